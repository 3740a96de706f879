// --debug shows every HTTP exchange but never a credential (issue 8, issue 7 "the debug log").
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
