// `npm run bench:docs`: puts the figures of the last `npm run bench` (bench-results/bench.json) in
// docs/speed.md, between its bench markers: the results as JSON in a comment, and the table made
// from them. The table is never typed: test/docs.test.ts renders it again from that JSON and
// compares.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export type BenchRow = { name: string; ms: number; ratio: number; against: string; target: number | null };

/** The resident memory of a `subs agent serve` before `calls` more calls and after them, KiB. */
export type ServeRss = { calls: number; start: number; end: number };

export type BenchResults = {
  date: string;
  node: string;
  runs: number;
  /** os.loadavg() when the run ended: 1, 5 and 15 minutes. */
  loadavg?: number[];
  results: BenchRow[];
  peak_rss_kib_mcp_list_1000: number;
  peak_rss_target_mib?: number;
  serve_rss_kib?: ServeRss;
  agent_serve?: unknown;
};

export const START = "<!-- bench:start (npm run bench:docs writes this part from bench-results/bench.json) -->";
export const END = "<!-- bench:end -->";
const DATA = /^<!-- bench\.json: (.*) -->$/m;

/** `subs mcp list --json (10)` as `subs mcp list --json`, 10: the command in code, what it ran on after it. */
function caseName(name: string): string {
  const command = /^((?:subs|node) [^(:]*?)(?: \((\d+)\))?(: .*)?$/.exec(name);
  if (!command) return name.replace(/ \((\d+)\)$/, ", $1 connections");
  return `\`${command[1]}\`${command[2] ? `, ${Number(command[2]).toLocaleString("en")} connections` : ""}${command[3] ?? ""}`;
}

const against = (name: string) => (name.startsWith("floor") ? `the floor, ${/\((\d+)\)/.exec(name)?.[1]}` : caseName(name));

/** The markdown the results make: the table of every case, then the peak RSS and how the run was made. */
export function speedTable(results: BenchResults): string {
  const lines = ["| case | median | ratio | against | target |", "| --- | --- | --- | --- | --- |"];
  for (const row of results.results) {
    const self = row.against === row.name;
    const target = row.target === null ? "" : `≤ ${row.target} (${row.ratio <= row.target ? "met" : "missed"})`;
    lines.push(`| ${caseName(row.name)} | ${row.ms.toFixed(1)} ms | ${row.ratio.toFixed(2)} | ${self ? "" : against(row.against)} | ${target} |`);
  }
  const rss = results.peak_rss_kib_mcp_list_1000 / 1024;
  const rssTarget = results.peak_rss_target_mib;
  lines.push(
    "",
    `Peak RSS of \`subs mcp list --json\` on 1,000 connections: ${rss.toFixed(1)} MiB${rssTarget === undefined ? "" : ` (target under ${rssTarget} MiB: ${rss < rssTarget ? "met" : "missed"})`}. ` +
      `Node ${results.node}, ${results.runs} runs of each case, interleaved, ${results.date.slice(0, 10)}` +
      `${results.loadavg ? `; load average ${results.loadavg.map((l) => l.toFixed(2)).join(", ")} at the end` : ""}.`,
  );
  const serve = results.serve_rss_kib;
  if (serve) {
    const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
    lines.push("", `Resident memory of a \`subs agent serve\` over ${serve.calls.toLocaleString("en")} tool calls: ${mib(serve.start)} before, ${mib(serve.end)} after (a figure, not a target).`);
  }
  return lines.join("\n");
}

/** The region between the markers for these results: the JSON it was made from, and the table. */
export function speedRegion(results: BenchResults): string {
  const data = { ...results, agent_serve: undefined };
  return `${START}\n<!-- bench.json: ${JSON.stringify(data)} -->\n\n${speedTable(results)}\n${END}`;
}

/** The region of `markdown` between the markers, the markers included: empty before a first bench:docs. */
function regionOf(markdown: string): string {
  const start = markdown.indexOf(START);
  const end = markdown.indexOf(END, start);
  if (start === -1 || end === -1) throw new Error("docs/speed.md has no bench markers");
  return markdown.slice(start, end + END.length);
}

/** The region of `markdown` between the markers, and the results it quotes. */
export function quotedRegion(markdown: string): { region: string; results: BenchResults } {
  const region = regionOf(markdown);
  const data = DATA.exec(region);
  if (!data) throw new Error("docs/speed.md's bench region quotes no bench.json");
  return { region, results: JSON.parse(data[1]!) as BenchResults };
}

const REPO = fileURLToPath(new URL("..", import.meta.url));

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const results = JSON.parse(readFileSync(path.join(REPO, "bench-results", "bench.json"), "utf8")) as BenchResults;
  const docs = path.join(REPO, "docs", "speed.md");
  const markdown = readFileSync(docs, "utf8");
  writeFileSync(docs, markdown.replace(regionOf(markdown), () => speedRegion(results)));
  console.log(`docs/speed.md: the table of ${results.date} (${results.runs} runs)`);
}
