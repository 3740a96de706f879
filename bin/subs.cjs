#!/usr/bin/env node
// The `subs` entry. CommonJS on purpose: `subs --version` answers without starting Node's ES
// module loader or the CLI (issue 6); everything else loads the bundled CLI (dist/main.js).
"use strict";
const { existsSync, readFileSync } = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${JSON.parse(readFileSync(path.join(__dirname, "..", "package.json"), "utf8")).version}\n`);
} else {
  const entry = path.join(__dirname, "..", "dist", "main.js");
  if (!existsSync(entry)) {
    process.stderr.write("subs: dist/ is missing; run `npm install` (it builds the CLI) or `npm run build`.\n");
    process.exit(1);
  }
  import(pathToFileURL(entry).href);
}
