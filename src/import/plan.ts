// Deciding what `subs mcp import` declares: for each server found, a connection to add,
// one the file already has, or a reason to skip it; never a secret carried over. Pure: the caller
// reads the files before and writes after.
import { ENV_NAME_PATTERN, idProblem, isSecretKey, newUrlProblem } from "../config/schema.ts";
import { firstUnsafe } from "../text/unsafe.ts";
import { CLIENT_TITLES, type ClientName, type FoundOAuth, type FoundServer, type Header, type LeftOut, type Scope } from "./types.ts";
import { asTemplate, bearerPart, looksLikeCredential, referenceIn, suggestedVariable } from "./values.ts";
import { envNameFor, HEADER_NAME_PATTERN, reservedHeaderProblem, SECRET_NAME } from "../config/templates.ts";
import path from "node:path";

/** Where a server was found: the client, its file, and the server's name there. */
export type Origin = { client: ClientName; scope: Scope; file: string; name: string };

/** Something about an added server a person has to know or do (never a header's value). */
export type Note =
  /** A token written into the client's file: left out; export it as `suggested_env`. */
  | { kind: "secret_left_out"; header: string; suggested_env: string }
  /** VS Code asks for the value (`${input:id}`) each time; subs reads a variable instead. */
  | { kind: "prompted_input"; header: string; input: string; suggested_env: string }
  /** The whole Authorization header comes from `env` (e.g. "Bearer …"); subs sends `Bearer <token_env>`. */
  | { kind: "header_from_env"; header: string; env: string; suggested_env: string }
  /** A header substructure.toml has no key for (it declares only `auth.token_env`, sent as a bearer token). */
  | { kind: "header_left_out"; header: string; credential: boolean }
  /** Under [remote] the deployment holds credentials: `env` is not written as `auth` (src/config/remote-rules.ts). */
  | { kind: "auth_on_deployment"; env: string }
  /** A pre-registered client's secret written into the client's file: left out; export it as `suggested_env`. */
  | { kind: "client_secret_left_out"; suggested_env: string }
  /** The client keeps a pre-registered client's secret, if it was given one, in its own credential store (Claude Code), which subs does not read. */
  | { kind: "client_secret_in_client_store"; suggested_env: string }
  /** Under [remote] a client secret is set on the deployment by its operator, never written (docs/remote.md). */
  | { kind: "client_secret_on_deployment" }
  /** The pre-registered client is registered with the client's own redirect URI (`port`: the one it pins); subs's is http://127.0.0.1:<port>/callback. */
  | { kind: "redirect_uri"; port: number | null }
  /** Part of the pre-registered client not written: its id or scopes are not literal values the file can hold, or the connection uses a static token. */
  | { kind: "oauth_left_out"; what: "client_id" | "scopes" | "client"; why: "not_a_literal" | "invalid_scope" | "static_token" }
  /** The client runs a command for this server's headers (Claude Code's `headersHelper`, Codex's `http_headers_helper`); subs does not. */
  | { kind: "headers_helper"; setting: string; suggested_env: string }
  /** A per-server setting substructure.toml has no key for, named as the client's file names it. */
  | { kind: "setting_left_out"; setting: string }
  /**
   * A value of a local server's `env` or `args`, or of a header, that the client's file holds as it
   * is and that looks like a secret (or VS Code prompts for: `input`): not copied; the entry reads
   * `${suggested_env}` instead, to be exported.
   */
  | { kind: "value_left_out"; where: "env" | "arg" | "header"; name: string; suggested_env: string; input?: string }
  /** `${NAME:-default}`: subs has no defaults; the entry reads `${NAME}`, which must be set. */
  | { kind: "default_dropped"; where: "env" | "arg" | "header"; name: string };

/** What `oauth = { … }` the addition declares (`subs mcp add --client-id`'s keys), or null. */
export type AddedOAuth = { client_id?: string; client_secret_env?: string; scopes?: string[] };

