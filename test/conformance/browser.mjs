// The "browser" the conformance adapter hands to `subs mcp login` through $BROWSER: it loads the
// authorization URL and follows every redirect, the way a person's browser would after consenting
// at the conformance suite's authorization server (which redirects at once, with a code), until it
// lands on subs's loopback callback. Plain JavaScript so $BROWSER can run it without a loader.
const url = process.argv[2];
if (!url) {
  process.stderr.write("usage: browser.mjs <url>\n");
  process.exit(2);
}
let current = new URL(url);
for (let hop = 0; hop < 10; hop++) {
  const response = await fetch(current, { redirect: "manual", signal: AbortSignal.timeout(20_000) });
  const location = response.headers.get("location");
  if (response.status >= 300 && response.status < 400 && location) {
    await response.body?.cancel();
    current = new URL(location, current);
    continue;
  }
  const text = await response.text();
  process.stderr.write(`browser: ${response.status} from ${current.origin}${current.pathname}${response.ok ? "" : `: ${text.slice(0, 200)}`}\n`);
  process.exit(response.ok ? 0 : 1);
}
process.stderr.write("browser: too many redirects\n");
process.exit(1);
