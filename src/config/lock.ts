// One edit of substructure.toml at a time. `subs mcp add`, `remove`, `import` and `subs init` read
// the file, check it, and rename the edited text over it; two runs at once both read the same
// text, and the second rename dropped the first run's edit (or brought back a section the other
// had just cut). Each edit therefore holds an exclusive lock from before the read to after the
// rename. proper-lockfile takes it with mkdir(2) (atomic, also on network file systems) on
// `<file>.lock` beside the file, keeps the directory's mtime fresh while it holds it, and takes
// over a lock whose holder stopped refreshing it (a process killed with SIGKILL), so a crash never
// blocks the file for good. Only the commands that edit the file load it.
import { realpathSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { failed, interrupted, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";

/** How long an edit waits for another to finish before it gives up (docs/commands.md). */
export const LOCK_WAIT_MS = 15_000;
/**
 * A lock not refreshed for this long is its holder's leftover (the holder refreshes it every
 * UPDATE_MS from a timer); below LOCK_WAIT_MS, so a waiting edit takes over such a lock itself.
 */
const STALE_MS = 10_000;
const UPDATE_MS = 2_000;
/** A wait longer than this is said on stderr, so a run that seems stuck says why. */
const TELL_AFTER_MS = 1_000;

/** The locks this process holds, by the path locked; `compromised` when another process took it over. */
const held = new Map<string, { compromised?: Error }>();

/**
 * The path the lock is taken on: the file a symlink leads to (two links to one file share its
 * lock), or, when there is no file yet, the path it will have.
 */
export function lockedPath(file: string): string {
  const resolved = path.resolve(file);
  try {
    return realpathSync(resolved);
  } catch {}
  try {
    return path.join(realpathSync(path.dirname(resolved)), path.basename(resolved));
  } catch {
    return resolved;
  }
}

export type LockOptions = {
  /** The file as messages show it. */
  shown: string;
  /** Ctrl-C and SIGTERM end the wait at once. */
  signal: AbortSignal;
  /** Told when the wait lasts (a line on stderr). */
  reporter?: Pick<Reporter, "info">;
};

/**
 * Runs `edit` while this process holds the lock on `file`: `edit` reads the file, checks it and
 * writes it, and no other subs edits it meanwhile. A lock another run holds is waited for, up to
 * LOCK_WAIT_MS (then exit 1: a failure of the moment, run the command again).
 */
export async function withConfigLock<T>(file: string, options: LockOptions, edit: () => T | Promise<T>): Promise<T> {
  const target = lockedPath(file);
  // A CommonJS package: its functions are on its module.exports, `default` here (as Node's own
  // import() gives it, and the bundle, whose chunks give such a package as `default` only).
  const { lock } = (await import("proper-lockfile")).default;
  const state: { compromised?: Error } = {};
  const started = Date.now();
  let told = false;
  let pause = 5;
  let release: () => Promise<void>;
  for (;;) {
    if (options.signal.aborted) throw interrupted();
    try {
      release = await lock(target, {
        realpath: false,
        stale: STALE_MS,
        update: UPDATE_MS,
        // The default throws from a timer, which would end the process mid-edit: the write checks it instead.
        onCompromised: (error) => {
          state.compromised = error;
        },
      });
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "error";
      // No lock could be made at all (a read-only directory, a directory that is gone): the file cannot be written either.
      if (code !== "ELOCKED") throw usage(`cannot write ${options.shown}: ${code}; nothing was written`);
      const waited = Date.now() - started;
      if (waited >= LOCK_WAIT_MS) {
        throw failed(`another subs has been editing ${options.shown} for ${LOCK_WAIT_MS / 1000} s; nothing was written`, {
          hint: "run the command again when it is done",
          code: "config_locked",
        });
      }
      if (!told && waited >= TELL_AFTER_MS) {
        told = true;
        options.reporter?.info(`Waiting for another subs to finish editing ${options.shown}…`);
      }
      // Jittered, so runs that met at one moment do not retry in step.
      await sleep(pause + Math.random() * pause, undefined, { signal: options.signal }).catch(() => {
        throw interrupted();
      });
      pause = Math.min(pause * 2, 100);
    }
  }
  held.set(target, state);
  try {
    return await edit();
  } finally {
    held.delete(target);
    await release().catch(() => {});
  }
}

/**
 * Throws unless this process holds the lock on `file` and still owns it; called right before the
 * file is replaced. A lock another process took over (its holder stalled past STALE_MS) no longer
 * keeps the other edits out: nothing is written.
 */
export function assertLockHeld(file: string, shown: string): void {
  const state = held.get(lockedPath(file));
  if (!state) throw new Error(`${shown} is written without holding its lock`);
  if (state.compromised) {
    throw failed(`lost the lock on ${shown} to another subs while editing it; nothing was written`, { hint: "run the command again", code: "config_locked" });
  }
}
