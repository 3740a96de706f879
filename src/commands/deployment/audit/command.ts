// `subs deployment audit`: its declaration; the run code is ./run.ts beside it.
import { Option } from "commander";
import { usage } from "../../../errors.ts";
import { configOption, examples, jsonOption, type CommandDeclaration } from "../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../options.ts";

export type AuditFlags = DeploymentFlags & {
  url?: string;
  config?: string;
  json?: boolean;
  follow?: boolean;
  since?: string;
  until?: string;
  person?: string;
  agent?: string;
  connection?: string;
  kind?: string;
  after?: string;
  limit?: string;
};

export const audit: CommandDeclaration = {
  name: "audit",
  declare(command, { ctx, setJson, configOf }) {
    settings(command, false, "on the deployment's host: its store, the data directory or postgres:// URL `subs deployment serve` runs with (env SUBS_DEPLOYMENT_STORE); one that does not exist is refused")
      .description("Read the deployment's record: every tool call its agents served (who, which tool, how it ended, how long; never arguments or results) and every change (apply, declarations, consents, tokens, key rotation), oldest first.")
      .addOption(new Option("--url <url>", "the deployment's URL: read over its API, with a read or admin token in $SUBSTRUCTURE_TOKEN (default: [remote].url of substructure.toml, with its token_env)"))
      .addOption(configOption())
      .addOption(new Option("--since <time>", "entries at or after this time: RFC 3339 (2026-12-06T09:00:00Z) or how far back (30m, 12h, 7d)"))
      .addOption(new Option("--until <time>", "entries before this time, in the same forms"))
      .addOption(new Option("--person <name>", "only this person's calls and changes"))
      .addOption(new Option("--agent <name>", "only this agent's"))
      .addOption(new Option("--connection <id>", "only this connection's"))
      .addOption(new Option("--kind <kind>", "only this kind: tool.call, apply, connection.declare, connection.delete, agent.declare, agent.delete, secret.set, secret.delete, consent.start, consent.finish, token.create, token.revoke, person.remove, key.rotate"))
      .addOption(new Option("--after <cursor>", "the entries after this cursor (a page's `next`, an entry's `cursor`)"))
      .addOption(new Option("--limit <n>", "at most this many entries (1-1000; default 100); the next page's cursor goes to stderr"))
      .addOption(new Option("--follow", "then print new entries as they are written, until Ctrl-C (asks every 2 s)"))
      .addOption(jsonOption())
      .addHelpText(
        "after",
        examples([
          "subs deployment audit --since 1d",
          "subs deployment audit --person alice --kind tool.call --json",
          "subs deployment audit --follow --url https://subs.example.com",
          "subs deployment audit --store /var/lib/subs --since 7d   # on the host",
        ]),
      )
      .action(async (opts: AuditFlags) => {
        setJson(Boolean(opts.json));
        const { auditCommand } = await import("./run.ts");
        await auditCommand(ctx, {
          target: { ...(opts.url !== undefined ? { url: opts.url } : {}), ...configOf(opts), flags: flagsOf(opts) },
          request: {
            ...Object.fromEntries((["since", "until", "person", "agent", "connection", "kind", "after"] as const).flatMap((k) => (opts[k] !== undefined ? [[k, opts[k]]] : []))),
            ...(opts.limit !== undefined ? { limit: limitOf(opts.limit) } : {}),
          },
          json: Boolean(opts.json),
          follow: Boolean(opts.follow),
        });
      });
  },
};

/** --limit: a whole number from 1 to 1000 (the deployment's largest page). */
function limitOf(text: string): number {
  if (!/^[1-9][0-9]{0,3}$/.test(text) || Number(text) > 1000) throw usage(`--limit ${JSON.stringify(text)}: a whole number from 1 to 1000`);
  return Number(text);
}
