#!/usr/bin/env node
// $BROWSER for the demo test: opens the authorization URL (the last argument), reads the consent
// page as a person would, and clicks a button (Approve by default; CLICK=deny for Deny): it posts
// the page's form, then follows the redirect to the loopback callback, as the browser would.
import { exchange, visit } from "./http-exchange.mjs";

const url = process.argv[process.argv.length - 1];
const decision = process.env.CLICK ?? "approve";
const fail = (message) => {
  process.stderr.write(`click-approve: ${message}\n`);
  process.exit(1);
};
// Followed as a browser does: subs's one-time loopback link redirects to the authorization page.
const page = await visit(url, { read: true });
const html = page.text;
if (page.status < 200 || page.status > 299 || !/<form[^>]*method="post"/i.test(html)) fail(`no consent form at the authorization URL (${page.status})`);
const action = html.match(/<form[^>]*action="([^"]+)"/i)?.[1];
const request = html.match(/name="request" value="([^"]+)"/)?.[1];
if (!action || !request) fail("the consent form has no action or request field");
if (!html.includes(`value="${decision}"`)) fail(`the consent form has no ${decision} button`);
const answer = await exchange(new URL(action, page.url).href, {
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({ request, decision }).toString(),
});
if (!answer.location) fail(`the consent form answered ${answer.status} without a redirect`);
await visit(answer.location, { read: true });
