// Where each MCP client keeps its configuration, as that client itself finds it: shared by
// `subs mcp import` (reads them) and `subs agent connect` / `subs mcp connect` (write one entry).
// Only paths are decided here, from the environment a command was given (ctx.env), never from
// process.env; nothing is read but the directories a git root is looked up by.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";

export type Env = Readonly<Record<string, string | undefined>>;

/** The home directory as the environment gives it (tests and sandboxes point it elsewhere). */
export const homeOf = (env: Env): string | undefined => env.HOME || env.USERPROFILE || undefined;

/**
 * Claude Code's own file (user and local scopes): `$CLAUDE_CONFIG_DIR/.claude.json` when that is
 * set, else `~/.claude.json` (https://code.claude.com/docs/en/settings, "Environment variables").
 */
export function claudeUserFile(env: Env): string | undefined {
  if (env.CLAUDE_CONFIG_DIR) return path.join(env.CLAUDE_CONFIG_DIR, ".claude.json");
  const home = homeOf(env);
  return home === undefined ? undefined : path.join(home, ".claude.json");
}

/** Claude Code's project scope: `.mcp.json` in the directory it runs in. */
export const claudeProjectFile = (dir: string): string => path.join(dir, ".mcp.json");

/**
 * The key of `projects` in ~/.claude.json under which Claude Code keeps a directory's local-scope
 * servers: the canonical root of the git repository the directory is in (a linked worktree's
 * main repository), else the directory itself.
 */
export const claudeProjectKey = (dir: string): string => gitRoot(dir) ?? dir;

/** Codex's home: `$CODEX_HOME`, default `~/.codex` (openai/codex docs/config.md). */
export function codexHome(env: Env): string | undefined {
  if (env.CODEX_HOME) return env.CODEX_HOME;
  const home = homeOf(env);
  return home === undefined ? undefined : path.join(home, ".codex");
}

/** Codex's user file, `config.toml` in its home. */
export function codexUserFile(env: Env): string | undefined {
  const home = codexHome(env);
  return home === undefined ? undefined : path.join(home, "config.toml");
}

/** Codex's project file: `.codex/config.toml` in the project (read in a trusted project only). */
export const codexProjectFile = (dir: string): string => path.join(dir, ".codex", "config.toml");

/**
 * Gemini CLI's user settings: `~/.gemini/settings.json`, where `$GEMINI_CLI_HOME` stands for the
 * home directory when set (gemini-cli docs/get-started/configuration.md).
 */
export function geminiUserFile(env: Env): string | undefined {
  const home = env.GEMINI_CLI_HOME || homeOf(env);
  return home === undefined ? undefined : path.join(home, ".gemini", "settings.json");
}

/** Gemini CLI's workspace settings: `.gemini/settings.json` in the directory it runs in (no walk upward). */
export const geminiProjectFile = (dir: string): string => path.join(dir, ".gemini", "settings.json");

/** Cursor's global file, `~/.cursor/mcp.json` (https://cursor.com/docs/context/mcp). */
export function cursorUserFile(env: Env): string | undefined {
  const home = homeOf(env);
  return home === undefined ? undefined : path.join(home, ".cursor", "mcp.json");
}

/** Cursor's project file, `.cursor/mcp.json`. */
export const cursorProjectFile = (dir: string): string => path.join(dir, ".cursor", "mcp.json");

/**
 * The VS Code user profile's directory, by platform (VS Code, "User and workspace settings"):
 * Linux `$XDG_CONFIG_HOME/Code/User` (`~/.config`), macOS `~/Library/Application Support/Code/User`,
 * Windows `%APPDATA%\Code\User`. Every one that could exist, most specific first.
 */
export function vscodeUserDirs(env: Env): string[] {
  const home = homeOf(env);
  const dirs = new Set<string>();
  if (env.XDG_CONFIG_HOME) dirs.add(path.join(env.XDG_CONFIG_HOME, "Code", "User"));
  if (env.APPDATA) dirs.add(path.join(env.APPDATA, "Code", "User"));
  if (home !== undefined) {
    dirs.add(path.join(home, ".config", "Code", "User"));
    dirs.add(path.join(home, "Library", "Application Support", "Code", "User"));
  }
  return [...dirs];
}

/** VS Code's workspace file, `.vscode/mcp.json`. */
export const vscodeProjectFile = (dir: string): string => path.join(dir, ".vscode", "mcp.json");

/**
 * Claude Desktop's directory, where `claude_desktop_config.json` lives (modelcontextprotocol.io,
 * "Connect to local MCP servers"): macOS `~/Library/Application Support/Claude`, Windows
 * `%APPDATA%\Claude`; there is no official Linux build, whose community builds use
 * `$XDG_CONFIG_HOME/Claude` (`~/.config/Claude`). Every one that could exist.
 */
export function claudeDesktopDirs(env: Env): string[] {
  const home = homeOf(env);
  const dirs = new Set<string>();
  if (env.APPDATA) dirs.add(path.join(env.APPDATA, "Claude"));
  if (home !== undefined) dirs.add(path.join(home, "Library", "Application Support", "Claude"));
  if (env.XDG_CONFIG_HOME) dirs.add(path.join(env.XDG_CONFIG_HOME, "Claude"));
  if (home !== undefined) dirs.add(path.join(home, ".config", "Claude"));
  return [...dirs];
}

export const CLAUDE_DESKTOP_FILE = "claude_desktop_config.json";

/**
 * The root of the git repository `dir` is in, as `git rev-parse --show-toplevel` would name it for
 * the main worktree: the nearest directory upward holding `.git`; when that `.git` is a file
 * (`gitdir: …`) of a linked worktree, whose git directory names the shared one in `commondir`,
 * the main worktree's root. Undefined outside a repository.
 */
export function gitRoot(dir: string): string | undefined {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    const dotGit = path.join(at, ".git");
    const stat = statOf(dotGit);
    if (stat?.isDirectory()) return at;
    if (stat?.isFile()) return linkedWorktreeRoot(dotGit) ?? at;
    if (path.dirname(at) === at) return undefined;
  }
}

function statOf(file: string) {
  try {
    return statSync(file, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** The main worktree's root for a linked worktree's `.git` file; undefined for anything else (a submodule). */
function linkedWorktreeRoot(dotGitFile: string): string | undefined {
  try {
    const gitdir = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGitFile, "utf8"))?.[1];
    if (gitdir === undefined) return undefined;
    const own = path.resolve(path.dirname(dotGitFile), gitdir);
    const common = path.resolve(own, readFileSync(path.join(own, "commondir"), "utf8").trim());
    return path.basename(common) === ".git" ? path.dirname(common) : undefined;
  } catch {
    return undefined;
  }
}

export const isInside = (file: string, dir: string): boolean => {
  const relative = path.relative(dir, file);
  return relative !== "" && !relative.startsWith("..") && !path.isAbsolute(relative);
};

/** A path as messages show it: relative to the working directory when inside it, else `~/…` when in `home`. */
export function shownPath(cwd: string, file: string, home?: string): string {
  if (isInside(file, cwd)) return path.relative(cwd, file);
  if (home !== undefined && isInside(file, home)) return `~/${path.relative(home, file)}`;
  return file;
}
