// CredentialRowSchema as one generated function (zod's AOT compile). Every `mcp list` validates
// every stored row, and zod's per-field dispatch made that its costliest step at 1000 rows
// (issue 6). An invalid row falls back to the regular parser, so what is accepted and how it
// fails are unchanged. A module of its own so that the compiler is a chunk loaded only for long
// lists (store.ts), not part of every command's start-up.
import { compile } from "zod/mini";
import { CredentialRowSchema } from "./schema.ts";

export const CompiledCredentialRowSchema = compile(CredentialRowSchema);
