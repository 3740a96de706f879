// `subs agent serve`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parseSeconds } from "../../flags.ts";
import { configOption, examples, httpOptions, httpTransportOptions, requestTimeoutOption, type CommandDeclaration, type HttpFlags } from "../../options.ts";

export const agentServe: CommandDeclaration = {
  name: "serve",
  declare(command, { ctx, servesUntilStopped, configOf }) {
    httpOptions(
      command
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
        .addOption(requestTimeoutOption("how long a call may go without an answer or a progress report")),
    )
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
        const { agentServeCommand } = await import("./run.ts");
        await agentServeCommand(ctx, { agent: name, ...configOf(opts), timeoutSeconds, requestTimeoutSeconds, ...transport });
      });
  },
};
