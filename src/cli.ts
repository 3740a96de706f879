// Builds the command tree. Each action parses its flags into a typed options object and loads its
// command module only when it runs (CONTRIBUTING.md, rule 7).
import { Command, CommanderError, Help, Option } from "commander";
import type { Context } from "./context.ts";
import { ConfigError, SubsError, exitCodeFor, formatDiagnostic, usage } from "./errors.ts";
import { animates, loadSpinner } from "./output/progress.ts";
import { shellWord } from "./output/shell-word.ts";
import { learningFetch, Secrets, withSecrets } from "./output/secrets.ts";
import { loadStyles, styleFor } from "./output/style.ts";
import { shown } from "./output/untrusted.ts";
import { VERSION } from "./version.ts";

const examples = (lines: string[]) => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

const configOption = () => new Option("--config <path>", "use this substructure.toml (default: $SUBS_CONFIG, else the nearest one upward)");
const jsonOption = () => new Option("--json", "print JSON (a documented, stable shape) on stdout");
// `subs agent serve` and `subs mcp proxy`: stdio unless --http (issue 16).
const httpOption = () => new Option("--http <[host:]port>", "serve Streamable HTTP on loopback at http://HOST:PORT/mcp instead of stdio (HOST: 127.0.0.1, ::1 or localhost; PORT 0 picks one)");
const tokenFileOption = () => new Option("--token-file <path>", "with --http: the bearer token clients must send, in this file (mode 0600) instead of on stderr; a token already there is kept when the file is yours and private");

// What a client can hold of an --http server (src/serve/http.ts DEFAULT_LIMITS; docs/serve.md, "Limits of --http").
const maxSessionsOption = () => new Option("--max-sessions <n>", "with --http: sessions at once; one more `initialize` is answered 503 with Retry-After (default 32)");
const idleTimeoutOption = () => new Option("--idle-timeout <seconds>", "with --http: end a session after this long with no request in progress and no stream open (default 300)");
const maxCallsOption = () => new Option("--max-calls <n>", "with --http: requests in progress per session; one more is answered a JSON-RPC error (default 64)");
const maxConnectionsOption = () => new Option("--max-connections <n>", "with --http: open connections; one more closes the oldest that has not sent the token (default 100)");

type HttpFlags = { http?: string; tokenFile?: string; maxSessions?: string; idleTimeout?: string; maxCalls?: string; maxConnections?: string };

/** --http and the flags that go with it, checked before anything is loaded or served (a usage mistake is exit 2). */
async function httpTransportOptions(
  opts: HttpFlags,
): Promise<{ http?: import("./serve/address.ts").HttpAddress; tokenFile?: string; limits?: Partial<import("./serve/http.ts").HttpLimits> }> {
  if (opts.http === undefined) {
    if (opts.tokenFile !== undefined) throw usage("--token-file goes with --http", { hint: "over stdio there is no token: the MCP client starts subs itself" });
    const stray = (["maxSessions", "idleTimeout", "maxCalls", "maxConnections"] as const).find((key) => opts[key] !== undefined);
    if (stray) throw usage(`--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} goes with --http`, { hint: "over stdio the MCP client starts subs itself, for one session" });
    return {};
  }
  const { parseHttpAddress } = await import("./serve/address.ts");
  const limits = {
    ...(opts.maxSessions !== undefined ? { maxSessions: parseCount(opts.maxSessions, "--max-sessions") } : {}),
    ...(opts.idleTimeout !== undefined ? { idleTimeoutMs: parseSeconds(opts.idleTimeout, "--idle-timeout") * 1000 } : {}),
    ...(opts.maxCalls !== undefined ? { maxCalls: parseCount(opts.maxCalls, "--max-calls") } : {}),
    ...(opts.maxConnections !== undefined ? { maxConnections: parseCount(opts.maxConnections, "--max-connections") } : {}),
  };
  return { http: parseHttpAddress(opts.http), ...(opts.tokenFile !== undefined ? { tokenFile: opts.tokenFile } : {}), limits };
}

// The MCP SDK gives up on a request after 60 s; a slow server or a long tool may need longer.
const requestTimeoutOption = (what: string) => new Option("--request-timeout <seconds>", what).default("60", "60");

