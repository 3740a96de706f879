// `subs agent connect <name> --to <client>` and `subs mcp connect <id> --to <client>`: one entry in
// an MCP client's own configuration that starts `subs agent serve <name>` (or `subs mcp proxy
// <id>`) with absolute paths and the variables its connections read (src/connect/clients.ts);
// `--remove` takes out exactly that. The rest of the client's file is left byte for byte. Never
// prints: the command renders the result.
import { lstatSync, mkdirSync, realpathSync, statSync, unlinkSync } from "node:fs";
import path from "node:path";
import { replaceFile } from "../config/edit.ts";
import { loadConfig } from "../config/load.ts";
import { findAgent, findConnection, findConnections } from "../config/lookup.ts";
import { remoteNotAllowed } from "../config/secret-pins.ts";
import { localVariables } from "../config/templates.ts";
import type { Context } from "../context.ts";
import { homeOf, shownPath } from "../clients/where.ts";
import { ConfigError, failed, refused, usage } from "../errors.ts";
import { readBounded, JSON_MAX_BYTES, TOML_MAX_BYTES } from "../clients/read.ts";
import { deploymentBase } from "../remote/client.ts";
import { CLIENTS, servedBy, type ClientSpec, type ConnectClient, type ConnectScope, type Endpoint, type Launch } from "./clients.ts";
import { maskJson, maskToml, unifiedDiff } from "./diff.ts";
import { deleteEntry, FileShapeError, putEntry, readEntry } from "./json-entry.ts";
import { deleteTable, putTable, readTable, type TomlValue } from "./toml-entry.ts";

export type ConnectOptions = {
  /** `agent connect` serves an agent; `mcp connect` proxies one connection. */
  kind: "agent" | "mcp";
  /** The agent's name or the connection's id. */
  name: string;
  to: ConnectClient;
  scope?: ConnectScope;
  config?: string;
  dryRun: boolean;
  remove: boolean;
  force: boolean;
};

export type ConnectAction = "added" | "updated" | "unchanged" | "removed";

export type ConnectResult = {
  client: ConnectClient;
  title: string;
  scope: ConnectScope;
  /** The client's file, absolute. */
  file: string;
  /** The entry's name in it. */
  name: string;
  /** What the entry runs: `subs agent serve <name>` or `subs mcp proxy <id>`; with [remote], the agent's endpoint on the deployment (`url`). */
  serves: { kind: "agent" | "mcp"; name: string; url?: string };
  action: ConnectAction;
  dryRun: boolean;
  /** What subs writes in the entry (null with --remove); keys a person added to it are kept in the file and not repeated here. */
  entry: Record<string, unknown> | null;
  /** The variables the entry passes to subs, or with [remote] the one the client reads the API token from (names only). */
  variables: string[];
  /** The change as a unified diff, values subs did not write masked (src/connect/diff.ts); "" when nothing changes. */
  diff: string;
  /** What the client needs besides the entry. */
  notes: string[];
};

/** A client's file changed between subs reading and writing it (the client saving its own state): the edit is done again. */
const ATTEMPTS = 3;

export async function connect(ctx: Pick<Context, "env" | "cwd" | "installation">, options: ConnectOptions): Promise<ConnectResult> {
  const spec = CLIENTS[options.to];
  const scope = options.scope ?? spec.defaultScope;
  if (!spec.scopes.includes(scope)) {
    throw usage(`${spec.title} has no ${scope} scope`, { hint: `use --scope ${spec.scopes.join(" or ")} (default: ${spec.defaultScope})` });
  }
  const words = options.kind === "agent" ? (["agent", "serve"] as const) : (["mcp", "proxy"] as const);
  // Taking the entry out needs nothing of the file: an agent since deleted can still be disconnected.
  const target = options.remove ? undefined : targetFor(ctx, options, spec, words);
  const launch = target && "launch" in target ? target.launch : undefined;
  const endpoint = target && "endpoint" in target ? target.endpoint : undefined;
  const place = spec.place(scope, ctx);
  if ("problem" in place) throw usage(place.problem, { hint: place.hint });
  const name = spec.entryName(options.name);
  const shownFile = shownPath(ctx.cwd, place.file, homeOf(ctx.env));
  for (let attempt = 1; ; attempt++) {
    const before = readClientText(place.file, shownFile, spec);
    const edit = edited(before, { spec, container: place.container, name, options, words, launch, endpoint, shownFile });
    const shownValues = new Set([
      name,
      options.name,
      ...words,
      ...(launch ? [...launch.args, launch.command, ...launch.variables] : []),
      ...(endpoint ? [endpoint.url, endpoint.tokenEnv] : []),
      ...stringsOf(edit.entry),
      ...edit.shown,
    ]);
    const diff = unifiedDiff(place.file, before, edit.after, spec.format === "toml" ? maskToml : maskJson, shownValues);
    const result: ConnectResult = {
      client: options.to,
      title: spec.title,
      scope,
      file: place.file,
      name,
      serves: { kind: options.kind, name: options.name, ...(endpoint ? { url: endpoint.url } : {}) },
      action: edit.action,
      dryRun: options.dryRun,
      entry: edit.entry,
      variables: launch?.variables ?? (endpoint ? [endpoint.tokenEnv] : []),
      diff,
      notes: launch ? (spec.notes?.(scope, launch) ?? []) : endpoint ? [remoteNote(spec, endpoint)] : [],
    };
    if (options.dryRun || before === edit.after) return result;
    if (writeClientText(place.file, before, edit.after, spec)) return result;
    if (attempt === ATTEMPTS) {
      throw refused(`${shownFile} kept changing while subs was editing it (${spec.title} saving its own state?); nothing was written`, {
        hint: "run the command again, or quit the client first",
        code: "client_file_changed",
      });
    }
  }
}

