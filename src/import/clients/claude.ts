// Claude Code (https://code.claude.com/docs/en/mcp, "MCP installation scopes"; the rest as Claude
// Code 2.1.332's own `claude mcp add` writes and `claude mcp list/get` reads):
// - user scope: `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json` when that is set), top-level
//   `mcpServers`;
// - local scope (the default of `claude mcp add`): the same file, `projects[KEY].mcpServers`, KEY the
//   project: the canonical git root of the working directory (for a linked worktree, the main
//   repository's; src/clients/git-root.ts), else the directory itself;
// - project scope: `.mcp.json`, read in the working directory and in every directory above it.
// A remote entry is `type: "http" | "sse"` (or "ws", which subs does not speak) with `url`,
// `headers` (values may use `${VAR}` or `${VAR:-default}`), `headersHelper` (a command whose output
// is the headers) and `oauth` { clientId, callbackPort, scopes (one space-separated string),
// authServerMetadataUrl, xaa }. The client secret `claude mcp add --client-secret` takes is kept in
// Claude Code's credential store, never in these files.
// Turned off: `projects[KEY].disabledMcpServers` (any server, by its exact name) and
// `projects[KEY].disabledMcpjsonServers` (a `.mcp.json` server rejected); `disabledMcpjsonServers`
// is also honoured in the settings files ~/.claude/settings.json, `.claude/settings.json` and
// `.claude/settings.local.json` of the working directory, and `.claude/settings.local.json` of the
// git root (Claude Code 2.1.332 ignores the git root's `.claude/settings.json` from a subdirectory).
// Approval (`enabledMcpjsonServers`, `enableAllProjectMcpServers`) only turns servers on: a `.mcp.json`
// server still pending approval is imported.
import path from "node:path";
import { canonicalGitRoot, gitRoot, realPath } from "../../clients/git-root.ts";
import { claudeProjectFile, claudeUserFile } from "../../clients/where.ts";
import { obj, presentSettings, serversOf, str, strings, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, FoundOAuth, FoundServer, LeftOut, Places, Switch } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
  details: (entry) => {
    const oauth = obj(entry.oauth);
    const found: FoundOAuth = {};
    const clientId = str(oauth?.clientId);
    // The secret, if one was given, is in Claude Code's credential store: not read (it is not ours to read).
    if (clientId !== undefined) Object.assign(found, { clientId, clientSecret: { stored: true } });
    const scopes = str(oauth?.scopes)?.split(" ").filter(Boolean);
    if (scopes !== undefined && scopes.length > 0) found.scopes = scopes;
    // Claude Code redirects to http://localhost:<callbackPort>/callback: a client registered for it names that port.
    if (typeof oauth?.callbackPort === "number") found.redirect = { port: oauth.callbackPort };
    const leftOut: LeftOut[] = presentSettings(oauth, ["authServerMetadataUrl", "xaa"], "oauth.");
    if (entry.headersHelper !== undefined) leftOut.unshift({ setting: "headersHelper", kind: "headers_helper" });
    return { ...(Object.keys(found).length > 0 ? { oauth: found } : {}), ...(leftOut.length > 0 ? { leftOut } : {}) };
  },
};

/** `.mcp.json` from each project directory up to the root, nearest first, then the user's file. */
export function claudeFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = [];
  const seen = new Set<string>();
  for (const dir of places.projectDirs) {
    for (let current = path.resolve(dir); ; current = path.dirname(current)) {
      const file = claudeProjectFile(current);
      if (!seen.has(file)) files.push(projectFile(file));
      seen.add(file);
      if (path.dirname(current) === current) break;
    }
  }
  const user = claudeUserFile(places.env);
  if (user !== undefined) files.push(userFile(user, places));
  return files;
}

/**
 * The files that only say which servers are turned off: the settings files, and the user's file,
 * whose per-project lists also turn off `.mcp.json` servers (read once when it is read for its servers too).
 */
export function claudeSwitchFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = [];
  const user = claudeUserFile(places.env);
  if (user !== undefined) files.push({ ...userFile(user, places), switchesOnly: true });
  const configDir = places.env.CLAUDE_CONFIG_DIR || (places.home !== undefined ? path.join(places.home, ".claude") : undefined);
  const settings = new Set<string>();
  if (configDir !== undefined) settings.add(path.join(configDir, "settings.json"));
  for (const dir of places.projectDirs) {
    settings.add(path.join(dir, ".claude", "settings.json"));
    settings.add(path.join(dir, ".claude", "settings.local.json"));
    const root = gitRoot(dir);
    if (root !== undefined) settings.add(path.join(root, ".claude", "settings.local.json"));
  }
  for (const file of settings) files.push(settingsFile(file));
  return files;
}

export function projectFile(file: string): ClientFile {
  return { client: "claude", scope: "project", file, format: "json", servers: (parsed) => serversOf(mcpServers(parsed), rules) };
}

export function userFile(file: string, places: Places): ClientFile {
  const keys = claudeProjectKeys(places);
  const projectsOf = (parsed: unknown) => {
    const projects = obj(obj(parsed)?.projects);
    return keys.flatMap((key) => (projects && Object.hasOwn(projects, key) ? [{ key, project: obj(projects[key]) }] : []));
  };
  return {
    client: "claude",
    scope: "user",
    file,
    format: "json",
    servers: (parsed) => {
      const found: FoundServer[] = serversOf(mcpServers(parsed), rules);
      for (const { project } of projectsOf(parsed)) found.push(...serversOf(mcpServers(project), rules));
      return found;
    },
    switches: (parsed) =>
      projectsOf(parsed).flatMap(({ key, project }): Switch[] => {
        const where = `projects[${JSON.stringify(key)}]`;
        const disabled = new Set(strings(project?.disabledMcpServers) ?? []);
        return [
          { setting: `${where}.disabledMcpServers`, off: (server) => disabled.has(server.name) },
          mcpjsonSwitch(`${where}.disabledMcpjsonServers`, project?.disabledMcpjsonServers),
        ];
      }),
  };
}

function settingsFile(file: string): ClientFile {
  return {
    client: "claude",
    scope: "user",
    file,
    format: "json",
    servers: () => [],
    switches: (parsed) => [mcpjsonSwitch("disabledMcpjsonServers", obj(parsed)?.disabledMcpjsonServers)],
    switchesOnly: true,
  };
}

/**
 * `disabledMcpjsonServers`: `.mcp.json` servers rejected, named as written or with every character
 * but letters, digits, '_' and '-' as '_' (how Claude Code compares these names).
 */
function mcpjsonSwitch(setting: string, list: unknown): Switch {
  const names = new Set((strings(list) ?? []).flatMap((name) => [name, normalizedName(name)]));
  return { setting, off: (server) => server.scope === "project" && (names.has(server.name) || names.has(normalizedName(server.name))) };
}

const normalizedName = (name: string) => name.replace(/[^a-zA-Z0-9_-]/g, "_");

/**
 * The keys under which ~/.claude.json holds this project's state: for each project directory, its
 * canonical git root, else the directory; each also as its real path (through a symlink the two differ).
 */
export function claudeProjectKeys(places: Places): string[] {
  const keys = new Set<string>();
  for (const dir of places.projectDirs) {
    const root = gitRoot(dir);
    const key = root !== undefined ? canonicalGitRoot(root) : path.resolve(dir);
    keys.add(key);
    keys.add(realPath(key));
  }
  return [...keys];
}

const mcpServers = (value: unknown): unknown => obj(value)?.mcpServers;
