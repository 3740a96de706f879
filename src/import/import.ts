// `subs mcp import`: the remote MCP servers a person already configured in Claude Code,
// Codex, Cursor, VS Code or Gemini CLI, declared in substructure.toml. Each client's files are read
// in its own documented format (src/import/clients/), the plan decides (plan.ts), and the file is
// edited as `subs mcp add` edits it. Never prints: the command renders the result.
import { existsSync } from "node:fs";
import path from "node:path";
import { appendConnections, type NewConnection } from "../config/edit.ts";
import { assertDirectoryFor, CONFIG_FILE_NAME, findConfigPath } from "../config/find.ts";
import { starterFile } from "../config/init.ts";
import { loadConfigText } from "../config/load.ts";
import { withConfigLock } from "../config/lock.ts";
import { readConfigFile } from "../config/read.ts";
import type { Context } from "../context.ts";
import { interrupted, SubsError, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { claudeFiles, claudeSwitchFiles, projectFile as claudeProjectFile, userFile as claudeUserFile } from "./clients/claude.ts";
import { codexFile, codexFiles } from "./clients/codex.ts";
import { cursorFile, cursorFiles } from "./clients/cursor.ts";
import { geminiFile, geminiFiles, geminiSwitchFiles } from "./clients/gemini.ts";
import { mcpJson, settingsJson, vscodeFiles } from "./clients/vscode.ts";
import { readBounded } from "../clients/read.ts";
import { isInside, shownPath } from "../clients/where.ts";
import { parseJsonc, readClientFile } from "./files.ts";
import { createPlanner, type Plan } from "./plan.ts";
import { CLIENTS, MAX_SERVERS_PER_FILE, TooManyServers, type ClientFile, type ClientName, type FoundServer, type Places, type Scope, type Switch } from "./types.ts";

export type ImportOptions = {
  /** A client's name, or the path of one of their files; absent: every client. */
  from?: string;
  dryRun: boolean;
  config?: string;
};

export type FileReport = { client: ClientName; scope: Scope; file: string };

export type ImportResult = Plan & {
  /** substructure.toml: where it is, and whether this run creates it (there was none). */
  config: { path: string; displayPath: string; created: boolean; remote: boolean };
  dryRun: boolean;
  /** The file was written (false under --dry-run, or with nothing to add). */
  written: boolean;
  /** Every client file read, with how many servers it declares. */
  read: Array<FileReport & { servers: number }>;
  /**
   * Client files present but unreadable (not valid JSON, …); the rest was imported. `role`: what
   * was lost, the servers it declares or what it says about servers turned off (a settings file).
   */
  unreadable: Array<FileReport & { problem: string; role: "servers" | "switches" }>;
  /** Every file looked for (for "nothing found"). */
  looked: FileReport[];
};

const CLIENT_FILES: Record<ClientName, (places: Places) => ClientFile[]> = {
  claude: claudeFiles,
  codex: codexFiles,
  cursor: cursorFiles,
  vscode: vscodeFiles,
  gemini: geminiFiles,
};

/** The files a client reads only to tell which servers are turned off (Codex says it in the server's table; Cursor and VS Code outside their files). */
const SWITCH_FILES: Record<ClientName, (places: Places) => ClientFile[]> = {
  claude: claudeSwitchFiles,
  codex: () => [],
  cursor: () => [],
  vscode: () => [],
  gemini: geminiSwitchFiles,
};

/**
 * Reads the client files (each bounded: src/import/files.ts), then, holding substructure.toml's
 * lock (src/config/lock.ts), reads it, plans and writes. Ctrl-C and SIGTERM (ctx.signal) are
 * looked at between files and between steps: they stop the import with nothing written.
 */
export async function importServers(
  ctx: Pick<Context, "env" | "cwd" | "secrets" | "signal">,
  options: ImportOptions,
  reporter?: Pick<Reporter, "info">,
): Promise<ImportResult> {
  const target = locateConfig(ctx, options.config);
  const places: Places = {
    projectDirs: [...new Set([path.dirname(target.path), path.resolve(ctx.cwd)])],
    // The home directory as the environment gives it (tests and sandboxes point it elsewhere).
    home: ctx.env.HOME || ctx.env.USERPROFILE || undefined,
    env: ctx.env,
  };
  const home = places.home;
  const files = filesFor(options.from, places, ctx.cwd);

  const read: ImportResult["read"] = [];
  const unreadable: ImportResult["unreadable"] = [];
  const found: Array<{ origin: FileReport; servers: FoundServer[] }> = [];
  const switches: Array<{ client: ClientName; file: string; switch: Switch }> = [];
  for (const file of files) {
    await stopIfAsked(ctx.signal);
    const where = { client: file.client, scope: file.scope, file: file.file };
    const onLarge = (bytes: number) => reporter?.info(`Reading ${shownPath(ctx.cwd, file.file, home)} (${Math.round(bytes / 1024 / 1024)} MiB)…`);
    const result = readServers(file, onLarge);
    if (!result.ok) {
      if (!result.missing) unreadable.push({ ...where, problem: result.problem, role: file.switchesOnly ? "switches" : "servers" });
      continue;
    }
    for (const s of result.switches) switches.push({ client: file.client, file: file.file, switch: s });
    if (file.switchesOnly) continue;
    read.push({ ...where, servers: result.servers.length });
    found.push({ origin: where, servers: result.servers });
  }
  // A file named on the command line that cannot be read is the command's failure, not a note.
  const named = options.from !== undefined && !isClient(options.from) ? unreadable.find((u) => u.role === "servers") : undefined;
  if (named) throw usage(`${options.from} ${named.problem}`, { hint: "give a client's MCP config file, or --from claude|codex|cursor|vscode|gemini" });
  // Every file read first: a server may be turned off by a file read after its own (~/.claude.json turns off `.mcp.json` servers).
  for (const file of found) file.servers = file.servers.map((server) => turnedOff(server, file.origin, switches));

  const shown = shownPath(ctx.cwd, target.path);
  const edit = async () => {
    // Read again under the lock: the file as it is now, not as it was before the lock was had.
    const exists = existsSync(target.path);
    const text = exists ? readConfigFile(target.path) : undefined;
    const config = text !== undefined ? loadConfigText(target.path, text, ctx) : undefined;
    const planner = createPlanner({ existing: config?.connections ?? [], remote: config?.remote !== undefined, secret: (value) => ctx.secrets?.add(value) });
    for (const file of found) {
      await stopIfAsked(ctx.signal);
      planner.add(file);
    }
    const plan = planner.plan;
    const connections: NewConnection[] = plan.added.map((a): NewConnection => ({
      id: a.id,
      ...(a.url !== null ? { url: a.url } : { local: { command: a.command!, args: a.args, env: a.env, ...(a.cwd !== null ? { cwd: a.cwd } : {}) } }),
      ...(Object.keys(a.headers).length > 0 ? { headers: a.headers } : {}),
      ...(a.token_env !== null ? { tokenEnv: a.token_env } : {}),
      ...(a.oauth?.client_id !== undefined ? { clientId: a.oauth.client_id } : {}),
      ...(a.oauth?.client_secret_env !== undefined ? { clientSecretEnv: a.oauth.client_secret_env } : {}),
      ...(a.oauth?.scopes !== undefined ? { scopes: a.oauth.scopes } : {}),
    }));
    if (connections.length > 0) {
      await stopIfAsked(ctx.signal);
      const edit =
        config && text !== undefined
          ? appendConnections(config, text, connections, { cwd: ctx.cwd, env: ctx.env })
          : // No file yet: the one `subs init` writes (its comments show the rest of the format), with these declared.
            starterFile({ path: target.path, cwd: ctx.cwd, env: ctx.env, connections });
      // The check of a large edit takes a moment: a signal during it is seen here, before anything is written.
      await stopIfAsked(ctx.signal);
      if (!options.dryRun) edit.write();
    }
    return {
      ...plan,
      config: { path: config?.path ?? target.path, displayPath: config?.displayPath ?? shown, created: !exists && connections.length > 0, remote: config?.remote !== undefined },
      dryRun: options.dryRun,
      written: !options.dryRun && connections.length > 0,
      read,
      unreadable,
      looked: files.filter((f) => !f.switchesOnly).map((f) => ({ client: f.client, scope: f.scope, file: f.file })),
    };
  };
  // A dry run writes nothing, so it takes no lock (and works where the file cannot be written).
  return options.dryRun ? edit() : withConfigLock(target.path, { shown, signal: ctx.signal, ...(reporter ? { reporter } : {}) }, edit);
}

/**
 * Lets pending events run (a signal is one), then throws if Ctrl-C or SIGTERM came: the import's
 * long parts are synchronous, and a signal is only seen between them.
 */
async function stopIfAsked(signal: AbortSignal): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  if (signal.aborted) throw interrupted();
}

