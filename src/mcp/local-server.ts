// A local (stdio) MCP server: a program subs starts on this machine and speaks MCP with over its
// stdin and stdout, one JSON-RPC message per line (MCP "Transports: stdio"). What it is given and
// how it ends (SECURITY.md, "Local servers"):
// - its environment: a few of the machine's variables a program needs to run at all
//   (BASE_VARIABLES) and its own `env` with its templates read now; never the person's others,
//   which hold their tokens;
// - its own process group (detached), so that ending it ends what it started too (`npx` runs the
//   server as a child of its own): stdin closed first (the spec's way to ask a server to end), then
//   SIGTERM to the group, then SIGKILL; every group still running when subs exits is killed by
//   main.ts (Context.processGroups), and when subs is killed outright (SIGKILL, which runs nothing
//   of it) by a watcher (WATCHER);
// - its stderr: a log file (0600) and, under --debug, subs's own stderr; never a serve's terminal.
//   Its last lines name what went wrong when it exits before it should;
// - bounds: one message on stdout may be as large as one HTTP answer (answer-cap.ts), its log
//   file holds at most LOG_RUN_BYTES per start.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, fstatSync, ftruncateSync, mkdirSync, openSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { LocalConnection } from "../config/types.ts";
import { expandTemplates, localVariables } from "../config/templates.ts";
import type { Context } from "../context.ts";
import { failed, SubsError } from "../errors.ts";
import { escaped } from "../text/unsafe.ts";
import { limitBytes, type AnswerLimit } from "./answer-cap.ts";

/** The machine's variables a local server gets besides its own `env` (as the MCP SDK's stdio client gives, and a locale). */
export const BASE_VARIABLES = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"] as const;

/** How much of a server's stderr one start of it may write to its log file. */
const LOG_RUN_BYTES = 8 * 1024 * 1024;
/** A log file larger than this when a server starts begins again. */
const LOG_KEEP_BYTES = 1024 * 1024;
/** Lines of stderr kept to say why a server ended, each cut to LAST_LINE_CHARS. */
const LAST_LINES = 12;
const LAST_LINE_CHARS = 400;
/** How long a server has to end after its stdin closes, then after SIGTERM; after SIGTERM when subs is being stopped. */
const END_GRACE_MS = 2000;
const URGENT_GRACE_MS = 500;

export type LocalServerContext = Pick<Context, "env" | "now"> & Partial<Pick<Context, "processGroups" | "debugLog" | "secrets" | "signal">>;

export type LocalEnvironment = { env: Record<string, string>; args: string[]; missing: string[] };

/** The variables and arguments `connection`'s process starts with, its templates read from `env`. */
export function localEnvironment(connection: LocalConnection, env: Readonly<Record<string, string | undefined>>): LocalEnvironment {
  const missing = new Set<string>();
  const out: Record<string, string> = {};
  for (const name of BASE_VARIABLES) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  for (const [name, value] of Object.entries(connection.process.env)) out[name] = expandTemplates(value, env, missing);
  const args = connection.process.args.map((arg) => expandTemplates(arg, env, missing));
  return { env: out, args, missing: [...missing] };
}

/** The values a template put in the process's variables or arguments: secrets of the run. */
function templateValues(connection: LocalConnection, env: Readonly<Record<string, string | undefined>>): string[] {
  return localVariables(connection.process).flatMap((name) => (env[name] ? [env[name]] : []));
}

/** Where `connection`'s stderr is written: one file per connection of one substructure.toml. */
export function logPathOf(connection: LocalConnection, configPath: string, env: Readonly<Record<string, string | undefined>>): string {
  const home = env.HOME;
  const state = env.XDG_STATE_HOME && path.isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : home ? path.join(home, ".local", "state") : path.join(os.tmpdir(), `subs-${process.getuid?.() ?? "user"}`);
  const file = createHash("sha256").update(configPath).digest("hex").slice(0, 10);
  return path.join(state, "subs", "logs", `${connection.id}-${file}.log`);
}

/** A message of the process's own, cut and made visible, for an error. */
const visible = (text: string) => escaped(text.length > LAST_LINE_CHARS ? `${text.slice(0, LAST_LINE_CHARS)}…` : text);

/**
 * The stdio transport of one local server process. The MCP SDK has one (StdioClientTransport),
 * but it starts the process in subs's own process group, so ending it leaves the server's own
 * children (the server `npx` starts) running, and its stderr can only be inherited, piped whole
 * or ignored.
 */
