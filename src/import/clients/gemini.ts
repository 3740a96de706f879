// Gemini CLI (https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md, and
// what Gemini CLI 0.61.0's own `gemini mcp add` writes and `gemini mcp list` reads):
// `.gemini/settings.json` in the working directory and `~/.gemini/settings.json` (`~` is
// `$GEMINI_CLI_HOME` when set), servers under `mcpServers`. `httpUrl` is a streamable HTTP
// endpoint, `url` one of `type` ("http"; SSE when absent), `headers` their headers (values may use
// `$VAR` or `${VAR}`, expanded as the settings load, as is every string there); `command` a local
// process. `oauth` { clientId, clientSecret, scopes[], redirectUri, authorizationUrl, tokenUrl, … }
// names a pre-registered client.
// Turned off: `~/.gemini/mcp-server-enablement.json` (`{ "<name, lowercased>": { "enabled": false } }`,
// what `/mcp disable` writes); `mcp.excluded` in any settings file (system, system defaults, user,
// workspace: the lists add up); `mcp.allowed` where a file sets it (a server must be in every such
// list). Names compare lowercased and trimmed.
import path from "node:path";
import { geminiProjectFile, geminiUserFile } from "../../clients/where.ts";
import { presentSettings, obj, redirectPort, serversOf, str, strings, typedTransport, type EntryRules } from "../shape.ts";
import { referenceIn } from "../values.ts";
import type { ClientFile, FoundOAuth, LeftOut, Places, Switch } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) =>
    entry.httpUrl !== undefined
      ? { url: entry.httpUrl, transport: "http" }
      : entry.url !== undefined
        ? { url: entry.url, transport: typedTransport(entry.type) ?? "sse" }
        : undefined,
  details: (entry) => {
    const oauth = obj(entry.oauth);
    const found: FoundOAuth = {};
    const clientId = str(oauth?.clientId);
    if (clientId !== undefined) found.clientId = clientId;
    const secret = str(oauth?.clientSecret);
    if (secret !== undefined) {
      const reference = referenceIn(secret);
      found.clientSecret = reference && "env" in reference ? { env: reference.env } : { literal: secret };
    }
    const scopes = strings(oauth?.scopes);
    if (scopes !== undefined && scopes.length > 0) found.scopes = scopes;
    const redirectUri = str(oauth?.redirectUri);
    if (redirectUri !== undefined) found.redirect = { port: redirectPort(redirectUri) };
    const leftOut: LeftOut[] = [
      ...presentSettings(entry, ["includeTools", "excludeTools", "timeout", "targetAudience", "targetServiceAccount"]),
      ...presentSettings(oauth, ["authorizationUrl", "tokenUrl", "registrationUrl", "audiences", "tokenParamName"], "oauth."),
    ];
    // Google credentials and service-account impersonation are Gemini CLI's own ways to get a token.
    const provider = str(entry.authProviderType);
    if (provider !== undefined && provider !== "dynamic_discovery") leftOut.push({ setting: "authProviderType", kind: "setting" });
    return { ...(Object.keys(found).length > 0 ? { oauth: found } : {}), ...(leftOut.length > 0 ? { leftOut } : {}) };
  },
};

export function geminiFiles(places: Places): ClientFile[] {
  const files = places.projectDirs.map((dir) => geminiFile(geminiProjectFile(dir), "project"));
  const user = geminiUserFile(places.env);
  if (user !== undefined) files.push(geminiFile(user, "user"));
  return files;
}

/** The files that only say which servers are turned off: the enablement file and the system settings. */
export function geminiSwitchFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = [];
  const home = geminiHome(places);
  if (home !== undefined) files.push(enablementFile(path.join(home, ".gemini", "mcp-server-enablement.json")));
  const system = places.env.GEMINI_CLI_SYSTEM_SETTINGS_PATH || SYSTEM_SETTINGS[process.platform] || SYSTEM_SETTINGS.linux!;
  files.push({ ...geminiFile(system, "user"), switchesOnly: true });
  const defaults = places.env.GEMINI_CLI_SYSTEM_DEFAULTS_PATH || path.join(path.dirname(system), "system-defaults.json");
  files.push({ ...geminiFile(defaults, "user"), switchesOnly: true });
  return files;
}

/** Where Gemini CLI looks for system settings, by platform (its `getSystemSettingsPath`). */
const SYSTEM_SETTINGS: Partial<Record<NodeJS.Platform, string>> = {
  linux: "/etc/gemini-cli/settings.json",
  darwin: "/Library/Application Support/GeminiCli/settings.json",
  win32: "C:\\ProgramData\\gemini-cli\\settings.json",
};

/** The directory Gemini CLI takes for home: `$GEMINI_CLI_HOME`, else the home directory. */
const geminiHome = (places: Places) => places.env.GEMINI_CLI_HOME || places.home;

export function geminiFile(file: string, scope: "project" | "user"): ClientFile {
  return {
    client: "gemini",
    scope,
    file,
    format: "json",
    servers: (parsed) => serversOf(obj(parsed)?.mcpServers, rules),
    switches: (parsed) => {
      const mcp = obj(obj(parsed)?.mcp);
      // A workspace's lists apply to its own servers and the user's, not to another workspace's.
      const applies = (server: { scope: string; file: string }) => scope === "user" || server.scope === "user" || server.file === file;
      const switches: Switch[] = [];
      const excluded = strings(mcp?.excluded);
      if (excluded !== undefined) {
        const names = new Set(excluded.map(normalized));
        switches.push({ setting: "mcp.excluded", off: (server) => applies(server) && names.has(normalized(server.name)) });
      }
      const allowed = strings(mcp?.allowed);
      if (allowed !== undefined) {
        const names = new Set(allowed.map(normalized));
        switches.push({ setting: "mcp.allowed (it is not listed)", off: (server) => applies(server) && !names.has(normalized(server.name)) });
      }
      return switches;
    },
  };
}

/** `mcp-server-enablement.json`: a server whose lowercased name maps to `{ "enabled": <false> }` is off. */
function enablementFile(file: string): ClientFile {
  return {
    client: "gemini",
    scope: "user",
    file,
    format: "json",
    servers: () => [],
    switches: (parsed) => {
      const states = obj(parsed);
      const off = (name: string) => {
        const key = normalized(name);
        const state = states && Object.hasOwn(states, key) ? obj(states[key]) : undefined;
        // Gemini CLI reads `state?.enabled ?? true` and treats a false value as off.
        return state?.enabled !== undefined && state.enabled !== null && !state.enabled;
      };
      return [{ setting: "its entry { \"enabled\": false }", off: (server) => off(server.name) }];
    },
    switchesOnly: true,
  };
}

/** Gemini CLI's `normalizeServerId`. */
const normalized = (name: string) => name.toLowerCase().trim();
