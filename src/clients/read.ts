// Reading another program's file: a client's configuration (Claude Code, Codex, Gemini CLI, …) or
// a repository's git metadata, which a cloned repository can make anything (a FIFO, a link to
// /dev/zero, a huge file). Opened without blocking, a regular file only, read up to a bound.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/**
 * The largest JSON client file read. ~/.claude.json also keeps Claude Code's per-project state and
 * has been seen at tens of megabytes; that is mostly long strings, which JSON.parse reads at
 * hundreds of MB/s. What makes a parse slow is the number of values, bounded below.
 */
export const JSON_MAX_BYTES = 64 * 1024 * 1024;
/**
 * The largest TOML client file read (Codex's config.toml holds a few kilobytes). smol-toml reads
 * the densest TOML at ~8 MB/s: 4 MiB is half a second, in one call Ctrl-C cannot cut short.
 */
export const TOML_MAX_BYTES = 4 * 1024 * 1024;
/** A file this large is said to be read (a line on stderr), so a run that takes a moment says why. */
export const LARGE_FILE_BYTES = 4 * 1024 * 1024;

const mib = (bytes: number) => `${bytes / 1024 / 1024} MiB`;

/**
 * The text of `file`, at most `maxBytes` long, or why not; `missing` when nothing is there (a
 * client not installed, not an error). Opened without blocking and checked to be a regular file,
 * as substructure.toml is.
 */
export function readBounded(file: string, maxBytes: number = JSON_MAX_BYTES, onLarge?: (bytes: number) => void): string | { missing: boolean; problem: string } {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO at that path would otherwise block the open forever (src/config/read.ts).
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    return { missing: code === "ENOENT" || code === "ENOTDIR", problem: `cannot be read (${code})` };
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { missing: false, problem: "is not a regular file" };
    if (stats.size > maxBytes) return { missing: false, problem: `is larger than ${mib(maxBytes)}, the most subs reads of such a file` };
    if (stats.size >= LARGE_FILE_BYTES) onLarge?.(stats.size);
    // The size read by fstat is the bound: a file growing meanwhile is read up to it.
    const buffer = Buffer.alloc(stats.size);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    return buffer.toString("utf8", 0, length);
  } catch (error) {
    return { missing: false, problem: `cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})` };
  } finally {
    closeSync(fd);
  }
}

