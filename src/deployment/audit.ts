// The record (docs/deployment-protocol.md section 3.14; docs/deployment-server.md, "The record"):
// every tool call an agent's session serves and every change made to the deployment, written to
// the store (one table every replica writes to) and as a JSON log line. Writing it never fails
// what it records: entries are queued and written in batches off the call's path, a store error
// is logged and the write retried, and a queue the store cannot drain is bounded: past it entries
// are dropped from the store's copy (each still logged), counted in /metrics and said in the log.
//
// What "written" promises (section 3.14): a change is in the store before its answer is sent,
// whenever the store answers (the route waits for its entry's batch); a tool call's entry within
// FLUSH_MS of its answer and one write. A process killed (kill -9) loses at most the tool calls of
// that last interval, never an acknowledged change.
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { ServedToolCall } from "../serve/agent-answer.ts";
import type { Log, Metrics } from "./ops.ts";
import type { ApiTokenRecord, AuditEntry, AuditKind, DeploymentStore, NewAuditEntry } from "./store/types.ts";

/** Who a token acts for: the person it belongs to (docs/deployment-protocol.md section 3.13). The one place that says so. */
export const personOf = (token: Pick<ApiTokenRecord, "person">): string => token.person;

/** How long a tool call's entry waits for others to be written with it. */
export const FLUSH_MS = 200;
/** The most entries one write carries (Postgres: 12 parameters each, far below its 65535). */
export const BATCH_MAX = 500;
/**
 * The most entries held while the store does not answer (a few MB): past it, new entries are
 * logged but not kept for the store, so an outage cannot grow the process without limit.
 */
export const QUEUE_MAX = 20_000;
/** After a failed write, the wait before the next, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 500;
const RETRY_MAX_MS = 5000;
/** The most entries one pruning deletes per statement, and statements per round: deletes stay short. */
export const PRUNE_BATCH = 5000;
const PRUNE_ROUNDS = 20;
/** How often a replica prunes, at most (more often for a retention shorter than twice this). */
const PRUNE_EVERY_MS = 10 * 60_000;
/** Text an entry stores is cut to this many characters: a tool's name comes from a server. */
const TEXT_MAX = 200;
/** How often a loss is said in the log while it goes on. */
const LOSS_LOG_MS = 10_000;

/** A served tool call as src/serve/agent-server.ts reports it. */
export type ServedCall = ServedToolCall;

/** Who made a change or a call: the request's API token (none for the operator's commands on the host). */
export type Actor = Pick<ApiTokenRecord, "id" | "person"> | undefined;

/** A change as a route reports it: its kind, what it is about, and what may be said of it (ids, counts, codes). */
export type Change = {
  kind: Exclude<AuditKind, "tool.call">;
  actor: Actor;
  /** For a consent's end: the person who started it, when the actor is no token. */
  person?: string | null;
  agent?: string;
  connection?: string;
  requestId?: string;
  outcome?: string;
  detail?: Record<string, unknown>;
};

/** What the routes, the consent's end and the agents' sessions write the record through. */
export interface AuditSink {
  /** A tool call: queued, never waited for; nothing here throws. */
  call(agent: string, actor: Actor, call: ServedCall): void;
  /** A change: resolves once its entry was written (or the write failed, which is logged); never rejects. */
  change(change: Change): Promise<void>;
}

/** Writes a change to the record, when the deployment keeps one (tests build routes without). */
export const record = (audit: AuditSink | undefined, change: Change): Promise<void> => (audit ? audit.change(change) : Promise.resolve());

/** The request's id (server.ts stamps every request with one, its X-Request-Id). */
export function requestIdOf(req: Pick<IncomingMessage, "headers">): string | undefined {
  const id = req.headers["x-request-id"];
  return typeof id === "string" ? id : undefined;
}