export async function run(given_argv: readonly string[], given: Context): Promise<number> {
  let argv = given_argv;
  let exitCode = 0;
  let jsonRequested = false;
  // A server's normal end is a signal (an MCP client stops it with SIGTERM): exit 0, not 130/143.
  let endsOnSignal = false;
  // A copy, so --debug can wrap its fetch for this run only. Every line printed passes the run's
  // secrets, --json included, and every request teaches them (issue 14, item 3).
  const secrets = new Secrets();
  const ctx: Context = withSecrets(given, secrets);
  if (ctx.color || ctx.stderrColor) await loadStyles();
  if (animates(ctx)) await loadSpinner();
  // Words other tools taught (logout, rm, `subs login`): the subs way, never the opposite action
  // a spelling suggestion could offer (`logout` is two letters from `login`; issue 15).
  const habit = habitFor(argv);
  if (habit) {
    renderError(ctx, habit, jsonFlagGiven(argv));
    return 2;
  }
  // `subs help mcp login` is `subs mcp login --help` (commander's help command stops at one word).
  if (argv[0] === "help") argv = [...argv.slice(1), "--help"];
  // A command that printed its whole result may still end non-zero (e.g. `agent tools` with a
  // connection unavailable); it reports that code here instead of throwing after its output.
  // A mistake the parser catches ends before any action runs, so before setJson could.
  let parseMistake: { message: string; path: string } | undefined;
  const program = buildProgram(
    ctx,
    {
      setJson: (json) => (jsonRequested = json),
      setExitCode: (code) => (exitCode = code),
      onParseMistake: (message, path) => (parseMistake = { message, path }),
      servesUntilStopped: () => (endsOnSignal = true),
    },
    namedPath(argv),
  );
  if (argv[0] === "__complete") {
    const { complete } = await import("./completion/complete.ts");
    for (const candidate of complete(program, argv.slice(1), ctx)) ctx.stdout.write(`${candidate}\n`);
    return 0;
  }
  // What ran, for an error without a hint of its own: its next step names this command.
  let ran: Ran | undefined;
  program.hook("preAction", async (_program, action) => {
    const debug = Boolean(program.opts().debug) || debugFromEnv(ctx.env);
    const config = (action.opts() as { config?: unknown }).config ?? (program.opts() as { config?: unknown }).config;
    const configArgs = typeof config === "string" ? ["--config", shellWord(config)] : [];
    const ranPath = commandPath(action);
    const writes = WRITING_COMMANDS.has(ranPath) && !(action.opts() as { dryRun?: unknown }).dryRun;
    ran = { path: ranPath, args: [...action.args.filter((a) => !a.startsWith("-")), ...configArgs], debug, writes };
    if (debug) {
      const { debugFetch } = await import("./output/debug-fetch.ts");
      ctx.fetch = debugFetch(learningFetch(given.fetch, secrets), ctx.stderr, ctx.now, secrets);
    }
  });
  // `subs` alone, or a group alone (`subs mcp`, `subs agent`), asked for nothing wrong: its help,
  // as data on stdout, exit 0.
  const words = commandWords(argv);
  const onlyGlobal = argv.every((a, n) => words.includes(a) || a === "--debug" || a === "--config" || a.startsWith("--config=") || argv[n - 1] === "--config");
  const group = words.length === 1 ? program.commands.find((c) => c.name() === words[0] && c.commands.length > 0) : undefined;
  if (onlyGlobal && (words.length === 0 || group)) {
    (group ?? program).outputHelp();
    return 0;
  }
  try {
    await program.parseAsync(argv as string[], { from: "user" });
    // Ctrl-C came while the command wound down (e.g. cut its revocations short): still 130.
    if (ctx.signal.aborted && !endsOnSignal) {
      ctx.stderr.write("Interrupted.\n");
      return 130;
    }
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with exitCode 0; usage mistakes with 1, which is our 2.
      if (error.exitCode === 0) return 0;
      // --json promises an error object for every failure (docs/exit-codes.md, "Errors with `--json`").
      if (parseMistake && jsonFlagGiven(argv)) ctx.stdout.write(JSON.stringify({ error: parseMistakeJson(parseMistake) }, null, 2) + "\n");
      return 2;
    }
    if (ctx.signal.aborted && !(error instanceof SubsError && error.kind !== "interrupted")) {
      // An interrupt that carries a report (what an apply did and did not do) still shows it.
      if (error instanceof SubsError && error.details) renderError(ctx, error, jsonRequested);
      ctx.stderr.write("Interrupted.\n");
      return 130;
    }
    renderError(ctx, error, jsonRequested, ran);
    exitCode = exitCodeFor(error);
  }
  return exitCode;
}

type ProgramHooks = {
  setJson: (json: boolean) => void;
  setExitCode: (code: number) => void;
  /** The parser's own error text (e.g. "error: unknown option '--x'") and the command it is about. */
  onParseMistake?: (message: string, path: string) => void;
  /** The command serves until stopped: Ctrl-C or SIGTERM is its normal end (exit 0). */
  servesUntilStopped?: () => void;
};

/** `--json` as a flag: before a `--`, after which every word is an argument. */
function jsonFlagGiven(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).includes("--json");
}

/**
 * commander's "error: unknown option '--jsn'\n(Did you mean --json?)" in subs's own words: the
 * message, and a hint (issue 15: one style for suggestions, commander's included) that names the
 * suggestion as every other "did you mean" does, then the command's --help. Also the --json error object.
 */
function parseMistakeJson({ message, path }: { message: string; path: string }): { code: "usage"; message: string; hint: string } {
  const [first = "", ...rest] = message.trim().split("\n");
  const help = `run \`${path} --help\` for its usage and examples`;
  const meant = rest.map((line) => /^\(Did you mean (one of )?(.*)\?\)$/.exec(line.trim())).find((m) => m !== null);
  // A command is named whole (`subs mcp list`), as the hints for habits name it.
  const whole = (word: string) => (first.startsWith("error: unknown command") ? `${path} ${word}` : word);
  const suggestion = meant ? `did you mean ${meant[1] ?? ""}${meant[2]!.split(", ").map((word) => `\`${whole(word)}\``).join(", ")}? ` : "";
  return { code: "usage", message: first.replace(/^error: /, ""), hint: `${suggestion}${help}` };
}

/** A parse mistake on stderr, as renderError writes every other usage error. */
function parseMistakeText(ctx: Context, mistake: { message: string; path: string }): string {
  const style = styleFor(ctx.stderrColor);
  const { message, hint } = parseMistakeJson(mistake);
  return `${style.red("error:")} ${message}\n${style.dim("hint:")} ${hint}\n`;
}

/** The words before any `--`, options and the value of --config left out. */
function commandWords(argv: readonly string[]): string[] {
  const words: string[] = [];
  for (let n = 0; n < argv.length && argv[n] !== "--"; n++) {
    const arg = argv[n]!;
    if (arg === "--config") n++;
    else if (!arg.startsWith("-")) words.push(arg);
  }
  return words;
}

const LOGOUT_HINT = "there is no logout: `subs mcp remove <id>` disconnects it (or delete its [mcp.<id>] section; `subs apply` then deletes the credential)";
const LOGOUT_WORDS = ["logout", "log-out", "signout", "sign-out", "disconnect", "deauth", "unauth", "revoke", "forget"];
/** Words of other tools for what an `mcp` subcommand does. */
const MCP_SYNONYMS: Record<string, string> = {
  rm: "remove",
  del: "remove",
  delete: "remove",
  unregister: "remove",
  uninstall: "remove",
  drop: "remove",
  new: "add",
  create: "add",
  register: "add",
  install: "add",
  declare: "add",
  ls: "list",
  signin: "login",
  "sign-in": "login",
  "log-in": "login",
  auth: "login",
  authorize: "login",
  authenticate: "login",
};

/** Levenshtein distance, for the few short words compared here. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, n) => n);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

const looksLikeLogout = (word: string) =>
  LOGOUT_WORDS.includes(word) || (distance(word, "logout") <= 2 && distance(word, "logout") < distance(word, "login"));

/** The usage error for a command typed from another tool's habits, else undefined (issue 15). */
export function habitFor(argv: readonly string[]): SubsError | undefined {
  if (argv[0] === "-v") return usage("unknown option '-v'", { hint: "`subs --version` (or `subs -V`) prints the version; `-v` is --verbose of `subs agent tools`" });
  const [group, sub] = commandWords(argv);
  if (group === undefined) return undefined;
  if (group === "mcp") {
    if (sub === undefined || (COMMAND_TREE.mcp ?? []).includes(sub)) return undefined;
    if (looksLikeLogout(sub)) return usage(`unknown command 'mcp ${sub}'`, { hint: LOGOUT_HINT });
    const meant = MCP_SYNONYMS[sub];
    return meant ? usage(`unknown command 'mcp ${sub}'`, { hint: `did you mean \`subs mcp ${meant}\`? (\`subs mcp --help\` lists every command)` }) : undefined;
  }
  if (Object.hasOwn(COMMAND_TREE, group) || group === "help") return undefined;
  if (group === "version") return usage("unknown command 'version'", { hint: "`subs --version` prints the version" });
  if (looksLikeLogout(group)) return usage(`unknown command '${group}'`, { hint: LOGOUT_HINT });
  const meant = (COMMAND_TREE.mcp ?? []).includes(group) ? group : MCP_SYNONYMS[group];
  return meant ? usage(`unknown command '${group}'`, { hint: `did you mean \`subs mcp ${meant}\`? (\`subs --help\` lists every command)` }) : undefined;
}

