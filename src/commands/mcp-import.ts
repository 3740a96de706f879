// `subs mcp import` (issue 15): reads the MCP servers other clients declare, prints what it adds
// (stderr; --json on stdout), and adds them (src/import/). Nothing a client's file holds as a
// secret is printed: the plan keeps header names, never their values.
import type { Context } from "../context.ts";
import { importServers, shownPath, type ImportResult } from "../import/import.ts";
import type { Addition, Note, Origin } from "../import/plan.ts";
import { writeJson } from "../output/json.ts";
import { shellWord } from "../output/shell-word.ts";
import { MARK, styleFor } from "../output/style.ts";
import { stderrReporter } from "../output/reporter.ts";
import { shown } from "../output/untrusted.ts";

export type McpImportOptions = { from?: string; dryRun: boolean; config?: string; json: boolean };

const CLIENT_NAMES: Record<string, string> = { claude: "Claude Code", codex: "Codex", cursor: "Cursor", vscode: "VS Code", gemini: "Gemini CLI" };

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

  for (const u of r.unreadable) out(`${style.yellow("warning:")} ${where(u.file)} ${u.problem}; its servers were not read`);
  if (r.read.length === 0) {
    const clients = [...new Set(r.looked.map((f) => CLIENT_NAMES[f.client] ?? f.client))].join(", ");
    if (r.unreadable.length === 0) out(`No MCP config of ${clients} found (looked for ${r.looked.map((f) => where(f.file)).join(", ")}). Nothing to import.`);
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
      const auth = a.token_env !== null ? `  token from $${shown(a.token_env)}` : "";
      out(`  ${style.green("+")} ${a.id.padEnd(width)}  ${shown(a.url)}${auth}  ${style.dim(`(${origin(a.from)})`)}`);
      for (const note of a.notes) out(`      ${style.yellow("!")} ${noteText(a, note)}`);
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
    for (const s of r.skipped) out(`  - ${origin(s.from)}: ${shown(s.message)}`);
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
  const login = r.added.filter((a) => a.token_env === null).map((a) => a.id);
  const unset = [...new Set(r.added.flatMap((a) => (a.token_env !== null && !ctx.env[a.token_env] ? [a.token_env] : [])))];
  const steps: string[] = [];
  if (unset.length > 0) steps.push(`export ${listed(unset.map((name) => shown(name)))}`);
  if (login.length > 0) steps.push(login.length > LISTED ? `\`subs mcp login --all${configArg}\`` : `\`subs mcp login ${login.join(" ")}${configArg}\``);
  steps.push(`\`subs mcp list${configArg}\``);
  out(`Next: ${steps.join(", then ")}.`);
}

/** How many names a "Next:" step lists before it says how many more there are. */
const LISTED = 8;
const listed = (names: readonly string[]) => (names.length > LISTED ? `${names.slice(0, LISTED).join(", ")} and ${names.length - LISTED} more` : names.join(", "));

function noteText(a: Addition, note: Note): string {
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
        : `header ${shown(note.header)} not imported: substructure.toml declares no custom headers`;
    case "auth_on_deployment":
      return `token from $${shown(note.env)} not written: with [remote] the deployment holds credentials; authorize there with ${login}`;
  }
}