const cut = (text: string | undefined | null): string | null => (text === undefined || text === null ? null : text.length > TEXT_MAX ? text.slice(0, TEXT_MAX) : text);
/** 16 random bytes: unique across replicas, so a batch written twice keeps one copy of each. */
const newId = () => randomBytes(16).toString("hex");

export function callEntry(agent: string, actor: Actor, call: ServedCall, at: number): NewAuditEntry {
  return {
    id: newId(),
    at,
    kind: "tool.call",
    person: actor ? personOf(actor) : null,
    tokenId: actor?.id ?? null,
    agent,
    connection: cut(call.connection),
    tool: cut(call.tool),
    outcome: call.outcome,
    durationMs: Math.round(call.durationMs * 100) / 100,
    requestId: call.requestId ?? null,
    detail: null,
  };
}

export function changeEntry(change: Change, at: number): NewAuditEntry {
  return {
    id: newId(),
    at,
    kind: change.kind,
    person: change.actor ? personOf(change.actor) : (change.person ?? null),
    tokenId: change.actor?.id ?? null,
    agent: change.agent ?? null,
    connection: change.connection ?? null,
    tool: null,
    outcome: change.outcome ?? null,
    durationMs: null,
    requestId: change.requestId ?? null,
    detail: change.detail ?? null,
  };
}

/** An entry as GET /v1/audit answers it and `subs deployment audit --json` prints it (section 3.14). */
export type AuditEntryJson = {
  cursor: string;
  at: string;
  kind: AuditKind;
  person: string | null;
  token_id: string | null;
  agent: string | null;
  connection: string | null;
  tool: string | null;
  outcome: string | null;
  duration_ms: number | null;
  request_id: string | null;
  detail: Record<string, unknown> | null;
};

export const auditJson = (e: AuditEntry): AuditEntryJson => ({
  cursor: String(e.seq),
  at: new Date(e.at).toISOString(),
  kind: e.kind,
  person: e.person,
  token_id: e.tokenId,
  agent: e.agent,
  connection: e.connection,
  tool: e.tool,
  outcome: e.outcome,
  duration_ms: e.durationMs,
  request_id: e.requestId,
  detail: e.detail,
});

/** An entry's log line's fields (ops.ts, jsonLog): the same as its JSON, the id for the cursor. */
const logFields = (e: NewAuditEntry) => ({
  kind: e.kind,
  audit_id: e.id,
  ...(e.person !== null ? { person: e.person } : {}),
  ...(e.tokenId !== null ? { token_id: e.tokenId } : {}),
  ...(e.agent !== null ? { agent: e.agent } : {}),
  ...(e.connection !== null ? { connection: e.connection } : {}),
  ...(e.tool !== null ? { tool: e.tool } : {}),
  ...(e.outcome !== null ? { outcome: e.outcome } : {}),
  ...(e.durationMs !== null ? { duration_ms: e.durationMs } : {}),
  ...(e.requestId !== null ? { request_id: e.requestId } : {}),
  ...(e.detail !== null ? { detail: e.detail } : {}),
});

export type AuditRecorderOptions = {
  store: Pick<DeploymentStore, "appendAudit" | "pruneAudit">;
  log: Log;
  metrics: Metrics;
  now: () => number;
  /** How long an entry is kept; the recorder prunes older ones (any replica may). */
  retentionMs: number;
  flushMs?: number;
  queueMax?: number;
};

type Queued = { entry: NewAuditEntry; logged: boolean };

/** The deployment's writer of the record: one per process. */
export class AuditRecorder implements AuditSink {
  readonly #o: AuditRecorderOptions;
  readonly #flushMs: number;
  readonly #queueMax: number;
  #queue: Queued[] = [];
  /** Entries ever queued, and entries done with (written, or given up on at close): a change waits until its number is done. */
  #queued = 0;
  #done = 0;
  readonly #waiting: Array<{ upTo: number; resolve: () => void }> = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #retryMs = 0;
  #storeDown = false;
  #lost = 0;
  #lossSaidAt = 0;
  #pruneTimer: NodeJS.Timeout | undefined;
  #pruning = false;
  #closed = false;

