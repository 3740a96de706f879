// The few typed errors subs raises. Each says what happened and what to do next; the CLI maps
// them to exit codes in exitCodeFor() and nowhere else (product.md, "Exit codes").

export type Diagnostic = {
  file: string;
  line: number;
  col: number;
  message: string;
  hint?: string;
};

export type ErrorKind =
  | "failed" // network, server, denied, timed out
  | "usage" // bad flags or arguments
  | "config" // substructure.toml is invalid
  | "refused" // a rule forbids the request; nothing was changed
  | "needs_login" // a connection has no usable credential
  | "interrupted"; // Ctrl-C

export class SubsError extends Error {
  readonly kind: ErrorKind;
  readonly hint: string | undefined;
  /** Machine-readable code for --json consumers, e.g. "url_not_in_catalog". */
  readonly code: string | undefined;

  constructor(kind: ErrorKind, message: string, options: { hint?: string; code?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SubsError";
    this.kind = kind;
    this.hint = options.hint;
    this.code = options.code;
  }
}

export class ConfigError extends SubsError {
  readonly diagnostics: Diagnostic[];
  constructor(diagnostics: Diagnostic[]) {
    const first = diagnostics[0];
    super("config", first ? formatDiagnostic(first) : "invalid configuration");
    this.name = "ConfigError";
    this.diagnostics = diagnostics;
  }
}

export const failed = (message: string, options?: { hint?: string; code?: string; cause?: unknown }) =>
  new SubsError("failed", message, options);
export const usage = (message: string, options?: { hint?: string }) => new SubsError("usage", message, options);
export const refused = (message: string, options?: { hint?: string; code?: string }) =>
  new SubsError("refused", message, options);
export const needsLogin = (id: string, reason: string) =>
  new SubsError("needs_login", `${id}: ${reason}`, { hint: `run \`subs mcp login ${id}\``, code: "needs_login" });
export const interrupted = () => new SubsError("interrupted", "interrupted", { code: "interrupted" });

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.col}: ${d.message}`;
}

/** The one place errors become exit codes (README, "Exit codes"). */
export function exitCodeFor(error: unknown): number {
  if (!(error instanceof SubsError)) return 1;
  switch (error.kind) {
    case "failed":
      return 1;
    case "usage":
    case "config":
    case "refused":
      return 2;
    case "needs_login":
      return 4;
    case "interrupted":
      return 130;
  }
}
