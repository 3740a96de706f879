// A run of subs, from its argv to its exit code: the run's context (secrets, styles), the habits of
// other tools, the command (cli.ts builds the tree and commander parses argv; `subs mcp list`, the
// commonest run, is parsed here without either), its action, and every error rendered once, mapped
// to its exit code.
import { debugFromEnv } from "./commands/flags.ts";
import { directMcpList, mcpListAction } from "./commands/mcp/list/action.ts";
import type { ProgramHooks } from "./commands/options.ts";
import type { Context } from "./context.ts";
import { ConfigError, SubsError, exitCodeFor, formatDiagnostic, usage } from "./errors.ts";
import { animates, loadSpinner } from "./output/progress.ts";
import { shellWord } from "./output/shell-word.ts";
import { learningFetch, Secrets, withSecrets } from "./secrets.ts";
import { loadStyles, styleFor } from "./output/style.ts";
import { hintOf } from "./output/hints.ts";
import { parseMistakeJson } from "./output/parse-mistake.ts";
import { shown } from "./output/untrusted.ts";

export async function run(given_argv: readonly string[], given: Context): Promise<number> {
  let argv = given_argv;
  let exitCode = 0;
  let jsonRequested = false;
  // A server's normal end is a signal (an MCP client stops it with SIGTERM): exit 0, not 130/143.
  let endsOnSignal = false;
  // A copy, so --debug can wrap its fetch for this run only. Every line printed passes the run's
  // secrets, --json included, and every request teaches them (SECURITY.md, "Redaction").
  const secrets = new Secrets();
  const ctx: Context = withSecrets(given, secrets);
  if (ctx.color || ctx.stderrColor) await loadStyles();
  if (animates(ctx)) await loadSpinner();
  // Words other tools taught (logout, rm, `subs login`): the subs way, never the opposite action
  // a spelling suggestion could offer (`logout` is two letters from `login`).
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
  const hooks: ProgramHooks = {
    setJson: (json) => (jsonRequested = json),
    setExitCode: (code) => (exitCode = code),
    onParseMistake: (message, path) => (parseMistake = { message, path }),
    servesUntilStopped: () => (endsOnSignal = true),
    ownRedaction: () => given,
  };
  // What ran, for an error without a hint of its own: its next step names this command. Set once
  // the parser has found the command, before its action runs; --debug then wraps this run's fetch.
  let ran: Ran | undefined;
  const beforeAction = async (next: Ran) => {
    ran = next;
    if (next.debug) {
      const { debugFetch } = await import("./output/debug-fetch.ts");
      ctx.fetch = debugFetch(learningFetch(given.fetch, secrets), ctx.stderr, ctx.now, secrets);
      ctx.debugLog = (text) => ctx.stderr.write(`${text}\n`);
    }
  };
  // The commonest run, `subs mcp list` as it is usually spelled, needs no parser (directMcpList);
  // every other run loads commander and the command tree (cli.ts).
  const direct = directMcpList(argv);
  let cli: typeof import("./cli.ts") | undefined;
  let program: import("commander").Command | undefined;
  if (!direct) {
    cli = await import("./cli.ts");
    const { commandPath } = cli;
    const tree = cli.buildProgram(ctx, hooks, namedPath(argv));
    program = tree;
    if (argv[0] === "__complete") {
      const { complete } = await import("./completion/complete.ts");
      for (const candidate of complete(tree, argv.slice(1), ctx)) ctx.stdout.write(`${candidate}\n`);
      return 0;
    }
    tree.hook("preAction", async (_program, action) => {
      const config = (action.opts() as { config?: unknown }).config ?? (tree.opts() as { config?: unknown }).config;
      const path = commandPath(action);
      await beforeAction({
        path,
        args: [...action.args.filter((a) => !a.startsWith("-")), ...configArgs(config)],
        debug: Boolean(tree.opts().debug) || debugFromEnv(ctx.env),
        writes: WRITING_COMMANDS.has(path) && !(action.opts() as { dryRun?: unknown }).dryRun && !(action.opts() as { check?: unknown }).check,
      });
    });
    // `subs` alone, or a group alone (`subs mcp`, `subs agent`), asked for nothing wrong: its help,
    // as data on stdout, exit 0.
    const words = commandWords(argv);
    const onlyGlobal = argv.every((a, n) => words.includes(a) || a === "--debug" || a === "--config" || a.startsWith("--config=") || argv[n - 1] === "--config");
    const group = words.length === 1 ? tree.commands.find((c) => c.name() === words[0] && c.commands.length > 0) : undefined;
    if (onlyGlobal && (words.length === 0 || group)) {
      (group ?? tree).outputHelp();
      return 0;
    }
  }
  try {
    if (direct) {
      await beforeAction({ path: "subs mcp list", args: configArgs(direct.config), debug: direct.debug || debugFromEnv(ctx.env), writes: false });
      await mcpListAction(ctx, hooks, direct);
    } else await program!.parseAsync(argv as string[], { from: "user" });
    // Ctrl-C came while the command wound down (e.g. cut its revocations short): still 130.
    if (ctx.signal.aborted && !endsOnSignal) {
      ctx.stderr.write("Interrupted.\n");
      return 130;
    }
  } catch (error) {
    if (cli && error instanceof cli.CommanderError) {
      // --help and --version end here with exitCode 0; usage mistakes with 1, which is our 2.
      if (error.exitCode === 0) return 0;
      // --json promises an error object for every failure (docs/exit-codes.md, "Errors with `--json`").
      if (parseMistake && jsonFlagGiven(argv)) ctx.stdout.write(JSON.stringify({ error: parseMistakeJson(parseMistake) }, null, 2) + "\n");
      return 2;
    }
    // Ctrl-C: a signal, or a key where the terminal is in raw mode (a hidden value's question,
    // src/output/hidden-input.ts), which interrupts alike.
    const stopped = ctx.signal.aborted || (error instanceof SubsError && error.kind === "interrupted");
    if (stopped && !(error instanceof SubsError && error.kind !== "interrupted")) {
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

/** `--json` as a flag: before a `--`, after which every word is an argument. */
function jsonFlagGiven(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).includes("--json");
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

/** The usage error for a command typed from another tool's habits, else undefined. */
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
  lock: [],
  completion: [],
  schema: [],
  agent: ["list", "tools", "serve", "connect"],
  deployment: ["serve", "token", "person", "audit", "rotate-key", "backup", "check-key"],
};

/**
 * The command argv names, when that is all the parser needs to see: `subs mcp list --json`
 * builds `mcp list` alone instead of all eleven commands (about 2 ms of every start-up).
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



/** `--config` as `ran` repeats it in a hint: a value given, else nothing. */
const configArgs = (config: unknown) => (typeof config === "string" ? ["--config", shellWord(config)] : []);

/**
 * Every error ends with the next command to run. Most carry their own hint; for the
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
 * person anything. The others read, or write only a refreshed token on the way.
 */
export const WRITING_COMMANDS = new Set(["subs init", "subs mcp add", "subs mcp remove", "subs mcp import", "subs mcp login", "subs apply", "subs lock", "subs agent connect", "subs mcp connect"]);

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
    // shown, never interpreted, here whatever the code that built them did
    // (SECURITY.md, "What subs shows of server text").
    ctx.stderr.write(`${style.red("error:")} ${shown(error.message)}\n`);
    const hint = hintOf(error) ?? fallbackHint(error, ran);
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
          ? { code: error.code ?? error.kind, message: error.message, ...(hintOf(error) ? { hint: hintOf(error) } : {}), ...error.details }
          : { code: "unexpected", message: error instanceof Error ? error.message : String(error) };
    ctx.stdout.write(JSON.stringify({ error: body }, null, 2) + "\n");
  }
}