/** Every command, by path; test/comfort.test.ts checks it against the tree buildProgram builds. */
export const COMMAND_TREE: Readonly<Record<string, readonly string[]>> = {
  init: [],
  mcp: ["list", "login", "tools", "call", "proxy", "connect", "add", "remove", "import"],
  apply: [],
  completion: [],
  schema: [],
  agent: ["list", "tools", "serve", "connect"],
};

/**
 * The command argv names, when that is all the parser needs to see: `subs mcp list --json`
 * builds `mcp list` alone instead of all eleven commands (about 2 ms of every start-up, issue 6).
 * Commander still parses everything, so flags and errors are the same. The whole tree is built
 * whenever it is shown or searched: help, completion, an unknown command (for "did you mean"),
 * a group named without a known subcommand.
 */
export function namedPath(argv: readonly string[]): string[] | undefined {
  if (argv.some((a) => a === "-h" || a === "--help" || a === "help" || a === "__complete")) return undefined;
  const words: string[] = [];
  for (let n = 0; n < argv.length && words.length < 2; n++) {
    const arg = argv[n]!;
    if (!arg.startsWith("-")) words.push(arg);
    else if (words.length === 0) {
      // Before the command only the global --debug and --config may come; anything else is the parser's to judge.
      if (arg === "--config") n++;
      else if (arg !== "--debug" && !arg.startsWith("--config=")) return undefined;
    }
  }
  const [group, command] = words;
  if (group === undefined || !Object.hasOwn(COMMAND_TREE, group)) return undefined;
  const subcommands = COMMAND_TREE[group]!;
  return command !== undefined && subcommands.includes(command) ? [group, command] : [group];
}

// `subs agent connect` and `subs mcp connect` (src/connect/): the same flags, one for an agent, one for a connection.
const CONNECT_TO = ["claude", "codex", "gemini", "cursor", "vscode", "claude-desktop"];
type ConnectFlags = { to: string; scope?: string; dryRun?: boolean; remove?: boolean; force?: boolean; json?: boolean; config?: string };

