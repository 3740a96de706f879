// The hint of an error as the person reads it, on stderr and in --json: the one the error carries,
// or one the output layer words from what a typed error holds (a path quoted for a shell).
import { MissingPath, type SubsError } from "../errors.ts";
import { shellWord } from "./shell-word.ts";

export function hintOf(error: SubsError): string | undefined {
  if (error.hint !== undefined || !(error instanceof MissingPath)) return error.hint;
  const word = shellWord(error.missing.path);
  return error.missing.kind === "config_file"
    ? `check the path, or create the file with \`subs init --config ${word}\``
    : `create it first (\`mkdir -p ${word}\`), or give a path in an existing directory`;
}
