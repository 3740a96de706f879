// Bundles src/ into one CommonJS file, dist/subs.cjs, with esbuild, then writes its V8 code cache
// for this machine (issue 6; never shipped: package.json "files" leaves it out, issue 14). One file, because bin/subs.cjs loads it through vm.Script with cached bytecode, which
// only CommonJS allows on Node 20. Laziness survives bundling: a dynamic import() of our own
// module becomes a function that initializes that module on first call, so a command still runs
// only what it uses (the MCP SDK only when it talks MCP).
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
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
  // there), so ask for it there directly.
  substitute({
    name: "better-sqlite3-addon",
    filter: /^bindings$/,
    importer: "better-sqlite3",
    contents: 'module.exports = (name) => require("better-sqlite3/build/Release/" + name);',
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
await build({
  absWorkingDir: root,
  entryPoints: ["src/main.ts"],
  outfile: `${staging}/subs.cjs`,
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  // A package loaded only by the command that needs it (the addon is required at run time, above).
  // The MCP SDK is bundled: from node_modules, resolving and compiling its ~100 CommonJS files
  // (and a second zod) took 130 ms of every `subs agent serve` start; bundled, it is lazy like our
  // own modules and its bytecode is in the code cache.
  external: ["open"],
  // import() of that becomes require(): an ES module import() starts Node's ES module loader,
  // about 10 ms more than require(). `open` is an ES module; Node ≥ 20.19 require()s it (engines
  // in package.json).
  supported: { "dynamic-import": false },
  sourcemap: false,
  // Less source to read at every start-up. Errors are shown as messages, never as stack traces,
  // so nothing readable is lost.
  minify: true,
  logLevel: "warning",
  plugins,
});
// The first line names this exact build, for people and scripts. bin/subs.cjs does not trust it
// for the code cache (anyone can copy it): a cache is bound to the bundle's bytes and to this
// file's identity on this machine (issue 14, item 10).
const { BUILD_ID_PREFIX } = createRequire(import.meta.url)("../bin/subs.cjs");
const bundled = readFileSync(`${staging}/subs.cjs`, "utf8");
writeFileSync(`${staging}/subs.cjs`, `${BUILD_ID_PREFIX}${createHash("sha256").update(bundled).digest("hex")}\n${bundled}`);
const warm = spawnSync(process.execPath, [fileURLToPath(new URL("./warm-code-cache.cjs", import.meta.url)), `${staging}/subs.cjs`], { stdio: "inherit" });
if (warm.status !== 0) throw new Error("writing the code cache failed");
rmSync(`${root}/dist`, { recursive: true, force: true });
renameSync(staging, `${root}/dist`);
