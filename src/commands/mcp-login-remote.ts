// `subs mcp login` with [remote] (issue 4). Wired from mcp-login.ts: with [remote] the credential
// is made and kept on the deployment; nothing is written on this machine.
import { findConnections } from "../config/lookup.ts";
import { assertNoLocalOnlyAuth } from "../config/remote-rules.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { usage, withDetails } from "../errors.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { MARK, styleFor } from "../output/style.ts";
import { shortDuration } from "../output/time.ts";
import { shown } from "../output/untrusted.ts";
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
  const style = styleFor(ctx.stderrColor);
  const results: RemoteLoginJson[] = [];
  for (const [n, connection] of targets.entries()) {
    try {
      await loginOne(connection);
    } catch (error) {
      // With several ids, --json still tells which were done (README, "With `[remote]`").
      throw targets.length > 1 ? withDetails(error, { id: connection.id, done: results, not_attempted: targets.slice(n + 1).map((c) => c.id) }) : error;
    }
  }
  if (options.json) writeJson(ctx.stdout, results);

  async function loginOne(connection: ConnectionConfig): Promise<void> {
    let progress: Progress | undefined;
    let remote;
    try {
      remote = await loginOnDeployment({
        ctx,
        client,
        connection,
        openBrowser: options.browser,
        timeoutMs: options.timeoutSeconds * 1000,
        events: {
          onAuthorizationUrl: (url, opened, error) => {
            // The URL is the deployment's: shown, never interpreted (issue 14, item 1).
            const link = shown(url);
            if (opened) ctx.stderr.write(`Opened a browser to authorize ${connection.id} on ${client.base.origin}. If it did not open, visit:\n  ${link}\n`);
            else if (error) ctx.stderr.write(`${style.yellow("warning:")} could not open a browser (${shown(error instanceof Error ? error.message : String(error))}). Visit:\n  ${link}\n`);
            else ctx.stderr.write(`To authorize ${connection.id} on ${client.base.origin}, visit:\n  ${link}\n`);
            // The spinner starts at once, below the URL, not after the first poll.
            progress = reporter.progress(`waiting for consent on the deployment for ${connection.id} (Ctrl-C to cancel)`);
          },
          onWaiting: (elapsedMs, remainingMs) => {
            const text = `waiting for consent on the deployment for ${connection.id} (gives up in ${shortDuration(remainingMs)})`;
            if (progress) progress.update(text);
            else progress = reporter.progress(text);
          },
        },
      });
      progress?.succeed(`${connection.id}: consent received`);
    } catch (error) {
      progress?.fail(`${connection.id}: stopped waiting`);
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
      const expiry = expiresAt === null ? "" : ` (expires in ${shortDuration(expiresAt - ctx.now())}; the deployment refreshes it)`;
      ctx.stdout.write(`${styleFor(ctx.color).green(MARK.success)} ${connection.id}: authorized on ${client.base.origin}${expiry}\n`);
    }
  }
}

function chooseIds(config: Config, options: McpLoginRemoteOptions): ConnectionConfig[] {
  if (options.all && options.ids.length > 0) throw usage("give connection ids or --all, not both");
  if (options.all) return config.connections;
  if (options.ids.length === 0) throw usage("name the connection to log in to, e.g. `subs mcp login sentry`, or pass --all");
  return findConnections(config, options.ids);
}
