// The files an operator gives the deployment that hold a secret: the encryption key, the client
// secrets, the store's password (its own file or a pgpass file). Each is read as ssh reads a
// private key (ssh(1), FILES: "These files contain sensitive data and should be readable by the
// user but not accessible by others"), and as libpq reads a password file (libpq, "The Password
// File": group or world access makes it ignored): a file its owner alone may use. One that group
// or others may read, or that another user owns, is refused, never tightened: its secret may have
// been copied already, and only the operator can tell whether to rotate it, so the message says
// how to fix the file and what to replace if it leaked.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { refused } from "../errors.ts";

/** What to replace when others could have read each kind of file: the hint of its refusal. */
export const IF_LEAKED = {
  key: "once it is private, move to a new key (`subs deployment rotate-key`), and treat the credentials in any copy of the store as exposed",
  clientSecrets: "have the authorization servers issue new client secrets",
  storePassword: "change the database user's password",
  pgpass: "change the passwords it holds",
};
/** A key file holds 44 characters; anything past this is not one. */
export const KEY_FILE_BYTES = 1024;

/** What is checked of a file: what fstat returns, or a test's stand-in. */
export type FileFacts = Pick<Stats, "mode" | "uid"> & Pick<Stats, "isFile" | "isDirectory" | "isFIFO" | "isSocket" | "isCharacterDevice" | "isBlockDevice">;

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, "0");
/** A path as a shell word for the fix shown (the same rule as src/output/shell-word.ts, a layer above). */
const word = (text: string) => (/^[\w./~@:=+-]+$/.test(text) ? text : JSON.stringify(text));

function kindOf(stat: FileFacts): string {
  if (stat.isDirectory()) return "a directory";
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isSocket()) return "a socket";
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  return "not a regular file";
}

/** One thing wrong with a file that holds a secret, and how to fix it. */
export type FileProblem = { problem: string; fix: string };

/**
 * What is wrong with a file that holds a secret, as its stat shows it (symbolic links followed:
 * the file they lead to is the one read and checked); none when it is fine. `uid` is the user
 * subs runs as (undefined where there is none: Windows).
 */
export function privateFileProblems(stat: FileFacts, uid: number | undefined, file: string): FileProblem[] {
  if (!stat.isFile()) return [{ problem: `is ${kindOf(stat)}, not a regular file`, fix: "give the path of a regular file that holds the secret" }];
  const problems: FileProblem[] = [];
  // Whoever owns a file may read it whatever its mode (chmod is theirs), so another owner has it.
  if (uid !== undefined && stat.uid !== uid) {
    problems.push({ problem: `belongs to another user (uid ${stat.uid}), not to the user subs runs as (uid ${uid})`, fix: `\`chown ${uid} ${word(file)}\` (or run subs as its owner)` });
  }
  const open = stat.mode & 0o077;
  if (open) {
    const what = open & 0o044 ? "others may read it" : open & 0o022 ? "others may change it" : "others have access to it";
    problems.push({ problem: `${what} (mode ${octal(stat.mode)})`, fix: `\`chmod 600 ${word(file)}\`` });
  }
  return problems;
}

export type PrivateFile = {
  /** Where the path came from, as an operator looks for it: `--key-file`, `$PGPASSFILE`. */
  from: string;
  /** The path as given (shown), and resolved (opened). */
  shown: string;
  file: string;
  /** Read at most this many bytes; a larger file is refused. */
  maxBytes: number;
  /** What to replace if others could read the file, e.g. "move to a new key (`subs deployment rotate-key`)". */
  ifLeaked: string;
};

/**
 * The file's text, or `undefined` when it does not exist. Opened once (O_NONBLOCK: a FIFO there
 * cannot hold the open; symbolic links followed), and the descriptor's own fstat checked, so the
 * file checked is the file read. Refuses (exit 2) a file of another user, one group or others
 * may use, anything but a regular file, and one larger than `maxBytes`; the hint says how to fix
 * it, and what to replace when others could read it.
 */
export function readPrivateFile(spec: PrivateFile): string | undefined {
  const at = `${spec.from} ${spec.shown}`;
  let fd: number;
  try {
    fd = openSync(spec.file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    throw refused(`${at}: cannot read it (${code ?? String(error)})`, { code: "unsafe_file" });
  }
  try {
    const stat = fstatSync(fd);
    const uid = process.getuid?.();
    const problems = privateFileProblems(stat, uid, spec.shown);
    if (problems.length) {
      const readByOthers = stat.isFile() && ((stat.mode & 0o044) !== 0 || (uid !== undefined && stat.uid !== uid));
      throw refused(`${at}: ${problems.map((p) => p.problem).join(", and ")}; it must be a regular file of the user running subs that no one else may read (mode 0600)`, {
        hint: `${problems.map((p) => p.fix).join(", then ")}${readByOthers ? `; what it holds may have been copied: ${spec.ifLeaked}` : ""}`,
        code: "unsafe_file",
      });
    }
    const buffer = Buffer.alloc(spec.maxBytes + 1);
    let length = 0;
    for (let n; length < buffer.length && (n = readSync(fd, buffer, length, buffer.length - length, null)) > 0; ) length += n;
    if (length > spec.maxBytes) throw refused(`${at}: larger than the ${spec.maxBytes} bytes such a file may hold`, { code: "unsafe_file" });
    return buffer.subarray(0, length).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
