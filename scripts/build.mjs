// Bundles src/ into one CommonJS file, dist/subs.cjs, with esbuild, then writes its V8 code cache
// for this machine (never shipped: package.json "files" leaves it out). One file, because bin/subs.cjs loads it through vm.Script with cached bytecode, which
// only CommonJS allows on Node 20. Laziness survives bundling: a dynamic import() of our own
// module becomes a function that initializes that module on first call, so a command still runs
// only what it uses (the MCP SDK only when it talks MCP).
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/**
 * Replaces a module some package imports with `contents`: `filter` matches the import specifier,
 * `importer` (a package name) limits it to imports made by that package's files.
 */
const substitute = ({ name, filter, importer, contents }) => ({
  name,
  setup(b) {
    b.onResolve({ filter }, (args) =>
      importer === undefined || args.importer.includes(`${"node_modules"}/${importer}/`) ? { path: name, namespace: name } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: name }, () => ({ contents, loader: "js" }));
  },
});

const plugins = [
  // zod re-exports all of its ~60 locales as a namespace (`z.locales`) from core, mini and classic.
  // subs never uses that namespace (classic registers English itself, and our messages are our
  // own), but once classic zod is in the bundle (the MCP SDK uses it) the whole namespace becomes
  // shared code that every command would load at start-up. Resolve it to an empty module.
  substitute({ name: "no-zod-locales", filter: /^\.\.\/locales\/index\.js$/, importer: "zod", contents: "export {};" }),
  // chalk detects colour support itself (os, tty, env) at import; subs always sets the level from
  // its Context (NO_COLOR, FORCE_COLOR, a terminal), so that detection is dead weight.
  substitute({
    name: "no-chalk-detection",
    filter: /^#supports-color$/,
    contents: "export function createSupportsColor() { return false; }\nexport default { stdout: false, stderr: false };",
  }),
  // better-sqlite3's JavaScript is bundled (so it is in the code cache: loading its ten files from
  // node_modules cost 4-9 ms of every command that opens the db); its native addon cannot be. The
  // package finds the addon with `bindings`, which probes a dozen paths and parses a stack trace on
  // every start-up; the addon is always at build/Release (prebuild-install and node-gyp both put it
  // there), so ask for it there directly: by path in this package's own node_modules, where npm
  // puts it for a checkout and a global install (a bare name costs a search and a package.json
  // read, about 0.3 ms), else by name, wherever the installation hoisted it.
  substitute({
    name: "better-sqlite3-addon",
    filter: /^bindings$/,
    importer: "better-sqlite3",
    contents: [
      'const path = require("node:path");',
      "module.exports = (name) => {",
      '  try { return require(path.join(__dirname, "..", "node_modules", "better-sqlite3", "build", "Release", name)); }',
      '  catch (error) { if (error.code !== "MODULE_NOT_FOUND") throw error; }',
      '  return require("better-sqlite3/build/Release/" + name);',
      "};",
    ].join("\n"),
  }),
  // commander requires node:child_process when it loads, for executable subcommands, which subs
  // does not have; loading it (with net and dgram behind it) was ~2 ms of every start-up. Give
  // commander a stand-in that loads the real module on first use.
  substitute({
    name: "lazy-child-process-for-commander",
    filter: /^node:child_process$/,
    importer: "commander",
    contents: 'let real; module.exports = new Proxy({}, { get: (_, key) => (real ??= require("node:child_process"))[key] });',
  }),
  // jsonc-parser's `main` is a UMD build whose require() calls sit inside a factory function:
  // esbuild cannot follow them, and the bundle failed at run time ("Cannot find module
  // './impl/format'"). Its `module` build is plain ES modules, which bundle like ours.
  {
    name: "jsonc-parser-esm",
    setup(b) {
      b.onResolve({ filter: /^jsonc-parser$/ }, (args) => b.resolve("jsonc-parser/lib/esm/main.js", { kind: args.kind, resolveDir: args.resolveDir }));
    },
  },
];

const root = fileURLToPath(new URL("..", import.meta.url));
// Build beside dist/ and swap it in, so a CLI started meanwhile never sees half a build.
const staging = `${root}/dist.staging-${process.pid}`;

/**
 * The groups of the bundle, by the modules whose chunks (with all they import) they hold, the first
 * holding main.ts: `subs mcp list` runs the first alone, piped (scripts, --json); a terminal adds
 * the second (colours, the spinner). Every other command adds the third, the command line
 * (commander and the command tree). The fourth is what `subs agent serve` and `subs mcp proxy`
 * run until they have answered `initialize` (src/serve/stdio.ts): a client waits for that answer
 * before anything else, so it waits for no part of the rest, where the MCP SDK is, which loads
 * once it is sent. Every other command also loads the last group, the rest.
 */
const GROUPS = [
  ["src/main.ts", "src/commands/mcp/list/run.ts", "node_modules/better-sqlite3/lib/index.js"],
  ["node_modules/chalk/source/index.js", "node_modules/yocto-spinner/index.js"],
  ["src/cli.ts"],
  ["src/commands/agent/serve/run.ts", "src/commands/mcp/proxy/run.ts", "src/serve/proxy-session.ts", "src/serve/stdio.ts"],
];

