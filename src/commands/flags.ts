// Flag values commander hands over as strings, parsed for the commands' actions (and for run.ts's
// own `subs mcp list`). A bad value is a usage mistake (exit 2) that, like every error, ends with
// the next command to run. No commander here: run.ts loads this on the path that skips the parser.
import { usage } from "../errors.ts";

export function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(port) || port < 1 || port > 65535) throw usage(`--port must be a port number (1-65535), not ${JSON.stringify(value)}`);
  return port;
}

export function parseCount(value: string, flag: string): number {
  const count = Number(value);
  if (!/^\d+$/.test(value) || !(count >= 1) || !Number.isSafeInteger(count)) throw usage(`${flag} must be a whole number from 1, not ${JSON.stringify(value)}`);
  return count;
}

export function parseSeconds(value: string, flag = "--timeout"): number {
  const seconds = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(seconds > 0)) throw usage(`${flag} must be a positive number of seconds, not ${JSON.stringify(value)}`);
  return seconds;
}

/** SUBS_DEBUG=1 (or true): one meaning for both of its effects, so SUBS_DEBUG=0 turns neither on. */
export const debugFromEnv = (env: Readonly<Record<string, string | undefined>>) => ["1", "true"].includes(env.SUBS_DEBUG ?? "");

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** A whole number of seconds, or of minutes, hours or days with m, h or d (`90d`). */
export function parseDuration(value: string, flag: string): number {
  const match = /^(\d{1,10})([smhd]?)$/.exec(value);
  const seconds = match ? Number(match[1]) * UNIT_SECONDS[match[2] || "s"]! : 0;
  if (!(seconds >= 1)) throw usage(`${flag} must be a duration: seconds, or a whole number with s, m, h or d (e.g. 90d), not ${JSON.stringify(value)}`);
  return seconds;
}
