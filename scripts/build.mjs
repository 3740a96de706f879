// Bundles src/ into dist/ with esbuild. Code splitting keeps every dynamic import() a separate
// chunk, so a command loads only what it uses (the MCP SDK only when it talks MCP; issue 6).
import { build } from "esbuild";
import { renameSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

// zod re-exports all of its ~60 locales as a namespace (`z.locales`) from core, mini and classic.
// subs never uses that namespace (classic registers English itself, and our messages are our
// own), but once classic zod is in the bundle (the MCP SDK uses it) the whole namespace becomes
// shared code that every command would load at start-up. Resolve it to an empty module.
const noZodLocales = {
  name: "no-zod-locales",
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes(`${"node_modules"}/zod/`) ? { path: "zod-locales", namespace: "empty" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "empty" }, () => ({ contents: "export {};", loader: "js" }));
  },
};

// chalk detects colour support itself (os, tty, env) at import; subs always sets the level from
// its Context (NO_COLOR, TTY, --no-color), so that detection is dead weight on every start-up.
const noChalkDetection = {
  name: "no-chalk-detection",
  setup(b) {
    b.onResolve({ filter: /^#supports-color$/ }, () => ({ path: "supports-color", namespace: "empty-supports-color" }));
    b.onLoad({ filter: /.*/, namespace: "empty-supports-color" }, () => ({
      contents: "export function createSupportsColor() { return false; }\nexport default { stdout: false, stderr: false };",
      loader: "js",
    }));
  },
};

const root = fileURLToPath(new URL("..", import.meta.url));
// Build beside dist/ and swap it in, so a CLI started meanwhile never sees half a build.
const staging = `${root}/dist.staging-${process.pid}`;
await build({
  absWorkingDir: root,
  entryPoints: ["src/main.ts"],
  outdir: staging,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // Native addon, and a package that ships a helper script beside its own files.
  external: ["better-sqlite3", "open", "@modelcontextprotocol/sdk"],
  // Bundled CommonJS dependencies call require(); give the ESM chunks one.
  banner: { js: "import { createRequire as __subsCreateRequire } from 'node:module'; const require = __subsCreateRequire(import.meta.url);" },
  chunkNames: "chunks/[name]-[hash]",
  sourcemap: false,
  // Less source to read and compile on every start-up (about 6 ms of `subs mcp list`, issue 6).
  // Errors are shown as messages, never as stack traces, so nothing readable is lost.
  minify: true,
  logLevel: "warning",
  plugins: [noZodLocales, noChalkDetection],
});
rmSync(`${root}/dist`, { recursive: true, force: true });
renameSync(staging, `${root}/dist`);