/**
 * What the entry reaches: without [remote], the command the client will run and the variables it
 * must pass, from the file, checked as `agent serve` checks it; with [remote], the agent's
 * endpoint on the deployment, which serves each agent (never a single connection).
 */
function targetFor(ctx: Pick<Context, "env" | "cwd" | "installation">, options: ConnectOptions, spec: ClientSpec, words: readonly [string, string]): { launch: Launch } | { endpoint: Endpoint } {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  if (config.remote) {
    if (options.kind === "mcp") {
      throw refused(`subs mcp connect works only without [remote]: with [remote] in ${config.displayPath} the deployment serves agents, not single connections`, {
        hint: "declare an agent with that connection and run `subs agent connect <name>`",
        code: "remote_unsupported",
      });
    }
    if (!spec.remoteEntry) {
      throw refused(`${spec.title} cannot read an API token from a variable for a remote server, and subs never writes a token in its file`, {
        hint: "connect another client, or use a substructure.toml without [remote] (--config)",
        code: "remote_unsupported",
      });
    }
    findAgent(config, options.name);
    const url = new URL(`v1/agents/${options.name}/mcp`, deploymentBase(config.remote));
    assertEndpointWritable(ctx.env, config, url);
    return { endpoint: { url: url.href, tokenEnv: config.remote.tokenEnv } };
  }
  return { launch: launchFor(ctx, { config, options, spec, words }) };
}

/**
 * The agent's endpoint, as the client will be given it, may be written: within SUBS_ALLOWED_REMOTE
 * as a whole (not only its origin), and holding no "$". Gemini CLI expands `$NAME` and `${NAME}`
 * in every string of its settings, url included; Claude Code, Cursor and VS Code expand `${…}`
 * (src/connect/clients.ts, per client): a `$` a file put in the url's path or host would make the
 * person's client send the value of any of their variables to that url. Refused for every client,
 * so that one file means the same whatever it is connected to; `%24`, which no client expands,
 * is the way to write a "$" the deployment's path really has. Query and fragment never reach the
 * endpoint (it is resolved under [remote].url as a directory).
 */
function assertEndpointWritable(env: Context["env"], config: ReturnType<typeof loadConfig>, url: URL): void {
  const remote = config.remote!;
  const refuse = (code: string, problem: { message: string; hint: string }) => {
    const { line, col } = config.locate(["remote", "url"]);
    throw new ConfigError([{ file: config.displayPath, line, col, ...problem }], { kind: "refused", code });
  };
  const pinned = remoteNotAllowed(env, remote, url);
  if (pinned) refuse("remote_not_allowed", pinned);
  if (url.href.includes("$")) {
    refuse("url_expands", {
      message: `[remote].url holds "$", and the endpoint subs would write is ${url.href}: MCP clients read "$" in their files as a variable (Gemini CLI: $NAME and \${NAME}; Claude Code, Cursor, VS Code: \${…}) and would send its value there`,
      hint: `take "$" out of [remote].url (a "$" the deployment's path really has is written %24)`,
    });
  }
}

type LaunchInput = { config: ReturnType<typeof loadConfig>; options: ConnectOptions; spec: ClientSpec; words: readonly [string, string] };

function launchFor(ctx: Pick<Context, "installation">, { config, options, spec, words }: LaunchInput): Launch {
  const connections = options.kind === "agent" ? findConnections(config, findAgent(config, options.name).mcp.map((m) => m.id)) : [findConnection(config, options.name)];
  // A local server's templates read the client's environment too: subs starts it from there.
  const variables = [
    ...new Set(connections.flatMap((c) => (c.process ? localVariables(c.process) : [c.auth?.tokenEnv, c.oauth?.clientSecretEnv].filter((v): v is string => v !== undefined)))),
  ];
  const self = ctx.installation?.();
  if (!self) throw failed("cannot tell which node and which subs are running");
  const launch: Launch = { command: self.node, args: [self.subs, ...words, options.name, "--config", config.path], variables };
  const expanded = spec.expands && [launch.command, ...launch.args].find((arg) => spec.expands!.test(arg));
  if (expanded) {
    throw refused(`${expanded} holds "$", which ${spec.title} would read as a variable and replace`, {
      hint: "move it to a path without \"$\" (or link it from one), then run this again",
      code: "path_expands",
    });
  }
  return launch;
}

