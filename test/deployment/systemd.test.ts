// The systemd unit the package ships (docs/subs-deployment.service): systemd's own checks find
// nothing to say about it (`systemd-analyze verify`: no warning at all; `systemd-analyze security`:
// an exposure "OK" or better), and its ExecStart line, run as written but for the paths the test
// owns, starts `subs deployment serve`, which then stops cleanly on the unit's KillSignal.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, test } from "node:test";
import { ensureDebian } from "../../scripts/tools.mjs";
import { REPO } from "../support/cli.ts";
import { stopChild, within } from "../support/wait.ts";

const UNIT = path.join(REPO, "docs", "subs-deployment.service");
const dir = mkdtempSync(path.join(tmpdir(), "subs-systemd-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** `Key=value` lines of the unit, in order (comments and sections left out). */
const settings = (text: string) =>
  text
    .split("\n")
    .filter((l) => /^[A-Za-z]+=/.test(l))
    .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)] as const);

test("systemd-analyze verify says nothing about the unit, and security rates its exposure OK or better", () => {
  ensureDebian([{ command: "systemd-analyze", package: "systemd" }], "test/deployment/systemd.test.ts");
  const unit = path.join(dir, "subs-deployment.service");
  copyFileSync(UNIT, unit);
  const verify = spawnSync("systemd-analyze", ["verify", unit], { encoding: "utf8" });
  assert.equal(verify.status, 0, verify.stderr);
  // verify exits 0 for an unknown key or a bad value too, with a warning: none is allowed.
  assert.equal(verify.stderr.trim(), "", "systemd-analyze verify warned");
  const security = spawnSync("systemd-analyze", ["security", "--offline=yes", unit], { encoding: "utf8" });
  const exposure = /Overall exposure level for subs-deployment\.service: (\d+\.\d+) (\w+)/.exec(security.stdout + security.stderr);
  assert.ok(exposure, security.stdout + security.stderr);
  assert.ok(Number(exposure[1]) <= 2, `exposure ${exposure[1]} ${exposure[2]}`);
  const keys = new Map(settings(readFileSync(UNIT, "utf8")));
  assert.equal(keys.get("User"), "subs", "a user of its own");
  assert.equal(keys.get("EnvironmentFile"), "/etc/subs/deployment.env", "the settings from an environment file");
  assert.equal(keys.get("KillSignal"), "SIGTERM");
});

test("its ExecStart, as written (only its paths and port the test's), starts the deployment; SIGTERM stops it with exit 0", async () => {
  const exec = new Map(settings(readFileSync(UNIT, "utf8"))).get("ExecStart")!;
  assert.match(exec, /^\/usr\/bin\/env subs deployment serve /);
  const store = path.join(dir, "state");
  mkdirSync(store, { mode: 0o700 });
  const key = path.join(dir, "deployment.key");
  writeFileSync(key, `${Buffer.alloc(32, 7).toString("base64")}\n`, { mode: 0o600 });
  chmodSync(key, 0o600);
  const args = exec
    .replace(/^\/usr\/bin\/env subs /, "")
    .replace("127.0.0.1:8080", "127.0.0.1:0")
    .replace("/var/lib/subs", store)
    .replace("/etc/subs/deployment.key", key)
    .split(" ");
  assert.deepEqual(args.slice(0, 2), ["deployment", "serve"]);
  const child = spawn(process.execPath, [path.join(REPO, "bin", "subs.cjs"), ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, SUBS_DEPLOYMENT_PUBLIC_URL: "https://subs.example.com" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const lines = createInterface({ input: child.stdout! });
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    lines.on("line", (line) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (entry.msg === "listening") resolve(entry);
    });
    child.once("exit", (code) => reject(new Error(`subs exited ${code}: ${stderr}`)));
  });
  try {
    const entry = await within(listening, () => `the unit's command to listen; its stderr:\n${stderr}`);
    assert.equal(entry.url, "https://subs.example.com");
    assert.equal(entry.store, path.join(store, "deployment.db"));
  } finally {
    assert.equal(await stopChild(child, "subs deployment serve", { signal: "SIGTERM" }), 0, stderr);
  }
});
