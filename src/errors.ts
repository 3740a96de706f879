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
  /** Extra fields for the --json error object (e.g. the catalog, what was applied); never a secret. */
  readonly details: Record<string, unknown> | undefined;

  constructor(kind: ErrorKind, message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SubsError";
    this.kind = kind;
    this.hint = options.hint;
    this.code = options.code;
    this.details = options.details;
  }
}

export type ErrorOptions = { hint?: string; code?: string; cause?: unknown; details?: Record<string, unknown> };

export class ConfigError extends SubsError {
  readonly diagnostics: Diagnostic[];
  /**
   * `refused`: the file is valid but a rule forbids what it asks for here (e.g. `auth` under
   * [remote]); reported like a config error, with its own --json code.
   */
  constructor(diagnostics: Diagnostic[], options: { kind?: "config" | "refused"; code?: string } = {}) {
    const first = diagnostics[0];
    super(options.kind ?? "config", first ? formatDiagnostic(first) : "invalid configuration", options.code ? { code: options.code } : {});
    this.name = "ConfigError";
    this.diagnostics = diagnostics;
  }
}

/**
 * A path the person named that is not there: a file given with --config or $SUBS_CONFIG, or the
 * directory a file is to be created in. Its hint is a command with the path in it, quoted for a
 * shell, which the output layer words (output/hints.ts) where the error is shown.
 */
export class MissingPath extends SubsError {
  readonly missing: { kind: "config_file" | "directory"; path: string };

  constructor(message: string, missing: MissingPath["missing"]) {
    super("usage", message);
    this.name = "MissingPath";
    this.missing = missing;
  }
}

export const failed = (message: string, options?: ErrorOptions) => new SubsError("failed", message, options);
export const usage = (message: string, options?: { hint?: string }) => new SubsError("usage", message, options);
export const refused = (message: string, options?: ErrorOptions) => new SubsError("refused", message, options);
export const needsLogin = (id: string, reason: string) =>
  new SubsError("needs_login", `${id}: ${reason}`, { hint: `run \`subs mcp login ${id}\``, code: "needs_login" });
/**
 * The person answered no to a question before a change (`subs apply`'s "Apply? [y/N]"). Exit 1, as
 * consent denied in a browser is: the command did not do what it was asked, and nothing changed.
 */
export const declined = (message: string, options?: { hint?: string }) => new SubsError("failed", message, { code: "declined", ...options });
export const interrupted = () => new SubsError("interrupted", "interrupted", { code: "interrupted" });

/**
 * The same failure, its message prefixed with the id it happened to, unless it names it already:
 * a step of a command over several ids (`mcp login --all`) must say which one failed.
 */
export function aboutId(error: unknown, id: string): unknown {
  if (!(error instanceof SubsError) || error instanceof ConfigError || error.kind === "interrupted" || error.message.startsWith(`${id}:`)) return error;
  return new SubsError(error.kind, `${id}: ${error.message}`, {
    ...(error.hint !== undefined ? { hint: error.hint } : {}),
    ...(error.code !== undefined ? { code: error.code } : {}),
    ...(error.details !== undefined ? { details: error.details } : {}),
    cause: error,
  });
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.col}: ${d.message}`;
}

/** The one place errors become exit codes (docs/exit-codes.md). */
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
