// Issue 7: hostile config input. Mutates every fixture with a fixed seed; every case must end in
// exit 0 (valid JSON on stdout) or exit 2 (file:line:col on stderr), never a stack trace, and a
// broken file must leave the db byte-for-byte as it was.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, runInProcess } from "./support/cli.ts";
import { seedCredentials } from "./support/credentials.ts";
import { prng } from "./support/prng.ts";

const CASES = 2000;
const SEED = 0x5eed;

const fixture = (name: string) => readFileSync(path.join(REPO, "fixtures", "config", name), "utf8");
const validBases = [fixture("valid-full.toml"), readFileSync(path.join(REPO, "substructure.toml.example"), "utf8")];
const invalidBases = readdirSync(path.join(REPO, "fixtures", "config")).filter((f) => f !== "valid-full.toml").map(fixture);

function mutate(random: () => number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  // Mostly valid files, so that a mutation can leave them valid and both outcomes are exercised.
  const base = random() < 0.8 ? pick(validBases) : pick(invalidBases);
  const lines = base.split("\n");
  const at = Math.floor(random() * (lines.length + 1));
  const mutations: Array<() => string> = [
    () => lines.filter((_, n) => n !== at).join("\n"),
    () => [...lines.slice(0, at), lines[at] ?? "", ...lines.slice(at)].join("\n"),
    () => base.slice(0, Math.floor(random() * base.length)),
    () => {
      const bytes = Array.from({ length: 1 + Math.floor(random() * 12) }, () => String.fromCharCode(Math.floor(random() * 256))).join("");
      const cut = Math.floor(random() * base.length);
      return base.slice(0, cut) + bytes + base.slice(cut);
    },
    () => `${base}\n[mcp.huge]\nurl = "https://example.com/${"x".repeat(200_000)}"\n`,
    () => `${base}\nnested = ${"[".repeat(5000)}${"]".repeat(5000)}\n`,
    () => `${base}\nnested = ${"{ a = ".repeat(3000)}1${" }".repeat(3000)}\n`,
    () => `${base}\n[mcp.${pick(["ñandú", "café", "日本", "a\u200bb", "ид"])}]\nurl = "https://u.example/mcp"\n`,
    () => `${base}\n[mcp."${pick(["ñandú", "🙂", "a b", "", "x\\u0000y"])}"]\nurl = "https://u.example/mcp"\n`,
    () =>
      Array.from({ length: 1000 + Math.floor(random() * 2000) }, (_, n) => `[mcp.s${n}]\nurl = "https://s${n}.example/mcp"\n`).join("\n") +
      `\n[agent.all]\nmcp = ["s1", "s2", "missing${Math.floor(random() * 10)}"]\n`,
    () => base.replace(/"[^"\n]*"/, () => pick(['"', "'''", '"""', "1979-05-27T07:32:00Z", "inf", "nan", "0x1F", "[]", "{}", "true"])),
    () => base.replace(/\n/g, () => (random() < 0.1 ? pick(["\r\n", "\r", "\n\n", " \\\n"]) : "\n")),
  ];
  return pick(mutations)();
}

test(`config fuzzing: ${CASES} mutated files (seed ${SEED.toString(16)})`, async () => {
  const random = prng(SEED);
  const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-"));
  const dbPath = path.join(dir, "substructure.db");
  const file = path.join(dir, "substructure.toml");
  const counts = { 0: 0, 2: 0 };
  let lastWasValid = false;
  for (let n = 0; n < CASES; n++) {
    const source = mutate(random);
    writeFileSync(file, source);
    // A credential for an id no fixture declares (only `subs apply` deletes one, issue 15): a
    // broken file must not touch the db.
    if (n === 0 || lastWasValid) await seedCredentials(dbPath, [{ id: "zz-planted", url: "https://planted.example/mcp" }]);
    const before = createHash("sha256").update(readFileSync(dbPath)).digest("hex");
    const result = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: {} });
    const context = `case ${n}: exit ${result.code}\n${result.stderr.slice(0, 500)}`;
    assert.ok(result.code === 0 || result.code === 2, context);
    assert.doesNotMatch(result.stderr, /\n\s+at .*:\d+:\d+\)?\n/, `stack trace in ${context}`);
    assert.doesNotMatch(result.stderr, /unexpected/, context);
    if (result.code === 0) {
      assert.ok(Array.isArray(JSON.parse(result.stdout)), context);
    } else {
      assert.match(result.stderr, /^substructure\.toml:\d+:\d+: /m, context);
      const after = createHash("sha256").update(readFileSync(dbPath)).digest("hex");
      assert.equal(after, before, `db written on a broken file: ${context}`);
    }
    counts[result.code as 0 | 2]++;
    lastWasValid = result.code === 0;
  }
  // The mutations must exercise both outcomes, or the test proves little.
  assert.ok(counts[0] > 300 && counts[2] > 500, JSON.stringify(counts));
  console.log(`outcomes: ${JSON.stringify(counts)}`);
});
