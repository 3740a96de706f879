// The one walk that accepts a valid file on every run (src/config/check.ts) against the full check
// with zod's schema it stands in for (load.ts, fullCheck): on every fixture, on the mutated files of
// both fuzzers (their generators and fixed seeds, test/support/file-cases.ts), and on parsed files
// mutated value by value, the walk must accept exactly the files the full check accepts, and
// build exactly what zod outputs for them (the same values, the same key order).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { parse } from "smol-toml";
import { checkedFile } from "../src/config/check.ts";
import { fullCheck, MAX_DEPTH } from "../src/config/load.ts";
import type { FileShape } from "../src/config/schema.ts";
import { ConfigError } from "../src/errors.ts";
import { REPO } from "./support/cli.ts";
import { CONTROL, fileCase, mutatedFile, RESERVED, UNICODE } from "./support/file-cases.ts";
import { picker, prng } from "./support/prng.ts";

const DIR = path.join(REPO, "project");
const fixtures = readdirSync(path.join(REPO, "fixtures", "config")).map((name) => [name, readFileSync(path.join(REPO, "fixtures", "config", name), "utf8")] as const);
const example = readFileSync(path.join(REPO, "substructure.toml.example"), "utf8");

type Tally = { accepted: number; refused: number; unparsed: number };
const tally = (): Tally => ({ accepted: 0, refused: 0, unparsed: 0 });

/** The full check's answer: what zod outputs, or undefined when it reports a problem. */
function fullAnswer(raw: unknown): FileShape | undefined {
  try {
    return fullCheck(raw, DIR, (_keyPath, message) => ({ file: "substructure.toml", line: 1, col: 1, message }));
  } catch (error) {
    if (error instanceof ConfigError) return undefined;
    throw error;
  }
}

/** Both checks on one parsed file (the walk first: the full check removes reserved keys as it reports them). */
function agree(raw: unknown, counts: Tally, context: () => string): void {
  const walked = checkedFile(raw, DIR);
  const full = fullAnswer(raw);
  if (walked === undefined) {
    assert.equal(full, undefined, `the walk refused a file the full check accepts: ${context()}`);
    counts.refused++;
    return;
  }
  assert.ok(full !== undefined, `the walk accepted a file the full check refuses: ${context()}`);
  assert.deepStrictEqual(walked, full, context());
  // Key order too: it is the order of `agent list --json` and of every listing.
  assert.equal(JSON.stringify(walked), JSON.stringify(full), context());
  counts.accepted++;
}

/**
 * Each text's outcome once compared: both checks and the parse are functions of the text alone, so
 * a text met again (the fuzzers' fixed mutations of one base come up again and again: the 1 MiB
 * comment, the 200 KB url, the deep nestings) is counted as it came out the first time, not parsed
 * and checked again. Of the 3,000 files of both fuzzers, 1,265 repeat one met before, and they are
 * three fifths of the bytes.
 */
const outcomes = new Map<string, keyof Tally>();

function agreeOnText(source: string | Buffer, counts: Tally, context: () => string): void {
  const text = typeof source === "string" ? source : source.toString("utf8");
  const known = outcomes.get(text);
  if (known !== undefined) {
    counts[known]++;
    return;
  }
  const before = { ...counts };
  let raw: unknown;
  try {
    raw = parse(text, { maxDepth: MAX_DEPTH });
  } catch {
    counts.unparsed++;
    outcomes.set(text, "unparsed");
    return;
  }
  agree(raw, counts, context);
  outcomes.set(text, counts.accepted > before.accepted ? "accepted" : "refused");
}

test("every fixture and the example: the walk answers as the full check does", () => {
  const counts = tally();
  for (const [name, source] of [...fixtures, ["substructure.toml.example", example] as const]) agreeOnText(source, counts, () => name);
  // valid-full.toml and the example are valid; the other fixtures each break a rule, or are not TOML.
  assert.equal(counts.accepted, 2, JSON.stringify(counts));
  assert.equal(counts.refused + counts.unparsed, fixtures.length - 1, JSON.stringify(counts));
});

test("the files of test/fuzz.test.ts (seed 0x14f1, 1000 cases): the walk answers as the full check does", () => {
  const p = picker(prng(0x14f1));
  const counts = tally();
  for (let n = 0; n < 1000; n++) {
    const { source } = fileCase(p);
    // The fuzzer draws its command next; drawing it here too keeps the same files in the same order.
    p.chance(0.5);
    agreeOnText(source, counts, () => `file case ${n}: ${String(source).slice(-300)}`);
  }
  console.log(JSON.stringify(counts));
  assert.ok(counts.accepted > 150 && counts.refused > 200, JSON.stringify(counts));
});

test("the files of test/config-fuzz.test.ts (seed 0x5eed, 2000 cases): the walk answers as the full check does", () => {
  const random = prng(0x5eed);
  const counts = tally();
  for (let n = 0; n < 2000; n++) {
    const source = mutatedFile(random);
    agreeOnText(source, counts, () => `case ${n}: ${source.slice(-300)}`);
  }
  console.log(JSON.stringify(counts));
  assert.ok(counts.accepted > 300 && counts.refused > 200, JSON.stringify(counts));
});

