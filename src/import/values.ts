// Which header values name a variable and which are secrets written into the file. A
// value counts as a variable only when it is one reference and nothing else: `Bearer ${TOKEN}`
// names TOKEN; `Bearer ${A}x` or `Bearer sk-...` are the file's own text, never copied, never shown.
import { ENV_NAME_PATTERN } from "../config/schema.ts";

export type Reference = { env: string } | { input: string };

// The reference forms the clients document: `${env:NAME}` (VS Code, Cursor), `${NAME}` and
// `${NAME:-default}` (Claude Code; the default is dropped, it may be a secret), `$NAME` and
// `${NAME}` (Gemini CLI), `${input:id}` (VS Code's prompted inputs).
const NAME = "[A-Za-z_][A-Za-z0-9_]*";
const FORMS: Array<[RegExp, (m: RegExpExecArray) => Reference]> = [
  [new RegExp(`^\\$\\{env:(${NAME})\\}$`), (m) => ({ env: m[1]! })],
  [new RegExp(`^\\$\\{(${NAME})(?::-[^}]*)?\\}$`), (m) => ({ env: m[1]! })],
  [new RegExp(`^\\$(${NAME})$`), (m) => ({ env: m[1]! })],
  [/^\$\{input:([^}]+)\}$/, (m) => ({ input: m[1]! })],
];

/** The variable (or prompted input) `value` consists of, else undefined: then it is literal text. */
export function referenceIn(value: string): Reference | undefined {
  const trimmed = value.trim();
  for (const [form, build] of FORMS) {
    const m = form.exec(trimmed);
    if (m) return build(m);
  }
  return undefined;
}

/** `Bearer <rest>` as its rest, else undefined (RFC 6750 §2.1: the scheme is case-insensitive). */
export function bearerPart(value: string): string | undefined {
  const m = /^\s*bearer\s+(.*?)\s*$/is.exec(value);
  return m ? m[1] : undefined;
}

/** A variable name for a token a client held: `linear` -> LINEAR_TOKEN (`suffix`: LINEAR_CLIENT_SECRET); an input id when it makes a name. */
export function suggestedVariable(id: string, input?: string, suffix = "TOKEN"): string {
  if (input !== undefined) {
    const fromInput = input.toUpperCase().replace(/[^A-Z0-9]+/g, "_").replace(/^_+|_+$/g, "");
    if (ENV_NAME_PATTERN.test(fromInput) && /TOKEN|KEY|SECRET|PAT|AUTH/.test(fromInput)) return fromInput;
  }
  const base = id.toUpperCase().replace(/[^A-Z0-9]+/g, "_").replace(/^_+|_+$/g, "");
  const name = `${base || "MCP"}_${suffix}`;
  return /^[0-9]/.test(name) ? `MCP_${name}` : name;
}

/** Header names whose value is a credential even when it is not `Authorization`. */
export const looksLikeCredential = (header: string) => /auth|token|key|secret|password|session|cookie|signature/i.test(header);

/**
 * `value` in substructure.toml's `${NAME}` templates (src/config/templates.ts), when it holds a
 * reference in a client's syntax: `${env:NAME}` and `${NAME:-default}` become `${NAME}` (the
 * default dropped: it may be a secret), a whole `$NAME` becomes `${NAME}`. `input`: VS Code's
 * `${input:id}`, which subs cannot ask for. Undefined for literal text.
 */
export function asTemplate(value: string): { value: string; droppedDefault: boolean } | { input: string } | undefined {
  const input = /\$\{input:([^}]+)\}/.exec(value);
  if (input) return { input: input[1]! };
  let droppedDefault = false;
  const whole = new RegExp(`^\\$(${NAME})$`).exec(value.trim());
  const converted = whole
    ? `\${${whole[1]}}`
    : value.replace(new RegExp(`\\$\\{(?:env:)?(${NAME})(:-[^}]*)?\\}`, "g"), (_, name: string, fallback: string | undefined) => {
        if (fallback !== undefined) droppedDefault = true;
        return `\${${name}}`;
      });
  if (!new RegExp(`\\$\\{${NAME}\\}`).test(converted)) return undefined;
  // What is left must be a valid template string (no other `${`): else it is literal text.
  if (converted.replace(new RegExp(`\\$\\{${NAME}\\}`, "g"), "").includes("${")) return undefined;
  return { value: converted, droppedDefault };
}
