// `subs deployment backup` and `subs deployment check-key`, through the built CLI against the store
// of a real `subs deployment serve`: a backup made while it serves is a consistent 0600 copy that
// never replaces a file, restores into a deployment that serves what it held, and opens with the
// key it names; after a rotation, check-key tells which key opens the store and which the backup.
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runCli } from "../support/cli.ts";
import { callServed, startServedDeployment } from "../support/deployment-serve.ts";
import { refusedUrl } from "../support/ports.ts";

test("a backup while it serves: 0600, never over a file, names its key, restores; check-key after a rotation tells the keys apart", async () => {
  const d = await startServedDeployment({ store: "sqlite" });
  const subs = (args: string[]) => runCli(["deployment", ...args], { cwd: d.dir });
  try {
    assert.equal((await callServed(d, "PUT", "/v1/mcp/tracker", { url: "https://tracker.example/mcp", prefix_tools: false })).status, 201);
    const made = await subs(["backup", "--store", d.storeArg, "b1.db"]);
    assert.equal(made.code, 0, made.stderr);
    const file = path.join(d.dir, "b1.db");
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const keyId = /it opens with key (\w+) alone/.exec(made.stderr)?.[1];
    assert.ok(keyId, made.stderr);
    assert.equal(made.stdout, "");

    writeFileSync(path.join(d.dir, "taken.db"), "a file of the operator's\n");
    const over = await subs(["backup", "--store", d.storeArg, "taken.db"]);
    assert.equal(over.code, 2, over.stderr);
    assert.match(over.stderr, /taken\.db exists: a backup never replaces a file/);
    assert.equal(readFileSync(path.join(d.dir, "taken.db"), "utf8"), "a file of the operator's\n");

    const opens = await subs(["check-key", "--key-file", d.keyFile, "--store", d.storeArg]);
    assert.deepEqual([opens.code, opens.stdout], [0, `key ${keyId} opens ${d.dbPath}\n`], opens.stderr);
    assert.deepEqual([(await subs(["check-key", "--key-file", d.keyFile, "b1.db"])).stdout], [`key ${keyId} opens b1.db\n`]);
    const notOne = await subs(["check-key", "--key-file", d.keyFile, "/etc/passwd"]);
    assert.equal(notOne.code, 2);
    assert.match(notOne.stderr, /\/etc\/passwd is not a backup of a subs deployment's store/);

    // Restored as the docs say (the copy in place as deployment.db, with the key it names), it serves what it held.
    const restored = mkdtempSync(path.join(tmpdir(), "subs-restored-"));
    try {
      copyFileSync(d.keyFile, path.join(restored, "deployment.key"));
      mkdirSync(path.join(restored, "data"), { mode: 0o700 });
      copyFileSync(file, path.join(restored, "data", "deployment.db"));
      const back = await startServedDeployment({ store: "sqlite", dir: restored });
      try {
        assert.deepEqual((await callServed(back, "GET", "/v1/mcp")).body.connections.map((c: { id: string }) => c.id), ["tracker"]);
      } finally {
        await back.close();
      }
    } finally {
      rmSync(restored, { recursive: true, force: true });
    }

    await d.stop();
    const rotated = await subs(["rotate-key", "--store", d.storeArg, "--key-file", d.keyFile, "--new-key-file", "new.key"]);
    assert.equal(rotated.code, 0, rotated.stderr);
    const newId = /to key (\w+)/.exec(rotated.stderr)?.[1];
    const oldOnStore = await subs(["check-key", "--key-file", d.keyFile, "--store", d.storeArg]);
    assert.equal(oldOnStore.code, 1);
    assert.match(oldOnStore.stderr, new RegExp(`key ${keyId} does not open .*deployment\\.db: its values are sealed under key ${newId}`));
    assert.equal((await subs(["check-key", "--key-file", "new.key", "--store", d.storeArg])).code, 0);
    assert.equal((await subs(["check-key", "--key-file", d.keyFile, "b1.db"])).code, 0, "the backup still opens with the old key");
    const newOnBackup = await subs(["check-key", "--key-file", "new.key", "b1.db"]);
    assert.equal(newOnBackup.code, 1);
    assert.match(newOnBackup.stderr, new RegExp(`its values are sealed under key ${keyId}`));
  } finally {
    await d.close();
  }
});

test("a Postgres store is not backed up by subs: refused before any connection, naming pg_dump", async () => {
  const url = (await refusedUrl("/subs")).replace("http://", "postgres://subs@");
  const refused = await runCli(["deployment", "backup", "--store", url, "b.dump"], { cwd: process.cwd() });
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /a Postgres store is backed up with pg_dump, not subs/);
  assert.match(refused.stderr, /pg_dump --format=custom/);
  assert.doesNotMatch(refused.stderr, /does not answer/, "no connection was tried");
});
