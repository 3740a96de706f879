// `subs mcp import`: reads the MCP servers other clients declare, prints what it adds
// (stderr; --json on stdout), and adds them (src/import/). Nothing a client's file holds as a
// secret is printed: the plan keeps header names, never their values.
import path from "node:path";
import type { Context } from "../../../context.ts";
import { importServers, shownPath, type ImportResult } from "../../../import/import.ts";
import { templateNames } from "../../../config/templates.ts";
import { disabledMessage, type Addition, type Note, type Origin } from "../../../import/plan.ts";
import { CLIENT_TITLES } from "../../../import/types.ts";
import { writeJson } from "../../../output/json.ts";
import { possessive } from "../../../text/possessive.ts";
import { shellWord } from "../../../output/shell-word.ts";
import { MARK, styleFor } from "../../../output/style.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { shown } from "../../../output/untrusted.ts";

export type McpImportOptions = { from?: string; dryRun: boolean; config?: string; json: boolean };

export async function mcpImportCommand(ctx: Context, options: McpImportOptions): Promise<void> {
  const result = await importServers(
    ctx,
    { ...(options.from !== undefined ? { from: options.from } : {}), ...(options.config !== undefined ? { config: options.config } : {}), dryRun: options.dryRun },
    stderrReporter(ctx),
  );
  if (options.json) writeJson(ctx.stdout, jsonOf(result));
  renderReport(ctx, result, options);
}

/** The --json document (docs/commands.md, `subs mcp import`): paths absolute, no header value anywhere. */
export function jsonOf(r: ImportResult) {
  return {
    config: r.config.path,
    created: r.config.created,
    dry_run: r.dryRun,
    written: r.written,
    read: r.read,
    unreadable: r.unreadable,
    added: r.added,
    already_declared: r.already_declared,
    skipped: r.skipped,
  };
}

function renderReport(ctx: Context, r: ImportResult, options: McpImportOptions): void {
  const style = styleFor(ctx.stderrColor);
  const home = ctx.env.HOME || ctx.env.USERPROFILE || undefined;
  const where = (file: string) => shown(shownPath(ctx.cwd, file, home));
  const origin = (from: Origin) => `${from.client} ${where(from.file)}: "${shown(from.name)}"`;
  const out = (line = "") => ctx.stderr.write(`${line}\n`);

  for (const u of r.unreadable) {
    const lost = u.role === "switches" ? `which servers it turns off in ${CLIENT_TITLES[u.client]} was not read` : "its servers were not read";
    out(`${style.yellow("warning:")} ${where(u.file)} ${u.problem}; ${lost}`);
  }
  if (r.read.length === 0) {
    const clients = [...new Set(r.looked.map((f) => CLIENT_TITLES[f.client] ?? f.client))].join(", ");
    if (r.unreadable.length === 0) out(`No MCP config of ${clients} found (looked for ${lookedFor(ctx.cwd, r.looked, where)}). Nothing to import.`);
    return;
  }
  out(`Read ${r.read.map((f) => `${where(f.file)} (${f.client}, ${f.servers} server${f.servers === 1 ? "" : "s"})`).join(", ")}.`);
  if (r.added.length + r.already_declared.length + r.skipped.length === 0) {
    out("No MCP servers in them. Nothing to import.");
    return;
  }
  const target = shown(r.config.displayPath);
  if (r.added.length > 0) {
    out();
    out(`${r.dryRun ? "Would add to" : "Adding to"} ${target}${r.config.created ? " (a new file, as `subs init` writes it)" : ""}:`);
    const width = Math.max(...r.added.map((a) => a.id.length));
    for (const a of r.added) {
      const auth = a.token_env !== null ? `  token from $${shown(a.token_env)}` : a.oauth?.client_id !== undefined ? `  OAuth client ${shown(a.oauth.client_id)}` : "";
      const where = a.url !== null ? shown(a.url) : `local: ${shown([a.command!, ...a.args].join(" "))}`;
      out(`  ${style.green("+")} ${a.id.padEnd(width)}  ${where}${auth}  ${style.dim(`(${origin(a.from)})`)}`);
      for (const note of a.notes) out(`      ${style.yellow("!")} ${noteText(a, note, r.config.remote)}`);
    }
  }
  if (r.already_declared.length > 0) {
    out();
    out("Already declared:");
    for (const d of r.already_declared) {
      const by = d.by === "file" ? `[mcp.${d.id}] in ${target}` : `imported above as ${d.id}`;
      out(`  = ${origin(d.from)}: its url is ${by}`);
    }
  }
  if (r.skipped.length > 0) {
    out();
    out("Skipped:");
    for (const s of r.skipped) out(`  - ${origin(s.from)}: ${s.disabled_in ? disabledMessage(s.from.client, { file: s.disabled_in.file, setting: shown(s.disabled_in.setting) }, where) : shown(s.message)}`);
  }
  out();
  if (r.added.length === 0) {
    out("Nothing to add.");
    return;
  }
  const n = `${r.added.length} connection${r.added.length === 1 ? "" : "s"}`;
  if (r.dryRun) {
    out(`Dry run: ${n} would be added; nothing was written.`);
    return;
  }
  out(`${style.green(MARK.success)} ${r.config.created ? `Wrote ${target} with` : `Added`} ${n}${r.config.created ? "" : ` to ${target}`}.`);
  const configArg = options.config !== undefined ? ` --config ${shellWord(options.config)}` : "";
  // A local server needs no login; what it, or a header, reads must be exported — but with
  // [remote] a header's variables are the deployment's, handed over by the login.
  const login = r.added.filter((a) => a.token_env === null && a.url !== null).map((a) => a.id);
  const read = (a: (typeof r.added)[number]) => [
    ...(a.token_env !== null ? [a.token_env] : []),
    ...[...a.args, ...Object.values(a.env), ...(r.config.remote ? [] : Object.values(a.headers))].flatMap(templateNames),
  ];
  const unset = [...new Set(r.added.flatMap((a) => read(a).filter((name) => !ctx.env[name])))];
  const steps: string[] = [];
  if (unset.length > 0) steps.push(`export ${listed(unset.map((name) => shown(name)))}`);
  if (login.length > 0) steps.push(login.length > LISTED ? `\`subs mcp login --all${configArg}\`` : `\`subs mcp login ${login.join(" ")}${configArg}\``);
  steps.push(`\`subs mcp list${configArg}\``);
  out(`Next: ${steps.join(", then ")}.`);
}