/**
 * The servers `file` declares and what it says about servers turned off, or why it could not be
 * read (past the caps: src/import/files.ts, MAX_SERVERS_PER_FILE).
 */
function readServers(
  file: ClientFile,
  onLarge: (bytes: number) => void,
): { ok: true; servers: FoundServer[]; switches: Switch[] } | { ok: false; missing: boolean; problem: string } {
  const result = readClientFile(file.file, file.format, onLarge);
  if (!result.ok) return result;
  try {
    const servers = file.switchesOnly ? [] : file.servers(result.value);
    if (servers.length > MAX_SERVERS_PER_FILE) throw new TooManyServers();
    return { ok: true, servers, switches: file.switches?.(result.value) ?? [] };
  } catch (error) {
    if (error instanceof TooManyServers) return { ok: false, missing: false, problem: error.message };
    throw error;
  }
}

/**
 * The file to import into: the one every command would read (--config, $SUBS_CONFIG, the nearest
 * upward); when there is none, the one `subs init` would write (the named path, else
 * ./substructure.toml), created as `subs init` creates it.
 */
function locateConfig(ctx: Pick<Context, "env" | "cwd">, explicit: string | undefined): { path: string; exists: boolean } {
  const named = explicit ?? (ctx.env.SUBS_CONFIG || undefined);
  if (named !== undefined) {
    const resolved = path.resolve(ctx.cwd, named);
    const exists = existsSync(resolved);
    // Said before anything is read, --dry-run too: its report would announce a file that cannot be written.
    if (!exists) assertDirectoryFor(resolved, named);
    return { path: resolved, exists };
  }
  try {
    return { path: findConfigPath({ env: ctx.env, cwd: ctx.cwd }), exists: true };
  } catch (error) {
    if (error instanceof SubsError && error.kind === "usage") return { path: path.resolve(ctx.cwd, CONFIG_FILE_NAME), exists: false };
    throw error;
  }
}

