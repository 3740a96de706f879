#!/usr/bin/env node
// The `subs` entry. CommonJS on purpose: `subs --version` answers without loading the CLI, and
// everything else runs the bundled CLI (dist/subs.cjs) from its V8 code cache (issue 6). The
// loader lives here rather than in a second file: one module less to resolve on every start-up.
"use strict";
const { existsSync, readFileSync, renameSync, unlinkSync, writeFileSync, writeSync } = require("node:fs");
const path = require("node:path");

// Loads the bundled CLI through a V8 code cache (issue 6). Compiling dist/subs.cjs from source on
// every start-up was the largest single cost of `subs mcp list` (about 40 of its 110 ms on a
// 2-core machine); with the bytecode V8 wrote on an earlier run, the load is a deserialization.
// Node 20 has no module compile cache (module.enableCompileCache is Node 22), so this does by hand
// what it does: vm.Script with cachedData.
//
// V8 rejects a cache from another V8 version, with other flags or cut short (cachedDataRejected),
// but it matches a cache to its source by length only, and it trusts the bytes: a damaged cache
// aborts the process. So a cache is used only when its trailer names the exact bundle it was made
// from (the build id in the bundle's first line, a hash of its content), and caches are only ever
// written beside and renamed into place. Anything else costs one ordinary compile.
const vm = require("node:vm");
const { createRequire } = require("node:module");

const BUILD_ID_PREFIX = "//subs-build:";
const BUILD_ID_LENGTH = 64;
const MAGIC = "subs-code-cache\n";
const TRAILER_LENGTH = MAGIC.length + BUILD_ID_LENGTH;

const cacheFileFor = (file) => `${file}.cache`;

function buildIdOf(source) {
  if (!source.startsWith(BUILD_ID_PREFIX)) return undefined;
  const id = source.slice(BUILD_ID_PREFIX.length, BUILD_ID_PREFIX.length + BUILD_ID_LENGTH);
  return /^[0-9a-f]{64}$/.test(id) ? id : undefined;
}

/** The V8 payload of a cache file, if the file is whole and was made from this build. */
function payloadFor(file, buildId) {
  let bytes;
  try {
    bytes = readFileSync(cacheFileFor(file));
  } catch {
    return undefined;
  }
  if (bytes.length <= TRAILER_LENGTH) return undefined;
  const trailer = bytes.subarray(bytes.length - TRAILER_LENGTH);
  const ours = trailer.toString("latin1") === MAGIC + buildId;
  return ours ? bytes.subarray(0, bytes.length - TRAILER_LENGTH) : undefined;
}

/**
 * Runs a CommonJS bundle and returns its exports, with what is needed to write its cache.
 * `useCache: false` compiles from source (the build's warm-up, which must not start from an
 * older cache).
 */
function loadBundle(file, { useCache = true } = {}) {
  const source = readFileSync(file, "utf8");
  const buildId = buildIdOf(source);
  const cachedData = useCache && buildId ? payloadFor(file, buildId) : undefined;
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new vm.Script(wrapped, { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file));
  return { exports: module.exports, script, buildId, cacheUsable: cachedData !== undefined && !script.cachedDataRejected };
}

/**
 * Writes the bytecode V8 holds for the script now, so functions compiled while it ran are in it.
 * Best effort: an unwritable install (a global one owned by root) just runs without a cache.
 */
function writeCodeCache(file, loaded) {
  if (!loaded.buildId) return;
  const target = cacheFileFor(file);
  const temporary = `${target}.${process.pid}.tmp`;
  try {
    const payload = loaded.script.createCachedData();
    const trailer = Buffer.alloc(TRAILER_LENGTH);
    trailer.write(MAGIC, 0, "latin1");
    trailer.write(loaded.buildId, MAGIC.length, "latin1");
    writeFileSync(temporary, Buffer.concat([payload, trailer]));
    renameSync(temporary, target);
  } catch {
    try {
      unlinkSync(temporary);
    } catch {}
  }
}

module.exports = { loadBundle, writeCodeCache, BUILD_ID_PREFIX };

if (require.main === module) {
  const args = process.argv.slice(2);
  if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
    const line = `${JSON.parse(readFileSync(path.join(__dirname, "..", "package.json"), "utf8")).version}\n`;
    // write(2) rather than process.stdout, a stream that costs more to build than the rest of this
    // path (issue 6). A full non-blocking pipe (EAGAIN) gets the stream, which queues; a reader
    // that has gone (EPIPE) gets nothing.
    try {
      writeSync(1, line);
    } catch (error) {
      if (error.code !== "EPIPE") process.stdout.write(line);
    }
  } else {
    const bundle = path.join(__dirname, "..", "dist", "subs.cjs");
    if (!existsSync(bundle)) {
      process.stderr.write("subs: dist/ is missing; run `npm install` (it builds the CLI) or `npm run build`.\n");
      process.exit(1);
    }
    const loaded = loadBundle(bundle);
    // No cache yet, or one from another build or Node: leave one for the next run. `main` ends
    // with process.exit, which runs this synchronously.
    if (!loaded.cacheUsable) process.once("exit", () => writeCodeCache(bundle, loaded));
    loaded.exports.main(args);
  }
}
