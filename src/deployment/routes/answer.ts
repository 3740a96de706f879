// What every route of the deployment's API shares (docs/deployment-protocol.md; section numbers
// are its): the identifier rule, JSON bodies read within a limit, error answers, a route's shape.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { isValidName } from "../../config/rules.ts";
import type { Secrets } from "../../secrets.ts";
import type { Need } from "../access.ts";
import type { ApiTokenRecord } from "../store/types.ts";

/** Protocol bodies are a few hundred bytes; anything near this is not one. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** The file's rule for ids and names (src/config/rules.ts): the deployment takes what a file may declare. */
export const IdSchema = z.string().refine(isValidName, "not a valid connection id");

export const FilterSchema = z.strictObject({
  include: z.array(z.string()).optional(),
  exclude: z.array(z.string()).optional(),
  read_only: z.boolean().optional(),
  non_destructive: z.boolean().optional(),
  idempotent: z.boolean().optional(),
});
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> };
export const fail = (status: number, error: string, message: string, extra: Record<string, unknown> = {}): Answer => ({ status, body: { error, message, ...extra } });
/** What a client is told when the store does not answer: the cause (its URL, the driver's words) goes to the log only. */
export const STORE_DOWN_MESSAGE = "the deployment's store does not answer; retry in a few seconds";
export const iso = (ms: number) => new Date(ms).toISOString();

export class BadBody extends Error {}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) throw new BadBody(`the body is larger than ${MAX_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadBody(`the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new BadBody("the body is not JSON");
  }
}

/** One path segment, percent-decoded (section 1); undefined when it does not decode. */
export const segment = (raw: string) => {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
};

export type Route = {
  pattern: RegExp;
  route: string;
  need: Need;
  methods: string[];
  /**
   * `secrets`: the request's own, learnt from every exchange it makes with servers and from the
   * credentials it uses; its answer is scrubbed of them before it is sent (server.ts).
   */
  /** Why the path's segments are not valid (a message), or undefined; absent: each must be a connection id or agent name (section 1). */
  checkParams?: (params: ReadonlyArray<string | undefined>) => string | undefined;
  run: (method: string, req: IncomingMessage, params: string[], token: ApiTokenRecord, res: ServerResponse, secrets: Secrets) => Promise<Answer | "streamed">;
};

export function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid body";
  const where = issue.path.length ? `${issue.path.join(".")}: ` : "";
  return `${where}${issue.message}`;
}

