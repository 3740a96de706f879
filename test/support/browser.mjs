#!/usr/bin/env node
// $BROWSER for tests (see browser.ts): follows the authorization URL given as the last argument
// to the loopback callback. SUBS_TEST_BROWSER=ignore only records the URL (timeouts, Ctrl-C);
// SUBS_TEST_BROWSER_LOG=FILE appends each URL to FILE.
import { appendFileSync } from "node:fs";

const url = process.argv[process.argv.length - 1];
if (process.env.SUBS_TEST_BROWSER_LOG) appendFileSync(process.env.SUBS_TEST_BROWSER_LOG, `${url}\n`);
if (process.env.SUBS_TEST_BROWSER !== "ignore") {
  const consent = await fetch(url, { redirect: "manual" });
  const location = consent.headers.get("location");
  if (!location) {
    process.stderr.write(`browser.mjs: the authorization endpoint answered ${consent.status} without a redirect\n`);
    process.exit(1);
  }
  await fetch(new URL(location, url), { redirect: "manual" });
}
