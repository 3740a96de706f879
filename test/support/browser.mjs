#!/usr/bin/env node
// $BROWSER for tests (see browser.ts): follows the URL given as the last argument (subs's one-time
// loopback link, then the authorization server's redirect) to the loopback callback, as a browser
// would. SUBS_TEST_BROWSER=ignore only records the URL (timeouts, Ctrl-C);
// SUBS_TEST_BROWSER_LOG=FILE appends each URL to FILE.
import { appendFileSync } from "node:fs";
import { visit } from "./http-exchange.mjs";

const url = process.argv[process.argv.length - 1];
if (process.env.SUBS_TEST_BROWSER_LOG) appendFileSync(process.env.SUBS_TEST_BROWSER_LOG, `${url}\n`);
if (process.env.SUBS_TEST_BROWSER !== "ignore") {
  const last = await visit(url);
  if (last.hops === 0) {
    // No redirect from the authorization endpoint: there is no consent to give.
    process.stderr.write(`browser.mjs: the authorization endpoint answered ${last.status} without a redirect\n`);
    process.exit(1);
  }
}
