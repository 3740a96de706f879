import type { Config, ConnectionConfig } from "../config/types.ts";
import { loadConfig } from "../config/load.ts";
import { findConnections } from "../config/lookup.ts";
import type { Context } from "../context.ts";
import { usage } from "../errors.ts";
import { withDeadline } from "../http/deadline.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { MARK, styleFor } from "../output/style.ts";
import { isoOrNull, shortDuration } from "../output/time.ts";
import { shown } from "../output/untrusted.ts";
import type { Reporter } from "../report.ts";
import { localStatuses, storedState, type StoredState } from "../status/status.ts";
import { storedRows } from "../store/environment.ts";
import { loginSteps } from "../output/login-words.ts";
import { possessive } from "../output/possessive.ts";

export type McpLoginOptions = {
  config?: string;
  ids: string[];
  all: boolean;
  port?: number;
  /** false under --no-browser */
  browser: boolean;
  timeoutSeconds: number;
  json: boolean;
};

/** The `--json` contract of `subs mcp login` (docs/commands.md, "subs mcp login"). Never holds a secret. */
export type LoginJson = {
  id: string;
  /** `open`: the server answered without asking for a credential; none is stored or sent. */
  result: "authorized" | "static" | "open";
  issuer: string | null;
  scopes: string[];
  expires_at: string | null;
  refreshable: boolean;
  /** How many tools the server offers with the new credential; null when listing them failed. */
  tools: number | null;
  token_env: string | null;
  token_env_set: boolean | null;
};

export async function mcpLoginCommand(ctx: Context, options: McpLoginOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  if (config.remote) {
    const { mcpLoginRemote } = await import("./mcp-login-remote.ts");
    return mcpLoginRemote(ctx, config, options);
  }
  const { openEnvironmentStore } = await import("../store/environment.ts");
  // One open of the db for the whole command (issue 6): --all chooses its targets from the rows
  // the logins then update. A db that does not exist yet is created only when some OAuth
  // connection is to be logged in to (and with none stored, every one of them is). What is stored
  // for ids the file no longer declares stays: only `subs apply` deletes it (issue 15).
  const open = () => openEnvironmentStore(config, { create: true, reporter });
  let opened: Awaited<ReturnType<typeof open>>;
  const style = styleFor(ctx.color);
  const results: LoginJson[] = [];
  try {
    let targets: ConnectionConfig[];
    if (options.all) {
      if (options.ids.length > 0) throw usage("give connection ids or --all, not both");
      opened = config.connections.some((c) => !c.auth) ? await open() : undefined;
      const stored = storedState(opened ? storedRows(opened) : { credentials: [], open: [] });
      targets = connectionsLackingCredentials(config, stored, ctx);
      if (targets.length === 0) ctx.stderr.write("Every OAuth connection already has a usable credential; nothing to do.\n");
    } else {
      if (options.ids.length === 0) throw usage("name the connection to log in to, e.g. `subs mcp login sentry`, or pass --all");
      targets = findConnections(config, options.ids);
      opened = targets.some((c) => !c.auth) ? await open() : undefined;
    }
    const { loginEach } = await import("./login-each.ts");
    await loginEach(ctx, targets, results, loginOne);
  } finally {
    opened?.store.close();
  }
  if (options.json) writeJson(ctx.stdout, results);

  async function loginOne(connection: ConnectionConfig): Promise<void> {
    if (connection.auth) {
      const set = Boolean(ctx.env[connection.auth.tokenEnv]);
      reporter.info(`${connection.id} uses a static token from $${connection.auth.tokenEnv}: there is nothing to log in.`);
      if (!set) reporter.warn(`$${connection.auth.tokenEnv} is not set; ${connection.id} cannot be used until it is`);
      results.push({ id: connection.id, result: "static", issuer: null, scopes: [], expires_at: null, refreshable: false, tools: null, token_env: connection.auth.tokenEnv, token_env_set: set });
      return;
    }
    const { login } = await import("../auth/login.ts");
    // A corrupt stored row must not stand in the way of the login that replaces it.
    const previous = (() => {
      try {
        return opened!.store.getCredential(connection.id);
      } catch {
        return undefined;
      }
    })();
    const result = await login({
      ctx,
      connection,
      store: opened!.store,
      steps: loginSteps(reporter),
      ...(options.port !== undefined ? { port: options.port } : {}),
      timeoutMs: options.timeoutSeconds * 1000,
      openBrowser: options.browser,
    });
    if (previous && (result.open || previous.url !== connection.url)) {
      // The credential for the old url is replaced (or, the server now needing none, dropped);
      // it is not left valid at its server.
      const { revokeCredentials } = await import("../auth/revoke.ts");
      await revokeCredentials([previous], { ctx, reporter, storePath: opened!.store.path });
    }
    const tools = await countTools(ctx, config, connection, reporter);
    if (result.open) {
      results.push({ id: result.id, result: "open", issuer: null, scopes: [], expires_at: null, refreshable: false, tools, token_env: null, token_env_set: null });
      if (!options.json) {
        ctx.stdout.write(
          `${style.green(MARK.success)} ${result.id}: the server asks for no credential; calls to it carry none\n` +
            (tools === null ? "" : `  ${tools} tool${tools === 1 ? "" : "s"} offered\n`),
        );
      }
      return;
    }
    const json: LoginJson = {
      id: result.id,
      result: "authorized",
      issuer: result.issuer,
      scopes: result.scopes,
      expires_at: isoOrNull(result.expiresAt),
      refreshable: result.refreshable,
      tools,
      token_env: null,
      token_env_set: null,
    };
    results.push(json);
    if (!options.json) {
      const expiry =
        result.expiresAt === null ? "does not expire" : `expires in ${shortDuration(result.expiresAt - ctx.now())}${result.refreshable ? ", refreshable" : ", not refreshable"}`;
      ctx.stdout.write(
        // The issuer and the scopes granted are the authorization server's words (issue 14).
        `${style.green(MARK.success)} ${result.id}: authorized by ${shown(result.issuer)}\n` +
          `  scopes: ${result.scopes.length > 0 ? shown(result.scopes.join(" ")) : "(none requested)"}\n` +
          `  ${expiry}\n` +
          (tools === null ? "" : `  ${tools} tool${tools === 1 ? "" : "s"} offered\n`),
      );
    }
  }
}

/** The OAuth connections without a usable stored credential: what `--all` logs in to. */
function connectionsLackingCredentials(config: Config, stored: StoredState, ctx: Context): ConnectionConfig[] {
  const statuses = localStatuses(config, stored, ctx.env, ctx.now());
  const lacking = new Set(statuses.filter((s) => s.auth === "oauth" && !s.usable).map((s) => s.id));
  return config.connections.filter((c) => lacking.has(c.id));
}

/** Tools the server offers with the new credential; a failure here does not undo the login. */
async function countTools(ctx: Context, config: Config, connection: ConnectionConfig, reporter: Reporter): Promise<number | null> {
  const [{ openConnection }, { listAllTools }] = await Promise.all([import("../mcp/open.ts"), import("../mcp/connect.ts")]);
  // A deadline that holds under GC (src/http/deadline.ts).
  const deadline = withDeadline(ctx.signal, 15_000);
  const { signal } = deadline;
  try {
    const client = await openConnection({ ctx, config, connection, signal });
    try {
      return (await listAllTools(client, { signal })).length;
    } finally {
      await client.close().catch(() => {});
    }
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    reporter.warn(`logged in, but listing ${possessive(connection.id)} tools failed: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  } finally {
    deadline.clear();
  }
}