export class LocalServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  #child: ChildProcess | undefined;
  /** Ends the watcher of its group (WATCHER) once the group has ended. */
  #watcher: (() => void) | undefined;
  #stdout = new LineBuffer();
  #stderr = new LineBuffer();
  #last: string[] = [];
  #log: number | undefined;
  #logged = 0;
  #ending = false;
  #exited: Promise<void> | undefined;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** How the process ended when nobody asked it to (a crash), once it has. */
  ended: SubsError | undefined;

  constructor(
    readonly connection: LocalConnection,
    private readonly ctx: LocalServerContext,
    private readonly options: { limit: AnswerLimit; configPath: string },
  ) {}

  /** Why the process ended, as the end of an error message: its exit status and last lines. */
  get ending(): string {
    const status = this.#exit ? (this.#exit.code !== null ? `exited with status ${this.#exit.code}` : `was stopped by ${this.#exit.signal}`) : "ended";
    // The last few lines, on one line: an error is one line (the whole log is a file).
    const lines = this.#last.filter((line) => line.trim() !== "").slice(-3);
    const last = lines.length ? `; stderr ended with: ${lines.map((line) => visible(line.trim())).join(" / ")}` : "; it wrote nothing on stderr";
    return `${status}${last}`;
  }

  get logPath(): string {
    return logPathOf(this.connection, this.options.configPath, this.ctx.env);
  }

  async start(): Promise<void> {
    const { connection, ctx } = this;
    const { env, args, missing } = localEnvironment(connection, ctx.env);
    if (missing.length > 0) {
      throw new SubsError("usage", `${connection.id}: ${missing.map((n) => `$${n}`).join(", ")} ${missing.length === 1 ? "is" : "are"} not set; [mcp.${connection.id}] reads ${missing.length === 1 ? "it" : "them"} when it starts`, {
        hint: `export ${missing[0]}=… and run again`,
        code: "variable_unset",
      });
    }
    for (const value of templateValues(connection, ctx.env)) ctx.secrets?.add(value);
    this.#openLog(args);
    const child = spawn(connection.process.command, args, { cwd: connection.process.cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true, windowsHide: true });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once("close", () => resolve()));
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => {
        if (child.pid !== undefined) {
          ctx.processGroups?.add(child.pid);
          this.#watcher = watch(child.pid, ctx);
        }
        resolve();
      });
      child.once("error", (error: NodeJS.ErrnoException) => {
        this.#closeLog();
        const why = error.code === "ENOENT" ? `\`${connection.process.command}\` was not found (PATH, or the path relative to ${connection.process.cwd})` : `\`${connection.process.command}\` could not be started (${error.code ?? error.message})`;
        reject(failed(`${connection.id}: ${why}`, { code: "server_not_started", hint: "check `command` and `cwd` in the file" }));
      });
    });
    const limit = limitBytes(this.options.limit);
    child.stdout!.on("data", (chunk: Buffer) => {
      for (const line of this.#stdout.push(chunk)) this.#receive(line);
      if (this.#stdout.size > limit) {
        this.onerror?.(failed(`${connection.id}: the local server sent one message over ${this.options.limit.mib} MiB; subs stopped it`, { code: "answer_too_large" }));
        void this.close();
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      for (const line of this.#stderr.push(chunk)) this.#note(line);
      // A line with no end yet is kept only up to a bound; what passes it is noted as it is.
      if (this.#stderr.size > LAST_LINE_CHARS * 4) this.#note(this.#stderr.take());
    });
    // A pipe's error (EPIPE as the process dies) is the process ending, which "close" reports.
    for (const stream of [child.stdin!, child.stdout!, child.stderr!]) stream.on("error", () => {});
    child.once("exit", (code, signal) => {
      this.#exit = { code, signal };
    });
    child.once("close", () => {
      if (child.pid !== undefined) ctx.processGroups?.delete(child.pid);
      this.#watcher?.();
      const rest = this.#stderr.take();
      if (rest) this.#note(rest);
      if (!this.#ending) {
        this.ended = failed(`${connection.id}: the local server ${this.ending}`, { code: "server_exited", hint: `its whole log: ${this.logPath}` });
        this.onerror?.(this.ended);
      }
      this.#closeLog();
      // What is left of the group once its leader ended (a child the server started).
      killGroup(child.pid, "SIGKILL");
      this.onclose?.();
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin || stdin.destroyed || !stdin.writable) throw failed(`${this.connection.id}: the local server ${this.ending}`, { code: "server_exited" });
    const line = `${JSON.stringify(message)}\n`;
    if (!stdin.write(line)) await new Promise<void>((resolve) => stdin.once("drain", resolve));
  }

  /**
   * Ends the process and its group: stdin closed, then SIGTERM, then SIGKILL (MCP "stdio":
   * Shutdown). When subs itself is being stopped (Ctrl-C, SIGTERM: the context's signal), SIGTERM
   * goes at once: whoever stops subs may not wait long before a SIGKILL, which nothing outlives
   * to end the group.
   */
  async close(): Promise<void> {
    const child = this.#child;
    if (!child || this.#ending) return this.#exited;
    this.#ending = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      const urgent = this.ctx.signal?.aborted === true;
      if (urgent || !(await within(this.#exited!, END_GRACE_MS))) {
        killGroup(child.pid, "SIGTERM");
        if (!(await within(this.#exited!, urgent ? URGENT_GRACE_MS : END_GRACE_MS))) killGroup(child.pid, "SIGKILL");
      }
    }
    await this.#exited;
  }

  #receive(line: string): void {
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      // A server printing its banner on stdout breaks the protocol; said, and read past, as the SDK does.
      this.onerror?.(new Error(`${this.connection.id}: the local server wrote a line on stdout that is not an MCP message`));
      this.#note(`(on stdout) ${line}`);
      return;
    }
    this.onmessage?.(message);
  }

  #note(line: string): void {
    const text = this.ctx.secrets ? this.ctx.secrets.scrub(line) : line;
    this.#last.push(text);
    if (this.#last.length > LAST_LINES) this.#last.shift();
    this.ctx.debugLog?.(`${this.connection.id} (stderr): ${visible(text)}`);
    this.#write(`${text}\n`);
  }

  #openLog(args: string[]): void {
    const file = this.logPath;
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      const fd = openSync(file, "a", 0o600);
      if (fstatSync(fd).size > LOG_KEEP_BYTES) ftruncateSync(fd, 0);
      this.#log = fd;
    } catch {
      // No log (a read-only home): the last lines still say what went wrong.
      this.#log = undefined;
    }
    const command = [this.connection.process.command, ...args].join(" ");
    const scrubbed = this.ctx.secrets ? this.ctx.secrets.scrub(command) : command;
    this.#write(`--- ${new Date(this.ctx.now()).toISOString()} subs started: ${scrubbed} (in ${this.connection.process.cwd})\n`);
  }

  #write(text: string): void {
    if (this.#log === undefined) return;
    const bytes = Buffer.byteLength(text);
    if (this.#logged + bytes > LOG_RUN_BYTES) {
      writeSync(this.#log, `--- subs: more than ${LOG_RUN_BYTES / 1024 / 1024} MiB of stderr; the rest is not kept\n`);
      this.#closeLog();
      return;
    }
    this.#logged += bytes;
    try {
      writeSync(this.#log, text);
    } catch {
      this.#closeLog();
    }
  }

  #closeLog(): void {
    if (this.#log === undefined) return;
    try {
      closeSync(this.#log);
    } catch {}
    this.#log = undefined;
  }
}

/** Bytes split into lines as they arrive; `size` is what waits for its line's end. */
class LineBuffer {
  #parts: Buffer[] = [];
  size = 0;

  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      this.#parts.push(chunk.subarray(start, end));
      lines.push(Buffer.concat(this.#parts).toString("utf8").replace(/\r$/, ""));
      this.#parts = [];
      this.size = 0;
      start = end + 1;
    }
    if (start < chunk.length) {
      this.#parts.push(chunk.subarray(start));
      this.size += chunk.length - start;
    }
    return lines;
  }

  take(): string {
    const rest = Buffer.concat(this.#parts).toString("utf8");
    this.#parts = [];
    this.size = 0;
    return rest;
  }
}

const SH = "/bin/sh";
/**
 * A watcher for one server's group: a shell in a group of its own that waits on fd 3, a pipe whose
 * other end subs holds and never writes. When subs ends, however it ends, the kernel closes that
 * end and the watcher kills the group. A SIGKILL is the one end of subs that runs none of its code
 * (a client that kills its servers outright), and without this what the server started (`npx`'s
 * child) was left running.
 */
const WATCHER = 'read _ <&3; kill -KILL "-$1" 2>/dev/null';

/**
 * Starts the watcher of group `pgid`; returns what ends it once the group has ended: SIGKILL to the
 * watcher first, so that closing its pipe never has it signal a group id the system may have given
 * to someone else since. main.ts kills it with the groups when subs exits (Context.processGroups).
 */
function watch(pgid: number, ctx: Pick<Context, "processGroups">): (() => void) | undefined {
  if (process.platform === "win32" || !existsSync(SH)) return undefined;
  const watcher = spawn(SH, ["-c", WATCHER, "subs-watch", String(pgid)], { stdio: ["ignore", "ignore", "ignore", "pipe"], detached: true });
  watcher.on("error", () => {});
  const pipe = watcher.stdio[3] as (NodeJS.ReadableStream & { destroy(): void; unref?(): void }) | null;
  pipe?.on("error", () => {});
  // Neither keeps subs running: it is there for when subs is gone.
  pipe?.unref?.();
  watcher.unref();
  if (watcher.pid !== undefined) ctx.processGroups?.add(watcher.pid);
  return () => {
    killGroup(watcher.pid, "SIGKILL");
    if (watcher.pid !== undefined) ctx.processGroups?.delete(watcher.pid);
    pipe?.destroy();
  };
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group has ended.
  }
}

function within(done: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([done.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]).finally(() => clearTimeout(timer));
}
