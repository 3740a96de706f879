// The Config of a run that can wait for a full check only when it needs one: the file parsed and
// accepted by check.ts's walk, load.ts (zod's schema, every diagnostic) loaded for any other file.
// It sits above both parse.ts and load.ts, so that load.ts builds on parse.ts and nothing below
// reaches back up to it.
import type { Config } from "./types.ts";
import { checkedFile } from "./check.ts";
import { findConfigPath } from "./find.ts";
import { configOf, parseToml, type LoadOptions } from "./parse.ts";
import { readConfigFile } from "./read.ts";
import { assertSecretDestinations } from "./secret-pins.ts";

/**
 * What loadConfig (load.ts) returns, for a run that can wait: the file found, read and parsed, and
 * accepted by the walk; a file the walk does not accept goes, parsed, to load.ts, loaded now, which
 * checks it in full and says what is wrong.
 */
export async function readConfig(options: LoadOptions): Promise<Config> {
  const file = findConfigPath({ explicit: options.configPath, env: options.env, cwd: options.cwd });
  const source = readConfigFile(file);
  const where = { path: file, cwd: options.cwd };
  const parsed = parseToml(source, where);
  const data = checkedFile(parsed.raw, parsed.dir);
  const config = data ? configOf(data, parsed, where) : (await import("./load.ts")).fullyCheckedConfig(parsed, where);
  // Where environment secrets may go, when CI pins it (SUBS_ALLOWED_REMOTE, SUBS_ALLOWED_TOKEN_HOSTS).
  assertSecretDestinations(config, options.env);
  return config;
}
