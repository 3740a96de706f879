// Opening the deployment's store, for `subs deployment serve` and the operator's commands on its
// own machine (`rotate-key`, and `token …` with `--store`: tokens.ts), which run against the store
// directly: they need no running server, and a token made while it runs is good at once (the
// server reads tokens from the store).
import type { Context } from "../context.ts";
import { failed, refused, SubsError, usage } from "../errors.ts";
import { deploymentConfig, type DeploymentConfig, type Flags } from "./config.ts";
import { createKeyFile, readKey, type Key, type Sealed } from "./keys.ts";
import type { DeploymentStore, RekeyableStore } from "./store/types.ts";

type Ctx = Pick<Context, "env" | "cwd" | "stdout" | "stderr">;

/** The store the settings name: the SQLite file of one machine, or a Postgres database replicas share. */
export type OpenedStore = RekeyableStore & {
  hasKeyCheck(): Promise<boolean>;
  keyCheck(): Promise<Sealed | undefined>;
  /** Refuses (wrong_key) when the key this store was opened with no longer opens its check value: it was rotated meanwhile. */
  checkKey(): Promise<void>;
};

/**
 * Opens the store the settings name; only the module of that kind of store is loaded. `mustExist`:
 * refuse, creating nothing, when there is no store there yet (`token … --store`: a mistyped path
 * must not become a new empty store the running server never reads).
 */
export async function openStore(config: DeploymentConfig, key: Key | undefined, options: { mustExist?: boolean } = {}): Promise<OpenedStore> {
  const mustExist = options.mustExist ?? false;
  if (config.postgres) {
    const { openPostgresStore } = await import("./store/postgres.ts");
    const { url, password, passwordFrom, redacted } = config.postgres;
    return openPostgresStore({ url, password, passwordFrom, redacted, key, mustExist });
  }
  const { openSqliteStore } = await import("./store/sqlite.ts");
  return openSqliteStore({ storeDir: config.storeDir, dbPath: config.dbPath, key, mustExist });
}

/**
 * The store with its key. A key file that does not exist yet is made (0600) for a store that has
 * sealed nothing yet, so the first start on a fresh machine needs no other step; for a store that
 * has, a missing or wrong key refuses to start.
 */
export async function openWithKey(ctx: Ctx, config: DeploymentConfig, options: { mustExist?: boolean } = {}): Promise<{ store: OpenedStore; key: Key }> {
  warn(ctx, config);
  if (!config.key) {
    throw refused("no encryption key: the deployment keeps credentials encrypted and needs one", {
      hint: "give --key-file PATH (made on first start when absent) or $SUBS_DEPLOYMENT_KEY (base64 of 32 random bytes: `openssl rand -base64 32`)",
      code: "no_key",
    });
  }
  let key = readKey(config.key);
  if (!key) {
    const probe = await openStore(config, undefined, options);
    const sealedBefore = await probe.hasKeyCheck();
    await probe.close();
    const file = "file" in config.key ? config.key.file : "";
    if (sealedBefore) {
      throw refused(`${config.key.from} ${file}: no such file, and the store holds values encrypted under a key`, {
        hint: "start with the key file the store was written with; nothing was decrypted",
        code: "no_key",
      });
    }
    key = createKeyFile(file);
    ctx.stderr.write(`subs: made a new encryption key in ${file} (key id ${key.id}); back it up apart from the store\n`);
  }
  return { store: await openStore(config, key, options), key };
}

/** The settings' warnings, on stderr, before anything is opened. */
function warn(ctx: Ctx, config: DeploymentConfig) {
  for (const warning of config.warnings) ctx.stderr.write(`subs: warning: ${warning}\n`);
}

/**
 * Re-encrypts every sealed value under a new key in one transaction. The server holds its key in
 * memory: stop it first, then start it with the new key (docs/deployment-server.md).
 */
