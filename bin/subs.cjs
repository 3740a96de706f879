#!/usr/bin/env node
// The `subs` entry. CommonJS on purpose: `subs --version` answers without loading the CLI, and
// everything else runs the bundled CLI (dist/subs.cjs) from its V8 code cache (docs/speed.md,
// "What makes start-up cheap"). The
// loader lives here rather than in a second file: one module less to resolve on every start-up.
"use strict";
const { accessSync, closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeSync } = require("node:fs");
const path = require("node:path");

// Loads the bundled CLI through a V8 code cache. Compiling dist/subs.cjs from source on
// every start-up was the largest single cost of `subs mcp list` (about 40 of its 110 ms on a
// 2-core machine); with the bytecode V8 wrote on an earlier run, the load is a deserialization.
// Node 20 has no module compile cache (module.enableCompileCache is Node 22), so this does by hand
// what it does: vm.Script with cachedData.
//
// V8 rejects a cache from another V8 version, with other flags or cut short (cachedDataRejected),
// but it matches a cache to its source by length only and trusts the bytes: a cache compiled from
// other source of the same length runs that source, and a damaged one aborts the process (release
// builds check no sum). Bytecode cannot be reviewed, so none is shipped (package.json "files"
// leaves it out), and a cache is given to V8 only when this installation made it from this exact
// file (SECURITY.md, "Faults and interrupts"). The proof is a seal written beside the cache (subs.cjs.cache.seal)
// naming the identity on this machine of both files: device, inode, size, mtime and ctime in
// nanoseconds. The kernel gives a file a new inode when it is made and a new ctime whenever it is
// written, renamed or chmod-ed, and nobody but root can set a ctime, so no copy, tarball or image layer can carry a
// matching cache and seal, and any change to either file since the seal was made (other bytecode
// written over the cache, a rebuilt bundle, a chmod) breaks the match. The seal also records the
// SHA-256 of both files, checked on every start only where timestamps are whole seconds (a file
// system too coarse for the identity alone). Cache, seal and their directory must be writable by
// nobody but the runner, the bundle's owner or root (who can change the bundle itself anyway).
// Hashing both files on every start cost ~4 ms in-process, more end to end (loading node:crypto,
// which brings node:stream, is most of it); these checks are a few stat calls. Anything that fails them costs
// one ordinary compile, and the run writes a cache and seal of its own.
//
// Since no cache is shipped, an installed package's first cache holds only what its first command
// compiled (after a first `subs --help`, `mcp list` ran 1.5 times slower than from the build's
// warmed cache). So the seal lists the commands whose functions the cache holds, and the first
// successful run of any other command rewrites it at exit, with that command's functions added:
// once per command, at most COMMANDS_MAX.
const vm = require("node:vm");
const { createRequire, isBuiltin } = require("node:module");

// The first line of a build names it (a hash of its content); kept for people and scripts reading
// dist/. The loader does not trust it: anyone can copy it.
const BUILD_ID_PREFIX = "//subs-build:";
// The second line of a bundle in groups (scripts/build.mjs) gives each group's length in bytes.
const GROUPS_PREFIX = "//subs-groups:";
const SEAL_MAGIC = "subs-code-cache-seal 2";
const SEAL_MAX = 4096;
const COMMANDS_MAX = 32;

