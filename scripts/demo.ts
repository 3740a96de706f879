// `npm run demo`: the whole main job, offline. Starts an OAuth-protected MCP server and
// its authorization server on 127.0.0.1 (with a real consent page), writes a substructure.toml
// for them, and walks through `subs mcp login demo` (in your browser), `subs mcp list` and
// `subs mcp tools demo`, running the real CLI. On a terminal it pauses before opening the browser
// and, at the end, keeps the servers up for more commands until Enter or Ctrl-C.
//   --no-pause: never wait for Enter (scripts, screenshots). Ctrl-C stops cleanly at any point.
// Where no browser can be opened (no $BROWSER, no display, or the opener fails), the login step
// says so at once and lets the person answer the demo's own consent page from the terminal, or
// paste the redirect, instead of waiting out the timeout. That answer is read
// from stdin whether or not it is a terminal, so a script can pipe it in.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { defaultOpenBrowser } from "../src/context.ts";
import { BIN, ensureBuilt } from "../test/support/cli.ts";
import { answerConsentPage, deliverRedirect, demoAuthorizationUrl, startDemoWorld, startHandoff, type DemoWorld, type Handoff } from "./demo-servers.ts";

const interactive = Boolean(process.stdin.isTTY) && !process.argv.includes("--no-pause");
const color = Boolean(process.stderr.isTTY) && !process.env.NO_COLOR;
const bold = (s: string) => (color ? `\x1b[1m${s}\x1b[22m` : s);
const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[22m` : s);
const say = (s = "") => process.stderr.write(`${s}\n`);

let world: DemoWorld | undefined;
let handoff: Handoff | undefined;
let child: ChildProcess | undefined;
let interrupted = false;
let stopWaiting: (() => void) | undefined;
/** The terminal answer to the consent page, while it is offered (closed when the login ends). */
let offer: { close(): void } | undefined;
/** Set when no browser opened and stdin ended unanswered: the demo stopped the login itself. */
let gaveUp = false;

async function shutdown(code: number): Promise<never> {
  offer?.close();
  await Promise.all([world?.close(), handoff?.close()].map((p) => p?.catch(() => {})));
  process.exit(code);
}

// Ctrl-C reaches the running `subs` too (same process group): it closes its own listener and
// exits 130; the demo then stops its servers and removes its directory.
process.on("SIGINT", () => {
  if (interrupted) return;
  interrupted = true;
  if (stopWaiting) return stopWaiting();
  if (child && child.exitCode === null) {
    // From the terminal, subs got this Ctrl-C too (a second one would make it exit at once,
    // skipping its clean-up); from kill(1) it did not: forward it only if subs is still running.
    const running = child;
    setTimeout(() => running.exitCode === null && running.signalCode === null && running.kill("SIGINT"), 1000).unref();
    return;
  }
  void shutdown(130);
});
process.on("SIGTERM", () => {
  child?.kill("SIGTERM");
  void shutdown(143);
});

/** The login's stderr as relayed so far (see `subs`), and who waits to see a line in it. */
let relayed = "";
let onRelayed: (() => void) | undefined;

/**
 * Runs `subs <args>` as a person would type it, its output straight to this terminal. `login`:
 * `subs mcp login`, with the demo's $BROWSER (scripts/demo-browser.mjs) and its stderr relayed
 * through the demo, so the demo's own lines (no browser, answer here) are never drawn over by a
 * spinner; stdin is the demo's alone, for that answer.
 */
function subs(args: string[], login = false): Promise<number> {
  say(`\n${bold(`$ subs ${args.join(" ")}`)}`);
  const env: NodeJS.ProcessEnv = { ...process.env, SUBS_CONFIG: world!.configPath };
  if (login) {
    env.BROWSER = `${process.execPath} ${DEMO_BROWSER}`;
    env.SUBS_DEMO_HANDOFF = handoff!.url;
    // Piped, subs would drop the colour this terminal shows; keep it (NO_COLOR still wins).
    if (color) env.FORCE_COLOR = "1";
  }
  return new Promise((resolve, reject) => {
    child = spawn(process.execPath, [BIN, ...args], { stdio: login ? ["ignore", "inherit", "pipe"] : "inherit", env });
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      if (gaveUp) return;
      process.stderr.write(text);
      relayed += text;
      onRelayed?.();
    });
    child.on("error", reject);
    // "close", not "exit": the relayed stderr is all written before the demo goes on.
    child.on("close", (code, signal) => {
      offer?.close();
      resolve(code ?? (signal === "SIGINT" ? 130 : 1));
    });
  });
}

/** Resolves when the relayed login output matches `pattern`, or after `ms`. */
function relayedShows(pattern: RegExp, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      onRelayed = undefined;
      resolve();
    };
    const timer = setTimeout(done, ms);
    onRelayed = () => pattern.test(relayed) && done();
    onRelayed();
  });
}

/**
 * subs handed the demo the URL to open (through demo-browser.mjs): open it as subs would have,
 * with the person's own $BROWSER or the system's opener; if that fails, offer the terminal.
 */
async function openOrOffer(url: string): Promise<void> {
  if (!/^https?:\/\//i.test(url)) return;
  let reason: string;
  try {
    await defaultOpenBrowser(process.env, url);
    return;
  } catch (error) {
    reason = error instanceof Error ? error.message : String(error);
  }
  // After subs's own lines (the URL, "Waiting for consent …"), not in the middle of them.
  await relayedShows(/Waiting for consent/, 2000);
  if (child?.exitCode !== null) return;
  let authorization: URL;
  try {
    authorization = await demoAuthorizationUrl(world!, url);
  } catch (error) {
    say(`${bold("No browser could be opened")} (${reason}); open the URL above yourself.`);
    say(dim(`(It cannot be answered here: ${error instanceof Error ? error.message : String(error)}.)`));
    return;
  }
  const scopes = authorization.searchParams.get("scope");
  say(`\n${bold("No browser could be opened")} (${reason}).`);
  say(`The consent page is the demo's own, on this machine${scopes ? ` (subs asks for: ${scopes})` : ""}, so you can answer it here:`);
  say(`  ${bold("Enter")}        approve, as clicking Approve on the page would`);
  say(`  ${bold("d")} + Enter    deny`);
  say(`  or paste the address a browser was redirected to, if you opened the URL above yourself`);
  await answerFromTerminal(authorization);
}