export type Addition = {
  id: string;
  /** Null for a local server. */
  url: string | null;
  /** A local server's program, args, env and cwd as the entry declares them; null/empty for a server at a url. */
  command: string | null;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
  /** Headers sent to `url`, as templates (src/config/templates.ts). */
  headers: Record<string, string>;
  transport: "http" | "sse" | null;
  token_env: string | null;
  oauth: AddedOAuth | null;
  from: Origin;
  notes: Note[];
};
export type AlreadyDeclared = { id: string; url: string | null; command?: string; from: Origin; by: "file" | "import" };
/** Why a server is not imported (docs/commands.md lists them: `--json` consumers match on them). */
export type SkipReason =
  | "stdio"
  | "command_has_variable"
  | "disabled"
  | "unrecognized"
  | "unsupported_transport"
  | "invalid_url"
  | "url_has_variable"
  | "url_has_credential"
  | "url_path_looks_secret"
  | "invalid_variable";
/** Where a server skipped as `disabled` is turned off: the setting, in the client's words, and the file holding it. */
export type DisabledIn = { file: string; setting: string };
export type Skipped = { from: Origin; reason: SkipReason; message: string; disabled_in?: DisabledIn };
export type Plan = { added: Addition[]; already_declared: AlreadyDeclared[]; skipped: Skipped[] };

type Found = { origin: Omit<Origin, "name">; servers: readonly FoundServer[] };

export type PlanInput = {
  found: readonly Found[];
  /** The file's connections (a local server's: its `process`). */
  existing: ReadonlyArray<{ id: string; url?: string | undefined; process?: { command: string; args: readonly string[] } | undefined }>;
  /** The file has [remote]: no `auth` is written. */
  remote: boolean;
  /** Learns every literal value read, so the run's output scrubs it should anything quote it (src/secrets.ts). */
  secret: (value: string) => void;
};

export function planImport(input: PlanInput): Plan {
  const planner = createPlanner(input);
  for (const found of input.found) planner.add(found);
  return planner.plan;
}

/**
 * A plan built one client file at a time (`add`), so the caller can look at Ctrl-C between files;
 * what was added before decides what comes after (ids taken, urls already imported).
 */
