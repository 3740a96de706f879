// What the `subs deployment` commands share: where the store is and the key that opens it. Each
// setting also reads the environment variable its help names (src/deployment/config.ts).
import { Option, type Command } from "commander";
import type { Flags } from "../../deployment/config.ts";

export type DeploymentFlags = Flags;

const STORE_HELP =
  "the data directory holding the SQLite store, made 0700, or a postgres://user@host:port/db URL (env SUBS_DEPLOYMENT_STORE; default ./subs-deployment). A password in a flag is visible to every local user: give it in --store-password-file, $PGPASSWORD or a pgpass file";

/**
 * --store and --store-password-file, and --key-file (listed where the key is used; accepted,
 * hidden, everywhere). `storeHelp`: --store's help where it means something else than serve's.
 */
export function settings(command: Command, showKeyFile = false, storeHelp = STORE_HELP): Command {
  return command
    .addOption(new Option("--store <dir|url>", storeHelp))
    .addOption(new Option("--store-password-file <file>", "the Postgres store's password, alone in a file of mode 0600 (env SUBS_DEPLOYMENT_STORE_PASSWORD_FILE; else $PGPASSWORD, else $PGPASSFILE or ~/.pgpass)"))
    .addOption(
      showKeyFile
        ? new Option("--key-file <path>", "the encryption key, base64 of 32 bytes, in a file of mode 0600 (others may not read it); made when absent for a new store (env SUBS_DEPLOYMENT_KEY_FILE, or the key itself in SUBS_DEPLOYMENT_KEY)")
        : new Option("--key-file <path>").hideHelp(),
    );
}

/** The settings given as flags, without the command's other options. */
export function flagsOf(opts: DeploymentFlags): DeploymentFlags {
  return Object.fromEntries(Object.entries(opts).filter(([k, v]) => ["listen", "publicUrl", "store", "storePasswordFile", "keyFile", "catalog", "clientSecrets", "allowPrivate", "auditRetention"].includes(k) && v !== undefined));
}
