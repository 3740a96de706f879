// Bundles src/ into dist/ with esbuild. Code splitting keeps every dynamic import() a separate
// chunk, so a command loads only what it uses (the MCP SDK only when it talks MCP; issue 6).
import { build } from "esbuild";
import { renameSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

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
  external: ["better-sqlite3", "open"],
  // Bundled CommonJS dependencies call require(); give the ESM chunks one.
  banner: { js: "import { createRequire as __subsCreateRequire } from 'node:module'; const require = __subsCreateRequire(import.meta.url);" },
  chunkNames: "chunks/[name]-[hash]",
  sourcemap: false,
  minify: false,
  logLevel: "warning",
});
rmSync(`${root}/dist`, { recursive: true, force: true });
renameSync(staging, `${root}/dist`);