const cacheFileFor = (file) => `${file}.cache`;
const sealFileFor = (file) => `${file}.cache.seal`;
const sha256 = (bytes) => require("node:crypto").createHash("sha256").update(bytes).digest("hex");
const identityOf = (stat) => `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
const SECOND = 1_000_000_000n;
const coarse = (stat) => stat.mtimeNs % SECOND === 0n || stat.ctimeNs % SECOND === 0n;

// Windows has no POSIX owners or modes (getuid is undefined there): the owner checks are skipped,
// the identities still hold.
const UID = process.getuid?.();
const GID = process.getgid?.();

/**
 * Whether only trusted users can write this file or directory: owned by the runner, the bundle's
 * owner or root, not world-writable, and group-writable only for the runner's own primary group
 * (the private group of Debian's and Ubuntu's umask 002, under which npm extracts dist/ 0775).
 */
function othersCannotWrite(stat, bundleOwner) {
  if (UID === undefined) return true;
  const owner = Number(stat.uid);
  if (owner !== UID && owner !== bundleOwner && owner !== 0) return false;
  const mode = Number(stat.mode);
  if (mode & 0o002) return false;
  return (mode & 0o020) === 0 || Number(stat.gid) === GID;
}

/**
 * Opens a regular file only trusted users can write, not through a symlink: its descriptor and
 * stat, the checks made on the file actually open (fstat of this descriptor), not on whatever the
 * name holds later. The caller reads it, and closes it.
 */
function openTrusted(file, bundleOwner, maxSize) {
  let fd;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch {
    return undefined;
  }
  const stat = fstatSync(fd, { bigint: true });
  if (stat.isFile() && stat.size <= maxSize && othersCannotWrite(stat, bundleOwner)) return { fd, stat };
  closeSync(fd);
  return undefined;
}

/** Reads a regular file only trusted users can write, not through a symlink; its bytes and stat. */
function readTrusted(file, bundleOwner, maxSize) {
  const opened = openTrusted(file, bundleOwner, maxSize);
  if (!opened) return undefined;
  try {
    const bytes = readFileSync(opened.fd);
    return bytes.length === Number(opened.stat.size) ? { bytes, stat: opened.stat } : undefined;
  } finally {
    closeSync(opened.fd);
  }
}

/** `length` bytes of an open file from `position`, all of them or an error. */
function readAt(fd, position, length) {
  const bytes = Buffer.allocUnsafe(length);
  for (let at = 0; at < length; ) {
    const n = readSync(fd, bytes, at, length - at, position + at);
    if (n === 0) throw new Error("a file of dist/ was cut short while subs read it; run again");
    at += n;
  }
  return bytes;
}

/**
 * The command a run names (`mcp list`, `apply`, "" for none), by which the cache grows: its first
 * word, and the second after a command group (src/cli.ts), so ids and paths never count. Flags
 * are skipped: `--debug` goes anywhere, and options that take a value come after the command.
 */
function commandOf(args) {
  const words = [];
  for (const arg of args) {
    if (words.length === (words[0] === "mcp" || words[0] === "agent" ? 2 : 1)) break;
    if (arg.startsWith("-")) continue;
    if (!/^[a-z][a-z-]{0,30}$/.test(arg)) break;
    words.push(arg);
  }
  return words.join(" ");
}

/**
 * The cache as its seal describes it (each group's part, the commands it holds), if the seal shows
 * this installation made it from this exact bundle: the cache's descriptor, its parts read when
 * their group is compiled. `bundle` is the open bundle (loadBundle).
 */
function sealedCache(file, bundle, groups) {
  let cache;
  try {
    const bundleOwner = Number(bundle.stat.uid);
    const seal = readTrusted(sealFileFor(file), bundleOwner, SEAL_MAX);
    if (!seal) return undefined;
    const [magic, sealedBundle, sealedCache, bundleHash, cacheHash, parts, commands, end] = seal.bytes.toString("latin1").split("\n");
    if (magic !== SEAL_MAGIC || end !== "" || !commands?.startsWith("commands ") || sealedBundle !== `bundle ${identityOf(bundle.stat)}`) return undefined;
    if (!parts?.startsWith("parts ")) return undefined;
    const lengths = parts.slice("parts ".length).split(",").map(Number);
    if (lengths.length !== groups || !lengths.every((n) => Number.isSafeInteger(n) && n >= 0)) return undefined;
    if (!othersCannotWrite(statSync(path.dirname(file)), bundleOwner)) return undefined;
    cache = openTrusted(cacheFileFor(file), bundleOwner, Number.MAX_SAFE_INTEGER);
    if (!cache || sealedCache !== `cache ${identityOf(cache.stat)}` || lengths.reduce((a, b) => a + b, 0) !== Number(cache.stat.size)) throw new Error("not this cache");
    if (coarse(bundle.stat) || coarse(cache.stat)) {
      if (bundleHash !== `bundle-sha256 ${sha256(bundle.all())}` || cacheHash !== `cache-sha256 ${sha256(readAt(cache.fd, 0, Number(cache.stat.size)))}`) throw new Error("not this cache");
    }
    const offsets = lengths.map((_, n) => lengths.slice(0, n).reduce((a, b) => a + b, 0));
    const read = [];
    // A group's part as V8 takes it, read once.
    const part = (n) => (lengths[n] === 0 ? undefined : (read[n] ??= readAt(cache.fd, offsets[n], lengths[n])));
    return { fd: cache.fd, stat: cache.stat, lengths, part, commands: commands.slice("commands ".length).split(",") };
  } catch {
    if (cache) closeSync(cache.fd);
    return undefined;
  }
}

/**
 * Where each group of a bundle lies in it: after its first two lines, at the lengths the second
 * gives (scripts/build.mjs); a bundle without that line (a build of one script, the benchmark's
 * floor) is one group, the whole file. `head` is the bundle's start, `size` its length.
 */
function groupsOf(head, size) {
  const secondLine = head.indexOf(10) + 1;
  if (secondLine === 0 || head.toString("latin1", secondLine, secondLine + GROUPS_PREFIX.length) !== GROUPS_PREFIX) return [[0, size]];
  const third = head.indexOf(10, secondLine) + 1;
  const ranges = [];
  let at = third;
  for (const length of head.toString("latin1", secondLine + GROUPS_PREFIX.length, third - 1).split(",").map(Number)) {
    ranges.push([at, at + length]);
    at += length;
  }
  if (third === 0 || at !== size || ranges.some(([start, stop]) => !(stop >= start))) throw new Error("the groups of dist/subs.cjs do not add up to the file; run `npm run build`");
  return ranges;
}

/** The bundle's first bytes, which hold its build id and the lengths of its groups. */
const HEAD = 4096;

/**
 * Runs a bundle and returns its exports, with what is needed to write its cache. A bundle in groups
 * (scripts/build.mjs) is a program of chunks, CommonJS functions by name, of which the first
 * group holds the entry and the map of where the others are: each group is read and compiled (or
 * deserialized from its part of the cache) only when a chunk in it is first required, so a run
 * pays only for the groups it uses. The bundle and its cache stay open for that, so every group
 * comes from the files first checked. `useCache: false` compiles from source (the build's warm-up,
 * which must not start from an older cache). `command` (commandOf) asks for a new cache when the
 * sealed one lacks it.
 */
function loadBundle(file, { useCache = true, command } = {}) {
  // The bytes compiled and the identity sealed come from one open file.
  const fd = openSync(file, "r");
  const stat = fstatSync(fd, { bigint: true });
  const size = Number(stat.size);
  let all;
  const bundle = { stat, all: () => (all ??= readAt(fd, 0, size)) };
  const ranges = groupsOf(readAt(fd, 0, Math.min(HEAD, size)), size);
  const sealed = useCache ? sealedCache(file, bundle, ranges.length) : undefined;
  let linked;
  let packageRequire;
  // What a group requires: a chunk of another group by its relative name; a node: module or a file
  // by its path (the SQLite addon) from here, where they resolve the same and Node already knows
  // the package (a require from dist/ read package.json again, ~0.2 ms); a package from dist/.
  const requireIn = (specifier) => {
    if (linked && specifier.startsWith("./")) return linked.load(specifier.slice(2));
    if (isBuiltin(specifier) || path.isAbsolute(specifier)) return require(specifier);
    return (packageRequire ??= createRequire(file))(specifier);
  };
  const groups = ranges.map(() => ({ script: undefined, exports: undefined, fromCache: false }));
  const loaded = { exports: undefined, script: undefined, stat, bundle, cached: undefined, cacheUsable: false, cacheWanted: true, commands: [], groups };
  const compile = (n) => {
    const group = groups[n];
    if (group.exports) return group.exports;
    const cachedData = sealed?.part(n);
    const [start, stop] = ranges[n];
    const source = (all ?? readAt(fd, start, stop - start)).toString("utf8", all ? start : 0, all ? stop : stop - start);
    const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
    group.script = script;
    group.fromCache = cachedData !== undefined && !script.cachedDataRejected;
    const module = { exports: {} };
    script.runInThisContext()(module.exports, requireIn, module, file, path.dirname(file));
    group.exports = module.exports;
    return module.exports;
  };
  const first = compile(0);
  loaded.script = groups[0].script;
  loaded.cacheUsable = groups[0].fromCache;
  loaded.commands = loaded.cacheUsable ? sealed.commands : [];
  loaded.cacheWanted = !loaded.cacheUsable || (command !== undefined && !loaded.commands.includes(command) && loaded.commands.length < COMMANDS_MAX);
  loaded.cached = loaded.cacheUsable ? sealed : undefined;
  if (ranges.length > 1) linked = link(first, compile);
  loaded.exports = linked ? linked.entry() : first;
  return loaded;
}

/**
 * Runs the entry chunk of a bundle in groups, each group compiled when first needed; its exports.
 * A group's `chunks[name]()` initializes that chunk (once) and returns its exports; `require` in
 * a group asks for a chunk of another group by its relative name, and for anything else (node:
 * modules, the packages left outside the bundle, the SQLite addon) from dist/.
 */
function link(first, compile) {
  const exportsOf = new Map();
  const load = (name) => {
    let exports = exportsOf.get(name);
    if (exports) return exports;
    const chunks = Object.hasOwn(first.chunks, name) ? first.chunks : Object.hasOwn(first.groupOf, name) ? compile(first.groupOf[name]).chunks : undefined;
    if (!chunks || !Object.hasOwn(chunks, name)) throw new Error(`${name} is missing from dist/subs.cjs; run \`npm run build\``);
    exports = chunks[name]();
    exportsOf.set(name, exports);
    return exports;
  };
  return { load, entry: () => load(first.entry) };
}

