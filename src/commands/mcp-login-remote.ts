// `subs mcp login` with [remote] (issue 4). Wired from mcp-login.ts: with [remote] the credential
// is made and kept on the deployment; nothing is written on this machine.
import { findConnections } from "../config/lookup.ts";
import { assertNoLocalOnlyAuth } from "../config/remote-rules.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { SubsError, usage } from "../errors.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { MARK, styleFor } from "../output/style.ts";
import { loginWords } from "../output/login-words.ts";
import { shortDuration } from "../output/time.ts";
import type { Progress } from "../report.ts";
import { DeploymentClient } from "../remote/client.ts";
import { loginOnDeployment } from "../remote/login.ts";

export type McpLoginRemoteOptions = {
  ids: string[];
  all: boolean;
  /** false under --no-browser */
  browser: boolean;
  timeoutSeconds: number;
  json: boolean;
  /** --port means nothing here: the deployment owns the redirect. */
  port?: number;
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
};

export async function mcpLoginRemote(ctx: Context, config: Config, options: McpLoginRemoteOptions): Promise<void> {
  const named = chooseIds(config, options);
  // Refused before anything is sent (product.md, "The file").
  assertNoLocalOnlyAuth(config, options.all ? undefined : named.map((c) => c.id));
  const reporter = stderrReporter(ctx);
  if (options.port !== undefined) reporter.warn("--port is ignored with [remote]: the deployment receives the redirect");
  const client = new DeploymentClient({ remote: config.remote!, ctx, reporter });
  let targets = named;
  if (options.all) {
    const remote = new Map((await client.listConnections()).map((c) => [c.id, c]));
    targets = named.filter((c) => {
      const r = remote.get(c.id);
      return !r || r.status !== "authorized" || r.url !== c.url;
    });
    if (targets.length === 0) {
      ctx.stderr.write("Every connection is already authorized on the deployment; nothing to do.\n");
      if (options.json) writeJson(ctx.stdout, []);
      return;
    }
  }
  const results: RemoteLoginJson[] = [];
  const { loginEach } = await import("./login-each.ts");
  await loginEach(ctx, targets, results, loginOne);
  if (options.json) writeJson(ctx.stdout, results);

  async function loginOne(connection: ConnectionConfig): Promise<void> {
    const id = connection.id;
    // The same steps in the same words as a login without [remote] (src/output/login-words.ts).
    const preparing = reporter.progress(loginWords.contactingThrough(id, client.base.origin));
    let waiting: Progress | undefined;
    let remote;
    try {
      remote = await loginOnDeployment({
        ctx,
        client,
        connection,
        openBrowser: options.browser,
        timeoutMs: options.timeoutSeconds * 1000,
        events: {
          onAuthorizationUrl: (url, opened, error, waitMs) => {
            preparing.succeed(loginWords.authorizesThrough(id, client.base.origin));
            // The URL is the deployment's: the reporter shows it, never interprets it (issue 14, item 1).
            if (options.browser) {
              reporter.info(loginWords.opening(id, new URL(url).origin));
              reporter.info(loginWords.ifItDoesNotOpen(url));
              if (!opened) reporter.warn(loginWords.browserFailed(error));
            } else reporter.info(loginWords.visit(id, url));
            // The spinner starts at once, below the URL, not after the first poll.
            waiting = reporter.progress(loginWords.waiting(id, waitMs));
          },
        },
      });
      waiting?.succeed(loginWords.received(id));
    } catch (error) {
      const code = error instanceof SubsError ? error.code : undefined;
      if (!waiting) preparing.fail(loginWords.couldNotStart(id));
      else waiting.fail(ctx.signal.aborted ? loginWords.stopped(id) : code === "access_denied" || code === "authorization_failed" ? loginWords.notGiven(id) : loginWords.noConsent(id));
      throw error;
    }
    const expiresAt = remote.expires_at ? Date.parse(remote.expires_at) : null;
    results.push({
      id: connection.id,
      result: "authorized",
      target: "remote",
      deployment: client.base.href,
      url: remote.url,
      authorized_at: remote.authorized_at ?? null,
      expires_at: remote.expires_at ?? null,
    });
    if (!options.json) {
      // As a local login's result: the mark, who authorized it, then its expiry on a line of its own.
      const expiry = expiresAt === null ? "" : `  expires in ${shortDuration(expiresAt - ctx.now())}, refreshed by the deployment\n`;
      ctx.stdout.write(`${styleFor(ctx.color).green(MARK.success)} ${id}: authorized on ${client.base.origin}\n${expiry}`);
    }
  }
}

function chooseIds(config: Config, options: McpLoginRemoteOptions): ConnectionConfig[] {
  if (options.all && options.ids.length > 0) throw usage("give connection ids or --all, not both");
  if (options.all) return config.connections;
  if (options.ids.length === 0) throw usage("name the connection to log in to, e.g. `subs mcp login sentry`, or pass --all");
  return findConnections(config, options.ids);
}