function connectFlags(command: Command): Command {
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

export function buildProgram(ctx: Context, { setJson, setExitCode, onParseMistake, servesUntilStopped }: ProgramHooks, only?: readonly string[]): Command {
  /** The command's --config, else one given before the command; absent when neither was. */
  const configOf = (opts: { config?: string }): { config: string } | Record<string, never> => {
    const config = opts.config ?? (program.opts() as { config?: string }).config;
    return config === undefined ? {} : { config };
  };
  // Whether the command at `path` is built: all of them, or those on the path argv names.
  const wanted = (...path: string[]) => only === undefined || path.every((name, n) => only[n] === undefined || only[n] === name);
  const program = new Command("subs")
    .description("Connect AI agents to MCP servers declared in substructure.toml.")
    .version(VERSION, "-V, --version", "print the version")
    .option("--debug", "print every HTTP exchange on stderr, credentials redacted (also SUBS_DEBUG=1)")
    // Also before the command (`subs --config X mcp list`), as --debug is; after it, the command's own wins.
    .addOption(configOption())
    .helpOption("-h, --help", "show help")
    // --debug and --config work after any command too: every command's help lists them, once
    // (a command's own --config is in its Options, so not again under Global Options).
    .configureHelp({
      showGlobalOptions: true,
      visibleGlobalOptions(cmd) {
        return Help.prototype.visibleGlobalOptions.call(this, cmd).filter((global) => !cmd.options.some((own) => own.long === global.long));
      },
    })
    .helpCommand("help [command]", "Show help for a command")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => {
        onParseMistake?.(s, "subs");
        write(parseMistakeText(ctx, { message: s, path: "subs" }));
      },
    })
    .addHelpText(
      "after",
      examples([
        "subs init sentry=https://mcp.sentry.dev/mcp",
        "subs mcp login sentry",
        "subs mcp list",
        "subs mcp list --json | jq '.[] | select(.usable | not) | .id'",
        "subs agent tools triage",
        "subs apply --dry-run",
      ]),
    );
  const commandWithDefaults = (parent: Command, name: string) => {
    const path = `${commandPath(parent)} ${name}`;
    const command = parent.command(name).helpOption("-h, --help", "show help").exitOverride().configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => {
        onParseMistake?.(s, path);
        write(parseMistakeText(ctx, { message: s, path }));
      },
    });
    command.showSuggestionAfterError(true);
    return command;
  };

  if (wanted("init")) {
    commandWithDefaults(program, "init")
      .description("Write a first substructure.toml here: the servers given as ID=URL declared, the rest of the format shown in comments. Never overwrites a file.")
      .argument("[id=url...]", "connections to declare, e.g. sentry=https://mcp.sentry.dev/mcp")
      .addOption(new Option("--config <path>", "write this file instead (default: $SUBS_CONFIG, else ./substructure.toml)"))
      .addHelpText("after", examples(["subs init", "subs init sentry=https://mcp.sentry.dev/mcp && subs mcp login sentry"]))
      .action(async (connections: string[], opts: { config?: string }) => {
        const { initCommand } = await import("./commands/init.ts");
        await initCommand(ctx, { ...configOf(opts), connections });
      });
  }

  const mcp = wanted("mcp")
    ? commandWithDefaults(program, "mcp")
        .description("Declared MCP connections: add, import, log in, list, inspect, call, proxy, connect to a client, remove.")
        .addHelpText(
          "after",
          examples([
            "subs mcp add sentry https://mcp.sentry.dev/mcp",
            "subs mcp import --dry-run",
            "subs mcp login sentry",
            "subs mcp list",
            "subs mcp tools sentry",
            `subs mcp call sentry whoami --args '{}'`,
            "subs mcp connect sentry --to claude",
            "subs mcp remove sentry",
          ]),
        )
    : undefined;

  if (mcp && wanted("mcp", "list")) {
    commandWithDefaults(mcp, "list")
      .description(
        "List every declared connection, its auth and status, and the agents that use it. Reads only the file, the environment and the local db; --check also asks every server, all at once.",
      )
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--check", "also probe every server: reachable, authorized, how many tools (exit 1 when one fails, 4 when the only problems need a login)")
      .addOption(new Option("--timeout <seconds>", "with --check: give each server this long").default("10", "10"))
      .addHelpText(
        "after",
        examples([
          "subs mcp list",
          "subs mcp list --json",
          "subs mcp list --check",
          "subs mcp list --check --json | jq '.[] | select(.check.authorized | not) | .id'",
          "subs mcp list --config ./deploy/substructure.toml",
        ]),
      )
      .action(async (opts: { config?: string; json?: boolean; check?: boolean; timeout: string }) => {
        setJson(Boolean(opts.json));
        const timeoutSeconds = parseSeconds(opts.timeout);
        const { mcpListCommand } = await import("./commands/mcp-list.ts");
        setExitCode(await mcpListCommand(ctx, { ...configOf(opts), json: Boolean(opts.json), ...(opts.check ? { check: { timeoutSeconds } } : {}) }));
      });
  }

  if (mcp && wanted("mcp", "login")) {
    commandWithDefaults(mcp, "login")
      .description(
        "Authorize connections: OAuth in a browser (the credential goes into the local db). A connection with a static token (auth.token_env) needs no login.",
      )
      .argument("[id...]", "connection ids from substructure.toml")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--all", "every OAuth connection that lacks a usable credential")
      .option("--no-browser", "print the URL instead of opening a browser (on a terminal, also accept the redirected URL pasted back)")
      .option("--port <n>", "a fixed loopback port for the redirect (default: chosen by the system)")
      .addOption(new Option("--timeout <seconds>", "how long to wait for consent").default("300", "300"))
      .addHelpText(
        "after",
        examples(["subs mcp login sentry", "subs mcp login sentry linear", "subs mcp login --all", "subs mcp login sentry --no-browser   # over SSH", "subs mcp login linear --port 8765"]),
      )
      .action(async (ids: string[], opts: { config?: string; json?: boolean; all?: boolean; browser: boolean; port?: string; timeout: string }) => {
        setJson(Boolean(opts.json));
        const { mcpLoginCommand } = await import("./commands/mcp-login.ts");
        const port = opts.port === undefined ? undefined : parsePort(opts.port);
        await mcpLoginCommand(ctx, {
          ...configOf(opts),
          ids,
          all: Boolean(opts.all),
          ...(port !== undefined ? { port } : {}),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          json: Boolean(opts.json),
        });
      });
  }

  if (mcp && wanted("mcp", "tools")) {
    commandWithDefaults(mcp, "tools")
      .description("Connect to a connection's server with its credential and list its tools with their annotations.")
      .argument("<id>", "connection id")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--no-browser", "if the server asks for more scopes, print the URL instead of opening a browser")
      .addOption(new Option("--timeout <seconds>", "how long a re-authorization waits for consent").default("300", "300"))
      .addOption(requestTimeoutOption("give the server this long to answer each request"))
      .addHelpText("after", examples(["subs mcp tools sentry", "subs mcp tools sentry --json | jq '.tools[].name'"]))
      .action(async (id: string, opts: { config?: string; json?: boolean; browser: boolean; timeout: string; requestTimeout: string }) => {
        setJson(Boolean(opts.json));
        const { mcpToolsCommand } = await import("./commands/mcp-tools.ts");
        await mcpToolsCommand(ctx, {
          ...configOf(opts),
          id,
          json: Boolean(opts.json),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          requestTimeoutSeconds: parseSeconds(opts.requestTimeout, "--request-timeout"),
        });
      });
  }

  if (mcp && wanted("mcp", "call")) {
    commandWithDefaults(mcp, "call")
      .description("Call one tool on a connection and print its result.")
      .argument("<id>", "connection id")
      .argument("<tool>", "the tool's name on the connection (not the prefixed name)")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--args <json>", "the tool's arguments, a JSON object; - reads it from stdin, @FILE from a file")
      .option("--no-browser", "if the server asks for more scopes, print the URL instead of opening a browser")
      .addOption(new Option("--timeout <seconds>", "how long a re-authorization waits for consent").default("300", "300"))
      .addOption(requestTimeoutOption("give the tool this long to answer; each progress report it sends restarts the wait"))
      .addHelpText(
        "after",
        examples([
          `subs mcp call sentry search_issues --args '{"query": "is:unresolved"}'`,
          `jq -n --arg q "$QUERY" '{query: $q}' | subs mcp call sentry search_issues --args -`,
          "subs mcp call sentry whoami --json",
          "subs mcp call ci run_suite --args @suite.json --request-timeout 900",
        ]),
      )
      .action(async (id: string, tool: string, opts: { config?: string; json?: boolean; args?: string; browser: boolean; timeout: string; requestTimeout: string }) => {
        setJson(Boolean(opts.json));
        const { mcpCallCommand } = await import("./commands/mcp-call.ts");
        await mcpCallCommand(ctx, {
          ...configOf(opts),
          ...pick(opts, "args"),
          id,
          tool,
          json: Boolean(opts.json),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          requestTimeoutSeconds: parseSeconds(opts.requestTimeout, "--request-timeout"),
        });
      });
  }

  if (mcp && wanted("mcp", "proxy")) {
    commandWithDefaults(mcp, "proxy")
      .summary("Serve one connection to an MCP client over stdio, with its stored credential.")
      .description(
        "Serve one connection as an MCP server on stdin/stdout, for any MCP client (Claude Code, Codex, Cursor, VS Code): everything is forwarded to the connection's server with its stored credential, refreshed as needed; the client never sees a token. Never opens a browser: log in first with `subs mcp login <id>`. Human messages go to stderr.",
      )
      .argument("<id>", "connection id")
      .addOption(configOption())
      .addOption(httpOption())
      .addOption(tokenFileOption())
      .addOption(maxSessionsOption())
      .addOption(idleTimeoutOption())
      .addOption(maxCallsOption())
      .addOption(maxConnectionsOption())
      .addHelpText(
        "after",
        examples([
          "subs mcp proxy sentry                # what an MCP client runs; it speaks MCP on stdin/stdout",
          "subs mcp proxy sentry --http 8931    # Streamable HTTP at http://127.0.0.1:8931/mcp; the bearer token on stderr",
          "subs mcp proxy sentry --config ~/work/substructure.toml",
          "subs mcp connect sentry --to codex    # registers this line, with absolute paths, in Codex",
        ]),
      )
      .action(async (id: string, opts: { config?: string } & HttpFlags) => {
        const transport = await httpTransportOptions(opts);
        servesUntilStopped?.();
        const { mcpProxyCommand } = await import("./commands/mcp-proxy.ts");
        const debug = Boolean(program.opts().debug) || debugFromEnv(ctx.env);
        setExitCode(await mcpProxyCommand(ctx, { ...configOf(opts), id, ...transport, debug }));
      });
  }

  if (mcp && wanted("mcp", "connect")) {
    connectFlags(
      commandWithDefaults(mcp, "connect")
        .summary("Register `subs mcp proxy <id>` in an MCP client's own config (Claude Code, Codex, Gemini CLI, Cursor, VS Code).")
        .description(
          "Register one connection in an MCP client's own configuration, as that client documents it: an entry named <id> that runs `subs mcp proxy <id>` with absolute paths " +
            "(this node, this subs, --config of this file), so it starts wherever the client starts it, and passes the variable its token or client secret is read from " +
            "(names only, never a value). The rest of the client's file is left byte for byte; running it again updates the entry in place; --remove takes it out.",
        )
        .argument("<id>", "connection id"),
    )
      .addHelpText(
        "after",
        examples([
          "subs mcp connect sentry --to claude",
          "subs mcp connect sentry --to codex --dry-run",
          "subs mcp connect github --to gemini --scope user",
          "subs mcp connect sentry --to claude --remove",
        ]),
      )
      .action(async (id: string, opts: ConnectFlags) => {
        setJson(Boolean(opts.json));
        const { connectCommand } = await import("./commands/connect.ts");
        await connectCommand(ctx, connectOptions("mcp", id, opts));
      });
  }

  if (mcp && wanted("mcp", "add")) {
    const collect = (value: string, previous: string[] = []) => [...previous, ...value.split(",").map((s) => s.trim()).filter(Boolean)];
    commandWithDefaults(mcp, "add")
      .summary("Declare a connection: append its [mcp.<id>] section, the rest of the file kept.")
      .description(
        "Declare a connection: append its [mcp.<id>] section to the file (comments and layout elsewhere kept), checked before it is written. Never writes a secret: a token is named by an environment variable.",
      )
      .argument("<id>", "the new connection's id: lowercase letters, digits, '-' and '_'")
      .argument("<url>", "the MCP server's URL")
      .addOption(configOption())
      .option("--token-env <var>", "a static token, read from this environment variable when a call is made (auth.token_env); no OAuth")
      .option("--client-id <id>", "a client registered at the authorization server (oauth.client_id)")
      .option("--client-secret-env <var>", "that client's secret, read from this environment variable (oauth.client_secret_env)")
      .option("--scopes <scopes>", "scopes to ask for, comma-separated or repeated (oauth.scopes)", collect)
      // Habits from other tools; a secret is never taken as a flag (it would end in shell history and in the file).
      .addOption(new Option("--token <value>").hideHelp())
      .addOption(new Option("--client-secret <value>").hideHelp())
      .addHelpText(
        "after",
        examples([
          "subs mcp add sentry https://mcp.sentry.dev/mcp && subs mcp login sentry",
          "subs mcp add github https://api.githubcopilot.com/mcp/ --token-env GITHUB_TOKEN",
          "subs mcp add linear https://mcp.linear.app/mcp --client-id abc123 --scopes read,write",
        ]),
      )
      .action(
        async (
          id: string,
          url: string,
          opts: { config?: string; tokenEnv?: string; clientId?: string; clientSecretEnv?: string; scopes?: string[]; token?: string; clientSecret?: string },
        ) => {
          if (opts.token !== undefined) throw usage("subs never writes a token in the file", { hint: "export it and name the variable: --token-env GITHUB_TOKEN" });
          if (opts.clientSecret !== undefined) {
            throw usage("subs never writes a client secret in the file", { hint: "export it and name the variable: --client-secret-env MY_CLIENT_SECRET" });
          }
          const { mcpAddCommand } = await import("./commands/mcp-add.ts");
          await mcpAddCommand(ctx, {
            ...configOf(opts),
            id,
            url,
            ...pick(opts, "tokenEnv"),
            ...pick(opts, "clientId"),
            ...pick(opts, "clientSecretEnv"),
            ...pick(opts, "scopes"),
          });
        },
      );
  }

  if (mcp && wanted("mcp", "remove")) {
    commandWithDefaults(mcp, "remove")
      .summary("Disconnect a connection: cut its section, delete and revoke its credential.")
      .description(
        "Disconnect a connection: cut its [mcp.<id>] section from the file (comments and layout elsewhere kept), then delete its stored credential and revoke it where the server offers revocation. With [remote], `subs apply` then removes it from the deployment.",
      )
      .argument("<id>", "connection id")
      .addOption(configOption())
      .addHelpText("after", examples(["subs mcp remove sentry", "subs mcp remove linear --config ./deploy/substructure.toml && subs apply --config ./deploy/substructure.toml"]))
      .action(async (id: string, opts: { config?: string }) => {
        const { mcpRemoveCommand } = await import("./commands/mcp-remove.ts");
        await mcpRemoveCommand(ctx, { ...configOf(opts), id });
      });
  }

  if (mcp && wanted("mcp", "import")) {
    commandWithDefaults(mcp, "import")
      .summary("Declare the remote MCP servers Claude Code, Codex, Cursor, VS Code or Gemini CLI already use.")
      .description(
        "Declare the remote MCP servers other clients already use: reads their project and user config files, prints what it adds, then appends the sections " +
          "(comments and layout elsewhere kept), checked before it is written. `Authorization: Bearer ${VAR}` becomes auth.token_env; a token written in a file is never " +
          "copied (the report names the variable to set); local (stdio) servers are listed as skipped. Without a substructure.toml, writes one as `subs init` does.",
      )
      .addOption(new Option("--from <client|path>", "read only this client (claude, codex, cursor, vscode, gemini) or this config file (default: every client whose files exist)"))
      .option("--dry-run", "print what would be added; write nothing")
      .addOption(configOption())
      .addOption(jsonOption())
      .addHelpText(
        "after",
        examples([
          "subs mcp import --dry-run",
          "subs mcp import --from claude",
          "subs mcp import --from ~/.cursor/mcp.json",
          "subs mcp import --from vscode --json | jq '.added[].id'",
        ]),
      )
      .action(async (opts: { from?: string; dryRun?: boolean; config?: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { mcpImportCommand } = await import("./commands/mcp-import.ts");
        await mcpImportCommand(ctx, { ...configOf(opts), ...pick(opts, "from"), dryRun: Boolean(opts.dryRun), json: Boolean(opts.json) });
      });
  }

  if (wanted("apply")) {
    commandWithDefaults(program, "apply")
      .description("Make the target match the file: the deployment named by [remote], else the local db (deletes credentials of connections no longer declared).")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--dry-run", "print the plan; change nothing")
      .option("-y, --yes", "apply a plan that removes without asking (on a terminal, subs asks first)")
      .addHelpText("after", examples(["subs apply --dry-run", "subs apply", "subs apply --json   # in CI"]))
      .action(async (opts: { config?: string; json?: boolean; dryRun?: boolean; yes?: boolean }) => {
        setJson(Boolean(opts.json));
        const { applyCommand } = await import("./commands/apply.ts");
        await applyCommand(ctx, { ...configOf(opts), json: Boolean(opts.json), dryRun: Boolean(opts.dryRun), yes: Boolean(opts.yes) });
      });
  }

  if (wanted("completion")) {
    commandWithDefaults(program, "completion")
      .description("Print a shell completion script: commands, flags, connection ids and agent names.")
      .argument("<shell>", "bash, zsh or fish")
      .addHelpText(
        "after",
        examples([
          "subs completion bash > ~/.local/share/bash-completion/completions/subs",
          "subs completion zsh > \"${fpath[1]}/_subs\"",
          "subs completion fish > ~/.config/fish/completions/subs.fish",
        ]),
      )
      .action(async (shell: string) => {
        const { completionCommand } = await import("./commands/completion.ts");
        await completionCommand(ctx, { shell });
      });
  }

  if (wanted("schema")) {
    commandWithDefaults(program, "schema")
      .description("Print the JSON Schema of substructure.toml (for editors such as Taplo / Even Better TOML).")
      .addHelpText("after", examples(["subs schema > substructure.schema.json"]))
      .action(async () => {
        const { schemaCommand } = await import("./commands/schema.ts");
        await schemaCommand(ctx);
      });
  }

  const agent = wanted("agent")
    ? commandWithDefaults(program, "agent")
        .description("Declared agents: what each one's model can call, and serving those tools to any MCP client.")
        .addHelpText("after", examples(["subs agent list", "subs agent tools triage", "subs agent connect triage --to claude"]))
    : undefined;

  if (agent && wanted("agent", "list")) {
    commandWithDefaults(agent, "list")
      .summary("List every declared agent with its connections, filters, tools and sub-agents.")
      .description("List every declared agent: its connections (and their filters), declared tools and sub-agents. Reads only the file.")
      .addOption(configOption())
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs agent list", "subs agent list --json | jq '.[].name'"]))
      .action(async (opts: { config?: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { agentListCommand } = await import("./commands/agent-list.ts");
        await agentListCommand(ctx, { ...configOf(opts), json: Boolean(opts.json) });
      });
  }

  if (agent && wanted("agent", "tools")) {
    commandWithDefaults(agent, "tools")
      .summary("Show exactly what an agent's model sees: names, dropped names, unavailable connections.")
      .description(
        "Show exactly what an agent's model sees: each connection's tools fetched once (in parallel), filtered (capability keys, then include, then exclude), " +
          "named (id__tool unless prefix_tools = false), collisions resolved; dropped names, filtered tools and unavailable connections go to stderr. " +
          "Exit 0 when every connection answered, 4 when the only failures need a login, 1 otherwise (the list is printed in every case).",
      )
      .argument("<name>", "the agent, as in [agent.<name>]")
      .addOption(configOption())
      .addOption(jsonOption())
      .addOption(new Option("--timeout <seconds>", "give each connection this long to list its tools").default("10", "10"))
      .option("-v, --verbose", "list every tool the agent's filter removed, with the reason")
      .addHelpText(
        "after",
        examples([
          "subs agent tools triage",
          "subs agent tools triage -v          # also every filtered tool and why",
          "subs agent tools triage --json | jq -r '.tools[].name'",
          "subs agent tools triage --json | jq '.dropped[] | {name, reason}'",
          "subs agent tools triage --timeout 30",
        ]),
      )
      .action(async (name: string, opts: { config?: string; json?: boolean; timeout: string; verbose?: boolean }) => {
        setJson(Boolean(opts.json));
        const timeoutSeconds = parseSeconds(opts.timeout);
        const { agentToolsCommand } = await import("./commands/agent-tools.ts");
        setExitCode(await agentToolsCommand(ctx, { agent: name, ...configOf(opts), json: Boolean(opts.json), timeoutSeconds, verbose: Boolean(opts.verbose) }));
      });
  }

  if (agent && wanted("agent", "serve")) {
    commandWithDefaults(agent, "serve")
      .summary("Serve an agent's tools to any MCP client over stdio, run with the stored credentials.")
      .description(
        "Serve exactly the tools `subs agent tools <name>` shows, as an MCP server on stdin/stdout, for Claude Code, Codex, Cursor, VS Code or your own agent. " +
          "Each session fetches the agent's connections once, in parallel, and keeps that list until it ends; a connection that fails is left out and reported " +
          "(stderr and an MCP log message). Calls run on the connection with its stored credential, refreshed as needed; a connection that needs a login answers " +
          "with a tool error naming `subs mcp login <id>` (a server never opens a browser). stdout carries only the protocol. Ends when stdin closes, on Ctrl-C or SIGTERM (exit 0). --http serves Streamable HTTP on loopback instead, one snapshot per client session.",
      )
      .argument("<name>", "the agent, as in [agent.<name>]")
      .addOption(configOption())
      .addOption(new Option("--timeout <seconds>", "give each connection this long to list its tools when a session starts").default("10", "10"))
      .addOption(requestTimeoutOption("how long a call may go without an answer or a progress report"))
      .addOption(httpOption())
      .addOption(tokenFileOption())
      .addOption(maxSessionsOption())
      .addOption(idleTimeoutOption())
      .addOption(maxCallsOption())
      .addOption(maxConnectionsOption())
      .addHelpText(
        "after",
        examples([
          "subs agent serve triage            # an MCP client starts this; it speaks MCP on stdin/stdout",
          "subs agent serve triage --http 8931  # Streamable HTTP at http://127.0.0.1:8931/mcp; the bearer token on stderr",
          "subs agent connect triage --to claude   # registers this line, with absolute paths, in Claude Code",
          "subs agent serve triage --config ~/work/substructure.toml --request-timeout 300",
        ]),
      )
      .action(async (name: string, opts: { config?: string; timeout: string; requestTimeout: string } & HttpFlags) => {
        const timeoutSeconds = parseSeconds(opts.timeout);
        const requestTimeoutSeconds = parseSeconds(opts.requestTimeout, "--request-timeout");
        const transport = await httpTransportOptions(opts);
        servesUntilStopped?.();
        const { agentServeCommand } = await import("./commands/agent-serve.ts");
        await agentServeCommand(ctx, { agent: name, ...configOf(opts), timeoutSeconds, requestTimeoutSeconds, ...transport });
      });
  }

  if (agent && wanted("agent", "connect")) {
    connectFlags(
      commandWithDefaults(agent, "connect")
        .summary("Plug an agent into an MCP client: register `subs agent serve <name>` in its own config.")
        .description(
          "Register an agent in an MCP client's own configuration (Claude Code, Codex, Gemini CLI, Cursor, VS Code, Claude Desktop), as that client documents it: " +
            "an entry named <name> that runs `subs agent serve <name>` with absolute paths (this node, this subs, --config of this file), so it starts wherever the client " +
            "starts it, and passes every variable the agent's connections read their token or client secret from (names only, never a value). The rest of the client's file " +
            "is left byte for byte; running it again updates the entry in place; an entry of that name that subs did not write is refused without --force; --remove takes it out.",
        )
        .argument("<name>", "the agent, as in [agent.<name>]"),
    )
      .addHelpText(
        "after",
        examples([
          "subs agent connect triage --to claude            # Claude Code, this project (local scope)",
          "subs agent connect triage --to codex --dry-run   # the diff of ~/.codex/config.toml",
          "subs agent connect triage --to gemini --scope user",
          "subs agent connect triage --to vscode --json | jq .file",
          "subs agent connect triage --to claude --remove",
        ]),
      )
      .action(async (name: string, opts: ConnectFlags) => {
        setJson(Boolean(opts.json));
        const { connectCommand } = await import("./commands/connect.ts");
        await connectCommand(ctx, connectOptions("agent", name, opts));
      });
  }

  return program;

  function connectOptions(kind: "agent" | "mcp", name: string, opts: ConnectFlags): import("./commands/connect.ts").ConnectCommandOptions {
    return {
      kind,
      name,
      to: opts.to as import("./connect/clients.ts").ConnectClient,
      ...(opts.scope !== undefined ? { scope: opts.scope as import("./connect/clients.ts").ConnectScope } : {}),
      ...configOf(opts),
      dryRun: Boolean(opts.dryRun),
      remove: Boolean(opts.remove),
      force: Boolean(opts.force),
      json: Boolean(opts.json),
    };
  }
}

/** SUBS_DEBUG=1 (or true): one meaning for both of its effects, so SUBS_DEBUG=0 turns neither on. */
const debugFromEnv = (env: Context["env"]) => ["1", "true"].includes(env.SUBS_DEBUG ?? "");

function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** A usage mistake caught by the parser ends, like every error, with the next command to run. */
function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(port) || port < 1 || port > 65535) throw usage(`--port must be a port number (1-65535), not ${JSON.stringify(value)}`);
  return port;
}

