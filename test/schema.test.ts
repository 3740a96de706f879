// The committed substructure.schema.json is what `subs schema` generates, and an editor
// validating against it accepts the example and rejects what subs rejects.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import { parse } from "smol-toml";
import { REPO, runInProcess } from "./support/cli.ts";

const committed = JSON.parse(readFileSync(path.join(REPO, "substructure.schema.json"), "utf8"));

test("substructure.schema.json is in sync with `subs schema` (regenerate: subs schema > substructure.schema.json)", async () => {
  const result = await runInProcess(["schema"], { cwd: REPO });
  assert.equal(result.code, 0);
  assert.deepEqual(JSON.parse(result.stdout), committed);
});

test("the schema accepts the example and the valid fixture, and rejects a token, an unknown key, a bad id", () => {
  const validate = new Ajv2020({ strict: false, allErrors: true }).compile(committed);
  const check = (toml: string) => validate(parse(toml));
  assert.ok(check(readFileSync(path.join(REPO, "substructure.toml.example"), "utf8")), JSON.stringify(validate.errors));
  assert.ok(check(readFileSync(path.join(REPO, "fixtures/config/valid-full.toml"), "utf8")), JSON.stringify(validate.errors));
  assert.equal(check('[mcp.github]\nurl = "https://x.example/mcp"\nauth = { token = "ghp_x" }\n'), false);
  assert.equal(check('token = "ghp_x"\n'), false);
  assert.equal(check('[mcp.github]\nurl = "https://x.example/mcp"\nprefix_tool = false\n'), false);
  assert.equal(check('[mcp.Git]\nurl = "https://x.example/mcp"\n'), false);
  assert.equal(check('[mcp.git]\nurl = "ftp://x.example/mcp"\n'), false);
});

test("the example file points editors at the schema", () => {
  assert.match(readFileSync(path.join(REPO, "substructure.toml.example"), "utf8"), /^#:schema \.\/substructure\.schema\.json$/m);
});