  constructor(options: AuditRecorderOptions) {
    this.#o = options;
    this.#flushMs = options.flushMs ?? FLUSH_MS;
    this.#queueMax = options.queueMax ?? QUEUE_MAX;
  }

  call(agent: string, actor: Actor, call: ServedCall): void {
    try {
      this.#push(callEntry(agent, actor, call, this.#o.now()));
    } catch {
      // Nothing the record does may fail the call it records.
    }
  }

  async change(change: Change): Promise<void> {
    try {
      const upTo = this.#push(changeEntry(change, this.#o.now()));
      if (upTo === undefined) return;
      const written = new Promise<void>((resolve) => this.#waiting.push({ upTo, resolve }));
      // At once, even while writes are being retried: its answer waits for this one attempt.
      this.#kick(0, true);
      await written;
    } catch {
      // As for a call: the change is made; its entry's fate is in the log.
    }
  }

  /** Resolves once every entry queued so far was written, or its write failed (a change's wait). */
  flush(): Promise<void> {
    if (this.#done >= this.#queued) return Promise.resolve();
    const written = new Promise<void>((resolve) => this.#waiting.push({ upTo: this.#queued, resolve }));
    this.#kick(0);
    return written;
  }

  /** Prunes now and then every so often (start after the store is open). */
  startPruning(): void {
    const every = Math.max(1000, Math.min(PRUNE_EVERY_MS, Math.floor(this.#o.retentionMs / 2)));
    this.#pruneTimer = setInterval(() => void this.prune(), every);
    this.#pruneTimer.unref();
    void this.prune();
  }

  /**
   * Deletes what is older than the retention, in bounded statements (PRUNE_BATCH, at most
   * PRUNE_ROUNDS a round: the rest waits for the next). Every replica prunes; two at once delete
   * disjoint or the same rows, either harmless. How many it deleted.
   */
  async prune(): Promise<number> {
    if (this.#pruning) return 0;
    this.#pruning = true;
    let deleted = 0;
    try {
      const before = this.#o.now() - this.#o.retentionMs;
      for (let round = 0; round < PRUNE_ROUNDS; round++) {
        const n = await this.#o.store.pruneAudit(before, PRUNE_BATCH);
        deleted += n;
        if (n < PRUNE_BATCH) break;
      }
      if (deleted > 0) this.#o.log("info", "pruned the record", { deleted, before: new Date(before).toISOString() });
    } catch (error) {
      this.#o.log("warn", "could not prune the record", { error: error instanceof Error ? error.message : "unknown" });
    } finally {
      this.#pruning = false;
    }
    return deleted;
  }

  /**
   * Writes what is queued (a stopping process), trying for at most `graceMs`; what is still
   * unwritten then is counted and said lost (every entry is in the log already).
   */
  async close(graceMs = 5000): Promise<void> {
    clearInterval(this.#pruneTimer);
    const deadline = this.#o.now() + graceMs;
    while (this.#queue.length > 0 && this.#o.now() < deadline) {
      this.#retryMs = 0;
      clearTimeout(this.#timer);
      this.#timer = undefined;
      await this.#write();
      if (this.#queue.length > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_MS, Math.max(0, deadline - this.#o.now()))));
    }
    this.#closed = true;
    clearTimeout(this.#timer);
    if (this.#queue.length > 0) {
      this.#logQueued();
      this.#lose(this.#queue.length);
      this.#queue = [];
      this.#o.metrics.auditQueued = 0;
      this.#finish(this.#queued);
    }
    this.#sayLoss(true);
  }

  /** Queues an entry; its number (for a change's wait), or undefined when it was dropped. */
  #push(entry: NewAuditEntry): number | undefined {
    if (this.#closed || this.#queue.length >= this.#queueMax) {
      // Lost to the store, not to the log.
      this.#o.log("info", "audit", logFields(entry));
      this.#lose(1);
      this.#sayLoss(false);
      return undefined;
    }
    this.#queue.push({ entry, logged: false });
    this.#o.metrics.auditQueued = this.#queue.length;
    this.#kick(this.#queue.length >= BATCH_MAX ? 0 : this.#flushMs);
    return ++this.#queued;
  }

  /**
   * A write in `ms` (sooner if one was planned later), unless one runs: it looks again when it
   * ends. After a failure, not before the retry's wait, unless `now` (a change waiting).
   */
  #kick(ms: number, now = false): void {
    if (this.#writing || this.#closed) return;
    const wait = now ? ms : Math.max(ms, this.#retryMs);
    if (this.#timer !== undefined) {
      if (wait > 0) return;
      clearTimeout(this.#timer);
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#write();
    }, wait);
    this.#timer.unref();
  }

  /**
   * Logs each queued entry not logged yet. Those logged are the queue's first ones (every call
   * logs all it finds, and entries join at the end): found from the end, so a long queue costs
   * only its new entries.
   */
  #logQueued(): void {
    let n = this.#queue.length;
    while (n > 0 && !this.#queue[n - 1]!.logged) n--;
    for (; n < this.#queue.length; n++) {
      const q = this.#queue[n]!;
      q.logged = true;
      this.#o.log("info", "audit", logFields(q.entry));
    }
  }

  async #write(): Promise<void> {
    if (this.#writing) return this.#writing;
    this.#writing = (async () => {
      while (this.#queue.length > 0) {
        // The log line first: it is the record's other copy, whatever the store does. In the loop,
        // not before it: entries queued while a batch was being written are written by the next
        // turn, and their log lines must come before that too.
        this.#logQueued();
        const batch = this.#queue.slice(0, BATCH_MAX);
        try {
          await this.#o.store.appendAudit(batch.map((q) => q.entry));
        } catch (error) {
          this.#o.metrics.auditWriteFailures++;
          if (!this.#storeDown) this.#o.log("error", "could not write the record; retrying", { error: error instanceof Error ? error.message : "unknown", queued: this.#queue.length });
          this.#storeDown = true;
          this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs === 0 ? RETRY_MS : this.#retryMs * 2);
          // A change waits for one attempt, not for the store to come back: its answer is not held.
          this.#finish(this.#queued);
          return;
        }
        this.#queue.splice(0, batch.length);
        this.#o.metrics.auditWritten += batch.length;
        this.#o.metrics.auditQueued = this.#queue.length;
        this.#done += batch.length;
        this.#finish(this.#done);
        if (this.#storeDown) this.#o.log("info", "writing the record again", {});
        this.#storeDown = false;
        this.#retryMs = 0;
      }
    })();
    try {
      await this.#writing;
    } finally {
      this.#writing = undefined;
      if (this.#queue.length > 0) this.#kick(this.#flushMs);
    }
  }

  /** Lets every change waiting for an entry up to `upTo` go on. */
  #finish(upTo: number): void {
    for (let n = this.#waiting.length - 1; n >= 0; n--) {
      const w = this.#waiting[n]!;
      if (w.upTo <= upTo) {
        this.#waiting.splice(n, 1);
        w.resolve();
      }
    }
  }

  #lose(count: number): void {
    this.#lost += count;
    this.#o.metrics.auditDropped += count;
  }

  /** A loss said in the log, with its count, at most every LOSS_LOG_MS while it goes on. */
  #sayLoss(now: boolean): void {
    if (this.#lost === 0) return;
    const at = this.#o.now();
    if (!now && at - this.#lossSaidAt < LOSS_LOG_MS) return;
    this.#lossSaidAt = at;
    this.#o.log("error", "entries of the record were dropped unwritten (each is in this log)", { dropped: this.#lost, queue_max: this.#queueMax });
    this.#lost = 0;
  }
}
