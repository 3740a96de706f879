// `subs apply` without [remote] asks before it deletes, as with [remote]: on a terminal the plan,
// then `Apply? [y/N]`; `--yes` skips the question; without a terminal (CI) it goes on. A deleted
// credential is revoked at its server, so a "no" must change nothing. Run as a person runs it: the
// built CLI on a pseudo-terminal.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeEach, describe, it } from "node:test";
import { openStore } from "../src/store/store.ts";
import { runCli } from "./support/cli.ts";
import { seedCredentials } from "./support/credentials.ts";
import { onTerminal } from "./support/terminal.ts";

const QUESTION = /Apply\? \[y\/N\] /;

describe("subs apply (local) asks before deleting, on a terminal", () => {
  let dir: string;

  const stored = async () => {
    const opened = await openStore({ dbPath: path.join(dir, "substructure.db"), create: false });
    try {
      return opened!.store.listCredentials().map((c) => c.id).sort();
    } finally {
      opened?.store.close();
    }
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-apply-local-"));
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.keep]\nurl = "https://keep.example/mcp"\n\n[mcp.moved]\nurl = "https://moved.example/v2/mcp"\n`);
    await seedCredentials(path.join(dir, "substructure.db"), [
      { id: "keep", url: "https://keep.example/mcp" },
      { id: "gone", url: "https://gone.example/mcp" },
      { id: "moved", url: "https://moved.example/v1/mcp" },
    ]);
  });

  it("a no: the question lists each credential and why, exit 1 (declined), nothing deleted", async () => {
    const r = await onTerminal(["apply"], { cwd: dir, typed: "n\n", prompt: QUESTION });
    assert.equal(r.code, 1, r.screen);
    assert.match(r.screen, /This removes from substructure\.db:\n {2}- the credential of gone \(no longer declared\)\n {2}- the credential of moved \(url changed since login\)\nApply\? \[y\/N\] /);
    assert.match(r.screen, /error: not applied: nothing was changed in substructure\.db/);
    assert.deepEqual(await stored(), ["gone", "keep", "moved"]);
  });

  it("Enter alone is no", async () => {
    const r = await onTerminal(["apply"], { cwd: dir, typed: "\n", prompt: QUESTION });
    assert.equal(r.code, 1, r.screen);
    assert.deepEqual(await stored(), ["gone", "keep", "moved"]);
  });

  it("a yes deletes what was listed", async () => {
    const r = await onTerminal(["apply"], { cwd: dir, typed: "y\n", prompt: QUESTION });
    assert.equal(r.code, 0, r.screen);
    assert.match(r.screen, /Deleted 2 credentials in substructure\.db/);
    assert.deepEqual(await stored(), ["keep"]);
  });

  it("--yes: no question", async () => {
    const r = await onTerminal(["apply", "--yes"], { cwd: dir });
    assert.equal(r.code, 0, r.screen);
    assert.doesNotMatch(r.screen, QUESTION);
    assert.deepEqual(await stored(), ["keep"]);
  });

  it("--dry-run, and a plan with nothing to delete, never ask", async () => {
    const dry = await onTerminal(["apply", "--dry-run"], { cwd: dir });
    assert.equal(dry.code, 0, dry.screen);
    assert.doesNotMatch(dry.screen, QUESTION);
    assert.deepEqual(await stored(), ["gone", "keep", "moved"]);
    assert.equal((await onTerminal(["apply", "--yes"], { cwd: dir })).code, 0);
    const nothing = await onTerminal(["apply"], { cwd: dir });
    assert.equal(nothing.code, 0, nothing.screen);
    assert.doesNotMatch(nothing.screen, QUESTION);
  });

  it("no terminal (CI, a script): applied as before, nothing asked", async () => {
    const r = await runCli(["apply"], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, QUESTION);
    assert.deepEqual(await stored(), ["keep"]);
  });
});