/** Writes `bytes` as a new file beside `target` and renames it into place; the placed file's stat. */
function place(target, bytes) {
  const temporary = `${target}.${process.pid}.tmp`;
  try {
    // A new file (never through one left at this name), writable by its owner only whatever the umask.
    const fd = openSync(temporary, "wx", 0o644);
    let ino;
    try {
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
      ino = fstatSync(fd, { bigint: true }).ino;
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, target);
    // After the rename, which sets the ctime the seal must name.
    const stat = lstatSync(target, { bigint: true });
    if (stat.ino !== ino || !stat.isFile()) throw new Error("replaced while written");
    return stat;
  } catch (error) {
    try {
      unlinkSync(temporary);
    } catch {}
    throw error;
  }
}

/**
 * Writes the bytecode V8 holds now for each group the run compiled, so functions compiled while it
 * ran are in it (those of the commands the loaded cache held included), the parts of groups it did
 * not compile as they were, then its seal, listing `commands` too. Best effort: an unwritable
 * install (a global one owned by root) just runs without a cache, and so does one in a directory
 * others could write (they could swap the cache in).
 */
function writeCodeCache(file, loaded, commands = []) {
  if (!loaded.bundle) return;
  try {
    if (!othersCannotWrite(statSync(path.dirname(file)), Number(loaded.stat.uid))) return;
    // Before serializing, which costs milliseconds: a directory this user cannot write (a global
    // install by root) would refuse the cache on every run.
    accessSync(path.dirname(file), constants.W_OK);
    // The file must still be the one compiled: a bundle replaced while the command ran (a rebuild)
    // gets no cache named after it.
    if (identityOf(statSync(file, { bigint: true })) !== identityOf(loaded.stat)) return;
    // A part is replaced only by a larger one: V8 may have flushed the bytecode of functions a
    // long run did not call (a login waiting minutes for the browser), and a smaller part would
    // lack them for good, their commands being sealed. When every part is kept, only the seal is
    // rewritten.
    const cached = loaded.cached;
    const kept = loaded.groups.map((_, n) => cached?.part(n));
    const parts = loaded.groups.map((group, n) => {
      const script = n === 0 ? loaded.script : group.script;
      if (!script) return kept[n];
      const grown = script.createCachedData();
      return kept[n] !== undefined && grown.length < kept[n].length ? kept[n] : grown;
    });
    const same = cached !== undefined && parts.every((part, n) => part === kept[n]);
    const payload = Buffer.concat(parts.filter((part) => part !== undefined));
    const cacheStat = same ? cached.stat : place(cacheFileFor(file), payload);
    const seal = [
      SEAL_MAGIC,
      `bundle ${identityOf(loaded.stat)}`,
      `cache ${identityOf(cacheStat)}`,
      `bundle-sha256 ${sha256(loaded.bundle.all())}`,
      `cache-sha256 ${sha256(payload)}`,
      `parts ${parts.map((part) => part?.length ?? 0).join(",")}`,
      `commands ${[...new Set([...loaded.commands, ...commands])].slice(0, COMMANDS_MAX).join(",")}`,
      "",
    ].join("\n");
    place(sealFileFor(file), Buffer.from(seal, "latin1"));
  } catch {}
}

