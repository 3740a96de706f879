// What every command declaration shares: the shape of a declaration, what its action may use, and
// the options several commands take. Loaded on every run that builds the command tree, so it
// imports nothing but commander, types, the usage error and the flag parsers; run code is loaded
// by each action.
import { Option, type Command } from "commander";
import type { ConnectClient, ConnectScope } from "../connect/clients.ts";
import type { Context } from "../context.ts";
import { usage } from "../errors.ts";
import type { HttpAddress } from "../serve/address.ts";
import type { HttpLimits } from "../serve/http.ts";
import type { ConnectCommandOptions } from "./connect.ts";
import { parseCount, parseSeconds } from "./flags.ts";

/** What the run gives the tree: how an action reports --json and its exit code, and parse mistakes. */
export type ProgramHooks = {
  setJson: (json: boolean) => void;
  setExitCode: (code: number) => void;
  /** The parser's own error text (e.g. "error: unknown option '--x'") and the command it is about. */
  onParseMistake?: (message: string, path: string) => void;
  /** The command serves until stopped: Ctrl-C or SIGTERM is its normal end (exit 0). */
  servesUntilStopped?: () => void;
  /**
   * The process's own context, without the run's redaction, for a command that serves others for
   * the life of the process (the deployment): it keeps each exchange's secrets itself, bounded and
   * forgotten when the exchange ends. The run's would learn for good whatever any server sends
   * and blank it in every later line (SECURITY.md, "The deployment's log"). Also the one way
   * `subs deployment token create` prints the token it was asked for: the run learnt it from the
   * deployment's answer (a `token` field) and would print `[redacted]`.
   */
  ownRedaction?: () => Context;
};

/** What an action may use: the run's context and hooks, and --config wherever it was given. */
export type CommandScope = ProgramHooks & {
  ctx: Context;
  /** The command's --config, else one given before the command; absent when neither was. */
  configOf: (opts: { config?: string }) => { config: string } | Record<string, never>;
};

/**
 * One command: its name, and what it adds to the command the program made for it (arguments,
 * options, help, examples, the action). A group names its commands, in the order its help lists them.
 */
export type CommandDeclaration = {
  name: string;
  declare: (command: Command, scope: CommandScope) => void;
  commands?: readonly CommandDeclaration[];
};

export const examples = (lines: string[]) => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

export const configOption = () => new Option("--config <path>", "use this substructure.toml (default: $SUBS_CONFIG, else the nearest one upward)");
export const jsonOption = () => new Option("--json", "print JSON (a documented, stable shape) on stdout");

// The MCP SDK gives up on a request after 60 s; a slow server or a long tool may need longer.
export const requestTimeoutOption = (what: string) => new Option("--request-timeout <seconds>", what).default("60", "60");

/** Copies a key only when set, so options objects never carry `undefined` for absent flags. */
export function pick<T extends object, K extends keyof T>(obj: T, key: K): Pick<T, K> | Record<string, never> {
  return obj[key] === undefined ? {} : ({ [key]: obj[key] } as Pick<T, K>);
}

// `subs agent serve` and `subs mcp proxy` serve over stdio unless --http; the limits are what a
// client can hold of an --http server (src/serve/http.ts DEFAULT_LIMITS; docs/serve.md, "Limits of --http").
export type HttpFlags = { http?: string; tokenFile?: string; maxSessions?: string; idleTimeout?: string; maxCalls?: string; maxConnections?: string };

