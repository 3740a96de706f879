// With $BROWSER unset, `subs mcp login` opens the system browser through the
// `open` package, in the built bundle users run. The machine here has no display and no browser
// but a fake `www-browser` on PATH, which `open`'s bundled xdg-open reaches by its generic route.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { test } from "node:test";
import { runCli } from "./support/cli.ts";
import { browserlessPath } from "./support/fake-browser.ts";
import { credential, environment } from "./auth/harness.ts";

/** No browser setting and no desktop for xdg-open to detect: its generic route only. */
const HEADLESS = {
  BROWSER: undefined,
  DISPLAY: undefined,
  WAYLAND_DISPLAY: undefined,
  XDG_CURRENT_DESKTOP: undefined,
  DESKTOP_SESSION: undefined,
  XDG_RUNTIME_DIR: undefined,
  KDE_FULL_SESSION: undefined,
  GNOME_DESKTOP_SESSION_ID: undefined,
};

test("login without $BROWSER opens the page through open's xdg-open, which runs www-browser; the login completes", async () => {
  const env = await environment();
  const path = browserlessPath({ browser: "www-browser" });
  try {
    const result = await runCli(["mcp", "login", "demo"], { cwd: env.dir, env: { ...HEADLESS, PATH: path.bin } });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /demo: authorized/);
    assert.doesNotMatch(result.stderr, /warning|could not open/i);
    assert.ok(credential(env, "demo")?.access_token, "the credential is stored");
    // The fake browser ran once, as www-browser, with one argument: the one-time loopback link
    // that redirects to the authorization URL, so no `state` in its argv.
    const url = /(http:\/\/\S+\/authorize\?\S+)/.exec(result.stderr)?.[1];
    assert.ok(url, result.stderr);
    const lines = readFileSync(path.log, "utf8").trimEnd().split("\n");
    assert.equal(lines.length, 1);
    const [program, link] = lines[0]!.split("\t");
    assert.equal(program, `${path.bin}/www-browser`);
    assert.equal(new URL(link!).origin, new URL(new URL(url).searchParams.get("redirect_uri")!).origin, "the link is on subs's loopback listener");
    assert.doesNotMatch(link!, /state/);
  } finally {
    await env.close();
    rmSync(path.bin, { recursive: true, force: true });
  }
});

test("login without $BROWSER on a machine with no browser warns at once, naming xdg-open, not after the timeout", async () => {
  const env = await environment();
  const path = browserlessPath();
  let warned = false;
  try {
    // A timeout of ten minutes, past runCli's own: a warning only after it would never come, and the
    // run would be killed (exit 128), not interrupted by the SIGINT sent on the warning (exit 130).
    const result = await runCli(["mcp", "login", "demo", "--timeout", "600"], {
      cwd: env.dir,
      env: { ...HEADLESS, PATH: path.bin },
      timeoutMs: 60_000,
      onSpawn: (child) => {
        let stderr = "";
        child.stderr?.on("data", (d) => {
          stderr += d;
          if (!warned && /could not open/.test(stderr)) {
            warned = true;
            child.kill("SIGINT");
          }
        });
      },
    });
    assert.ok(warned, `no warning: ${result.stderr}`);
    assert.match(result.stderr, /warning: could not open a browser \(xdg-open exited with code 3: no browser found\)/);
    assert.doesNotMatch(result.stderr, /is not a function/);
    assert.equal(result.code, 130, result.stderr);
    assert.equal(credential(env, "demo"), undefined);
  } finally {
    await env.close();
    rmSync(path.bin, { recursive: true, force: true });
  }
});
