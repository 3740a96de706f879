// Concurrency: 8 processes logging in, refreshing and applying at once on one db (and
// 8 remote applies at once on one deployment). No
// credential is lost or corrupted, and a rotating refresh token is refreshed at most once per
// rotation at the authorization server (the others wait on the db's write lock, then use the
// token the first one stored: src/auth/refresh.ts).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { parse as parseToml } from "smol-toml";
import { environment, leakedTokens, type Env, type Row } from "../auth/harness.ts";
import { browserCommand } from "../support/browser.ts";
import { runAs, runCli, signalOnce, type RunResult } from "../support/cli.ts";
import { STORES } from "../support/deployment-serve.ts";
import { targets } from "../support/deployment-targets.ts";
import { waitFor } from "../support/wait.ts";

const IDS = ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"];
const toml = (url: string, ids: string[]) => ids.map((id) => `[mcp.${id}]\nurl = "${url}"\n`).join("\n");

function rows(env: Env): Row[] {
  const db = new Database(path.join(env.dir, "substructure.db"), { readonly: true });
  try {
    assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
    return db.prepare("SELECT * FROM subs_credentials ORDER BY id").all() as Row[];
  } finally {
    db.close();
  }
}

/** Marks the stored credentials of `ids` expired: the next command that uses one refreshes it. */
function expireCredentials(env: Env, ids: string[]) {
  const db = new Database(path.join(env.dir, "substructure.db"));
  const update = db.prepare("UPDATE subs_credentials SET expires_at = ? WHERE id = ?");
  for (const id of ids) update.run(Date.now() - 1000, id);
  db.close();
}

function allOk(results: RunResult[], what: string) {
  results.forEach((r, i) => assert.equal(r.code, 0, `${what} #${i}: ${r.stderr}`));
}