// --- parsed files mutated value by value ------------------------------------------------------

/** A file with every part of the format: [remote], every key of a connection and of a filter, sub-agents. */
const EVERYTHING = `db = "state/env.db"

[remote]
url = "https://deploy.example.com"
token_env = "DEPLOY_TOKEN"

[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"
oauth = { client_metadata_url = "https://app.example.com/client.json", scopes = ["read", "org:write"] }

[mcp.linear]
url = "https://mcp.linear.app/mcp"
oauth = { client_id = "abc", client_secret_env = "LINEAR_CLIENT_SECRET" }
prefix_tools = true

[mcp.github]
url = "https://api.githubcopilot.com/mcp/?x=1#f"
auth = { token_env = "GITHUB_TOKEN" }
prefix_tools = false

[mcp.local]
url = "http://[::1]:8080/mcp"
headers = { "X-API-Key" = "\${LOCAL_KEY}", "X-Client" = "subs" }

[mcp.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "./docs", "\${HOME}/notes"]
env = { LOG_LEVEL = "info", API_TOKEN = "\${FS_TOKEN}", EMPTY = "" }
cwd = "tools"
prefix_tools = false

[agent.support]
mcp = ["sentry", { id = "github", tools = { include = ["a*"], exclude = ["b"], read_only = true, non_destructive = false, idempotent = true } }]

[agent.triage]
mcp = [{ id = "linear" }, "local", "fs"]
tools = ["summarize"]
agents = ["support"]
`;

const bases = [fixtures.find(([name]) => name === "valid-full.toml")![1], example, EVERYTHING].map((source) => parse(source) as Record<string, unknown>);

