// Reading substructure.toml from a path a repository (or $SUBS_CONFIG) chose:
// a FIFO there blocked forever and ignored Ctrl-C, /dev/zero grew to 16 GB. So the file is opened
// without blocking, must be a regular file, and is read with a bound, never past the cap.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { usage } from "../errors.ts";

/** The largest substructure.toml read: far above any real file, far below memory trouble. */
export const CONFIG_MAX_BYTES = 1024 * 1024;

const kind = (stats: Stats) =>
  stats.isDirectory()
    ? "a directory"
    : stats.isFIFO()
      ? "a named pipe (FIFO)"
      : stats.isSocket()
        ? "a socket"
        : stats.isCharacterDevice() || stats.isBlockDevice()
          ? "a device"
          : "not a regular file";

/**
 * The text of the config file at `file`. A symlink is followed (a checkout may link the file from
 * elsewhere); what it reaches must itself be a regular file, which fstat on the open descriptor
 * checks, so no swap between a check and the read can change it. O_NONBLOCK makes opening a FIFO
 * return at once (open(2) otherwise waits for a writer); it changes nothing for a regular file.
 */
export function readConfigFile(file: string, shown: string = file): string {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    throw usage(`cannot read ${shown}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw usage(`${shown} is ${kind(stats)}, not a regular file`, { hint: "substructure.toml must be a regular file: replace it, or pass --config PATH" });
    if (stats.size > CONFIG_MAX_BYTES) throw tooLarge(shown);
    // The size can grow after fstat (a file being appended to): the read never goes past cap + 1.
    let buffer = Buffer.alloc(Math.min(stats.size, CONFIG_MAX_BYTES) + 1);
    let length = 0;
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buffer, length, buffer.length - length, null);
      } catch (error) {
        throw usage(`cannot read ${shown}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
      }
      if (n === 0) return buffer.toString("utf8", 0, length);
      length += n;
      if (length > CONFIG_MAX_BYTES) throw tooLarge(shown);
      if (length === buffer.length) {
        const bigger = Buffer.alloc(CONFIG_MAX_BYTES + 1);
        buffer.copy(bigger, 0, 0, length);
        buffer = bigger;
      }
    }
  } finally {
    closeSync(fd);
  }
}

const tooLarge = (shown: string) =>
  usage(`${shown} is larger than ${CONFIG_MAX_BYTES / 1024 / 1024} MiB; subs does not read it`, { hint: "a substructure.toml is a few kilobytes; check the path" });
