#!/usr/bin/env node
import { existsSync, readFileSync } from "node:fs";

const args = process.argv.slice(2);
// `subs --version` is run in scripts and prompts: answer without loading the CLI (issue 6).
if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}\n`);
} else {
  const entry = new URL("../dist/main.js", import.meta.url);
  if (!existsSync(entry)) {
    process.stderr.write("subs: dist/ is missing; run `npm install` (it builds the CLI) or `npm run build`.\n");
    process.exit(1);
  }
  await import(entry.href);
}