/** A deep copy as smol-toml makes them: tables without a prototype, dates kept. */
function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy);
  if (value instanceof Date) return new Date(value.getTime());
  if (value !== null && typeof value === "object") {
    const out = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(value)) out[key] = copy((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

const table = (entries: Record<string, unknown>) => copy(entries);

const KEYS = [
  "db", "remote", "mcp", "agent", "url", "auth", "oauth", "prefix_tools", "token_env", "client_id", "client_secret_env", "client_metadata_url", "scopes",
  "tools", "agents", "id", "include", "exclude", "read_only", "non_destructive", "idempotent",
  "token", "client_secret", "api_key", "password", "x", "Bad", "a__b", "sentry", "sentry2", "support", "new-id", "new_agent", "", ...RESERVED,
];

const STRINGS = [
  "", "x", "sentry", "sentry2", "linear", "github", "local", "support", "triage", "missing",
  "https://b.example/mcp", "https://B.EXAMPLE:8443/p?q#f", "http://127.0.0.1:9/mcp", "http://localhost/mcp", "http://[::1]/mcp", "http://127.1.2.3/m",
  "http://example.com/mcp", "https://user:pw@x.example/mcp", "https://x.example\\@y.example/", "ftp://x.example", "not a url", "https://", "https://x y.example",
  "https://x.example/\u202e", "https://ex\u0000ample.com", "https://日本.example/mcp",
  "MY_TOKEN", "_X9", "1BAD", "BAD-NAME", "read", "org:write", "read write", 'a"b', "a\\b",
  "state/env.db", "../outside.db", "/abs/elsewhere.db", ".", "sub/dir/x.db", "sentry__search", "constructor", "token",
  ...CONTROL, ...UNICODE,
];

function value(p: ReturnType<typeof picker>): unknown {
  const kinds: Array<() => unknown> = [
    () => p.pick(STRINGS),
    () => p.pick(STRINGS),
    () => p.pick([0, 1, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]),
    () => p.chance(0.5),
    () => new Date(0),
    () => p.pick([[], ["x"], [1], ["sentry"], ["sentry", "sentry"], ["support"], [""], ["read", "\u0007"], [new Date(0)]]).map(copy),
    () => [table({ id: p.pick(["sentry", "linear", "missing", "github"]) }), ...(p.chance(0.3) ? [p.pick(STRINGS)] : [])],
    () =>
      table(
        p.pick([
          {},
          { id: "sentry" },
          { token_env: "X" },
          { url: "https://b.example/mcp" },
          { url: "https://b.example/mcp", prefix_tools: false },
          { client_id: "c", scopes: ["read"] },
          { read_only: true, include: ["x*"] },
          { mcp: ["sentry"] },
          { mcp: [], tools: [], agents: [] },
        ]),
      ),
  ];
  return p.pick(kinds)();
}

/** Values for one key, valid and not, so that each rule of that key comes up often. */
const FOR_KEY: Record<string, unknown[]> = {
  db: ["x.db", "state/env.db", "../outside.db", "/abs/elsewhere.db", ".", "", "a/../b.db", "a/../../b.db", "./sub/./x.db", "..", "x\u202e.db"],
  url: ["https://b.example/mcp", "http://localhost:1/mcp", "http://example.com/mcp", "https://u:p@x.example/", "https://x.example/\u0007", "mailto:x@y"],
  client_metadata_url: ["https://app.example.com/c.json", "http://localhost/c.json", "http://127.0.0.1/c.json", "https://u@x.example/c", "nope"],
  client_id: ["abc", "", "a\u0007", "日本", 1],
  token_env: ["GITHUB_TOKEN", "1X", "", "A-B"],
  client_secret_env: ["SECRET", "9", ""],
  scopes: [["read"], [], ["a b"], ["\""], ["read", 1], "read"],
  mcp: [new Date(0), [], ["sentry"], "x"],
  agent: [new Date(0), [], "x"],
  oauth: [
    { client_id: "c", client_metadata_url: "https://app.example.com/c.json" },
    { client_secret_env: "S" },
    { client_id: "c", client_secret_env: "S" },
    { client_metadata_url: "http://localhost/c.json" },
    { client_metadata_url: "https://app.example.com/c.json", scopes: ["read"] },
    new Date(0),
  ],
};

/** Every table and array in `root`, each with its path. */
function containers(root: unknown): Array<{ node: Record<string, unknown> | unknown[]; at: string }> {
  const out: Array<{ node: Record<string, unknown> | unknown[]; at: string }> = [];
  const walk = (node: unknown, at: string) => {
    if (Array.isArray(node)) {
      out.push({ node, at });
      node.forEach((item, n) => walk(item, `${at}[${n}]`));
    } else if (node !== null && typeof node === "object" && !(node instanceof Date)) {
      out.push({ node: node as Record<string, unknown>, at });
      for (const key of Object.keys(node)) walk((node as Record<string, unknown>)[key], `${at}.${key}`);
    }
  };
  walk(root, "");
  return out;
}

function mutateOnce(root: Record<string, unknown>, p: ReturnType<typeof picker>): string {
  const { node, at } = p.pick(containers(root));
  if (Array.isArray(node)) {
    const n = p.int(node.length + 1);
    const what = p.int(3);
    if (what === 0 && node.length > 0) node.splice(n % node.length, 1);
    else if (what === 1 && node.length > 0) node.push(copy(node[n % node.length]));
    else node.splice(n, 0, value(p));
    return `${at}[${n}] (${what})`;
  }
  const keys = Object.keys(node);
  const what = p.int(4);
  const key = keys.length > 0 && what < 3 ? p.pick(keys) : p.pick(KEYS);
  if (what === 0) delete node[key];
  else if (what === 1) {
    const renamed = p.pick(KEYS);
    const moved = node[key];
    delete node[key];
    node[renamed] = moved;
    return `${at}: ${key} -> ${renamed}`;
  } else node[key] = Object.hasOwn(FOR_KEY, key) && p.chance(0.7) ? copy(p.pick(FOR_KEY[key]!)) : value(p);
  return `${at}.${key} (${what})`;
}

test("parsed files mutated value by value (seed 0xc4ec, 20000 cases): the walk answers as the full check does", () => {
  const p = picker(prng(0xc4ec));
  const counts = tally();
  for (let n = 0; n < 20_000; n++) {
    const root = copy(p.pick(bases)) as Record<string, unknown>;
    const done: string[] = [];
    for (let k = 1 + p.int(3); k > 0; k--) done.push(mutateOnce(root, p));
    agree(root, counts, () => `mutated case ${n}: ${done.join("; ")}`);
  }
  console.log(JSON.stringify(counts));
  assert.ok(counts.accepted > 2000 && counts.refused > 10_000, JSON.stringify(counts));
});

// TOML dates where a table goes: zod's object check takes a date (it has no keys), its record
// check does not, and the cross-references see no table in it. Rare enough that the mutations above
// seldom reach a file where only that decides.
test("dates where tables go: the walk answers as the full check does", () => {
  const date = () => new Date(0);
  const url = "https://a.example/mcp";
  const cases: Array<[string, Record<string, unknown>]> = [
    ["mcp is a date", { mcp: date() }],
    ["agent is a date", { agent: date() }],
    ["remote is a date", { remote: date() }],
    ["a connection is a date", { mcp: { a: date() } }],
    ["oauth is a date", { mcp: { a: { url, oauth: date() } } }],
    ["oauth is a date beside auth", { mcp: { a: { url, auth: { token_env: "T" }, oauth: date() } } }],
    ["auth is a date", { mcp: { a: { url, auth: date() } } }],
    ["an agent is a date", { agent: { x: date() } }],
    ["an agent's entry is a date", { mcp: { a: { url } }, agent: { x: { mcp: [date()] } } }],
    ["a filter is a date", { mcp: { a: { url } }, agent: { x: { mcp: [{ id: "a", tools: date() }] } } }],
  ];
  const counts = tally();
  for (const [name, raw] of cases) agree(table(raw), counts, () => name);
  console.log(JSON.stringify(counts));
  assert.ok(counts.accepted >= 4 && counts.refused >= 4, JSON.stringify(counts));
});