function parseCount(value: string, flag: string): number {
  const count = Number(value);
  if (!/^\d+$/.test(value) || !(count >= 1) || !Number.isSafeInteger(count)) throw usage(`${flag} must be a whole number from 1, not ${JSON.stringify(value)}`);
  return count;
}

function parseSeconds(value: string, flag = "--timeout"): number {
  const seconds = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(seconds > 0)) throw usage(`${flag} must be a positive number of seconds, not ${JSON.stringify(value)}`);
  return seconds;
}

/** Copies a key only when set, so options objects never carry `undefined` for absent flags. */
function pick<T extends object, K extends keyof T>(obj: T, key: K): Pick<T, K> | Record<string, never> {
  return obj[key] === undefined ? {} : ({ [key]: obj[key] } as Pick<T, K>);
}

/**
 * Every error ends with the next command to run (issue 8). Most carry their own hint; for the
 * rest: a usage mistake points at the command's --help, a failure at the same command with
 * --debug (every HTTP exchange, credentials redacted). Only on stderr: --json keeps its shape.
 */
function fallbackHint(error: SubsError, ran: Ran | undefined): string | undefined {
  if (!ran || error.code === "tool_error") return undefined;
  if (error.kind === "usage") return `run \`${ran.path} --help\` for its usage and examples`;
  if ((error.kind === "failed" || error.kind === "refused") && !ran.debug) {
    // Positional arguments are ids and tool names; option values (--args JSON) are not repeated.
    return `run \`${[ran.path, ...ran.args].join(" ")} --debug\` to see every HTTP exchange (credentials redacted)`;
  }
  return undefined;
}

