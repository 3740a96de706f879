#!/usr/bin/env node
import { existsSync } from "node:fs";

const entry = new URL("../dist/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("subs: dist/ is missing; run `npm install` (it builds the CLI) or `npm run build`.\n");
  process.exit(1);
}
await import(entry.href);
