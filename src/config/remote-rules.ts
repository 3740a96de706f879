// Under [remote] the deployment holds credentials, so settings that name a variable on this
// machine cannot work there: `auth.token_env` and `oauth.client_secret_env` belong to a local
// engine (product.md, "The file"; connectors.md, "Where the credential lives"). Nor can a local
// server (`command`): it is a process on the machine that starts it. `headers` can: the deployment
// sends them itself and fills their templates from values handed to it by `subs mcp login`
// (docs/deployment-protocol.md section 3.12), never from this machine's environment.
import { ConfigError, formatDiagnostic, type Diagnostic } from "../errors.ts";
import type { Reporter } from "../report.ts";
import type { Config } from "./types.ts";

/** Every connection (of `ids`, default all) that carries a local-only setting, as file:line:col diagnostics. */
export function localOnlyAuthDiagnostics(config: Config, ids?: readonly string[]): Diagnostic[] {
  const wanted = ids ? new Set(ids) : undefined;
  const diagnostics: Diagnostic[] = [];
  const refuse = (keyPath: string[], message: string, hint: string) => {
    const { line, col } = config.locate(keyPath);
    diagnostics.push({ file: config.displayPath, line, col, message, hint });
  };
  for (const connection of config.connections) {
    if (wanted && !wanted.has(connection.id)) continue;
    const id = connection.id;
    if (connection.process) {
      refuse(
        ["mcp", id, "command"],
        `[mcp.${id}] has \`command\`: a local server runs on the machine that starts it; the deployment in [remote] cannot run it`,
        "declare the server's url instead (a server the deployment reaches over HTTP), or keep this connection in a file without [remote]",
      );
    }
    if (connection.auth) {
      refuse(
        ["mcp", id, "auth"],
        `[mcp.${id}] has \`auth\`, which names a variable on this machine; the deployment in [remote] cannot use it`,
        `remove \`auth\` and authorize on the deployment instead: subs mcp login ${id}`,
      );
    }
    if (connection.oauth?.clientSecretEnv) {
      refuse(
        ["mcp", id, "oauth", "client_secret_env"],
        `[mcp.${id}] has \`oauth.client_secret_env\`, which names a variable on this machine; the deployment in [remote] cannot use it`,
        `remove \`client_secret_env\` and authorize on the deployment instead: subs mcp login ${id}`,
      );
    }
  }
  return diagnostics.sort((a, b) => a.line - b.line || a.col - b.col);
}

/** Throws the refusal (exit 2, nothing sent) when any connection of `ids` carries a local-only setting. */
export function assertNoLocalOnlyAuth(config: Config, ids?: readonly string[]): void {
  const diagnostics = localOnlyAuthDiagnostics(config, ids);
  if (diagnostics.length > 0) throw new ConfigError(diagnostics, { kind: "refused", code: "local_only_auth" });
}

/**
 * For the commands that only look (`mcp list`, `mcp tools` with [remote]): the same findings as
 * warnings, so their "run `subs apply`" does not send a person to a refusal they were not told of.
 */
export function warnLocalOnlyAuth(config: Config, reporter: Reporter, ids?: readonly string[]): void {
  const diagnostics = localOnlyAuthDiagnostics(config, ids);
  if (diagnostics.length === 0) return;
  for (const d of diagnostics) reporter.warn(`${formatDiagnostic(d)}${d.hint ? `\n  hint: ${d.hint}` : ""}`);
  reporter.warn("`subs apply` and `subs mcp login` refuse such a connection while [remote] is set");
}