/** --http, --token-file and the limits, in the order both serving commands list them. */
export function httpOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        "--http <[host:]port>",
        "serve Streamable HTTP on loopback at http://HOST:PORT/mcp instead of stdio (HOST: 127.0.0.1, ::1 or localhost; PORT 0 picks one)",
      ),
    )
    .addOption(
      new Option(
        "--token-file <path>",
        "with --http: the bearer token clients must send, in this file (mode 0600) instead of on stderr; a token already there is kept when the file is yours and private",
      ),
    )
    .addOption(new Option("--max-sessions <n>", "with --http: sessions at once; one more `initialize` is answered 503 with Retry-After (default 32)"))
    .addOption(new Option("--idle-timeout <seconds>", "with --http: end a session after this long with no request in progress and no stream open (default 300)"))
    .addOption(new Option("--max-calls <n>", "with --http: requests in progress per session; one more is answered a JSON-RPC error (default 64)"))
    .addOption(new Option("--max-connections <n>", "with --http: open connections; one more closes the oldest that has not sent the token (default 100)"));
}

/** --http and the flags that go with it, checked before anything is loaded or served (a usage mistake is exit 2). */
export async function httpTransportOptions(opts: HttpFlags): Promise<{ http?: HttpAddress; tokenFile?: string; limits?: Partial<HttpLimits> }> {
  if (opts.http === undefined) {
    if (opts.tokenFile !== undefined) throw usage("--token-file goes with --http", { hint: "over stdio there is no token: the MCP client starts subs itself" });
    const stray = (["maxSessions", "idleTimeout", "maxCalls", "maxConnections"] as const).find((key) => opts[key] !== undefined);
    if (stray) throw usage(`--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} goes with --http`, { hint: "over stdio the MCP client starts subs itself, for one session" });
    return {};
  }
  const { parseHttpAddress } = await import("../serve/address.ts");
  const limits = {
    ...(opts.maxSessions !== undefined ? { maxSessions: parseCount(opts.maxSessions, "--max-sessions") } : {}),
    ...(opts.idleTimeout !== undefined ? { idleTimeoutMs: parseSeconds(opts.idleTimeout, "--idle-timeout") * 1000 } : {}),
    ...(opts.maxCalls !== undefined ? { maxCalls: parseCount(opts.maxCalls, "--max-calls") } : {}),
    ...(opts.maxConnections !== undefined ? { maxConnections: parseCount(opts.maxConnections, "--max-connections") } : {}),
  };
  return { http: parseHttpAddress(opts.http), ...(opts.tokenFile !== undefined ? { tokenFile: opts.tokenFile } : {}), limits };
}

// `subs agent connect` and `subs mcp connect` (src/connect/): the same flags, one for an agent, one for a connection.
const CONNECT_TO = ["claude", "codex", "gemini", "cursor", "vscode", "claude-desktop"];
export type ConnectFlags = { to: string; scope?: string; dryRun?: boolean; remove?: boolean; force?: boolean; json?: boolean; config?: string };

export function connectFlags(command: Command): Command {
  return command
    .addOption(new Option("--to <client>", "the MCP client (claude is Claude Code, gemini Gemini CLI)").choices(CONNECT_TO).makeOptionMandatory())
    .addOption(
      new Option("--scope <scope>", "where in the client, among the scopes it has (default: the one its own `mcp add` uses: claude local, gemini project, the others user)").choices([
        "local",
        "user",
        "project",
      ]),
    )
    .option("--dry-run", "print the change to the client's file as a unified diff; write nothing")
    .option("--remove", "take out the entry connect wrote")
    .option("--force", "replace (or with --remove, take out) an entry of that name that subs did not write")
    .addOption(configOption())
    .addOption(jsonOption());
}

/** The connect flags as `subs agent connect` and `subs mcp connect` hand them to their run code. */
export function connectOptions(kind: "agent" | "mcp", name: string, opts: ConnectFlags, { configOf }: Pick<CommandScope, "configOf">): ConnectCommandOptions {
  return {
    kind,
    name,
    to: opts.to as ConnectClient,
    ...(opts.scope !== undefined ? { scope: opts.scope as ConnectScope } : {}),
    ...configOf(opts),
    dryRun: Boolean(opts.dryRun),
    remove: Boolean(opts.remove),
    force: Boolean(opts.force),
    json: Boolean(opts.json),
  };
}