export function createPlanner(input: Omit<PlanInput, "found">): { plan: Plan; add: (found: Found) => void } {
  const plan: Plan = { added: [], already_declared: [], skipped: [] };
  const ids = new Set(input.existing.map((c) => c.id));
  const urls = new Map<string, { id: string; by: "file" | "import" }>(input.existing.flatMap((c) => (c.url !== undefined ? [[sameUrl(c.url), { id: c.id, by: "file" as const }]] : [])));
  const programs = new Map<string, { id: string; by: "file" | "import" }>(input.existing.flatMap((c) => (c.process ? [[programKey(c.process), { id: c.id, by: "file" as const }]] : [])));
  const add = ({ origin: where, servers }: Found) => {
    for (const server of servers) {
      const from: Origin = { ...where, name: server.name };
      if (server.kind === "stdio") {
        if (input.remote) {
          plan.skipped.push({ from, reason: "stdio", message: "a local (stdio) server runs on the machine that starts it; the deployment in [remote] cannot run it" });
          continue;
        }
        if (asTemplate(server.command) !== undefined || firstUnsafe(server.command)) {
          plan.skipped.push({ from, reason: "command_has_variable", message: "its command uses a variable or holds a control character; substructure.toml runs a literal command" });
          continue;
        }
        if (server.disabled) {
          const disabledIn = { file: server.disabled.file ?? from.file, setting: server.disabled.setting };
          plan.skipped.push({ from, reason: "disabled", message: disabledMessage(from.client, disabledIn), disabled_in: disabledIn });
          continue;
        }
        const notes: Note[] = [];
        const badName = Object.keys(server.env).find((name) => !ENV_NAME_PATTERN.test(name) || isSecretKey(name));
        if (badName !== undefined) {
          plan.skipped.push({ from, reason: "invalid_variable", message: "a name in its env is not a variable name subs can pass (letters, digits and '_')" });
          continue;
        }
        const id = uniqueId(validId(server.name), ids);
        const args = server.args.map((arg, n) => importedValue(arg, { where: "arg", name: String(n + 1), secretName: false, suggested: suggestedVariable(id, undefined, `ARG_${n + 1}`) }, notes, input.secret));
        const env: Record<string, string> = {};
        for (const [name, value] of Object.entries(server.env)) env[name] = importedValue(value, { where: "env", name, secretName: SECRET_NAME.test(name) || looksLikeCredential(name), suggested: name }, notes, input.secret);
        const known = programs.get(programKey({ command: server.command, args }));
        if (known) {
          plan.already_declared.push({ id: known.id, url: null, command: server.command, from, by: known.by });
          continue;
        }
        ids.add(id);
        programs.set(programKey({ command: server.command, args }), { id, by: "import" });
        const cwd = server.cwd !== undefined && !firstUnsafe(server.cwd) && asTemplate(server.cwd) === undefined ? path.resolve(path.dirname(from.file), server.cwd) : null;
        if (server.cwd !== undefined && cwd === null) notes.push({ kind: "setting_left_out", setting: "cwd" });
        notes.push(...(server.leftOut ?? []).map((left) => leftOutNote(id, left)));
        plan.added.push({ id, url: null, command: server.command, args, env, cwd, headers: {}, transport: null, token_env: null, oauth: null, from, notes });
        continue;
      }
      if (server.kind === "unrecognized") {
        plan.skipped.push({ from, reason: "unrecognized", message: server.why });
        continue;
      }
      if (server.kind === "unsupported") {
        plan.skipped.push({ from, reason: "unsupported_transport", message: unsupportedMessage(server.transport) });
        continue;
      }
      if (server.oauth?.clientSecret && "literal" in server.oauth.clientSecret) input.secret(server.oauth.clientSecret.literal);
      for (const header of server.headers) {
        if (!("value" in header)) continue;
        const bearer = bearerPart(header.value);
        if (referenceIn(bearer ?? header.value) !== undefined) continue;
        input.secret(header.value);
        if (bearer !== undefined) input.secret(bearer);
      }
      const skip = urlSkipReason(server.url, input.secret) ?? variableSkipReason(server.headers, input.secret);
      if (skip) {
        plan.skipped.push({ from, ...skip });
        continue;
      }
      if (server.disabled) {
        const disabledIn = { file: server.disabled.file ?? from.file, setting: server.disabled.setting };
        plan.skipped.push({ from, reason: "disabled", message: disabledMessage(from.client, disabledIn), disabled_in: disabledIn });
        continue;
      }
      const known = urls.get(sameUrl(server.url));
      if (known) {
        plan.already_declared.push({ id: known.id, url: server.url, from, by: known.by });
        continue;
      }
      const id = uniqueId(validId(server.name), ids);
      ids.add(id);
      urls.set(sameUrl(server.url), { id, by: "import" });
      const { tokenEnv, notes, headers } = authOf(id, server.headers, input.secret);
      if (tokenEnv !== undefined && input.remote) notes.unshift({ kind: "auth_on_deployment", env: tokenEnv });
      const written = tokenEnv !== undefined && !input.remote ? tokenEnv : undefined;
      const oauth = server.oauth ? oauthOf(id, server.oauth, { staticToken: written !== undefined, remote: input.remote }, notes) : null;
      notes.push(...(server.leftOut ?? []).map((left) => leftOutNote(id, left)));
      plan.added.push({ id, url: server.url, command: null, args: [], env: {}, cwd: null, headers, transport: server.transport ?? null, token_env: written ?? null, oauth, from, notes });
    }
  };
  return { plan, add };
}

/** Why a server the client turned off is skipped, naming the setting and the file (`show` renders the path). */
export function disabledMessage(client: ClientName, where: DisabledIn, show: (file: string) => string = (file) => file): string {
  return `disabled in ${CLIENT_TITLES[client]}: ${where.setting} in ${show(where.file)}`;
}

function unsupportedMessage(transport: string): string {
  const name = transport === "ws" ? "WebSocket (ws)" : `"${transport}"`;
  return `its transport is ${name}; subs connects to remote servers over Streamable HTTP or SSE: if the server offers one of them, declare that url with \`subs mcp add <id> <url>\``;
}

// RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), as the file's rules check it.
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * The `oauth` a pre-registered client becomes, with the notes on what is not written: a client
 * secret (never copied: named by a variable, or to be exported), an id or scopes the file cannot
 * hold as they are, the client's own redirect URI.
 */
