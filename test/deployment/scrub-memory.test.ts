// What a server that acts for others learns to scrub (src/secrets.ts, learningFetch with
// `answers: "issued"`, as every exchange of `subs deployment serve` uses it): the credentials an
// answer issues at its top level, and nothing else an answer holds. A hostile authorization server
// returning thousands of token-like values must not grow what the deployment keeps, nor choose what
// it blanks; a CLI run, which ends soon, still learns every secret-named value.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { learningFetch, Secrets } from "../../src/secrets.ts";

describe("learning from an authorization server's answer", () => {
  let base = "";
  let body = "";
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }).end(body);
  });
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  /** An answer under 64 KiB (read before its caller sees it) with 1,000 nested token-like values. */
  const hostileAnswer = (round: number) => {
    const nested = Array.from({ length: 1000 }, (_, n) => `nested-${round}-${String(n).padStart(8, "0")}`);
    const answer = {
      access_token: `issued-access-${round}-token`,
      client_secret: `issued-secret-${round}-value`,
      nested: nested.map((access_token) => ({ access_token })),
      password: `a-password-${round}-value`,
      token: `a-token-field-${round}`,
      refresh_token: "r".repeat(9000),
    };
    return { text: JSON.stringify(answer), nested, answer };
  };

  test('answers: "issued" learns the credentials at the top of an answer only, whatever else it holds, round after round', async () => {
    const secrets = new Secrets();
    const fetch = learningFetch(globalThis.fetch, secrets, { answers: "issued" });
    const unlearnt: string[] = [];
    for (let round = 0; round < 25; round++) {
      const { text, nested, answer } = hostileAnswer(round);
      body = text;
      assert.ok(Buffer.byteLength(text) < 65_536);
      await (await fetch(`${base}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).text();
      assert.equal(secrets.scrub(answer.access_token), "[redacted]", "the issued access token is learnt");
      assert.equal(secrets.scrub(answer.client_secret), "[redacted]", "the issued client secret is learnt");
      unlearnt.push(...nested, answer.password, answer.token, answer.refresh_token);
    }
    // 25 × 1,003 values the answers held beyond what they issued: none is scrubbed, so none is held.
    const text = unlearnt.join(" ");
    assert.equal(secrets.scrub(text), text);
  });

  test('answers: "issued" learns nothing from the query of a URL a server named', async () => {
    const secrets = new Secrets();
    body = "{}";
    await (await learningFetch(globalThis.fetch, secrets, { answers: "issued" })(`${base}/token?code=chosen-by-a-server&token=another-one`, { method: "POST", body: "" })).text();
    assert.equal(secrets.scrub("chosen-by-a-server another-one"), "chosen-by-a-server another-one");
  });

  test("a CLI run learns every secret-named value of an answer, nested ones included (it ends soon, and prints what servers say)", async () => {
    const secrets = new Secrets();
    const { text, nested, answer } = hostileAnswer(0);
    body = text;
    await (await learningFetch(globalThis.fetch, secrets)(`${base}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).text();
    assert.equal(secrets.scrub(nested[700]!), "[redacted]");
    assert.equal(secrets.scrub(answer.password), "[redacted]");
  });
});