/** Whether the run compiled a group from source that a cache could hold: one its cache had no part for, or none. */
const groupsUncached = (loaded) => loaded.groups.some((group) => group.script !== undefined && !group.fromCache);

module.exports = { loadBundle, writeCodeCache, commandOf, BUILD_ID_PREFIX, GROUPS_PREFIX };

if (require.main === module) {
  const args = process.argv.slice(2);
  if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
    const line = `${JSON.parse(readFileSync(path.join(__dirname, "..", "package.json"), "utf8")).version}\n`;
    // write(2) rather than process.stdout, a stream that costs more to build than the rest of this
    // path. A full non-blocking pipe (EAGAIN) gets the stream, which queues; a reader
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
    const command = commandOf(args);
    const loaded = loadBundle(bundle, { command });
    // No cache yet, or one not made here from this file or for another Node: leave one for the
    // next run. A cache without this command grows only by a run that succeeded, so mistyped
    // commands do not fill the seal's list; a group the run compiled from source is added to it
    // either way. `main` ends with process.exit, which runs this synchronously.
    process.once("exit", (code) => {
      if (loaded.cacheWanted && (!loaded.cacheUsable || code === 0)) writeCodeCache(bundle, loaded, [command]);
      else if (groupsUncached(loaded)) writeCodeCache(bundle, loaded);
    });
    loaded.exports.main(args);
  }
}