export async function rotateKeyCommand(ctx: Ctx & Pick<Context, "now">, options: { flags: Flags; newKeyFile: string; force?: boolean }) {
  const config = deploymentConfig(options.flags, ctx, { serve: false });
  const { store, key } = await openWithKey(ctx, config, { mustExist: true });
  try {
    // A process serving the store holds the old key: after the rotation it could open nothing.
    const live = await store.liveReplicas(ctx.now() - REPLICA_GONE_AFTER_MS);
    if (live.length > 0 && !options.force) {
      const seen = live.map((r) => `${r.listen} (last said so ${Math.max(0, Math.round((ctx.now() - r.seenAt) / 1000))} s ago)`).join(", ");
      throw refused(`${live.length === 1 ? "a process serves" : `${live.length} processes serve`} this store: ${seen}; nothing was re-encrypted`, {
        hint: `stop ${live.length === 1 ? "it" : "every one"} first (\`systemctl stop subs-deployment\`), then rotate; one killed without stopping counts for ${REPLICA_GONE_AFTER_MS / 1000} s after its last word (--force rotates anyway)`,
        code: "store_in_use",
      });
    }
    const file = (await import("node:path")).resolve(ctx.cwd, options.newKeyFile);
    let next = readKey({ file, from: "--new-key-file" });
    if (!next) {
      next = createKeyFile(file);
      ctx.stderr.write(`subs: made a new encryption key in ${options.newKeyFile}\n`);
    }
    if (next.id === key.id) throw usage("--new-key-file holds the key the store already uses", { hint: "give a file with another key, or a path where a new one is made" });
    const count = await store.rekey(next);
    // Into the record, by nobody's token: the operator on the host (a failed write fails nothing).
    const { changeEntry } = await import("./audit.ts");
    await store.appendAudit([changeEntry({ kind: "key.rotate", actor: undefined, detail: { from_key: key.id, to_key: next.id, values: count, via: "store" } }, ctx.now())]).catch((error: unknown) => {
      ctx.stderr.write(`subs: warning: the rotation is done, but not written to the deployment's record: ${error instanceof Error ? error.message : String(error)}\n`);
    });
    ctx.stderr.write(`subs: re-encrypted ${count} values from key ${key.id} to key ${next.id}; start the deployment with --key-file ${options.newKeyFile} from now on, and keep the old key (key ${key.id}) as long as you keep a backup made before now: those open with it alone\n`);
  } finally {
    await store.close();
  }
}

/**
 * `subs deployment backup FILE`: a consistent copy of the SQLite store, made while it serves, 0600,
 * never over an existing file (a Postgres store is refused, naming pg_dump). Says which key opens it.
 */
export async function backupCommand(ctx: Ctx, options: { flags: Flags; file: string }): Promise<void> {
  const config = deploymentConfig(options.flags, ctx, { serve: false });
  // Postgres's own tools make a backup a copy by subs could not match (and it is refused before any connection).
  if (config.postgres) {
    throw refused("a Postgres store is backed up with pg_dump, not subs", {
      hint: `(umask 077; pg_dump --format=custom --file "/backup/subs-$(date +%F).dump" "$SUBS_DEPLOYMENT_STORE") (docs/deployment-server.md, "Postgres")`,
      code: "backup_postgres",
    });
  }
  const { openSqliteStore } = await import("./store/sqlite.ts");
  const store = await openSqliteStore({ storeDir: config.storeDir, dbPath: config.dbPath, key: undefined, mustExist: true });
  try {
    const { resolve } = await import("node:path");
    await store.backup(resolve(ctx.cwd, options.file));
    const check = await store.keyCheck();
    const opens = check ? `; it opens with key ${check.keyId} alone: keep that key as long as you keep this backup` : "";
    ctx.stderr.write(`subs: backed up ${store.path} to ${options.file} (mode 0600)${opens}\n`);
  } finally {
    await store.close();
  }
}

