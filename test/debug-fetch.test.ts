// --debug shows every HTTP exchange but never a credential.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { debugFetch, redactUrl } from "../src/output/debug-fetch.ts";

test("debug log redacts tokens in headers, query, form and JSON bodies, both ways", async () => {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json", "set-cookie": "session=COOKIE-SECRET" });
    res.end(JSON.stringify({ access_token: "AT-SECRET", refresh_token: "RT-SECRET", token_type: "Bearer", expires_in: 3600, nested: { id_token: "IDT-SECRET" } }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  let log = "";
  const fetch = debugFetch(globalThis.fetch, { write: (s: string) => (log += s) }, Date.now);
  try {
    const response = await fetch(`http://user:PW-SECRET@127.0.0.1:${port}/token?code=CODE-SECRET&state=abc`, {
      method: "POST",
      headers: { authorization: "Bearer BEARER-SECRET", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "RT-OLD-SECRET", client_secret: "CS-SECRET", code_verifier: "V-SECRET" }).toString(),
    }).catch(async () =>
      // fetch refuses URLs with credentials; the redaction of those is checked below.
      fetch(`http://127.0.0.1:${port}/token?code=CODE-SECRET&state=abc`, {
        method: "POST",
        headers: { authorization: "Bearer BEARER-SECRET", "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "RT-OLD-SECRET", client_secret: "CS-SECRET", code_verifier: "V-SECRET" }).toString(),
      }),
    );
    const body = (await response.json()) as { access_token: string };
    assert.equal(body.access_token, "AT-SECRET", "the caller still gets the real response");
  } finally {
    server.close();
  }
  assert.doesNotMatch(log, /SECRET/);
  assert.match(log, /→ POST http:\/\/127\.0\.0\.1:\d+\/token\?code=\[redacted\]&state=abc/);
  assert.match(log, /authorization: \[redacted\]/);
  assert.match(log, /grant_type=refresh_token&refresh_token=\[redacted\]&client_secret=\[redacted\]&code_verifier=\[redacted\]/);
  assert.match(log, /← 200 OK/);
  assert.match(log, /"access_token":"\[redacted\]".*"token_type":"Bearer","expires_in":3600,"nested":\{"id_token":"\[redacted\]"\}/);
  assert.equal(redactUrl("https://u:PW-SECRET@example.com/x?token=T-SECRET&a=1"), "https://example.com/x?token=[redacted]&a=1");
});

test("debug log redacts secrets only: a JSON-RPC error's numeric code stays; a registration access token and a secret echoed in a later answer go", async () => {
  const answers = [
    // A registration answer: its registration_access_token is a secret.
    { client_id: "dyn-1", registration_access_token: "RAT-SECRET-1", registration_client_uri: "http://x/reg/dyn-1" },
    // A token answer, then a server quoting that token back under a name that is not secret.
    { access_token: "AT-ISSUED-SECRET", token_type: "Bearer" },
    { error: "invalid_request", error_description: "bad token AT-ISSUED-SECRET and RAT-SECRET-1" },
    // A JSON-RPC error: its code is a number the person debugging needs.
    { jsonrpc: "2.0", id: 1, error: { code: -32601, message: "Method not found" } },
    // An authorization code as a JSON string is still redacted.
    { code: "CODE-IN-JSON-SECRET" },
  ];
  let next = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(answers[next++]));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  let log = "";
  const fetch = debugFetch(globalThis.fetch, { write: (s: string) => (log += s) }, Date.now);
  try {
    for (let i = 0; i < answers.length; i++) await (await fetch(`http://127.0.0.1:${port}/x${i}`, { method: "POST", body: "{}" })).text();
  } finally {
    server.close();
  }
  assert.doesNotMatch(log, /SECRET/);
  assert.match(log, /"registration_access_token":"\[redacted\]"/);
  assert.match(log, /"error_description":"bad token \[redacted\] and \[redacted\]"/);
  assert.match(log, /"error":\{"code":-32601,"message":"Method not found"\}/);
  assert.match(log, /"code":"\[redacted\]"/);
});
