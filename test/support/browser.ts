// A "browser" for login tests: follows the authorization URL as a person's consent would (the
// test authorization server consents at once and redirects), then delivers the redirect to the
// loopback callback. The same logic runs as a script for child processes (browser.mjs via $BROWSER).
import { fileURLToPath } from "node:url";

export const BROWSER_SCRIPT = fileURLToPath(new URL("./browser.mjs", import.meta.url));

/** $BROWSER for a child `subs`: `node …/browser.mjs` (mode "ignore": records the URL, never visits). */
export function browserCommand(): string {
  return `${process.execPath} ${BROWSER_SCRIPT}`;
}

/**
 * Follows redirects as a browser would (subs's one-time link, the authorization server's consent,
 * the loopback callback); returns the status of the last answer, the first that is no redirect.
 */
export async function followAuthorization(url: string): Promise<number> {
  let target = new URL(url);
  for (let hop = 0; hop < 6; hop++) {
    const answer = await fetch(target, { redirect: "manual" });
    const location = answer.headers.get("location");
    await answer.body?.cancel();
    if (answer.status < 300 || answer.status >= 400 || !location) {
      if (hop === 0 && !location) throw new Error(`the authorization endpoint answered ${answer.status} without a redirect`);
      return answer.status;
    }
    target = new URL(location, target);
  }
  throw new Error("more than 5 redirects");
}

/** The authorization URL behind subs's one-time loopback link, as the browser would be sent there. */
export async function authorizationUrlOf(link: string): Promise<string> {
  const answer = await fetch(link, { redirect: "manual" });
  await answer.body?.cancel();
  const location = answer.headers.get("location");
  if (answer.status !== 302 || !location) throw new Error(`the one-time link answered ${answer.status}`);
  return location;
}

/** An openBrowser for in-process runs: follows in the background, as a real browser would. */
export function consentingBrowser(visited: string[] = []): (url: string) => Promise<void> {
  return async (url) => {
    visited.push(url);
    void followAuthorization(url).catch(() => {});
  };
}