async function answerFromTerminal(authorization: URL): Promise<void> {
  // Not a terminal-mode readline: the terminal stays in its normal mode, so Ctrl-C still reaches
  // subs and the demo alike (as everywhere else in the demo), and piped input works the same.
  const rl = createInterface({ input: process.stdin, terminal: false });
  let closed = false;
  offer = {
    close: () => {
      closed = true;
      rl.close();
    },
  };
  const ask = () => process.stderr.write("Approve? [Enter / d / paste] ");
  ask();
  let answered = false;
  for await (const line of rl) {
    // Piped input is not echoed: end the prompt's line before what follows.
    if (!process.stdin.isTTY) process.stderr.write("\n");
    const answer = line.trim();
    try {
      if (answer === "" || /^(a|approve|y|yes)$/i.test(answer)) {
        await deliverRedirect(authorization, await answerConsentPage(authorization, "approve"));
        say("Approved from the terminal.");
      } else if (/^(d|deny|n|no)$/i.test(answer)) {
        await deliverRedirect(authorization, await answerConsentPage(authorization, "deny"));
        say("Denied from the terminal.");
      } else if (/^https?:\/\//i.test(answer)) {
        await deliverRedirect(authorization, answer);
        say("Delivered the pasted address to subs.");
      } else {
        say("Press Enter to approve, type d to deny, or paste the redirected address.");
        ask();
        continue;
      }
      answered = true;
      break;
    } catch (error) {
      say(`That did not work: ${error instanceof Error ? error.message : String(error)}.`);
      ask();
    }
  }
  offer = undefined;
  rl.close();
  if (answered || closed || child?.exitCode !== null) return;
  // stdin ended with no answer and no browser: nobody can consent, so stop now, not at the timeout.
  say("\n\nNo browser, and no answer on stdin (it ended). Run `npm run demo` in a terminal, or set BROWSER to a browser command.");
  gaveUp = true;
  child?.kill("SIGINT");
}

/** On a terminal: waits for Enter (true) or Ctrl-C (false). */
function pressEnter(prompt: string): Promise<boolean> {
  if (!interactive) return Promise.resolve(true);
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    stopWaiting = () => {
      rl.close();
      resolve(false);
    };
    rl.on("SIGINT", () => stopWaiting!());
    rl.question(prompt, () => {
      stopWaiting = undefined;
      rl.close();
      resolve(true);
    });
  });
}

async function step(n: number, title: string | undefined, args: string[], login = false): Promise<void> {
  if (title) say(`\n${bold(`Step ${n}/3`)}: ${title}`);
  const code = await subs(args, login);
  if (gaveUp) return shutdown(1);
  if (interrupted || code === 130) {
    say("\nInterrupted: the demo's servers are stopped.");
    return shutdown(130);
  }
  if (code !== 0) {
    say(`\nThe demo stopped: \`subs ${args.join(" ")}\` exited ${code}. Run \`npm run demo\` to start again.`);
    return shutdown(1);
  }
}

const DEMO_BROWSER = fileURLToPath(new URL("./demo-browser.mjs", import.meta.url));

ensureBuilt();
world = await startDemoWorld();
handoff = await startHandoff((url) => void openOrOffer(url));
const alias = `alias subs="node ${BIN}"`;
say(bold("subs offline demo"));
say(`An MCP server that needs OAuth runs at ${world.mcpUrl}`);
say(`and its authorization server at ${world.issuer} (both on this machine only).`);
say(`The demo's file is ${world.configPath}:`);
say(dim("  [mcp.demo]      the OAuth-protected server"));
say(dim("  [agent.notes]   an agent that may use its read-only tools"));

say(`\n${bold("Step 1/3")}: log in. Your browser opens the authorization server's consent page: click ${bold("Approve")}.`);
say(dim("The credential goes into the demo's local db, next to its substructure.toml."));
if (process.env.BROWSER) say(dim(`(the browser is $BROWSER: ${process.env.BROWSER})`));
if (!(await pressEnter("Press Enter to open the browser (Ctrl-C to quit) … "))) {
  say("\nStopped before logging in: the demo's servers are stopped.");
  await shutdown(130);
}
await step(1, undefined, ["mcp", "login", "demo"], true);
await step(2, "every declared connection and whether it can be used", ["mcp", "list"]);
await step(3, "connect with the stored credential and list the server's tools", ["mcp", "tools", "demo"]);

say(`\n${bold("Done")}: logged in, listed, connected — all offline. Next, try:`);
say(`  ${alias}`);
say(`  export SUBS_CONFIG=${world.configPath}`);
say(`  subs agent tools notes         ${dim("# what the agent's model sees (read-only tools only)")}`);
say(`  subs mcp call demo search_notes --args '{"query": "mcp"}'`);
say(`  subs mcp list --json`);
if (interactive) {
  say(dim(`\nThe servers keep running for those commands (in another terminal).`));
  await pressEnter("Press Enter or Ctrl-C to stop the demo … ");
}
await shutdown(0);