/**
 * `subs deployment check-key [FILE]`: whether the key (--key-file, $SUBS_DEPLOYMENT_KEY) opens the
 * store, or the backup FILE. Nothing is decrypted but the store's key check value; nothing is written.
 */
export async function checkKeyCommand(ctx: Ctx, options: { flags: Flags; file?: string }): Promise<void> {
  const config = deploymentConfig(options.flags, ctx, { serve: false });
  if (!config.key) throw usage("no key to check: give --key-file PATH or $SUBS_DEPLOYMENT_KEY");
  const key = readKey(config.key);
  if (!key) throw refused(`${config.key.from} ${"file" in config.key ? config.key.file : ""}: no such file`, { code: "no_key" });
  const { check, where } = options.file === undefined ? await storeKeyCheck(config) : await backupKeyCheck(ctx, options.file);
  if (!check) {
    ctx.stdout.write(`${where} has sealed nothing yet: key ${key.id} would become its key\n`);
    return;
  }
  const { open, KeyMismatch } = await import("./keys.ts");
  const { KEY_CHECK, KEY_CHECK_TEXT } = await import("./store/rows.ts");
  try {
    if (open(key, check, KEY_CHECK) !== KEY_CHECK_TEXT) throw new KeyMismatch("check");
  } catch {
    throw failed(`key ${key.id} does not open ${where}: its values are sealed under key ${check.keyId}`, {
      code: "wrong_key",
      hint: `run \`subs deployment check-key\` with each old key file (deployment.key.until-…) to find key ${check.keyId}`,
    });
  }
  ctx.stdout.write(`key ${key.id} opens ${where}\n`);
}

async function storeKeyCheck(config: DeploymentConfig): Promise<{ check: Sealed | undefined; where: string }> {
  const store = await openStore(config, undefined, { mustExist: true });
  try {
    return { check: await store.keyCheck(), where: store.path };
  } finally {
    await store.close();
  }
}

/** A backup file, opened read-only: nothing in it is changed, not even its journal mode. */
async function backupKeyCheck(ctx: Ctx, file: string): Promise<{ check: Sealed | undefined; where: string }> {
  const { resolve } = await import("node:path");
  const { default: Database } = await import("better-sqlite3");
  const { readKeyCheck } = await import("./store/sqlite.ts");
  let db: import("better-sqlite3").Database | undefined;
  try {
    db = new Database(resolve(ctx.cwd, file), { readonly: true, fileMustExist: true });
    return { check: readKeyCheck(db), where: file };
  } catch (error) {
    if (error instanceof SubsError) throw error;
    throw refused(`${file} is not a backup of a subs deployment's store (${(error as { code?: string }).code ?? (error as Error).message})`, {
      hint: "give a file `subs deployment backup` made, or leave FILE out to check the store itself",
      code: "not_a_backup",
    });
  } finally {
    db?.close();
  }
}

/** How often a serving process says so in the store, and after how long without a word it counts as gone (a process killed without stopping). */
export const REPLICA_HEARTBEAT_MS = 5000;
export const REPLICA_GONE_AFTER_MS = 15_000;

/**
 * Says in the store, now and every REPLICA_HEARTBEAT_MS, that this process serves it at `listen`,
 * so that `rotate-key` can refuse while any does; `end()` takes the word back (a clean stop). A store
 * that does not answer misses a beat, no more: the process serves on.
 */
export async function sayServing(store: Pick<DeploymentStore, "heartbeat" | "endReplica">, listen: string, now: () => number): Promise<{ end(): Promise<void> }> {
  const { randomUUID } = await import("node:crypto");
  const replica = { id: randomUUID(), listen };
  await store.heartbeat(replica, now());
  const beat = setInterval(() => void store.heartbeat(replica, now()).catch(() => {}), REPLICA_HEARTBEAT_MS);
  beat.unref();
  return {
    async end() {
      clearInterval(beat);
      await store.endReplica(replica.id).catch(() => {});
    },
  };
}