/** What ran, once the parser chose a command. */
type Ran = {
  path: string;
  args: string[];
  debug: boolean;
  /** The command would have changed a file, the db or a deployment (WRITING_COMMANDS, not --dry-run). */
  writes: boolean;
};

/**
 * The commands that change something: only after one of them does "nothing was changed" tell the
 * person anything (issue 15). The others read, or write only a refreshed token on the way.
 */
const WRITING_COMMANDS = new Set(["subs init", "subs mcp add", "subs mcp remove", "subs mcp import", "subs mcp login", "subs apply", "subs agent connect", "subs mcp connect"]);

function renderError(ctx: Context, error: unknown, json: boolean, ran?: Ran): void {
  const style = styleFor(ctx.stderrColor);
  if (error instanceof ConfigError) {
    for (const d of error.diagnostics) {
      ctx.stderr.write(`${shown(formatDiagnostic(d))}\n`);
      if (d.hint) ctx.stderr.write(`  ${style.dim("hint:")} ${shown(d.hint, { multiline: true })}\n`);
    }
    const n = error.diagnostics.length;
    const what = error.kind === "refused" ? "refusal" : "error";
    ctx.stderr.write(`${n} ${what}${n === 1 ? "" : "s"} in ${shown(error.diagnostics[0]?.file ?? "the file")}${ran?.writes ? "; nothing was changed" : ""}.\n`);
  } else if (error instanceof SubsError) {
    // Messages quote servers (an error_description, a JSON-RPC message, a deployment's words):
    // shown, never interpreted, here whatever the code that built them did (issue 14, item 1).
    ctx.stderr.write(`${style.red("error:")} ${shown(error.message)}\n`);
    const hint = error.hint ?? fallbackHint(error, ran);
    // A hint may be a list on its own lines (a deployment's allowed URLs); escapes still show.
    if (hint) ctx.stderr.write(`${style.dim("hint:")} ${shown(hint, { multiline: true })}\n`);
  } else {
    // A bug, not a user error: say so without a stack trace (SUBS_DEBUG=1 shows it).
    const message = error instanceof Error ? error.message : String(error);
    ctx.stderr.write(`${style.red("error:")} unexpected: ${shown(message)}\n`);
    if (debugFromEnv(ctx.env) && error instanceof Error && error.stack) ctx.stderr.write(`${shown(error.stack, { multiline: true })}\n`);
  }
  // A tool's own error result is already on stdout as the --json document (isError: true).
  if (json && !(error instanceof SubsError && error.code === "tool_error")) {
    const body =
      error instanceof ConfigError
        ? { code: error.code ?? "invalid_config", message: error.message, diagnostics: error.diagnostics }
        : error instanceof SubsError
          ? { code: error.code ?? error.kind, message: error.message, ...(error.hint ? { hint: error.hint } : {}), ...error.details }
          : { code: "unexpected", message: error instanceof Error ? error.message : String(error) };
    ctx.stdout.write(JSON.stringify({ error: body }, null, 2) + "\n");
  }
}
