// `subs deployment serve`: its declaration; the run code is src/deployment/serve.ts, loaded when it runs.
import { Option } from "commander";
import { examples, type CommandDeclaration } from "../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../options.ts";

export const deploymentServe: CommandDeclaration = {
  name: "serve",
  declare(command, { ctx, servesUntilStopped, ownRedaction }) {
    settings(command, true)
      .description(
        "Serve the deployment protocol (docs/deployment-protocol.md) and each declared agent's tools over MCP at <public-url>/v1/agents/<name>/mcp, with server-side OAuth on the public URL and credentials encrypted at rest. Every setting also reads the environment variable named in its help. Ends on Ctrl-C or SIGTERM after in-flight requests finish.",
      )
      .addOption(new Option("--listen <[host:]port>", "where to listen (env SUBS_DEPLOYMENT_LISTEN; default 127.0.0.1:8080; 0.0.0.0:8080 behind a proxy)"))
      .addOption(new Option("--public-url <url>", "the URL browsers and clients reach it at, https unless loopback (env SUBS_DEPLOYMENT_PUBLIC_URL; default: the loopback address it listens on)"))
      .addOption(new Option("--catalog <file>", "allow only the MCP server URLs in this file, one per line (env SUBS_DEPLOYMENT_CATALOG)"))
      .addOption(
        new Option(
          "--client-secrets <file>",
          'secrets of confidential pre-registered OAuth clients, each sent only to the server that issued it: {"<client_id>": {"issuer": "<url>", "secret": "…"}}, mode 0600 (env SUBS_DEPLOYMENT_CLIENT_SECRETS)',
        ),
      )
      .addOption(
        new Option(
          "--allow-private <list>",
          "loopback, private and special-use addresses it may send requests to, beyond public ones: addresses or CIDR blocks, each with an optional :port, or all (env SUBS_DEPLOYMENT_ALLOW_PRIVATE; default: all when the public URL is loopback, else none)",
        ),
      )
      .addOption(new Option("--audit-retention <duration>", "how long the record of tool calls and changes keeps an entry: a number and s, m, h or d (env SUBS_DEPLOYMENT_AUDIT_RETENTION; default 90d)"))
      .addHelpText(
        "after",
        "\nLimits, from the environment (docs/deployment-server.md, \"Limits\"):\n" +
          "  SUBS_DEPLOYMENT_MAX_CONNECTIONS         open connections (default 1000): past it a new one\n" +
          "                                          displaces the oldest that carried no request with a\n" +
          "                                          valid token; one with no whole request in 5 s is closed\n" +
          "  SUBS_DEPLOYMENT_MAX_SESSIONS_PER_TOKEN  agents' MCP sessions of one API token, on all agents\n" +
          "                                          and processes together (default 16)\n" +
          examples([
          "subs deployment serve --public-url http://127.0.0.1:8080 --key-file ./deployment.key",
          "SUBS_DEPLOYMENT_PUBLIC_URL=https://subs.example.com subs deployment serve --listen 127.0.0.1:8080",
        ]),
      )
      .action(async (opts: DeploymentFlags) => {
        servesUntilStopped?.();
        const { deploymentServeCommand } = await import("../../../deployment/serve.ts");
        await deploymentServeCommand(ownRedaction?.() ?? ctx, { flags: flagsOf(opts) });
      });
  },
};
