import { build } from "esbuild";
await build({ absWorkingDir: "/work/main", entryPoints: [".exp/ch.ts"], outfile: ".exp/ch2.mjs", bundle: true, format: "esm", platform: "node", logLevel: "warning",
  plugins: [{ name: "s", setup(b) { b.onResolve({ filter: /^#supports-color$/ }, () => ({ path: "sc", namespace: "stub" })); b.onLoad({ filter: /.*/, namespace: "stub" }, () => ({ contents: "export function createSupportsColor(){return false}; export default {stdout:false,stderr:false};", loader: "js" })); } }] });
