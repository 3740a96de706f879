// Shell completion: `subs __complete <words…>` answers one candidate per line, from the
// command tree itself (so new commands and flags complete without touching this file) and from
// the file's connection ids and agent names.
import type { Command } from "commander";
import { loadConfig } from "../config/load.ts";
import type { Context } from "../context.ts";
import { CLIENTS } from "../import/types.ts";

/** What a positional argument completes to, by its name in the command's usage. */
const ARGUMENT_SOURCES: Record<string, (words: Source) => string[]> = {
  id: (s) => s.connections(),
  name: (s) => s.agents(),
  shell: () => ["bash", "zsh", "fish"],
};

type Source = { connections(): string[]; agents(): string[] };

/**
 * `words` are the words after `subs` up to the cursor; the last is the one being completed
 * (empty when the cursor follows a space).
 */
export function complete(program: Command, words: readonly string[], ctx: Pick<Context, "env" | "cwd">): string[] {
  const current = words[words.length - 1] ?? "";
  const before = words.slice(0, -1);
  let command = program;
  let positional = 0;
  let configPath: string | undefined;
  for (let i = 0; i < before.length; i++) {
    const word = before[i]!;
    if (word === "--config") configPath = before[++i];
    else if (word.startsWith("--config=")) configPath = word.slice("--config=".length);
    else if (word.startsWith("-")) {
      // An option's value (`--to claude`) is not a positional argument.
      if (takesValue(command, word)) i++;
    } else {
      const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
      if (sub && positional === 0) command = sub;
      else positional++;
    }
  }
  if (before[before.length - 1] === "--config") return [];
  // An option with a fixed set of values (`--to`, `--scope`): those.
  const choices = optionOf(command, before[before.length - 1] ?? "")?.argChoices;
  if (choices) return choices.filter((c) => c.startsWith(current)).sort();
  // `mcp import --from` takes a client or a file: the clients, unless a path is being typed (then
  // nothing, and the shell completes the file itself).
  if (before[before.length - 1] === "--from" && command.name() === "import") {
    return /^[./~]/.test(current) ? [] : CLIENTS.filter((c) => c.startsWith(current));
  }

  let file: { connections: string[]; agents: string[] } | undefined;
  const source: Source = {
    connections: () => (file ??= readNames(ctx, configPath)).connections,
    agents: () => (file ??= readNames(ctx, configPath)).agents,
  };

  let candidates: string[];
  if (current.startsWith("-")) {
    candidates = [...command.options.filter((o) => !o.hidden).flatMap((o) => [o.long, o.short]).filter((f): f is string => Boolean(f)), "--help"];
    if (command !== program) candidates.push(...program.options.filter((o) => !o.hidden && o.long !== "--version").map((o) => o.long!).filter(Boolean));
  } else if (command.commands.length > 0 && positional === 0) {
    candidates = command.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).map((c) => c.name());
  } else {
    const args = command.registeredArguments;
    const arg = args[Math.min(positional, args.length - 1)];
    // `mcp add` names a connection that does not exist yet: no declared id completes it.
    const declares = command.name() === "add" && command.parent?.name() === "mcp";
    const fill = arg && !declares && (positional < args.length || arg.variadic) ? ARGUMENT_SOURCES[arg.name()] : undefined;
    candidates = fill ? fill(source) : [];
    if (arg?.variadic) candidates = candidates.filter((c) => !before.includes(c));
  }
  return [...new Set(candidates)].filter((c) => c.startsWith(current)).sort();
}

function readNames(ctx: Pick<Context, "env" | "cwd">, configPath: string | undefined) {
  try {
    const config = loadConfig({ configPath, env: ctx.env, cwd: ctx.cwd });
    return { connections: config.connections.map((c) => c.id), agents: config.agents.map((a) => a.name) };
  } catch {
    // A broken or missing file completes nothing; the command itself will say why.
    return { connections: [], agents: [] };
  }
}

const optionOf = (command: Command, flag: string) => (flag.startsWith("-") ? command.options.find((o) => o.long === flag || o.short === flag) : undefined);

const takesValue = (command: Command, flag: string) => {
  const option = optionOf(command, flag);
  return option !== undefined && (option.required || option.optional);
};
