// A "browser" for login tests: follows the authorization URL as a person's consent would (the
// test authorization server consents at once and redirects), then delivers the redirect to the
// loopback callback. The same logic runs as a script for child processes (browser.mjs via $BROWSER).
import { fileURLToPath } from "node:url";

export const BROWSER_SCRIPT = fileURLToPath(new URL("./browser.mjs", import.meta.url));

/** $BROWSER for a child `subs`: `node …/browser.mjs` (mode "ignore": records the URL, never visits). */
export function browserCommand(): string {
  return `${process.execPath} ${BROWSER_SCRIPT}`;
}

/** Follows the authorization redirect to the callback; returns the callback's HTTP status. */
export async function followAuthorization(url: string): Promise<number> {
  const consent = await fetch(url, { redirect: "manual" });
  const location = consent.headers.get("location");
  await consent.body?.cancel();
  if (!location) throw new Error(`the authorization endpoint answered ${consent.status} without a redirect`);
  const callback = await fetch(new URL(location, url), { redirect: "manual" });
  await callback.body?.cancel();
  return callback.status;
}

/** An openBrowser for in-process runs: follows in the background, as a real browser would. */
export function consentingBrowser(visited: string[] = []): (url: string) => Promise<void> {
  return async (url) => {
    visited.push(url);
    void followAuthorization(url).catch(() => {});
  };
}
