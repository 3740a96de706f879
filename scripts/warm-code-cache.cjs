// Run by scripts/build.mjs on a fresh bundle: runs the everyday commands in-process against a
// throw-away file, then writes the V8 code cache bin/subs.cjs loads, a part for each
// group of the bundle those commands compiled. A cache written after running holds the bytecode
// of every function those commands compiled, so the first real `subs mcp list` already starts
// from it. Local commands only: nothing here touches the network.
// The cache is bound to this bundle file on this machine (bin/subs.cjs), so it serves the checkout
// that built it and is never shipped: an installed package makes its own on its first run.
"use strict";
const { existsSync, mkdtempSync, rmSync, writeFileSync } = require("node:fs");
const { tmpdir } = require("node:os");
const path = require("node:path");
const { commandOf, loadBundle, writeCodeCache } = require("../bin/subs.cjs");

async function warm(bundle) {
  const loaded = loadBundle(bundle, { useCache: false });
  const { run, processContext, openStore } = loaded.exports;
  const dir = mkdtempSync(path.join(tmpdir(), "subs-warm-"));
  const broken = mkdtempSync(path.join(tmpdir(), "subs-warm-broken-"));
  // Stored rows, so that the cache holds the code a listing runs for each of them.
  const long = mkdtempSync(path.join(tmpdir(), "subs-warm-long-"));
  const commands = [];
  try {
    writeFileSync(
      path.join(dir, "substructure.toml"),
      [
        '[mcp.alpha]\nurl = "https://alpha.example.com/mcp"\noauth = { scopes = ["read"] }\n',
        '[mcp.beta]\nurl = "http://127.0.0.1:9/mcp"\nauth = { token_env = "WARM_TOKEN" }\nprefix_tools = false\n',
        '[agent.helper]\nmcp = ["alpha", { id = "beta", tools = { read_only = true, exclude = ["delete_*"] } }]\ntools = ["notes"]\n',
        '[agent.lead]\nmcp = ["alpha"]\nagents = ["helper"]\n',
      ].join("\n"),
    );
    writeFileSync(path.join(broken, "substructure.toml"), '[mcp.Bad]\nurl = "http://example.com"\ntoken = "x"\n');
    const ids = Array.from({ length: 60 }, (_, n) => `c${n}`);
    writeFileSync(path.join(long, "substructure.toml"), ids.map((id) => `[mcp.${id}]\nurl = "https://${id}.example.com/mcp"\n`).join("\n"));
    const seeded = await openStore({ dbPath: path.join(long, "substructure.db"), create: true });
    for (const id of ids) {
      seeded.store.putCredential({
        id,
        url: `https://${id}.example.com/mcp`,
        issuer: "https://auth.example.com",
        resource: null,
        client_json: '{"client_id":"warm"}',
        access_token: "warm",
        token_type: "Bearer",
        refresh_token: "warm",
        expires_at: Date.now() + 3_600_000,
        refresh_expires_at: null,
        scopes: "",
        created_at: Date.now(),
        updated_at: Date.now(),
      });
    }
    seeded.store.close();
    const sink = { write: () => true };
    const base = { ...(await processContext(new AbortController().signal)), stdout: sink, stderr: sink, env: { WARM_TOKEN: "warm", HOME: dir } };
    const plain = { ...base, stdoutIsTTY: false, stderrIsTTY: false, color: false, stderrColor: false };
    const terminal = { ...base, stdoutIsTTY: true, stderrIsTTY: true, color: true, stderrColor: true, env: { ...base.env, CI: "1" } };
    const runs = [
      [plain, dir, ["mcp", "list", "--json"]],
      [plain, long, ["mcp", "list", "--json"]],
      [plain, long, ["apply", "--dry-run"]],
      [plain, dir, ["apply", "--dry-run"]],
      [plain, dir, ["apply", "--json"]],
      [plain, dir, ["mcp", "list", "--json"]],
      [terminal, dir, ["mcp", "list"]],
      [plain, dir, ["mcp", "list"]],
      [plain, dir, ["agent", "list", "--json"]],
      [terminal, dir, ["agent", "list"]],
      [plain, dir, ["--help"]],
      [plain, dir, ["mcp", "list", "--help"]],
      [plain, dir, ["mcp", "lst"]],
      [terminal, broken, ["mcp", "list"]],
      [plain, broken, ["apply", "--json"]],
    ];
    for (const [ctx, cwd, argv] of runs) {
      await run(argv, { ...ctx, cwd });
      commands.push(commandOf(argv));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(broken, { recursive: true, force: true });
    rmSync(long, { recursive: true, force: true });
  }
  // Sealed with the commands it ran, so a first real run of those does not rewrite it.
  writeCodeCache(bundle, loaded, commands);
  // writeCodeCache is best effort (a run must never fail for its cache); a build says so.
  if (!existsSync(`${bundle}.cache.seal`)) {
    process.stderr.write(`warm-code-cache: no code cache written beside ${bundle} (a directory others can write?); the CLI works, and compiles from source at each start\n`);
  }
}

warm(process.argv[2]).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`warm-code-cache: ${error && error.stack ? error.stack : error}\n`);
    process.exit(1);
  },
);
