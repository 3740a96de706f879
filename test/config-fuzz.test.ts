// Hostile config input. Mutates every fixture with a fixed seed; every case must end in
// exit 0 (valid JSON on stdout) or exit 2 (file:line:col on stderr), never a stack trace, and a
// broken file must leave the db byte-for-byte as it was.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, runInProcess } from "./support/cli.ts";
import { seedCredentials } from "./support/credentials.ts";
import { mutatedFile } from "./support/file-cases.ts";
import { prng } from "./support/prng.ts";

const CASES = 2000;
const SEED = 0x5eed;

test(`config fuzzing: ${CASES} mutated files (seed ${SEED.toString(16)})`, async () => {
  const random = prng(SEED);
  const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-"));
  const dbPath = path.join(dir, "substructure.db");
  const file = path.join(dir, "substructure.toml");
  const counts = { 0: 0, 2: 0 };
  const digest = () => createHash("sha256").update(readFileSync(dbPath)).digest("hex");
  /** The db's digest right after the credential below was written. */
  let seeded: string | undefined;
  let seedings = 0;
  for (let n = 0; n < CASES; n++) {
    const source = mutatedFile(random);
    writeFileSync(file, source);
    // A credential for an id no fixture declares (only `subs apply` deletes one): a
    // broken file must not touch the db. Written again whenever the db's bytes are no longer
    // those it left (a run changed the db), so that every run starts from a db that holds it;
    // `mcp list` opens the db to read only, so once was enough in every run so far (written after
    // every valid run before, 381 writes of the same row).
    let before = seeded === undefined ? undefined : digest();
    if (before === undefined || before !== seeded) {
      await seedCredentials(dbPath, [{ id: "zz-planted", url: "https://planted.example/mcp" }]);
      before = seeded = digest();
      seedings++;
    }
    const result = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: {} });
    const context = `case ${n}: exit ${result.code}\n${result.stderr.slice(0, 500)}`;
    assert.ok(result.code === 0 || result.code === 2, context);
    assert.doesNotMatch(result.stderr, /\n\s+at .*:\d+:\d+\)?\n/, `stack trace in ${context}`);
    assert.doesNotMatch(result.stderr, /unexpected/, context);
    if (result.code === 0) {
      assert.ok(Array.isArray(JSON.parse(result.stdout)), context);
    } else {
      assert.match(result.stderr, /^substructure\.toml:\d+:\d+: /m, context);
      assert.equal(digest(), before, `db written on a broken file: ${context}`);
    }
    counts[result.code as 0 | 2]++;
  }
  // The mutations must exercise both outcomes, or the test proves little.
  assert.ok(counts[0] > 300 && counts[2] > 500, JSON.stringify(counts));
  console.log(`outcomes: ${JSON.stringify(counts)}; the planted credential written ${seedings} times`);
});
