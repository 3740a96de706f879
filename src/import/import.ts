// `subs mcp import` (issue 15): the remote MCP servers a person already configured in Claude Code,
// Codex, Cursor, VS Code or Gemini CLI, declared in substructure.toml. Each client's files are read
// in its own documented format (src/import/clients/), the plan decides (plan.ts), and the file is
// edited as `subs mcp add` edits it. Never prints: the command renders the result.
import { existsSync } from "node:fs";
import path from "node:path";
import { appendConnections, type NewConnection } from "../config/edit.ts";
import { CONFIG_FILE_NAME, findConfigPath } from "../config/find.ts";
import { starterFile } from "../config/init.ts";
import { loadConfigText } from "../config/load.ts";
import { withConfigLock } from "../config/lock.ts";
import { readConfigFile } from "../config/read.ts";
import type { Context } from "../context.ts";
import { interrupted, SubsError, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { isInside, shownPath } from "../clients/where.ts";
import { claudeFiles, projectFile as claudeProjectFile, userFile as claudeUserFile } from "./clients/claude.ts";
import { codexFile, codexFiles } from "./clients/codex.ts";
import { cursorFile, cursorFiles } from "./clients/cursor.ts";
import { geminiFile, geminiFiles } from "./clients/gemini.ts";
import { mcpJson, settingsJson, vscodeFiles } from "./clients/vscode.ts";
import { parseJsonc, readBounded, readClientFile } from "./files.ts";
import { createPlanner, type Plan } from "./plan.ts";
import { CLIENTS, MAX_SERVERS_PER_FILE, TooManyServers, type ClientFile, type ClientName, type FoundServer, type Places, type Scope } from "./types.ts";

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
  /** Client files present but unreadable (not valid JSON, …); the rest was imported. */
  unreadable: Array<FileReport & { problem: string }>;
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
  for (const file of files) {
    await stopIfAsked(ctx.signal);
    const where = { client: file.client, scope: file.scope, file: file.file };
    const onLarge = (bytes: number) => reporter?.info(`Reading ${shownPath(ctx.cwd, file.file, home)} (${Math.round(bytes / 1024 / 1024)} MiB)…`);
    const result = readServers(file, onLarge);
    if (!result.ok) {
      if (!result.missing) unreadable.push({ ...where, problem: result.problem });
      continue;
    }
    read.push({ ...where, servers: result.servers.length });
    found.push({ origin: where, servers: result.servers });
  }
  // A file named on the command line that cannot be read is the command's failure, not a note.
  if (options.from !== undefined && !isClient(options.from) && unreadable.length > 0) {
    throw usage(`${options.from} ${unreadable[0]!.problem}`, { hint: "give a client's MCP config file, or --from claude|codex|cursor|vscode|gemini" });
  }

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
    const connections: NewConnection[] = plan.added.map((a) => ({ id: a.id, url: a.url, ...(a.token_env !== null ? { tokenEnv: a.token_env } : {}) }));
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
      looked: files.map((f) => ({ client: f.client, scope: f.scope, file: f.file })),
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

/** The servers `file` declares, or why they could not be read (past the caps: src/import/files.ts, MAX_SERVERS_PER_FILE). */
function readServers(file: ClientFile, onLarge: (bytes: number) => void): { ok: true; servers: FoundServer[] } | { ok: false; missing: boolean; problem: string } {
  const result = readClientFile(file.file, file.format, onLarge);
  if (!result.ok) return result;
  try {
    const servers = file.servers(result.value);
    if (servers.length > MAX_SERVERS_PER_FILE) throw new TooManyServers();
    return { ok: true, servers };
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
    return { path: resolved, exists: existsSync(resolved) };
  }
  try {
    return { path: findConfigPath({ env: ctx.env, cwd: ctx.cwd }), exists: true };
  } catch (error) {
    if (error instanceof SubsError && error.kind === "usage") return { path: path.resolve(ctx.cwd, CONFIG_FILE_NAME), exists: false };
    throw error;
  }
}

const isClient = (from: string): from is ClientName => (CLIENTS as readonly string[]).includes(from);

function filesFor(from: string | undefined, places: Places, cwd: string): ClientFile[] {
  if (from !== undefined && !isClient(from)) return [fileByShape(path.resolve(cwd, from), from, places)];
  const files = (from === undefined ? CLIENTS : [from]).flatMap((client) => CLIENT_FILES[client](places));
  // Run in the home directory, a project file is the user file (~/.cursor/mcp.json): read once, as the user's.
  const byPath = new Map<string, ClientFile>();
  for (const file of files) {
    const first = byPath.get(file.file);
    if (!first) byPath.set(file.file, file);
    else if (file.scope === "user") byPath.set(file.file, { ...first, scope: "user" });
  }
  return [...byPath.values()];
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
