import { backendFor } from "../../../backend/choose.ts";
import type { Authorized } from "../../../backend/types.ts";
import { loadConfig } from "../../../config/load.ts";
import type { Context } from "../../../context.ts";
import { usage } from "../../../errors.ts";
import { writeJson } from "../../../output/json.ts";
import { loginSteps, loginWords } from "../../../output/login-words.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { MARK, styleFor, type Style } from "../../../output/style.ts";
import { isoOrNull, shortDuration } from "../../../output/time.ts";
import { shown } from "../../../output/untrusted.ts";

export type McpLoginOptions = {
  config?: string;
  ids: string[];
  all: boolean;
  port?: number;
  /** false under --no-browser */
  browser: boolean;
  timeoutSeconds: number;
  json: boolean;
  /**
   * `--from-env`: the values of a connection's header variables, handed to a deployment, come from
   * this machine's variables of the same names instead of being asked for.
   */
  fromEnv: boolean;
};

/** The `--json` contract of `subs mcp login` (docs/commands.md, "subs mcp login"). Never holds a secret. */
export type LoginJson = {
  id: string;
  /** `open`: the server answered without asking for a credential; none is stored or sent. */
  /** `local`: a local server; there is nothing to log in. */
  result: "authorized" | "static" | "open" | "local";
  issuer: string | null;
  scopes: string[];
  expires_at: string | null;
  refreshable: boolean;
  /** How many tools the server offers with the new credential; null when listing them failed. */
  tools: number | null;
  token_env: string | null;
  token_env_set: boolean | null;
};

/** One element of the `subs mcp login --json` array under [remote] (README.md, "With `[remote]`"). */
export type RemoteLoginJson = {
  id: string;
  result: "authorized";
  target: "remote";
  deployment: string;
  url: string;
  authorized_at: string | null;
  expires_at: string | null;
  /** The variables of the connection's headers whose values were handed to the deployment (names only); empty after a consent. */
  secrets: string[];
};

export async function mcpLoginCommand(ctx: Context, options: McpLoginOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  if (options.all && options.ids.length > 0) throw usage("give connection ids or --all, not both");
  if (!options.all && options.ids.length === 0) throw usage("name the connection to log in to, e.g. `subs mcp login sentry`, or pass --all");
  const backend = await backendFor({ ctx, config, reporter, loginSteps: () => loginSteps(reporter) });
  const style = styleFor(ctx.color);
  const results: Array<LoginJson | RemoteLoginJson> = [];
  // Without [remote] a connection's headers read this machine's variables whenever it connects.
  if (options.fromEnv && backend.place.kind === "local") reporter.warn("--from-env is used only with [remote]: here a connection's headers read this machine's variables whenever it connects");
  const headerValue = headerValueSource(ctx, options.fromEnv);
  try {
    const targets = await backend.loginTargets({ ids: options.ids, all: options.all, ...(options.port !== undefined ? { port: options.port } : {}) });
    if (options.all && targets.length === 0) {
      ctx.stderr.write(
        backend.place.kind === "local"
          ? "Every OAuth connection already has a usable credential; nothing to do.\n"
          : "Every connection is already authorized on the deployment; nothing to do.\n",
      );
    }
    const { loginEach } = await import("./each.ts");
    await loginEach(ctx, targets, results, async (connection) => {
      const outcome = await backend.authorize(connection, {
        ...(options.port !== undefined ? { port: options.port } : {}),
        browser: options.browser,
        timeoutMs: options.timeoutSeconds * 1000,
        headerValue,
      });
      results.push(loginJson(outcome));
      if (outcome.result === "local") {
        reporter.info(`${outcome.id} is a local server: subs starts it when a command uses it; there is nothing to log in.`);
        if (outcome.unsetEnv.length > 0) reporter.warn(`${outcome.unsetEnv.map((name) => `$${name}`).join(", ")} ${outcome.unsetEnv.length === 1 ? "is" : "are"} not set; ${outcome.id} cannot start until ${outcome.unsetEnv.length === 1 ? "it is" : "they are"}`);
      } else if (outcome.result === "static") {
        reporter.info(`${outcome.id} uses a static token from $${outcome.tokenEnv}: there is nothing to log in.`);
        if (!outcome.tokenEnvSet) reporter.warn(`$${outcome.tokenEnv} is not set; ${outcome.id} cannot be used until it is`);
      } else if (!options.json) ctx.stdout.write(loginText(outcome, style, ctx.now()));
    });
  } finally {
    backend.close();
  }
  if (options.json) writeJson(ctx.stdout, results);
}