function oauthOf(id: string, found: FoundOAuth, options: { staticToken: boolean; remote: boolean }, notes: Note[]): AddedOAuth | null {
  // A connection authenticates one way (src/config/load.ts): the token read from a variable wins, as the client sent it.
  if (options.staticToken) {
    if (found.clientId !== undefined || found.scopes !== undefined) notes.push({ kind: "oauth_left_out", what: "client", why: "static_token" });
    return null;
  }
  const oauth: AddedOAuth = {};
  if (found.clientId !== undefined) {
    // A client may expand variables in it; the file's values are literal, and never hold a control character.
    if (found.clientId.trim() === "" || /\$\{|\$[A-Za-z_]/.test(found.clientId) || firstUnsafe(found.clientId)) notes.push({ kind: "oauth_left_out", what: "client_id", why: "not_a_literal" });
    else oauth.client_id = found.clientId;
  }
  if (found.scopes !== undefined && found.scopes.length > 0) {
    if (found.scopes.every((scope) => SCOPE_TOKEN.test(scope))) oauth.scopes = [...new Set(found.scopes)];
    else notes.push({ kind: "oauth_left_out", what: "scopes", why: "invalid_scope" });
  }
  if (oauth.client_id !== undefined) {
    const secret = found.clientSecret;
    const suggested_env = suggestedVariable(id, undefined, "CLIENT_SECRET");
    if (secret !== undefined && options.remote) notes.push({ kind: "client_secret_on_deployment" });
    else if (secret !== undefined && "env" in secret && ENV_NAME_PATTERN.test(secret.env)) oauth.client_secret_env = secret.env;
    else if (secret !== undefined && "stored" in secret) notes.push({ kind: "client_secret_in_client_store", suggested_env });
    else if (secret !== undefined) notes.push({ kind: "client_secret_left_out", suggested_env });
    if (found.redirect !== undefined) notes.push({ kind: "redirect_uri", port: found.redirect.port ?? null });
  }
  return Object.keys(oauth).length > 0 ? oauth : null;
}

function leftOutNote(id: string, left: LeftOut): Note {
  return left.kind === "headers_helper" ? { kind: "headers_helper", setting: left.setting, suggested_env: suggestedVariable(id) } : { kind: "setting_left_out", setting: left.setting };
}

/**
 * A header whose value comes from a variable must name one: anything else (a token pasted where
 * the name goes, escape sequences) is never written, never shown, and keeps the server out.
 */
function variableSkipReason(headers: readonly Header[], secret: (value: string) => void): { reason: SkipReason; message: string } | undefined {
  const bad = headers.find((h) => "fromEnv" in h && !ENV_NAME_PATTERN.test(h.fromEnv));
  if (!bad || !("fromEnv" in bad)) return undefined;
  secret(bad.fromEnv);
  return {
    reason: "invalid_variable",
    message: `its ${bad.name} header is to come from a variable, but what names the variable is not a variable name (letters, digits and '_'); correct it there, then import again`,
  };
}

/**
 * What the headers say: `auth.token_env` from Authorization, the other headers as templates (under
 * [remote] too: the deployment holds their variables' values), and notes; no secret value is kept.
 */
function authOf(id: string, headers: readonly Header[], secret: (value: string) => void): { tokenEnv: string | undefined; notes: Note[]; headers: Record<string, string> } {
  const notes: Note[] = [];
  const carried: Record<string, string> = {};
  let tokenEnv: string | undefined;
  let authorizationSeen = false;
  for (const header of headers) {
    const isAuthorization = header.name.toLowerCase() === "authorization";
    if (!isAuthorization && HEADER_NAME_PATTERN.test(header.name) && !reservedHeaderProblem(header.name) && !isSecretKey(header.name) && !Object.hasOwn(carried, header.name)) {
      const suggested = envNameFor(header.name);
      carried[header.name] =
        "fromEnv" in header
          ? `\${${ENV_NAME_PATTERN.test(header.fromEnv) ? header.fromEnv : suggested}}`
          : importedValue(header.value, { where: "header", name: header.name, secretName: SECRET_NAME.test(header.name) || looksLikeCredential(header.name), suggested }, notes, secret);
      continue;
    }
    if (!isAuthorization || authorizationSeen) {
      notes.push({ kind: "header_left_out", header: header.name, credential: looksLikeCredential(header.name) });
      continue;
    }
    authorizationSeen = true;
    if ("fromEnv" in header) {
      if (header.bearer) tokenEnv = header.fromEnv;
      else notes.push({ kind: "header_from_env", header: header.name, env: header.fromEnv, suggested_env: suggestedVariable(id) });
      continue;
    }
    const bearer = bearerPart(header.value);
    const reference = referenceIn(bearer ?? header.value);
    if (reference && "env" in reference) {
      if (bearer !== undefined) tokenEnv = reference.env;
      else notes.push({ kind: "header_from_env", header: header.name, env: reference.env, suggested_env: suggestedVariable(id) });
    } else if (reference) {
      notes.push({ kind: "prompted_input", header: header.name, input: reference.input, suggested_env: suggestedVariable(id, reference.input) });
    } else {
      notes.push({ kind: "secret_left_out", header: header.name, suggested_env: suggestedVariable(id) });
    }
  }
  return { tokenEnv, notes, headers: carried };
}

/**
 * A value of a local server's `env` or `args`, or of a header, as the file writes it: a reference
 * in the client's syntax as a `${NAME}` template. A literal `env` or header value is never copied
 * (a variable's or a header's value is where tokens are pasted, whatever its name says): the entry
 * reads `${suggested}`, with a note saying what to export. A literal argument is copied, unless it
 * looks like a secret (`secretName`, or random-looking text).
 */
function importedValue(value: string, what: { where: "env" | "arg" | "header"; name: string; secretName: boolean; suggested: string }, notes: Note[], secret: (value: string) => void): string {
  const template = asTemplate(value);
  if (template && "input" in template) {
    notes.push({ kind: "value_left_out", where: what.where, name: what.name, suggested_env: what.suggested, input: template.input });
    return `\${${what.suggested}}`;
  }
  if (template) {
    if (template.droppedDefault) notes.push({ kind: "default_dropped", where: what.where, name: what.name });
    return template.value;
  }
  const secretLooking = value !== "" && (what.where !== "arg" || what.secretName || secretLookingSegment(`/${value}`) !== undefined);
  if (!secretLooking && !firstUnsafe(value)) return value;
  // Learnt by the run's output, which scrubs it should anything quote it.
  secret(value);
  notes.push({ kind: "value_left_out", where: what.where, name: what.name, suggested_env: what.suggested });
  return `\${${what.suggested}}`;
}

/** A local server as compared for "already declared": its program and arguments. */
const programKey = (p: { command: string; args: readonly string[] }) => JSON.stringify([p.command, ...p.args]);

/**
 * Why a url cannot go into the file as it is, if it cannot. A client may expand variables in its
 * urls; substructure.toml's are literal. A secret written into the url (user:password@, a query
 * or fragment parameter named like a credential or a signature, a path segment that looks like a
 * key) would be copied with it into a file meant to be committed, and printed.
 */
function urlSkipReason(url: string, secret: (value: string) => void): { reason: SkipReason; message: string } | undefined {
  if (/\$\{|\$[A-Za-z_]/.test(url)) return { reason: "url_has_variable", message: "its url uses a variable; substructure.toml takes a literal url" };
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed) {
    const fragment = new URLSearchParams(parsed.hash.slice(1));
    if (parsed.username || parsed.password || [...parsed.searchParams.keys(), ...fragment.keys()].some(credentialParameter)) {
      secret(url);
      for (const value of [...parsed.searchParams.values(), ...fragment.values()]) secret(value);
      if (parsed.password) secret(decodeURIComponent(parsed.password));
      return {
        reason: "url_has_credential",
        message:
          "its url carries a credential (in its query, its fragment or user:password@), which is never copied; add it by hand with the credential in a variable, or log in with OAuth",
      };
    }
  }
  const problem = newUrlProblem(url);
  if (problem) return { reason: "invalid_url", message: `its url ${problem}` };
  const segment = parsed && secretLookingSegment(parsed.pathname);
  if (segment) {
    secret(url);
    secret(segment);
    return {
      reason: "url_path_looks_secret",
      message:
        "its url path holds what looks like a key (a long random segment), which is never copied: if the server gives each user such a url, keep it out of substructure.toml and log in with OAuth if it offers that; if the segment is no secret, declare it with `subs mcp add <id> <url>`",
    };
  }
  return undefined;
}

/**
 * Query and fragment parameters whose value is a credential: those named like one (`api_key`,
 * `access_token`, `X-Amz-Signature`, `X-Goog-Credential`…) and the short names of signed urls
 * (Azure SAS `sig`) and keys.
 */
const credentialParameter = (name: string) => looksLikeCredential(name) || /credential|^(sig|sign|hmac|jwt|pwd|pass|passwd)$/i.test(name);

/**
 * The first path segment of `pathname` that looks like a secret, decoded, or undefined. Such urls
 * are capabilities (Zapier's `…/s/<key>/mcp`, a webhook id as the only credential). A segment looks
 * like one when it holds 32 or more hex digits (a UUID, a hex key), or a run of 20 or more letters
 * and digits ('-' and '_' aside) mixed as random text mixes them: the class (lowercase, uppercase,
 * digit) changes at least every 5 characters, and its lowercase letters are not the bodies of
 * words (`GitHub`, `ServerV2`). Words, slugs, versions, dates and short ids do not: `@org/name`,
 * `v1`, `acme-corp`, `context7-mcp`, `2025-06-18`, `MCPServerForGitHubV2` all pass. Measured on
 * random keys: base62 of 20 characters is caught 98 times in 100, of 32 characters 999 in 1000.
 */
export function secretLookingSegment(pathname: string): string | undefined {
  for (const raw of pathname.split("/")) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      segment = raw;
    }
    if (/^[0-9a-f-]+$/i.test(segment) && segment.replace(/-/g, "").length >= 32) return segment;
    // '-' and '_' are joined over: base64url and many key formats (`sk_live_…`) hold them.
    for (const run of segment.split(/[^A-Za-z0-9_-]+/).map((part) => part.replace(/[-_]/g, ""))) {
      if (run.length >= 20 && looksRandom(run)) return segment;
    }
  }
  return undefined;
}