/** The client's file as text, or undefined when it is not there. */
function readClientText(file: string, shownFile: string, spec: ClientSpec): string | undefined {
  const text = readBounded(file, spec.format === "toml" ? TOML_MAX_BYTES : JSON_MAX_BYTES);
  if (typeof text === "string") return text;
  if (text.missing) return undefined;
  throw refused(`${shownFile} ${text.problem}; nothing was written`, { code: "client_file_unreadable" });
}

type EditInput = {
  spec: ClientSpec;
  container: string[];
  name: string;
  options: ConnectOptions;
  words: readonly [string, string];
  launch: Launch | undefined;
  endpoint: Endpoint | undefined;
  shownFile: string;
};

/**
 * The file after the edit (undefined: deleted), what was done, the entry subs wrote, and the
 * strings of subs's entry already in the file (shown whole in the diff).
 */
function edited(
  before: string | undefined,
  input: EditInput,
): { after: string | undefined; action: ConnectAction; entry: Record<string, unknown> | null; shown: string[] } {
  const { spec, container, name, options, words, launch, endpoint } = input;
  const text = before ?? "";
  try {
    const existing = spec.format === "toml" ? readTable(text, name) : readEntry(text, container, name);
    const owner = existing ? servedBy(existing.value) : undefined;
    const ours = owner !== undefined && owner.words[0] === words[0] && owner.words[1] === words[1] && owner.name === options.name;
    if (existing && !ours && !options.force) throw notOurs(input, owner);
    const shown = existing && ours ? subsStrings(existing.value) : [];
    const read = (after: string) => (spec.format === "toml" ? readTable(after, name) : readEntry(after, container, name));
    if (options.remove) {
      if (!existing) return { after: before, action: "unchanged", entry: null, shown };
      const after = spec.format === "toml" ? deleteTable(text, name) : deleteEntry(text, container, name);
      if (after !== undefined && read(after) !== undefined) throw editFailed(input);
      // A file left empty was one connect created (or held nothing): it goes, as it was not there.
      return { after: after === undefined || after === "" ? undefined : after, action: "removed", entry: null, shown };
    }
    const wanted = endpoint ? spec.remoteEntry!(endpoint) : spec.entry(launch!);
    assertNothingExpands(spec, wanted, launch?.variables ?? [endpoint!.tokenEnv]);
    // From a local entry to a deployment's (or back) the transport changes: subs's old keys go.
    const sameKind = ours && Boolean(owner.remote) === Boolean(endpoint);
    const entry = existing && sameKind ? merged(existing.value, wanted) : wanted;
    // Codex: only subs's keys are set (its table's other keys and sub-tables stay as written).
    const after =
      spec.format === "toml"
        ? putTable(text, name, Object.fromEntries(Object.keys(wanted).map((key) => [key, entry[key] as TomlValue])), { replace: !sameKind })
        : putEntry(text, container, name, entry);
    // The text surgery checked by reading the result back: the file as the client will read it.
    const written = read(after)?.value;
    if (!isRecord(written) || Object.keys(wanted).some((key) => JSON.stringify(written[key]) !== JSON.stringify(entry[key]))) throw editFailed(input);
    return { after, action: !existing ? "added" : after === before ? "unchanged" : "updated", entry: wanted, shown };
  } catch (error) {
    if (error instanceof FileShapeError) {
      throw refused(`${input.shownFile} ${error.message}; nothing was written`, { hint: `fix it (${spec.title} could not read it either), then run this again`, code: "client_file_invalid" });
    }
    throw error;
  }
}

/**
 * No string of the entry subs writes holds text the client expands (ClientSpec.expands), but the
 * references to the variables it means to pass, whole (`$NAME`, `Bearer ${env:NAME}`). Paths and
 * the deployment's url are refused before with their own words (launchFor,
 * assertEndpointWritable); this holds the rule for every value, args, env, url and headers alike,
 * whatever changes later.
 */
function assertNothingExpands(spec: ClientSpec, entry: Record<string, unknown>, variables: readonly string[]): void {
  if (!spec.expands) return;
  const meant = new Set(spec.reference ? variables.flatMap((v) => [spec.reference!(v), `Bearer ${spec.reference!(v)}`]) : []);
  const found = stringsOf(entry).find((value) => !meant.has(value) && spec.expands!.test(value));
  if (found !== undefined) {
    throw failed(`subs would write ${JSON.stringify(found)}, which ${spec.title} would read as a variable and replace; nothing was written`, { hint: "report this: subs writes no such text but its own variable references" });
  }
}

