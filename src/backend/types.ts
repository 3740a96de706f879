// Where declarations and credentials live: this machine (the db, the loopback OAuth flow, the
// servers reached from here) or a deployment (its store and its OAuth, reached through the
// deployment protocol, docs/deployment-protocol.md). Every command that touches credentials is
// written once against a Backend and never looks at [remote] itself, as Terraform's commands hand
// an operation to whichever backend the configuration names. A deployment server implements the
// same operations on its side, so one set of behaviour tests holds the places to each other
// (test/backend.test.ts). What one place cannot do, it refuses with the typed error a command
// would give.
import type { ToolSource } from "../agents/fetch.ts";
import type { LocalApplyResult, LocalChange } from "../apply/local.ts";
import type { LoginStep as LocalLoginStep } from "../auth/login.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { RemoteListEntry } from "../remote/list.ts";
import type { LockStep, RemotePlan, StepOutcome } from "../remote/plan.ts";
import type { ToolLock } from "../config/tool-lock.ts";
import type { Reporter } from "../report.ts";
import type { ConnectionCheck } from "../status/check.ts";
import type { ConnectionStatus } from "../status/status.ts";
import type { CredentialRow } from "../store/schema.ts";

/** Where the credentials live, as the commands name it to a person. */
export type Place = { kind: "local"; dbPath: string } | { kind: "deployment"; url: URL };

/** Every connection's status where the credentials live; with `check`, each probed there. */
export type Listing =
  | { target: "local"; statuses: ConnectionStatus[]; undeclared: CredentialRow[]; checks?: Map<string, ConnectionCheck> }
  | { target: "remote"; url: URL; entries: RemoteListEntry[]; checks?: Map<string, ConnectionCheck> };

export type AuthorizeOptions = {
  /** --port; meaningless where the place receives the redirect itself. */
  port?: number;
  /** false under --no-browser */
  browser: boolean;
  timeoutMs: number;
  /**
   * The value of a variable connection `id`'s headers name, for a place that holds such values
   * itself (a deployment: docs/deployment-protocol.md section 3.12). The command asks the person
   * or reads this machine's variable; it throws (a usage error) when it can do neither. Without
   * it such a connection cannot be logged in to there.
   */
  headerValue?: (request: { id: string; name: string }) => Promise<string>;
};

/** One connection authorized (or found to need no credential), as the place reports it. */
export type Authorized =
  | { result: "static"; id: string; tokenEnv: string; tokenEnvSet: boolean }
  /** A local server: nothing to log in; `unsetEnv` are the variables it reads that are not set. */
  | { result: "local"; id: string; unsetEnv: string[] }
  /** The server answered without asking for a credential; none is stored or sent. */
  | { result: "open"; id: string; tools: number | null }
  | {
      result: "authorized";
      target: "local";
      id: string;
      issuer: string;
      scopes: string[];
      expiresAt: number | null;
      refreshable: boolean;
      /** How many tools the server offers with the new credential; null when listing them failed. */
      tools: number | null;
    }
  | {
      result: "authorized";
      target: "remote";
      id: string;
      deployment: URL;
      url: string;
      authorizedAt: string | null;
      expiresAt: string | null;
      /** The variables whose values were handed to the deployment (never the values); empty after a consent. */
      secrets: string[];
    };

export type ListedTool = { name: string; title?: string | null; description?: string | null; annotations?: object | null; [key: string]: unknown };

export type ToolsOptions = {
  /** How long a re-authorization waits for consent. */
  timeoutMs: number;
  /** How long one MCP request may go unanswered. */
  requestTimeoutMs: number;
  browser: boolean;
};

export type CallRequest = ToolsOptions & {
  id: string;
  tool: string;
  args: Record<string, unknown>;
  /** The call starts (the connection is known), and each progress notification the server sends. */
  events?: {
    onStart?(connection: ConnectionConfig): void;
    onProgress?(progress: { progress: number; total?: number; message?: string }): void;
  };
};

/** A tool's answer, as MCP's tools/call result (`content`, `structuredContent`, `isError`). */
export type CallResult = { content?: unknown; structuredContent?: unknown; isError?: unknown; [key: string]: unknown };

