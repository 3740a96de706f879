// `npm run demo` (issue 8): the whole main job, offline. Starts an OAuth-protected MCP server and
// its authorization server on 127.0.0.1 (with a real consent page), writes a substructure.toml
// for them, and walks through `subs mcp login demo` (in your browser), `subs mcp list` and
// `subs mcp tools demo`, running the real CLI. On a terminal it pauses before opening the browser
// and, at the end, keeps the servers up for more commands until Enter or Ctrl-C.
//   --no-pause: never wait for Enter (scripts, screenshots). Ctrl-C stops cleanly at any point.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { BIN, ensureBuilt } from "../test/support/cli.ts";
import { startDemoWorld, type DemoWorld } from "./demo-servers.ts";

const interactive = Boolean(process.stdin.isTTY) && !process.argv.includes("--no-pause");
const color = Boolean(process.stderr.isTTY) && !process.env.NO_COLOR;
const bold = (s: string) => (color ? `\x1b[1m${s}\x1b[22m` : s);
const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[22m` : s);
const say = (s = "") => process.stderr.write(`${s}\n`);

let world: DemoWorld | undefined;
let child: ChildProcess | undefined;
let interrupted = false;
let stopWaiting: (() => void) | undefined;

async function shutdown(code: number): Promise<never> {
  await world?.close().catch(() => {});
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

/** Runs `subs <args>` as a person would type it, its output straight to this terminal. */
function subs(args: string[]): Promise<number> {
  say(`\n${bold(`$ subs ${args.join(" ")}`)}`);
  return new Promise((resolve, reject) => {
    child = spawn(process.execPath, [BIN, ...args], { stdio: "inherit", env: { ...process.env, SUBS_CONFIG: world!.configPath } });
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve(code ?? (signal === "SIGINT" ? 130 : 1)));
  });
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

async function step(n: number, title: string | undefined, args: string[]): Promise<void> {
  if (title) say(`\n${bold(`Step ${n}/3`)}: ${title}`);
  const code = await subs(args);
  if (interrupted || code === 130) {
    say("\nInterrupted: the demo's servers are stopped.");
    return shutdown(130);
  }
  if (code !== 0) {
    say(`\nThe demo stopped: \`subs ${args.join(" ")}\` exited ${code}. Run \`npm run demo\` to start again.`);
    return shutdown(1);
  }
}

ensureBuilt();
world = await startDemoWorld();
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
await step(1, undefined, ["mcp", "login", "demo"]);
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
