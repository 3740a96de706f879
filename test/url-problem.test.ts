// urlProblem answers plain https urls without building a URL. Its answers must be the
// ones the rules give when spelled out with `new URL`, for tricky values and random ones alike.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parsedUrlProblem as reference, urlProblem } from "../src/config/schema.ts";


const TRICKY = [
  "https://mcp.sentry.dev/mcp",
  "https://s1.example.com",
  "https://s1.example.com:8443/mcp?x=1#f",
  "https://user@host/mcp",
  "https://user:pw@host/mcp",
  "https:///user@host/mcp",
  "https://\\user@host/mcp",
  "https://\t/user@host/mcp",
  "https://ho\tst/mcp",
  "https://ho\nst@evil/mcp",
  "https://host@evil/mcp",
  "https://host:/mcp",
  "https://host:99999/mcp",
  "https://host:443/mcp",
  "https://1.2.3.4.5/mcp",
  "https://s.123/mcp",
  "https://s.0x10/mcp",
  "https://xn--a.com/mcp",
  "https://xn--nxasmq6b.com/mcp",
  "https://a..b/mcp",
  "https://-a-.example/mcp",
  "https://.example/mcp",
  "https://host\\@evil/mcp",
  "https://host /mcp",
  "https://host/mcp ",
  " https://host/mcp",
  "https://host\n",
  "HTTPS://host/mcp",
  "https:host/mcp",
  "https:/host/mcp",
  "https://",
  "https://:443/mcp",
  "https://[::1]/mcp",
  "http://127.0.0.1:8080/mcp",
  "http://localhost/mcp",
  "http://example.com/mcp",
  "ftp://example.com/",
  "not a url",
  "",
];

test("urlProblem gives the answers of the rules spelled out with new URL, on tricky values", () => {
  for (const value of TRICKY) {
    for (const httpsOnly of [false, true]) assert.equal(urlProblem(value, { httpsOnly }), reference(value, httpsOnly), JSON.stringify(value));
  }
});

test("urlProblem gives the answers of the rules spelled out with new URL, on random https-like values", () => {
  let a = 0x5eed;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const alphabet = ["a", "z", "0", "9", ".", "-", ":", "@", "/", "\\", "?", "#", "%", "[", "]", " ", "\t", "\n", "x", "n", "_", "é", "0x", "443"];
  for (let n = 0; n < 20000; n++) {
    let value = "https://";
    const length = Math.floor(random() * 14);
    for (let i = 0; i < length; i++) value += alphabet[Math.floor(random() * alphabet.length)];
    for (const httpsOnly of [false, true]) assert.equal(urlProblem(value, { httpsOnly }), reference(value, httpsOnly), JSON.stringify(value));
  }
});