// esbuild splits the program where it imports a module with import(): an ES module per entry
// and per set of entries sharing code ("chunks"), each loaded once whichever command needs it.
// A CommonJS package loaded with import() is then its module.exports as `default`, and nothing
// else: `(await import("proper-lockfile")).default.lock`, never `{ lock }`.
const split = await build({
  absWorkingDir: root,
  entryPoints: ["src/main.ts"],
  outdir: staging,
  entryNames: "[name]",
  chunkNames: "c-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  write: false,
  metafile: true,
  platform: "node",
  target: "node20",
  // A package loaded only by the command that needs it (the addon is required at run time, above).
  // The MCP SDK is bundled: from node_modules, resolving and compiling its ~100 CommonJS files
  // (and a second zod) took 130 ms of every `subs agent serve` start; bundled, it is lazy like our
  // own modules and its bytecode is in the code cache.
  // pg likewise: only a deployment whose store is Postgres loads it, and its optional native
  // binding (pg-native) is a require() esbuild could not resolve.
  external: ["open", "pg"],
  sourcemap: false,
  // Less source to read at every start-up. Errors are shown as messages, never as stack traces,
  // so nothing readable is lost.
  minify: true,
  logLevel: "warning",
  plugins,
});

// The chunks in groups, each compiled (or deserialized from its part of the code cache) only when
// a run first needs one of its chunks: V8 deserializes every function a cache holds, and
// parses every function of a script it compiles, so one script of the whole program cost every
// command the bytecode and pre-parse data of all of them (about 3 ms of `subs mcp list`,
// docs/speed.md).
const outputs = split.metafile.outputs;
const nameOf = (output) => output.slice(output.lastIndexOf("/") + 1);
const staticClosure = (output, seen = new Set()) => {
  if (seen.has(output)) return seen;
  seen.add(output);
  for (const i of outputs[output].imports) if (i.kind === "import-statement" && !i.external) staticClosure(i.path, seen);
  return seen;
};
// A chunk is in the first group that needs it; a chunk no group needs is in the rest.
const groupOfChunk = new Map();
GROUPS.forEach((entries, group) => {
  for (const entry of entries) {
    const output = Object.keys(outputs).find((o) => outputs[o].entryPoint === entry);
    if (!output) throw new Error(`build: ${entry} is no longer an entry of the split (imported with import() nowhere?); update GROUPS`);
    for (const o of staticClosure(output)) if (!groupOfChunk.has(nameOf(o))) groupOfChunk.set(nameOf(o), group);
  }
});
// Each group as one CommonJS script, for bin/subs.cjs to run from its part of the code cache
// (vm.Script takes no ES module on Node 20): esbuild bundles the group's chunks again, scope-hoisted
// in one module (a chunk each was a module of its own, with esbuild's helpers and every import a
// getter on another module's exports: about 0.5 ms more of `subs mcp list`), each chunk initialized
// when the group's `chunks[name]()` or another chunk first needs it. A chunk of another group stays
// a require() that bin/subs.cjs answers with that group's chunk, and import() a require() in a
// promise: an ES module import() starts Node's ES module loader, about 10 ms more than require().
// `open` is an ES module; Node ≥ 20.19 require()s it (engines in package.json).
const chunkTexts = new Map(split.outputFiles.map((file) => [nameOf(file.path), file.text]));
const groupIndex = (name) => groupOfChunk.get(name) ?? GROUPS.length;
const groupOf = {};
for (const name of chunkTexts.keys()) if (groupIndex(name) > 0) groupOf[name] = groupIndex(name);
const sources = [];
for (let group = 0; group <= GROUPS.length; group++) {
  const names = [...chunkTexts.keys()].filter((name) => groupIndex(name) === group);
  const chunks = names.map((name) => `${JSON.stringify(name)}: () => require(${JSON.stringify(`./${name}`)})`).join(",\n");
  const { outputFiles } = await build({
    stdin: { contents: `module.exports = { ${group === 0 ? `entry: "main.js", groupOf: ${JSON.stringify(groupOf)}, ` : ""}chunks: {\n${chunks}\n} };\n`, loader: "js", resolveDir: root },
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    supported: { "dynamic-import": false },
    minify: true,
    write: false,
    logLevel: "warning",
    plugins: [
      {
        name: "chunks-of-this-group",
        setup(b) {
          b.onResolve({ filter: /.*/ }, (args) => {
            const name = /^\.\/([\w-]+\.js)$/.exec(args.path)?.[1];
            if (name === undefined || !chunkTexts.has(name)) return { path: args.path, external: true };
            return groupIndex(name) === group ? { path: name, namespace: "chunk" } : { path: args.path, external: true };
          });
          b.onLoad({ filter: /.*/, namespace: "chunk" }, (args) => ({ contents: chunkTexts.get(args.path), loader: "js", resolveDir: root }));
        },
      },
    ],
  });
  sources.push(outputFiles[0].text);
}
// The first line names this exact build, for people and scripts. bin/subs.cjs does not trust it
// for the code cache (anyone can copy it): a cache is bound to the bundle's bytes and to this
// file's identity on this machine (SECURITY.md, "Faults and interrupts"). The second gives each group's length.
const { BUILD_ID_PREFIX, GROUPS_PREFIX } = createRequire(import.meta.url)("../bin/subs.cjs");
const bundled = `${GROUPS_PREFIX}${sources.map((source) => Buffer.byteLength(source)).join(",")}\n${sources.join("")}`;
mkdirSync(staging, { recursive: true });
writeFileSync(`${staging}/subs.cjs`, `${BUILD_ID_PREFIX}${createHash("sha256").update(bundled).digest("hex")}\n${bundled}`);
const warm = spawnSync(process.execPath, [fileURLToPath(new URL("./warm-code-cache.cjs", import.meta.url)), `${staging}/subs.cjs`], { stdio: "inherit" });
if (warm.status !== 0) throw new Error("writing the code cache failed");
rmSync(`${root}/dist`, { recursive: true, force: true });
renameSync(staging, `${root}/dist`);
