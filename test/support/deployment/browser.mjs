#!/usr/bin/env node
// A stand-in for a person's browser, used as `$BROWSER <url>`: follows redirects (authorization
// server consent, then the deployment's callback) until a page answers. Appends every URL it
// visits to $BROWSER_LOG when set, so tests can see where it went.
import { appendFileSync } from "node:fs";

let url = process.argv[process.argv.length - 1];
for (let hop = 0; hop < 20; hop++) {
  if (process.env.BROWSER_LOG) appendFileSync(process.env.BROWSER_LOG, `${url}\n`);
  const response = await fetch(url, { redirect: "manual" });
  const location = response.headers.get("location");
  await response.arrayBuffer();
  if (response.status >= 300 && response.status < 400 && location) {
    url = new URL(location, url).href;
    continue;
  }
  break;
}