const DIGIT = 0;
const UPPER = 1;
const LOWER = 2;
const classOf = (c: number) => (c <= 0x39 ? DIGIT : c <= 0x5a ? UPPER : LOWER);

/** Whether a run of letters and digits reads as random text rather than words (see secretLookingSegment). */
function looksRandom(run: string): boolean {
  let changes = 0;
  let words = true;
  let hasLower = false;
  for (let i = 0; i < run.length; ) {
    const kind = classOf(run.charCodeAt(i));
    let end = i + 1;
    while (end < run.length && classOf(run.charCodeAt(end)) === kind) end++;
    if (i > 0) changes++;
    if (kind === LOWER) {
      hasLower = true;
      // A word's body: three letters, or two after its capital (`Hub`).
      const afterCapital = i > 0 && classOf(run.charCodeAt(i - 1)) === UPPER;
      if (end - i < (afterCapital ? 2 : 3)) words = false;
    }
    i = end;
  }
  return changes * 5 >= run.length && !(hasLower && words);
}

/** The url as compared for "already declared": parsed (case of scheme and host, default port), without a trailing slash. */
function sameUrl(url: string): string {
  try {
    return new URL(url).href.replace(/\/$/, "");
  } catch {
    return url;
  }
}

/** `name` made a connection id (src/config/schema.ts: lowercase letters, digits, '-' and '_', never "__"). */
export function validId(name: string): string {
  const id = name
    .normalize("NFKD")
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/_{2,}/g, "_")
    .replace(/-{2,}/g, "-")
    .replace(/^[-_]+|[-_]+$/g, "");
  return id === "" ? "server" : id.slice(0, 64).replace(/[-_]+$/, "");
}

/**
 * `id`, or `id-2`, `id-3`… the first not in `taken`, nor reserved (`constructor` becomes
 * `constructor-2`), nor a key the file refuses anywhere as a secret's (`secret`, `token`: src/config/load.ts).
 */
export function uniqueId(id: string, taken: ReadonlySet<string>): string {
  if (!taken.has(id) && idProblem(id) === undefined && !isSecretKey(id)) return id;
  for (let n = 2; ; n++) if (!taken.has(`${id}-${n}`)) return `${id}-${n}`;
}