const isClient = (from: string): from is ClientName => (CLIENTS as readonly string[]).includes(from);

/**
 * The files to read: the servers' files of the clients asked for (or the one file named), then the
 * files those clients read only to tell which servers are off. A file is read once: run in the home
 * directory, a project file is the user file (~/.cursor/mcp.json), read as the user's; one read for
 * its servers is not read again for its switches (it carries them).
 */
function filesFor(from: string | undefined, places: Places, cwd: string): ClientFile[] {
  const named = from !== undefined && !isClient(from) ? fileByShape(path.resolve(cwd, from), from, places) : undefined;
  const clients = named ? [named.client] : from === undefined ? CLIENTS : [from as ClientName];
  const files = [...(named ? [named] : clients.flatMap((client) => CLIENT_FILES[client](places))), ...clients.flatMap((client) => SWITCH_FILES[client](places))];
  const byPath = new Map<string, ClientFile>();
  for (const file of files) {
    const first = byPath.get(file.file);
    if (!first) byPath.set(file.file, file);
    else if (file.scope === "user" && !file.switchesOnly) byPath.set(file.file, { ...first, scope: "user" });
  }
  return [...byPath.values()];
}

/** `server`, marked turned off by the first switch of its client that says so (unless its own file already did). */
function turnedOff(server: FoundServer, origin: FileReport, switches: ReadonlyArray<{ client: ClientName; file: string; switch: Switch }>): FoundServer {
  if (server.kind !== "remote" || server.disabled) return server;
  const by = switches.find((s) => s.client === origin.client && s.switch.off({ name: server.name, scope: origin.scope, file: origin.file }));
  return by ? { ...server, disabled: { setting: by.switch.setting, file: by.file } } : server;
}

/**
 * The client a file given by path belongs to: by its name where that says (`config.toml`,
 * `.claude.json`, `.mcp.json`, `.cursor/`, `.gemini/`, `.vscode/`), else by its shape.
 */
function fileByShape(file: string, given: string, places: Places): ClientFile {
  const scope: Scope = places.home !== undefined && isInside(file, places.home) && !places.projectDirs.some((d) => isInside(file, d)) ? "user" : "project";
  const base = path.basename(file);
  const parent = path.basename(path.dirname(file));
  if (file.endsWith(".toml")) return codexFile(file, scope);
  if (base === ".claude.json") return claudeUserFile(file, places);
  if (base === ".mcp.json") return claudeProjectFile(file);
  if (parent === ".cursor") return cursorFile(file, scope);
  if (parent === ".gemini") return geminiFile(file, scope);
  const text = readBounded(file);
  if (typeof text !== "string") {
    throw usage(text.missing ? `${given}: no such file` : `${given} ${text.problem}`, { hint: "give a client's MCP config file, or --from claude|codex|cursor|vscode|gemini" });
  }
  const parsed = parseJsonc(text);
  if (!parsed.ok) throw usage(`${given} ${parsed.problem}`, { hint: "give a client's MCP config file (JSON or TOML)" });
  const value = (typeof parsed.value === "object" && parsed.value !== null ? parsed.value : {}) as Record<string, unknown>;
  if (parent === ".vscode" || "servers" in value) return base === "settings.json" ? settingsJson(file, scope) : mcpJson(file, scope);
  if ("mcp.servers" in value || (typeof value.mcp === "object" && value.mcp !== null && "servers" in value.mcp)) return settingsJson(file, scope);
  if ("projects" in value) return claudeUserFile(file, places);
  if ("mcpServers" in value) {
    const entries = typeof value.mcpServers === "object" && value.mcpServers !== null ? Object.values(value.mcpServers) : [];
    // `httpUrl` is Gemini CLI's alone; Claude Code's and Cursor's entries read alike.
    if (entries.some((e) => typeof e === "object" && e !== null && "httpUrl" in e)) return geminiFile(file, scope);
    return claudeProjectFile(file);
  }
  throw usage(`${given} is not an MCP config file subs knows`, {
    hint: "it reads `mcpServers` (Claude Code, Cursor, Gemini CLI), `servers` (VS Code) and `[mcp_servers.*]` (Codex)",
  });
}

export { shownPath };
