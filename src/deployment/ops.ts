// What an operator watches: one JSON line per request (and per notable event) on stdout, and
// Prometheus metrics in the text exposition format. Hand-written: a few counters and one
// histogram do not earn a logging or metrics library in every install of the CLI.
// A log line never carries a header, a query string or a body: the paths logged are the route's
// pathname, which holds ids only (the callback's code and state are in its query, never logged).
import type { Output } from "../context.ts";
import { LOSS_REASONS, type CredentialLoss, type CredentialRecord } from "./store/types.ts";

export type Log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export function jsonLog(out: Output, now: () => number): Log {
  return (level, msg, fields = {}) => out.write(`${JSON.stringify({ time: new Date(now()).toISOString(), level, msg, ...fields })}\n`);
}

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const label = (value: string) => value.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));

/**
 * What /metrics says of the credentials, read from the store at each scrape (so every replica says
 * the same): the seconds until each refresh token expires, where its server said (a gauge per
 * connection and kind), and how many connections' credentials were lost for good and await a
 * login, by reason and kind: `shared` (the credential belongs to the connection id) or `personal`
 * (one per person: the gauge is the soonest of theirs, and names no person; a `read` token learns
 * when someone's grant runs out, never whose). The connection label's values are the declared ids
 * that hold such a credential: one series per declaration and kind an `apply` token made, never a
 * value a server or a `read` token chooses, and they go when the declaration goes.
 */
export function credentialMetrics(summaries: ReadonlyArray<Omit<CredentialRecord, "secret">>, losses: readonly CredentialLoss[], now: number): string {
  const lines: string[] = [];
  lines.push(
    "# HELP subs_deployment_credential_refresh_expiry_seconds Seconds until the refresh token (the grant) of a connection's credential expires, where its authorization server said (a personal connection's: the soonest of its people's); negative once past.",
    "# TYPE subs_deployment_credential_refresh_expiry_seconds gauge",
  );
  const soonest = new Map<string, number>();
  for (const c of summaries) {
    if (c.refreshExpiresAt == null) continue;
    const key = `${c.id}\n${kindOf(c.person)}`;
    soonest.set(key, Math.min(soonest.get(key) ?? Infinity, c.refreshExpiresAt));
  }
  for (const [key, at] of [...soonest].sort(([a], [b]) => a.localeCompare(b))) {
    const [id, kind] = key.split("\n") as [string, string];
    lines.push(`subs_deployment_credential_refresh_expiry_seconds{connection="${label(id)}",kind="${kind}"} ${Math.round((at - now) / 1000)}`);
  }
  lines.push(
    "# HELP subs_deployment_credentials_needing_login Credentials lost for good (a refresh rejected, no refresh token, the server moved, refused after a refresh) and not replaced by a new login, by kind and reason.",
    "# TYPE subs_deployment_credentials_needing_login gauge",
  );
  for (const kind of ["shared", "personal"] as const) {
    for (const reason of LOSS_REASONS) lines.push(`subs_deployment_credentials_needing_login{kind="${kind}",reason="${reason}"} ${losses.filter((l) => kindOf(l.person) === kind && l.reason === reason).length}`);
  }
  return `${lines.join("\n")}\n`;
}

/** A credential's kind, by its holder ("" for the connection's). */
const kindOf = (person: string): "shared" | "personal" => (person === "" ? "shared" : "personal");

export class Metrics {
  readonly #requests = new Map<string, number>();
  readonly #durations = new Map<string, { buckets: number[]; sum: number; count: number }>();
  readonly #refreshes = new Map<string, number>();
  sessions = 0;
  sessionsStarted = 0;
  /** The record (src/deployment/audit.ts): entries written to the store, dropped unwritten, and writes that failed (retried). */
  auditWritten = 0;
  auditDropped = 0;
  auditWriteFailures = 0;
  /** Entries waiting to be written (a gauge). */
  auditQueued = 0;

  request(method: string, route: string, status: number, seconds: number) {
    const key = `method="${label(method)}",route="${label(route)}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
    const hist = this.#durations.get(route) ?? { buckets: BUCKETS.map(() => 0), sum: 0, count: 0 };
    BUCKETS.forEach((b, n) => {
      if (seconds <= b) hist.buckets[n]!++;
    });
    hist.sum += seconds;
    hist.count++;
    this.#durations.set(route, hist);
  }

  refresh(outcome: string) {
    this.#refreshes.set(outcome, (this.#refreshes.get(outcome) ?? 0) + 1);
  }

  text(): string {
    const lines: string[] = [];
    lines.push("# HELP subs_deployment_http_requests_total HTTP requests answered, by route and status.", "# TYPE subs_deployment_http_requests_total counter");
    for (const [k, v] of this.#requests) lines.push(`subs_deployment_http_requests_total{${k}} ${v}`);
    lines.push("# HELP subs_deployment_http_request_duration_seconds Time to answer a request, by route.", "# TYPE subs_deployment_http_request_duration_seconds histogram");
    for (const [route, h] of this.#durations) {
      BUCKETS.forEach((b, n) => lines.push(`subs_deployment_http_request_duration_seconds_bucket{route="${label(route)}",le="${b}"} ${h.buckets[n]}`));
      lines.push(`subs_deployment_http_request_duration_seconds_bucket{route="${label(route)}",le="+Inf"} ${h.count}`);
      lines.push(`subs_deployment_http_request_duration_seconds_sum{route="${label(route)}"} ${h.sum}`);
      lines.push(`subs_deployment_http_request_duration_seconds_count{route="${label(route)}"} ${h.count}`);
    }
    lines.push("# HELP subs_deployment_refreshes_total Credential refreshes, by outcome.", "# TYPE subs_deployment_refreshes_total counter");
    for (const [k, v] of this.#refreshes) lines.push(`subs_deployment_refreshes_total{outcome="${label(k)}"} ${v}`);
    lines.push("# HELP subs_deployment_mcp_sessions MCP sessions open on agents' endpoints.", "# TYPE subs_deployment_mcp_sessions gauge", `subs_deployment_mcp_sessions ${this.sessions}`);
    lines.push("# HELP subs_deployment_mcp_sessions_started_total MCP sessions started.", "# TYPE subs_deployment_mcp_sessions_started_total counter", `subs_deployment_mcp_sessions_started_total ${this.sessionsStarted}`);
    lines.push("# HELP subs_deployment_audit_entries_total Entries of the record written to the store.", "# TYPE subs_deployment_audit_entries_total counter", `subs_deployment_audit_entries_total ${this.auditWritten}`);
    lines.push(
      "# HELP subs_deployment_audit_dropped_total Entries of the record dropped unwritten (the queue was full while the store did not answer); each is still in the log.",
      "# TYPE subs_deployment_audit_dropped_total counter",
      `subs_deployment_audit_dropped_total ${this.auditDropped}`,
    );
    lines.push("# HELP subs_deployment_audit_write_failures_total Writes of the record that failed (retried).", "# TYPE subs_deployment_audit_write_failures_total counter", `subs_deployment_audit_write_failures_total ${this.auditWriteFailures}`);
    lines.push("# HELP subs_deployment_audit_queued Entries of the record waiting to be written.", "# TYPE subs_deployment_audit_queued gauge", `subs_deployment_audit_queued ${this.auditQueued}`);
    return `${lines.join("\n")}\n`;
  }
}