/** A bug of subs's, not the file's: said as such, nothing written. */
const editFailed = (input: EditInput) => failed(`subs could not edit ${input.shownFile} safely; nothing was written`, { hint: "edit the file by hand (`--dry-run` shows the entry), and report this" });

function notOurs(input: EditInput, owner: ReturnType<typeof servedBy>) {
  const { spec, name, options } = input;
  const what = owner ? `, which runs \`subs ${owner.words.join(" ")} ${owner.name}\`` : " that subs did not write";
  const verb = options.remove ? "remove" : "replace";
  return refused(`${input.shownFile} already has an entry "${name}"${what}`, {
    hint: `pass --force to ${verb} it${options.remove ? "" : `, or remove it in ${spec.title} first`}`,
    code: "entry_exists",
  });
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * subs's entry as it should be now, from what the file holds: subs's keys set, in their place;
 * keys a person added kept (a timeout, `trust`, an approval mode); variables a person added to
 * `env` or `env_vars` kept beside subs's own.
 */
function merged(current: unknown, wanted: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const now = isRecord(current) ? current : {};
  for (const [key, value] of Object.entries(now)) {
    if (!(key in wanted)) out[key] = value;
    else if (key === "env" && isRecord(value) && isRecord(wanted.env)) out[key] = { ...value, ...wanted.env };
    else if (key === "env_vars" && Array.isArray(value) && Array.isArray(wanted.env_vars)) {
      // Codex names a variable as "NAME" or as { name = "NAME", source = … }.
      const named = new Set(value.map((v) => (isRecord(v) ? v.name : v)));
      out[key] = [...value, ...wanted.env_vars.filter((v) => !named.has(v))];
    }
    else out[key] = wanted[key];
  }
  for (const [key, value] of Object.entries(wanted)) if (!(key in out)) out[key] = value;
  return out;
}

/** The strings of what subs writes in an entry found in the file: its command, arguments and variable references. */
function subsStrings(entry: unknown): string[] {
  if (!isRecord(entry)) return [];
  const references = isRecord(entry.env) ? Object.entries(entry.env).flatMap(([name, value]) => (isReference(name, value) ? [value as string] : [])) : [];
  const endpoint = [...stringsOf(entry.url), ...stringsOf(entry.httpUrl), ...stringsOf(entry.bearer_token_env_var), ...(isRecord(entry.headers) ? stringsOf(entry.headers.Authorization) : [])];
  return [...stringsOf(entry.command), ...stringsOf(entry.args), ...stringsOf(entry.env_vars), ...stringsOf(entry.type), ...references, ...endpoint];
}

/** The token the client sends: of a role the deployment lets call agents. */
function remoteNote(spec: ClientSpec, { tokenEnv }: Endpoint): string {
  return `${spec.title} sends $${tokenEnv} to the deployment: set it in its environment to a \`use\` (or \`admin\`) token of the deployment (\`subs deployment token create --role use\`); an \`apply\` or \`read\` token is refused`;
}

/** `$NAME`, `${NAME}` or `${env:NAME}` for the variable `name` itself. */
const isReference = (name: string, value: unknown) => typeof value === "string" && [`$${name}`, `\${${name}}`, `\${env:${name}}`].includes(value);

/** The strings in an entry subs wrote (shown whole in the diff). */
function stringsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (isRecord(value)) return Object.values(value).flatMap(stringsOf);
  return [];
}

/**
 * Writes `after` over the client's file (undefined: deletes it), unless it no longer holds
 * `before`: false then, nothing written. The file keeps its mode and owner; a symlink is written
 * where it points; a new file is 0600 where the client's own is, else gets the usual mode.
 */
function writeClientText(file: string, before: string | undefined, after: string | undefined, spec: ClientSpec): boolean {
  try {
    if (before === undefined) {
      if (lstatSync(file, { throwIfNoEntry: false }) !== undefined) return false;
      if (after === undefined) return true;
      mkdirSync(path.dirname(file), { recursive: true });
      replaceFile(file, after, spec.privateFile ? { mode: 0o600 } : {});
      return true;
    }
    const target = realpathSync(file);
    if (readBounded(target, spec.format === "toml" ? TOML_MAX_BYTES : JSON_MAX_BYTES) !== before) return false;
    if (after === undefined) {
      unlinkSync(target);
      return true;
    }
    const stat = statSync(target);
    replaceFile(target, after, { mode: stat.mode & 0o7777, owner: { uid: stat.uid, gid: stat.gid } });
    return true;
  } catch (error) {
    throw usage(`cannot write ${file}: ${(error as NodeJS.ErrnoException).code ?? "error"}; nothing was written`);
  }
}
