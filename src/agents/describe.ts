// Sentences for what resolve.ts decided, shared by the human output and the `message` fields of
// `subs agent tools --json`. Pure: no colour, no I/O.
import type { Claimant, DroppedTool, FilteredTool, Warning, WithheldTool } from "./resolve.ts";
import { possessive } from "../text/possessive.ts";

export function describeClaimant(c: Claimant): string {
  switch (c.kind) {
    case "declared":
      return `the declared tool \`${c.name}\``;
    case "sub_agent":
      return `the sub-agent \`${c.name}\``;
    case "connector":
      return `${possessive(c.connection)} \`${c.tool}\``;
  }
}

export function describeDropped(d: DroppedTool): string {
  const subject = `${possessive(d.connection)} \`${d.tool}\` would be \`${d.name}\``;
  switch (d.reason) {
    case "declared_tool":
    case "sub_agent": {
      const others = d.with.slice(1).map(describeClaimant);
      return `${subject}; ${describeClaimant(d.with[0]!)} keeps its name${others.length ? ` (also claimed by ${others.join(", ")})` : ""}`;
    }
    case "connector_tool":
      return `${subject}; ${d.with.map(describeClaimant).join(", ")} ${d.with.length === 1 ? "has the same name, and both lose it" : "have the same name, and all lose it"}`;
  }
}

export function describeFiltered(f: FilteredTool): string {
  switch (f.step) {
    case "read_only":
    case "non_destructive":
    case "idempotent":
      return f.value === null
        ? `${f.step}: no ${f.annotation} annotation (a tool without one fails the key)`
        : `${f.step}: ${f.annotation} is ${f.value}`;
    case "include":
      return `include: matches none of ${f.patterns.map((p) => `\`${p}\``).join(", ") || "(an empty list)"}`;
    case "exclude":
      return `exclude: matches \`${f.pattern}\``;
  }
}

export function describeWarning(w: Warning, agent: string): string {
  switch (w.code) {
    case "too_many_tools":
      return (
        `agent \`${agent}\` gives its model ${w.count} tools (${w.fromConnections} from connections); above about ${w.limit} a model chooses badly. ` +
        `Take fewer with a filter (mcp = [{ id = "…", tools = { read_only = true, include = ["…"] } }]) or put a large connection behind a sub-agent.`
      );
    case "filter_keeps_nothing":
      return `agent \`${agent}\`: the filter on ${w.connection} keeps none of its ${w.offered} tool${w.offered === 1 ? "" : "s"}`;
    case "glob_matches_nothing":
      return (
        `agent \`${agent}\`: ${w.key} glob \`${w.pattern}\` matches no tool ${w.connection} offers` +
        (w.pattern.includes("__") ? ` (globs match the tool's name on the connection, without the \`${w.connection}__\` prefix)` : "")
      );
    case "name_declared_twice":
      return `agent \`${agent}\`: \`${w.name}\` is declared more than once (${w.as.map((k) => (k === "declared" ? "tool" : "sub-agent")).join(", ")}); rename one`;
  }
}

/** A locked field in words, as `subs lock` and `subs agent tools` show it. */
export const FIELD_WORDS = { title: "title", description: "description", inputSchema: "input schema", outputSchema: "output schema", annotations: "annotations" } as const;

/** Why substructure.lock keeps a tool from the model, and what to run once it is reviewed. */
export function describeWithheld(w: WithheldTool): string {
  const subject = `${possessive(w.connection)} \`${w.tool}\``;
  return w.reason === "not_locked"
    ? `${subject} is withheld: not locked (it is not in substructure.lock); review it with \`subs lock\``
    : `${subject} is withheld: changed since locked (${w.fields.map((f) => FIELD_WORDS[f]).join(", ") || "its digest"}); review the change with \`subs lock\``;
}
