// A machine with no browser but a fake one, for the default opener's real route: a
// directory to put alone on PATH, holding sh, node and the few utilities the `open` package's
// bundled xdg-open runs (grep, uname, sed …; sleep for ensureBuilt's lock), and, if asked, a
// `www-browser`, the first browser xdg-open's generic route tries when there is no display
// (xdg-open: open_generic). Nothing else from the system PATH is reachable, so no real browser
// can open.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { BROWSER_SCRIPT } from "./browser.ts";

const UTILITIES = ["sh", "grep", "sed", "uname", "cat", "tr", "cut", "head", "awk", "readlink", "realpath", "dirname", "basename", "which", "printf", "sleep"];

/** Quotes `s` as one sh word. */
const shQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export type BrowserlessPath = {
  /** The directory to use as the whole of PATH. */
  bin: string;
  /** The fake www-browser's log: one line per run, its arguments separated by tabs (when asked for). */
  log: string;
};

/**
 * Makes the directory. `browser`: the name of a fake browser to put there (e.g. "www-browser")
 * that logs its arguments and plays the person who consents (test/support/browser.mjs).
 */
export function browserlessPath(options: { browser?: string } = {}): BrowserlessPath {
  const bin = mkdtempSync(path.join(tmpdir(), "subs-nobrowser-"));
  const log = path.join(bin, "browser.log");
  for (const name of UTILITIES) {
    const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).stdout.trim();
    if (found && path.isAbsolute(found) && !existsSync(path.join(bin, name))) symlinkSync(found, path.join(bin, name));
  }
  symlinkSync(process.execPath, path.join(bin, "node"));
  if (options.browser) {
    const script = path.join(bin, options.browser);
    writeFileSync(
      script,
      `#!/bin/sh\n# A fake ${options.browser}: records how it was run, then consents (browser.mjs).\n` +
        `(IFS='\t'; printf '%s\\t%s\\n' "$0" "$*") >> ${shQuote(log)}\n` +
        `exec ${shQuote(process.execPath)} ${shQuote(BROWSER_SCRIPT)} "$@"\n`,
    );
    chmodSync(script, 0o755);
  }
  return { bin, log };
}
