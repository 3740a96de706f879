// Deciding what `subs mcp import` declares (issue 15): for each server found, a connection to add,
// one the file already has, or a reason to skip it; never a secret carried over. Pure: the caller
// reads the files before and writes after.
import { isValidName, urlProblem } from "../config/schema.ts";
import { possessive } from "../output/possessive.ts";
import type { ClientName, FoundServer, Header, Scope } from "./types.ts";
import { bearerPart, looksLikeCredential, referenceIn, suggestedVariable } from "./values.ts";

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
  | { kind: "auth_on_deployment"; env: string };

export type Addition = { id: string; url: string; transport: "http" | "sse" | null; token_env: string | null; from: Origin; notes: Note[] };
export type AlreadyDeclared = { id: string; url: string; from: Origin; by: "file" | "import" };
export type SkipReason = "stdio" | "disabled" | "unrecognized" | "invalid_url" | "url_has_variable" | "url_has_credential";
export type Skipped = { from: Origin; reason: SkipReason; message: string };
export type Plan = { added: Addition[]; already_declared: AlreadyDeclared[]; skipped: Skipped[] };

export type PlanInput = {
  found: ReadonlyArray<{ origin: Omit<Origin, "name">; servers: readonly FoundServer[] }>;
  /** The file's connections. */
  existing: ReadonlyArray<{ id: string; url: string }>;
  /** The file has [remote]: no `auth` is written. */
  remote: boolean;
  /** Learns every literal value read, so the run's output scrubs it should anything quote it (src/output/secrets.ts). */
  secret: (value: string) => void;
};

export function planImport(input: PlanInput): Plan {
  const plan: Plan = { added: [], already_declared: [], skipped: [] };
  const ids = new Set(input.existing.map((c) => c.id));
  const urls = new Map<string, { id: string; by: "file" | "import" }>(input.existing.map((c) => [sameUrl(c.url), { id: c.id, by: "file" }]));
  for (const { origin: where, servers } of input.found) {
    for (const server of servers) {
      const from: Origin = { ...where, name: server.name };
      if (server.kind === "stdio") {
        plan.skipped.push({ from, reason: "stdio", message: "a local (stdio) server: subs connects to remote servers only" });
        continue;
      }
      if (server.kind === "unrecognized") {
        plan.skipped.push({ from, reason: "unrecognized", message: server.why });
        continue;
      }
      for (const header of server.headers) {
        if (!("value" in header)) continue;
        const bearer = bearerPart(header.value);
        if (referenceIn(bearer ?? header.value) !== undefined) continue;
        input.secret(header.value);
        if (bearer !== undefined) input.secret(bearer);
      }
      const urlSkip = urlSkipReason(server.url, input.secret);
      if (urlSkip) {
        plan.skipped.push({ from, ...urlSkip });
        continue;
      }
      if (server.disabled) {
        plan.skipped.push({ from, reason: "disabled", message: `turned off in ${possessive(from.client)} file` });
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
      const { tokenEnv, notes } = authOf(id, server.headers);
      if (tokenEnv !== undefined && input.remote) notes.unshift({ kind: "auth_on_deployment", env: tokenEnv });
      plan.added.push({ id, url: server.url, transport: server.transport ?? null, token_env: tokenEnv !== undefined && !input.remote ? tokenEnv : null, from, notes });
    }
  }
  return plan;
}

/** What the headers say about authentication, as `auth.token_env` and notes; no value is kept. */
function authOf(id: string, headers: readonly Header[]): { tokenEnv: string | undefined; notes: Note[] } {
  const notes: Note[] = [];
  let tokenEnv: string | undefined;
  let authorizationSeen = false;
  for (const header of headers) {
    const isAuthorization = header.name.toLowerCase() === "authorization";
    if (!isAuthorization || authorizationSeen) {
      notes.push({ kind: "header_left_out", header: header.name, credential: looksLikeCredential(header.name) });
      continue;
    }
    authorizationSeen = true;
    if ("fromEnv" in header) {
      notes.push({ kind: "header_from_env", header: header.name, env: header.fromEnv, suggested_env: suggestedVariable(id) });
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
  return { tokenEnv, notes };
}

/**
 * Why a url cannot go into the file as it is, if it cannot. A client may expand variables in its
 * urls; substructure.toml's are literal. A query parameter named like a credential (or a
 * user:password@) is a secret written into the url: copying the url would copy the secret.
 */
function urlSkipReason(url: string, secret: (value: string) => void): { reason: SkipReason; message: string } | undefined {
  if (/\$\{|\$[A-Za-z_]/.test(url)) return { reason: "url_has_variable", message: "its url uses a variable; substructure.toml takes a literal url" };
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed && (parsed.username || parsed.password || [...parsed.searchParams.keys()].some(looksLikeCredential))) {
    secret(url);
    for (const value of parsed.searchParams.values()) secret(value);
    if (parsed.password) secret(decodeURIComponent(parsed.password));
    return { reason: "url_has_credential", message: "its url carries a credential (in its query or user:password@), which is never copied; add it by hand with the credential in a variable, or log in with OAuth" };
  }
  const problem = urlProblem(url);
  if (problem) return { reason: "invalid_url", message: `its url ${problem}` };
  return undefined;
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

/** `id`, or `id-2`, `id-3`… the first not in `taken`. */
export function uniqueId(id: string, taken: ReadonlySet<string>): string {
  if (!taken.has(id) && isValidName(id)) return id;
  for (let n = 2; ; n++) if (!taken.has(`${id}-${n}`)) return `${id}-${n}`;
}
