// Builds the command tree. Each action parses its flags into a typed options object and loads its
// command module only when it runs (CONTRIBUTING.md, rule 7). Loaded by run.ts for every run but
// the everyday `subs mcp list`, which needs no parser.
import { Command, Help, Option } from "commander";
import type { Context } from "./context.ts";
import { usage } from "./errors.ts";
import { debugFromEnv, mcpListAction, parseCount, parseMistakeText, parsePort, parseSeconds, type ProgramHooks } from "./run.ts";
import { VERSION } from "./version.ts";

export { CommanderError } from "commander";
// The run and the words it knows, for whoever imported them from here.
export { COMMAND_TREE, habitFor, namedPath, run } from "./run.ts";

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
      .action((opts: { config?: string; json?: boolean; check?: boolean; timeout: string }) => mcpListAction(ctx, { setJson, setExitCode }, { ...opts, ...configOf(opts) }));
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

export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** Copies a key only when set, so options objects never carry `undefined` for absent flags. */
function pick<T extends object, K extends keyof T>(obj: T, key: K): Pick<T, K> | Record<string, never> {
  return obj[key] === undefined ? {} : ({ [key]: obj[key] } as Pick<T, K>);
}

