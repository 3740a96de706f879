// `subs init`: a first substructure.toml, so a new user starts from a file that is valid and
// explains itself instead of from an error (the hint of a missing file names this command).
import { writeFileSync } from "node:fs";
import { refused, usage } from "../errors.ts";
import { checkedEdit, connectionSection, type NewConnection } from "./edit.ts";
import { displayPathOf } from "./load.ts";
import { assertLockHeld } from "./lock.ts";
import { idProblem, newUrlProblem } from "./schema.ts";

export type StarterConnection = { id: string; url: string };

/** `sentry=https://mcp.sentry.dev/mcp` as a connection; a mistake is a usage error naming the argument. */
export function parseConnectionArgument(argument: string): StarterConnection {
  const at = argument.indexOf("=");
  const example = "e.g. subs init sentry=https://mcp.sentry.dev/mcp";
  if (at <= 0) throw usage(`\`${argument}\` is not ID=URL`, { hint: example });
  const id = argument.slice(0, at);
  const url = argument.slice(at + 1);
  const badId = idProblem(id);
  if (badId) throw usage(badId, { hint: example });
  // The url is never echoed: it may carry a secret in its query (src/config/schema.ts).
  const problem = newUrlProblem(url);
  if (problem) throw usage(`the url of ${id} ${problem}`, { hint: example });
  return { id, url };
}

/**
 * The text of a starter file: the given connections declared (as `subs mcp add` writes a section;
 * `subs mcp import` gives them with `auth`), everything else as comments.
 */
export function starterConfig(connections: readonly NewConnection[]): string {
  const declared = connections.map(connectionSection).join("\n");
  return `# substructure.toml: the MCP servers your agents connect to, and the agents.
# Secrets never go in this file: a token is named by an environment variable (\`*_env\`).
# Editor completion: \`subs schema > substructure.schema.json\`, then make the first line
#   #:schema ./substructure.schema.json

# The local engine's database, beside this file. It holds credentials: add \`*.db*\` to .gitignore.
# db = "substructure.db"

# A connection per server. OAuth is the default: \`subs mcp login <id>\` opens a browser for consent.
${declared || `# [mcp.sentry]\n# url = "https://mcp.sentry.dev/mcp"\n`}${staticExample(connections)}
# An agent names the connections it uses; \`subs agent tools support\` shows what its model sees.
# [agent.support]
# mcp = [${connections.length > 0 ? connections.map((c) => JSON.stringify(c.id)).join(", ") : `"sentry"`}]

# A deployment that holds declarations and credentials; \`subs apply\` pushes this file to it.
# [remote]
# url = "https://deploy.example.com"
# token_env = "SUBSTRUCTURE_TOKEN"
`;
}

/**
 * The commented example of a static token, unless a declared connection already shows one (or is
 * named as the example is): a commented `[mcp.github]` beside a real one reads as a second.
 */
function staticExample(connections: readonly NewConnection[]): string {
  if (connections.some((c) => c.tokenEnv !== undefined || c.id === "github")) return "";
  return `
# A server that takes a static token reads it from the environment when a call is made (local only):
# [mcp.github]
# url = "https://api.githubcopilot.com/mcp/"
# auth = { token_env = "GITHUB_TOKEN" }
`;
}

/**
 * The starter file for `path`, with `connections` declared, checked as every command checks the
 * file (so what `init` writes always loads), and `write`, which creates it, never over an existing
 * one; the caller holds the lock on that path (src/config/lock.ts). Checked and not written:
 * `subs mcp import --dry-run` with no file yet.
 */
export function starterFile(options: {
  path: string;
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  connections: readonly NewConnection[];
}): { write: () => void } {
  const ids = new Set<string>();
  for (const c of options.connections) {
    if (ids.has(c.id)) throw usage(`${c.id} is given twice`, { hint: "declare one server twice under two ids to connect two accounts" });
    ids.add(c.id);
  }
  const text = starterConfig(options.connections);
  const shown = displayPathOf(options.path, options.cwd);
  checkedEdit({ path: options.path, displayPath: shown }, text, options);
  const write = () => {
    assertLockHeld(options.path, shown);
    try {
      writeFileSync(options.path, text, { flag: "wx" });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST") throw refused(`${shown} already exists; nothing was written`, { hint: "edit it, or run `subs init` in another directory", code: "config_exists" });
      throw usage(`cannot write ${shown}: ${code ?? "error"}`);
    }
  };
  return { write };
}