test("8 processes at once on one db: logins, refreshes and applies lose or corrupt nothing; one refresh per rotation", { timeout: 120_000 }, async () => {
  const env = await environment({ as: { refreshDelayMs: 200 }, toml: (url) => toml(url, IDS) });
  // Every run's output is kept in env.outputs, which leakedTokens reads.
  const kept = (r: RunResult) => (env.outputs.push(r.stdout, r.stderr), r);
  const cli = async (argv: string[]) => kept(await runCli(argv, { cwd: env.dir, env: { BROWSER: browserCommand() }, timeoutMs: 60_000 }));
  // What the races left in the db, read by a person's next commands, one at a time: run() in this
  // process, with the child's HOME (the races above run mcp list's and mcp tools's path on the built CLI).
  const next = async (argv: string[]) => kept(await runAs("in-process", argv, { cwd: env.dir, env: { HOME: env.dir } }));
  const expire = (ids: string[]) => expireCredentials(env, ids);
  try {
    // 1. Eight logins at once, one id each, into a db none of them has created yet.
    allOk(await Promise.all(IDS.map((id) => cli(["mcp", "login", id]))), "login");
    const logged = rows(env);
    assert.deepEqual(logged.map((r) => r.id), IDS);
    assert.equal(new Set(logged.map((r) => r.access_token)).size, 8, "each id has its own credential");
    assert.equal(env.as.counters.codeExchanges, 8);

    // 2. Eight refreshes at once: four processes on each of two expired credentials.
    expire(["a1", "a2"]);
    const before = env.as.counters.refreshes;
    allOk(await Promise.all(["a1", "a1", "a1", "a1", "a2", "a2", "a2", "a2"].map((id) => cli(["mcp", "tools", id, "--json"]))), "refresh");
    assert.equal(env.as.counters.refreshes - before, 2, "exactly one refresh per rotated token");
    assert.equal(env.as.counters.rejectedRefreshes, 0, "no process used a refresh token another had rotated");
    const refreshed = rows(env);
    for (const id of ["a1", "a2"]) {
      const row = refreshed.find((r) => r.id === id)!;
      assert.ok(row.expires_at! > Date.now());
      assert.notEqual(row.refresh_token, logged.find((r) => r.id === id)!.refresh_token);
    }

    // 3. Everything at once: three applies removing a7 and a8, three processes refreshing a3, two re-logins of a4.
    env.write(toml(env.mcp.url, IDS.slice(0, 6)));
    expire(["a3"]);
    const beforeMixed = env.as.counters.refreshes;
    const mixed = await Promise.all([
      cli(["apply"]),
      cli(["apply", "--json"]),
      cli(["apply"]),
      cli(["mcp", "tools", "a3"]),
      cli(["mcp", "tools", "a3", "--json"]),
      cli(["mcp", "call", "a3", "echo"]),
      cli(["mcp", "login", "a4"]),
      cli(["mcp", "login", "a4", "--json"]),
    ]);
    allOk(mixed, "mixed");
    // Only the applies delete a7 and a8; at most one refresh of a3.
    assert.equal(env.as.counters.refreshes - beforeMixed, 1);
    assert.equal(env.as.counters.rejectedRefreshes, 0);
    const final = rows(env);
    assert.deepEqual(final.map((r) => r.id), IDS.slice(0, 6), "a7 and a8 deleted, nothing else lost");

    // Every remaining credential is usable; the ones the mixed run touched work at the server.
    const list = JSON.parse((await next(["mcp", "list", "--json"])).stdout) as Array<{ id: string; status: string }>;
    assert.deepEqual(list.map((c) => [c.id, c.status]), IDS.slice(0, 6).map((id) => [id, "authorized"]));
    for (const id of ["a3", "a4", "a5"]) allOk([await next(["mcp", "tools", id])], `tools ${id}`);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

// A refresh runs over the network without holding the db's write lock (src/auth/refresh.ts: a
// lease in the db says who refreshes): while one connection's refresh waits on a slow authorization
// server, a login of another connection and a refresh of a third both complete. The authorization
// server holds the first refresh until they have, so the order is forced, not timed: when the refresh
// held the write lock across the network, the login failed "database is locked" after the db's 5 s
// busy timeout, and the other refresh waited behind the first.
test("a refresh waiting on a slow authorization server holds up no other command: a login and another connection's refresh complete meanwhile", { timeout: 60_000 }, async () => {
  let releaseHeld!: () => void;
  const held = new Promise<void>((resolve) => (releaseHeld = resolve));
  let heldToken: string | undefined;
  let holding = false;
  const env = await environment({
    as: {
      refreshHold: async (token) => {
        // The first refresh only: the one the test holds in flight.
        if (heldToken !== undefined && token !== heldToken) return;
        heldToken = token;
        holding = true;
        await held;
      },
    },
    toml: (url) => toml(url, ["r1", "r2", "r3"]),
  });
  const cli = (argv: string[]) => runCli(argv, { cwd: env.dir, env: { BROWSER: browserCommand() }, timeoutMs: 60_000 });
  const expire = (ids: string[]) => expireCredentials(env, ids);
  try {
    allOk(await Promise.all(["r1", "r3"].map((id) => cli(["mcp", "login", id]))), "login");
    expire(["r1"]);
    const slow = cli(["mcp", "tools", "r1", "--json"]);
    await waitFor(() => holding, "r1's refresh to reach the authorization server");
    const login = await cli(["mcp", "login", "r2"]);
    assert.equal(login.code, 0, login.stderr);
    expire(["r3"]);
    const other = await cli(["mcp", "tools", "r3", "--json"]);
    assert.equal(other.code, 0, other.stderr);
    assert.equal(env.as.counters.refreshes, 1, "r3's refresh answered while r1's is still held");
    releaseHeld();
    const first = await slow;
    assert.equal(first.code, 0, first.stderr);
    assert.equal(env.as.counters.refreshes, 2);
    assert.equal(env.as.counters.rejectedRefreshes, 0);
    assert.deepEqual(rows(env).map((r) => r.id), ["r1", "r2", "r3"]);
  } finally {
    releaseHeld();
    await env.close();
  }
});

// The real server on each store (the reference deployment, a stand-in, adds nothing here: no fault
// is injected and it speaks the whole protocol).
for (const target of targets(STORES).filter((t) => t.kind !== "reference")) test(`8 remote applies at once converge: the deployment ends as the file says, and a next run has nothing to write (${target.name})`, { timeout: 60_000 }, async () => {
  const deployment = await target.start();
  const dir = mkdtempSync(path.join(tmpdir(), "subs-concurrent-remote-"));
  try {
    const connections = IDS.map((id) => `[mcp.${id}]\nurl = "https://${id}.example/mcp"\n`).join("\n");
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${connections}\n[agent.all]\nmcp = [${IDS.map((id) => `"${id}"`).join(", ")}]\n`);
    const apply = (...args: string[]) => runCli(["apply", ...args], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: deployment.token }, timeoutMs: 60_000 });
    const results = await Promise.all(IDS.map(() => apply("--json")));
    allOk(results, "apply");
    assert.deepEqual([...deployment.connections.keys()].sort(), IDS);
    assert.deepEqual(deployment.agents.get("all")!.mcp.map((m: { id: string }) => m.id), IDS);
    const answered = (await deployment.seen()).length;
    const next = await apply("--json");
    assert.equal(next.code, 0, next.stderr);
    assert.equal(JSON.parse(next.stdout).changed, false);
    assert.deepEqual((await deployment.seen()).slice(answered).filter((r) => !r.startsWith("GET")), []);
    for (const r of [...results, next]) assert.ok(!r.stdout.includes(deployment.token) && !r.stderr.includes(deployment.token));
  } finally {
    await deployment.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The connection ids substructure.toml at `file` declares (it must parse). */
function declared(file: string): Set<string> {
  const parsed = parseToml(readFileSync(file, "utf8")) as { mcp?: Record<string, unknown> };
  return new Set(Object.keys(parsed.mcp ?? {}));
}

/** Nothing an edit leaves behind: no lock directory, no temporary file. */
function assertNoLeftovers(dir: string) {
  assert.deepEqual(readdirSync(dir).filter((name) => name.endsWith(".lock") || name.endsWith(".tmp")), []);
}

// Every edit of substructure.toml reads it, checks it and renames the edited text over it. Sixteen
// at once used to lose edits (runs printed "Added" and were not in the file) and bring back
// sections a remove had just cut. Each run now holds the file's lock from its read to its rename:
// every run that says it landed is in the file, and every one that did not says so and fails.
// One round, where 20 and then 3 ran: with the lock taken out, round 1 had a run refused as
// "changed while subs was editing it"; with the lock and that check before the rename taken out,
// round 1 lost edits; each in every one of three tries on a loaded 2-core machine, and again in
// every one of three tries with the file run alone on an idle one.
// Twelve runs (7 adds, 3 removes, 2 imports), where 16 ran: with either of those taken out, twelve
// failed round 1 in each of three tries on a loaded 2-core machine; eight (5, 2, 1) passed one of
// three with the lock taken out, so fewer is not enough.
const ROUNDS = 1; // the test's name says it too
test("12 edits of substructure.toml at once: adds, removes and imports all land, or say they did not", { timeout: 900_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-concurrent-edits-"));
  const file = path.join(dir, "substructure.toml");
  const adds = Array.from({ length: 7 }, (_, i) => `a${i}`);
  const removes = ["r0", "r1", "r2"];
  const imports = ["i0", "i1"];
  try {
    mkdirSync(path.join(dir, "clients"));
    let landed = 0;
    for (let round = 0; round < ROUNDS; round++) {
      writeFileSync(file, `# kept\n[mcp.base]\nurl = "https://base.example/mcp"\n\n${removes.map((id) => `[mcp.${id}]\nurl = "https://${id}.example/mcp"\n`).join("\n")}`);
      for (const id of imports) {
        writeFileSync(path.join(dir, "clients", `${id}.json`), JSON.stringify({ mcpServers: { [id]: { type: "http", url: `https://${id}.example/r${round}/mcp` } } }));
      }
      const cli = (argv: string[]) => runCli(argv, { cwd: dir, timeoutMs: 120_000 });
      const runs = [
        ...adds.map((id) => ({ id, kind: "add" as const, run: cli(["mcp", "add", id, `https://${id}.example/mcp`]) })),
        ...removes.map((id) => ({ id, kind: "remove" as const, run: cli(["mcp", "remove", id]) })),
        ...imports.map((id) => ({ id, kind: "import" as const, run: cli(["mcp", "import", "--from", path.join("clients", `${id}.json`)]) })),
      ];
      const results = await Promise.all(runs.map((r) => r.run));
      const ids = declared(file);
      const expected = new Set(["base"]);
      runs.forEach(({ id, kind }, n) => {
        const r = results[n]!;
        const what = `round ${round}, ${kind} ${id} (exit ${r.code}):\n${r.stderr}`;
        if (r.code === 0) {
          landed++;
          assert.match(r.stderr, kind === "add" ? /Added \[mcp\.a\d\]/ : kind === "remove" ? /Removed \[mcp\.r\d\]/ : /Added 1 connection/, what);
          if (kind !== "remove") expected.add(id);
        } else {
          // The only way an edit may not land: the lock stayed busy past the bounded wait.
          assert.equal(r.code, 1, what);
          assert.match(r.stderr, /another subs has been editing substructure\.toml for 15 s; nothing was written/, what);
          if (kind === "remove") expected.add(id);
        }
      });
      assert.deepEqual([...ids].sort(), [...expected].sort(), `round ${round}: the file does not hold what the runs said`);
      assert.match(readFileSync(file, "utf8"), /^# kept\n\[mcp\.base\]\n/);
      assertNoLeftovers(dir);
    }
    // Each edit holds the lock for milliseconds: every one gets its turn well within the wait.
    assert.equal(landed, ROUNDS * (adds.length + removes.length + imports.length));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// One round of four inits and four imports, where 3 rounds of eight each ran: with init writing over
// an existing file (no "wx"), and with import creating the file without the lock, round 1 failed
// (an init wrote over the file; an import's edit was lost or refused as changed), each in every one
// of three tries on a loaded 2-core machine (eight processes starting at once on two cores make the
// race by themselves).
const CREATE_ROUNDS = 1;
const CREATORS = 4;
test("init and import creating substructure.toml at once: one creates it, every import lands, every other init says the file exists", { timeout: 300_000 }, async () => {
  for (let round = 0; round < CREATE_ROUNDS; round++) {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-concurrent-create-"));
    try {
      mkdirSync(path.join(dir, "clients"));
      const imports = Array.from({ length: CREATORS }, (_, i) => `i${i}`);
      for (const id of imports) writeFileSync(path.join(dir, "clients", `${id}.json`), JSON.stringify({ mcpServers: { [id]: { type: "http", url: `https://${id}.example/mcp` } } }));
      const inits = Array.from({ length: CREATORS }, (_, i) => `n${i}`);
      const cli = (argv: string[]) => runCli(argv, { cwd: dir, timeoutMs: 120_000 });
      const results = await Promise.all([
        ...inits.map((id) => cli(["init", `${id}=https://${id}.example/mcp`])),
        ...imports.map((id) => cli(["mcp", "import", "--from", path.join("clients", `${id}.json`)])),
      ]);
      const ids = declared(path.join(dir, "substructure.toml"));
      const initResults = results.slice(0, inits.length);
      const created = initResults.filter((r) => r.code === 0).length;
      assert.ok(created <= 1, "at most one init wrote the file");
      initResults.forEach((r, n) => {
        if (r.code === 0) assert.ok(ids.has(inits[n]!));
        else {
          assert.equal(r.code, 2, r.stderr);
          assert.match(r.stderr, /substructure\.toml already exists; nothing was written/);
          assert.ok(!ids.has(inits[n]!));
        }
      });
      results.slice(inits.length).forEach((r, n) => {
        assert.equal(r.code, 0, r.stderr);
        assert.ok(ids.has(imports[n]!), `import ${imports[n]} said ${r.stderr}`);
      });
      assertNoLeftovers(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

// The lock's edges: a wait is said, and Ctrl-C/SIGTERM end it at once; a lock its holder stopped
// refreshing (killed with SIGKILL) is taken over; a lock held past the wait is exit 1 with nothing written.
test("an edit waiting for the lock says so and stops at once on SIGTERM; a dead run's lock is taken over; a lock held past 15 s is exit 1", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-lock-"));
  const file = path.join(dir, "substructure.toml");
  const lock = `${file}.lock`;
  const text = `[mcp.base]\nurl = "https://base.example/mcp"\n`;
  writeFileSync(file, text);
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(file, old, old);
  const untouched = () => {
    assert.equal(readFileSync(file, "utf8"), text);
    assert.equal(statSync(file).mtimeMs, old.getTime());
  };
  try {
    // Another run holds the lock (and keeps it fresh, as proper-lockfile does).
    mkdirSync(lock);
    const fresh = setInterval(() => utimesSync(lock, new Date(), new Date()), 1000);
    try {
      // A run that waits out the lock, begun first: "at once" is an order, not a figure a loaded
      // machine can break. The run told to stop ends while this one still waits.
      const t0 = Date.now();
      let timedOutEnded = false;
      let saidSoFar = "";
      const timingOut = runCli(["mcp", "add", "y", "https://y.example/mcp"], { cwd: dir, timeoutMs: 60_000, onSpawn: (child) => child.stderr?.on("data", (d) => (saidSoFar += d)) }).finally(() => (timedOutEnded = true));
      await waitFor(() => saidSoFar.includes("Waiting for another subs to finish editing substructure.toml"), () => `the first run to say it waits for the lock; it said: ${saidSoFar}`);
      const term = signalOnce("Waiting for another subs to finish editing substructure.toml", "SIGTERM");
      const r = await runCli(["mcp", "add", "x", "https://x.example/mcp"], { cwd: dir, timeoutMs: 30_000, onSpawn: term.onSpawn });
      assert.ok(term.state.sent, `no wait was said:\n${r.stderr}`);
      assert.equal(r.code, 143, r.stderr);
      assert.equal(timedOutEnded, false, "stopped at once: before a run waiting for the same lock since earlier gave up");
      untouched();

      const timedOut = await timingOut;
      assert.equal(timedOut.code, 1, timedOut.stderr);
      assert.match(timedOut.stderr, /another subs has been editing substructure\.toml for 15 s; nothing was written\nhint: run the command again when it is done/);
      assert.ok(Date.now() - t0 >= 14_000, "it waited");
      untouched();
    } finally {
      clearInterval(fresh);
    }
    // The holder died (nothing refreshes the lock): after 10 s it is anyone's.
    const stale = new Date(Date.now() - 11_000);
    utimesSync(lock, stale, stale);
    const taken = await runCli(["mcp", "add", "z", "https://z.example/mcp"], { cwd: dir, timeoutMs: 30_000 });
    assert.equal(taken.code, 0, taken.stderr);
    assert.deepEqual([...declared(file)].sort(), ["base", "z"]);
    assertNoLeftovers(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