export type ApplyRequest = {
  dryRun: boolean;
  /**
   * Asked with the plan before anything changes (the person's "Apply?"); throws to change nothing.
   * Only what it was shown is carried out.
   */
  confirm(plan: { target: "local"; changes: readonly LocalChange[] } | { target: "remote"; plan: RemotePlan; url: URL }): Promise<void>;
  /** Shown the plan before anything changes (a deployment's plan is printed first). */
  onPlan?(plan: RemotePlan, url: URL): void;
  /** Each step of a deployment's plan as it is carried out. */
  onStep?(outcome: StepOutcome): void;
};

export type Applied =
  | { target: "local"; dbPath: string; result: LocalApplyResult }
  | {
      target: "remote";
      url: URL;
      plan: RemotePlan;
      dryRun: boolean;
      outcomes: StepOutcome[];
      /** Carried out in one request (all or nothing) rather than step by step. */
      atomic?: boolean;
    };

export type Backend = {
  readonly place: Place;
  /** Statuses of every connection in the file and every id the place holds beyond it. */
  list(options: { check?: { timeoutMs: number } }): Promise<Listing>;
  /**
   * For a command that only looks: warns of declarations this place would refuse to act on, so
   * a later "run `subs apply`" does not send a person to a refusal they were not told of.
   */
  warnRefusals(ids?: readonly string[]): void;
  /**
   * The connections `subs mcp login` acts on: `ids` as declared, or with `all` those without a
   * usable credential here. Refuses what the place cannot authorize before anything is sent.
   */
  loginTargets(request: { ids: readonly string[]; all: boolean; port?: number }): Promise<ConnectionConfig[]>;
  authorize(connection: ConnectionConfig, options: AuthorizeOptions): Promise<Authorized>;
  /** One connection's whole tool list, with the credential the place holds for it. */
  tools(connection: ConnectionConfig, options: ToolsOptions): Promise<ListedTool[]>;
  call(request: CallRequest): Promise<CallResult>;
  /** Where `subs agent tools` (and `mcp list --check`) get each connection's list. */
  toolSource(options: { timeoutMs: number }): ToolSource;
  /**
   * The lock where the agents are served against the file's (`lock`): a deployment's, as `subs
   * apply` would plan it (docs/deployment-protocol.md section 3.10); undefined locally, where the
   * file's lock is the one served.
   */
  servedLock(lock: ToolLock | undefined): Promise<LockStep | undefined>;
  /** Makes the place match the file: deletes (locally) or plans and carries out (a deployment). */
  apply(request: ApplyRequest): Promise<Applied>;
  /**
   * What the place holds for a connection just cut from the file. `deferred`: the place drops it
   * at the next `subs apply`, not now.
   */
  forget(id: string): Promise<"done" | "deferred">;
  /** Releases what the operations opened (the db). */
  close(): void;
};

/**
 * A step of a login the person should see, for the command to word (src/output/login-words.ts):
 * a local login's (src/auth/login.ts), or one made on a deployment, which this machine asks for
 * and waits on: it is contacted, and gives the authorization URL, in place of the server.
 */
export type LoginStep =
  | LocalLoginStep
  | { step: "contacting_deployment"; id: string; deployment: string }
  | { step: "ready_on_deployment"; id: string; deployment: string }
  /** The values of the variables a connection's headers name, handed to the deployment instead of a consent. */
  | { step: "handing_over"; id: string; deployment: string; names: string[] }
  | { step: "handed_over"; id: string; deployment: string; names: string[] }
  | { step: "hand_over_failed"; id: string; deployment: string };

export type BackendOptions = {
  ctx: Context;
  config: Config;
  /** The command's own reporter: a wait inside an operation is shown on the command's progress line. */
  reporter: Reporter;
  /**
   * Each login's steps as the command words them, one renderer per login (a renderer keeps its
   * progress lines). Given by the commands that may log in (`mcp login`, and `mcp tools` and
   * `mcp call` for a step-up); without it a login's steps are not shown.
   */
  loginSteps?: () => (step: LoginStep) => void;
};
