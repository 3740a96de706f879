#!/usr/bin/env node
// $BROWSER for `subs mcp login` under `npm run demo`: hands the URL (the last
// argument) to the demo, which opens the real browser itself and, when none opens, offers to
// answer its consent page from the terminal. Exits 0 once the demo has the URL, so subs keeps
// waiting on its loopback listener and never reads the terminal the demo reads.
const url = process.argv[process.argv.length - 1];
const handoff = process.env.SUBS_DEMO_HANDOFF;
if (!handoff || !url) {
  process.stderr.write("demo-browser: run by `npm run demo` only (SUBS_DEMO_HANDOFF and a URL)\n");
  process.exit(2);
}
try {
  const response = await fetch(handoff, { method: "POST", body: url });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
} catch (error) {
  process.stderr.write(`demo-browser: the demo did not take the URL (${error instanceof Error ? error.message : String(error)})\n`);
  process.exit(1);
}