/**
 * Where the value of a variable a connection's headers name comes from, for a deployment that
 * holds it (docs/deployment-protocol.md section 3.12): with `--from-env` this machine's variable of
 * that name, else the person at the terminal, typing it hidden. Neither possible is a usage error,
 * raised before anything of that connection is sent. The value is never printed: the core teaches
 * it to the run's secrets as soon as it has it.
 */
function headerValueSource(ctx: Context, fromEnv: boolean): (request: { id: string; name: string }) => Promise<string> {
  let ask: ((prompt: string) => Promise<string>) | undefined;
  return async ({ id, name }) => {
    if (fromEnv) {
      const value = ctx.env[name];
      if (value === undefined) {
        throw usage(`${id}: $${name} is not set; --from-env reads the value of ${name} from this machine's environment; nothing was sent`, {
          hint: `export ${name}=<the value ${id} expects>, then run \`subs mcp login ${id} --from-env\` again (or, on a terminal, run it without --from-env and type the value)`,
        });
      }
      return value;
    }
    const stdin = await ctx.terminalStdin?.();
    if (!stdin) {
      throw usage(`${id}: its headers need the value of ${name}, which subs asks for on a terminal, and stdin is not one; nothing was sent`, {
        hint: `export ${name}=<the value ${id} expects>, then run \`subs mcp login ${id} --from-env\``,
      });
    }
    const { hiddenInput } = await import("../../../output/hidden-input.ts");
    ask ??= hiddenInput(ctx, stdin);
    return ask(loginWords.askValue(name, id));
  };
}

function loginJson(outcome: Authorized): LoginJson | RemoteLoginJson {
  const none = { issuer: null, scopes: [], expires_at: null, refreshable: false };
  switch (outcome.result) {
    case "static":
      return { id: outcome.id, result: "static", ...none, tools: null, token_env: outcome.tokenEnv, token_env_set: outcome.tokenEnvSet };
    case "open":
      return { id: outcome.id, result: "open", ...none, tools: outcome.tools, token_env: null, token_env_set: null };
    case "local":
      return { id: outcome.id, result: "local", ...none, tools: null, token_env: null, token_env_set: null };
  }
  if (outcome.target === "remote") {
    const { id, deployment, url, authorizedAt, expiresAt, secrets } = outcome;
    return { id, result: "authorized", target: "remote", deployment: deployment.href, url, authorized_at: authorizedAt, expires_at: expiresAt, secrets };
  }
  const { id, issuer, scopes, expiresAt, refreshable, tools } = outcome;
  return { id, result: "authorized", issuer, scopes, expires_at: isoOrNull(expiresAt), refreshable, tools, token_env: null, token_env_set: null };
}

/** What a person reads on stdout of one connection's login. */
function loginText(outcome: Exclude<Authorized, { result: "static" | "local" }>, style: Style, now: number): string {
  const toolCount = (tools: number | null) => (tools === null ? "" : `  ${tools} tool${tools === 1 ? "" : "s"} offered\n`);
  if (outcome.result === "open") return `${style.green(MARK.success)} ${outcome.id}: the server asks for no credential; calls to it carry none\n` + toolCount(outcome.tools);
  if (outcome.target === "remote") {
    // As a local login's result: the mark, who authorized it, then its expiry on a line of its own.
    const expiresAt = outcome.expiresAt ? Date.parse(outcome.expiresAt) : null;
    const expiry = expiresAt === null ? "" : `  expires in ${shortDuration(expiresAt - now)}, refreshed by the deployment\n`;
    // Names only: the values went to the deployment and are never shown.
    const held = outcome.secrets.length ? `  the deployment holds ${outcome.secrets.join(", ")} for its headers\n` : "";
    return `${style.green(MARK.success)} ${outcome.id}: authorized on ${outcome.deployment.origin}\n${held}${expiry}`;
  }
  const expiry =
    outcome.expiresAt === null ? "does not expire" : `expires in ${shortDuration(outcome.expiresAt - now)}${outcome.refreshable ? ", refreshable" : ", not refreshable"}`;
  return (
    // The issuer and the scopes granted are the authorization server's words: shown
    // (SECURITY.md, "What subs shows of server text").
    `${style.green(MARK.success)} ${outcome.id}: authorized by ${shown(outcome.issuer)}\n` +
    `  scopes: ${outcome.scopes.length > 0 ? shown(outcome.scopes.join(" ")) : "(none requested)"}\n` +
    `  ${expiry}\n` +
    toolCount(outcome.tools)
  );
}
