// Bundles test files for scripts/test.mjs: each test/**/*.test.ts with everything it imports from
// this repository (test/support, src/) into one ES module, packages left to node_modules, so that a
// test file's process runs plain JavaScript. Loading tsx in every test file's process (its loader
// runs on a thread of its own, a second V8 isolate) cost about 0.8 s of CPU per file, a tenth of
// the suite's; esbuild bundles all of them in about three seconds. Files shared by several test
// files go into chunks loaded once per process.
//
// What a bundle must keep: `import.meta.url` and `import.meta.dirname` of each module are its own
// source file's (fixtures, scripts and src/ are found beside them), so each is replaced by the
// module's own path before bundling. Source maps point failures at the .ts lines.
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";

/** Each module's own `import.meta.url`/`dirname`/`filename`, written in as literals. */
const ownImportMeta = {
  name: "own-import-meta",
  setup(build) {
    // Scripts too (scripts/tools.mjs finds tools/ beside itself), not packages.
    build.onLoad({ filter: /\.(ts|mjs|js)$/ }, (args) => {
      if (args.path.split(path.sep).includes("node_modules")) return undefined;
      const contents = readFileSync(args.path, "utf8")
        .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll("import.meta.dirname", JSON.stringify(path.dirname(args.path)))
        .replaceAll("import.meta.filename", JSON.stringify(args.path));
      return { contents, loader: args.path.endsWith(".ts") ? "ts" : "js" };
    });
  },
};

/**
 * Bundles `files` (paths relative to `root`) into `outdir` (inside `root`, so that packages resolve
 * from its node_modules); returns each file's bundle, in the same order, with the repository's files
 * it runs (relative to `root`: its own, what it imports, and their imports, at once or later).
 */
export async function bundleTests(root, files, outdir) {
  const { metafile } = await build({
    metafile: true,
    absWorkingDir: root,
    entryPoints: files,
    outdir,
    outbase: ".",
    outExtension: { ".js": ".mjs" },
    chunkNames: "chunks/[name]-[hash]",
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "linked",
    plugins: [ownImportMeta],
    logLevel: "error",
  });
  const sources = (output, seen = new Set()) => {
    if (seen.has(output)) return seen;
    seen.add(output);
    for (const { path: chunk } of metafile.outputs[output]?.imports ?? []) if (metafile.outputs[chunk]) sources(chunk, seen);
    return seen;
  };
  return files.map((file) => {
    const bundle = path.join(outdir, file.replace(/\.ts$/, ".mjs"));
    const inputs = new Set([...sources(path.relative(root, bundle))].flatMap((output) => Object.keys(metafile.outputs[output].inputs)));
    return { bundle, inputs };
  });
}