/** The files looked for, with the `.mcp.json` of every directory above the working one said once. */
function lookedFor(cwd: string, looked: ImportResult["looked"], where: (file: string) => string): string {
  const here = path.join(cwd, ".mcp.json");
  const above = (file: string) => {
    const up = path.relative(path.dirname(file), cwd);
    return path.basename(file) === ".mcp.json" && file !== here && up !== "" && !up.startsWith("..") && !path.isAbsolute(up);
  };
  const anyAbove = looked.some((f) => f.client === "claude" && above(f.file));
  return looked
    .filter((f) => !(f.client === "claude" && above(f.file)))
    .map((f) => (anyAbove && f.file === here ? `${where(f.file)} (and in every directory above)` : where(f.file)))
    .join(", ");
}

/** How many names a "Next:" step lists before it says how many more there are. */
const LISTED = 8;
const listed = (names: readonly string[]) => (names.length > LISTED ? `${names.slice(0, LISTED).join(", ")} and ${names.length - LISTED} more` : names.join(", "));

/** The clients' settings that choose a server's tools: subs chooses them per agent. */
const TOOL_FILTERS = new Set(["includeTools", "excludeTools", "enabled_tools", "disabled_tools"]);

/** `remote`: the file has [remote], whose deployment holds the values of header templates (docs/remote.md). */
function noteText(a: Addition, note: Note, remote: boolean): string {
  const client = CLIENT_TITLES[a.from.client];
  const auth = (env: string) => `add \`auth = { token_env = "${env}" }\` to [mcp.${a.id}]`;
  const login = `\`subs mcp login ${a.id}\``;
  switch (note.kind) {
    case "secret_left_out":
      return `${shown(note.header)} held a token written in the file: not copied. Export it as ${note.suggested_env} and ${auth(note.suggested_env)}, or log in with OAuth: ${login}`;
    case "prompted_input":
      return `VS Code prompts for ${shown(note.header)} (\${input:${shown(note.input)}}); subs reads a variable: export ${note.suggested_env} and ${auth(note.suggested_env)}, or ${login}`;
    case "header_from_env":
      return `${shown(note.header)} is the whole of $${shown(note.env)}; subs sends "Bearer <token>": export the token alone as ${note.suggested_env} and ${auth(note.suggested_env)}, or ${login}`;
    case "header_left_out":
      return note.credential
        ? `${shown(note.header)} carries a credential subs cannot send (it sends only Authorization: Bearer): left out; try ${login}`
        : `header ${shown(note.header)} not imported: subs sets it itself, or its name is not one a file can declare`;
    case "auth_on_deployment":
      return `token from $${shown(note.env)} not written: with [remote] the deployment holds credentials; authorize there with ${login}`;
    case "client_secret_left_out":
      return `${client} holds the OAuth client's secret written in its file: not copied. Export it as ${note.suggested_env} and add \`client_secret_env = "${note.suggested_env}"\` to the \`oauth\` of [mcp.${a.id}]`;
    case "client_secret_in_client_store":
      return `if you gave ${client} a client secret for it, ${client} keeps it in its own credential store, which subs does not read: export it as ${note.suggested_env} and add \`client_secret_env = "${note.suggested_env}"\` to the \`oauth\` of [mcp.${a.id}]`;
    case "client_secret_on_deployment":
      return "the OAuth client's secret, if it has one, is not written: with [remote] the deployment's operator sets it (docs/remote.md)";
    case "redirect_uri":
      return note.port !== null
        ? `the OAuth client is registered for ${client}, which logs in on port ${note.port}: run \`subs mcp login ${a.id} --port ${note.port}\`; if the server compares redirect URIs exactly, also register http://127.0.0.1:${note.port}/callback with the client`
        : `the OAuth client is registered with ${possessive(client)} own redirect URI: register http://127.0.0.1:<port>/callback with the client, then run \`subs mcp login ${a.id} --port <port>\``;
    case "oauth_left_out":
      return note.why === "static_token"
        ? `its OAuth client settings not written: the connection sends a token from a variable, and a connection uses a token or OAuth, not both`
        : note.what === "scopes"
          ? `its OAuth scopes not written: one is not a valid scope (RFC 6749 §3.3); add \`scopes = [...]\` to the \`oauth\` of [mcp.${a.id}] by hand`
          : `its OAuth client id not written: it uses a variable or holds a control character; add \`client_id = "..."\` to the \`oauth\` of [mcp.${a.id}] by hand`;
    case "headers_helper":
      return `${client} runs a command for its headers (${shown(note.setting)}), which subs does not: imported without them. If the server takes a token, export it as ${note.suggested_env} and ${auth(note.suggested_env)}; else log in with OAuth: ${login}`;
    case "value_left_out": {
      const what = note.where === "env" ? `$${shown(note.name)} of its env` : note.where === "arg" ? `argument ${note.name}` : `header ${shown(note.name)}`;
      const why = note.input !== undefined ? `VS Code prompts for it (\${input:${shown(note.input)}})` : `${client} holds its value written in its file`;
      // With [remote], a header's value is handed to the deployment; a local server's is not run there.
      const next = remote && note.where === "header" ? `hand its value to the deployment with ${login}` : `export ${note.suggested_env}`;
      return `${what}: ${why}; not copied: the entry reads \${${note.suggested_env}}: ${next}`;
    }
    case "default_dropped":
      return `${note.where === "env" ? `$${shown(note.name)} of its env` : note.where === "arg" ? `argument ${note.name}` : `header ${shown(note.name)}`}: its \${NAME:-default} is \${NAME} here (subs has no defaults): the variable must be set`;
    case "setting_left_out":
      return TOOL_FILTERS.has(note.setting)
        ? `${shown(note.setting)} (${client}) not imported: filter the tools per agent instead, \`mcp = [{ id = "${a.id}", tools = { include = [...] } }]\` in its [agent.*]`
        : `${shown(note.setting)} (${client}) not imported: substructure.toml has no such setting`;
  }
}
