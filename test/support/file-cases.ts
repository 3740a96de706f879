// The mutated files the fuzzers run (test/fuzz.test.ts, test/config-fuzz.test.ts), from fixed
// seeds, and that test/config-check.test.ts holds the file's one-walk check to zod's answer on.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { CONFIG_MAX_BYTES } from "../../src/config/read.ts";
import { REPO } from "./cli.ts";
import type { picker } from "./prng.ts";

/** What a run must end in, when the outcome is certain. */
export type Expect = { codes: number[]; stderr?: RegExp };

const valid = [
  readFileSync(path.join(REPO, "fixtures", "config", "valid-full.toml"), "utf8"),
  readFileSync(path.join(REPO, "substructure.toml.example"), "utf8"),
  '[mcp.a]\nurl = "https://a.example/mcp"\n[agent.x]\nmcp = ["a"]\n',
];
export const RESERVED = ["__proto__", "constructor", "prototype"];
export const CONTROL = ["\u0000", "\u0001", "\u0007", "\b", "\t", "\u000b", "\f", "\r", "\u001b", "\u001b[2K", "\u001b]2;owned\u0007", "\u007f", "\u009b"];
export const UNICODE = ["ñandú", "日本", "🙂", "\u202e", "\u200b", "\u2028", "\ufeff", "\ud800", "ид", "e\u0301"];

/** A file mutation and, when the outcome is certain, what the run must say. */
export type FileCase = { source: string | Buffer; expect?: Expect };

export function fileCase(p: ReturnType<typeof picker>): FileCase {
  const base = p.pick(valid);
  const lines = base.split("\n");
  const at = p.int(lines.length + 1);
  const depth = p.pick([66, 100, 1000, 10_000, 30_000]);
  const dotted = (n: number) => Array.from({ length: n }, () => p.pick(["a", "b", '"q"'])).join(".");
  const nested: FileCase = { source: "", expect: { codes: [2], stderr: /nested deeper than 64 levels/ } };
  const mutations: Array<() => FileCase> = [
    // bytes flipped anywhere, invalid UTF-8 included
    () => {
      const bytes = Buffer.from(base);
      for (let k = 1 + p.int(8); k > 0; k--) bytes[p.int(bytes.length)] = p.int(256);
      return { source: bytes };
    },
    () => ({ source: base.slice(0, p.int(base.length)) }),
    () => ({ source: lines.filter((_, n) => n !== at).join("\n") }),
    // a duplicated line: duplicate keys and tables
    () => ({ source: [...lines.slice(0, at), lines[at] ?? "", ...lines.slice(at)].join("\n") }),
    () => ({ source: `${base}\n${p.pick(lines.filter((l) => l.startsWith("[")))}\n`, expect: { codes: [2], stderr: /^substructure\.toml:\d+:\d+: invalid TOML/m } }),
    // deep nesting of every kind
    () => ({ ...nested, source: `${base}\nx = ${"[".repeat(depth)}${"]".repeat(depth)}\n` }),
    () => ({ ...nested, source: `${base}\nx = ${"{ a = ".repeat(depth)}1${" }".repeat(depth)}\n` }),
    () => ({ ...nested, source: `${base}\n[${dotted(depth)}]\n` }),
    () => ({ ...nested, source: `${base}\n[[mcp.${dotted(depth)}]]\n` }),
    () => ({ ...nested, source: `${dotted(depth)} = 1\n${base}` }),
    // huge strings, keys and files
    () => ({ source: `${base}\n[mcp.huge]\nurl = "https://example.com/${"x".repeat(p.int(CONFIG_MAX_BYTES - base.length - 64))}"\n` }),
    () => ({ source: `${base}\n[mcp.${"k".repeat(1 + p.int(200_000))}]\nurl = "https://k.example/mcp"\n` }),
    () => ({ source: `${base}\n# ${"z".repeat(CONFIG_MAX_BYTES)}\n`, expect: { codes: [2], stderr: /is larger than 1 MiB/ } }),
    // control characters raw and escaped, in strings, keys and comments
    () => {
      const c = p.pick(CONTROL);
      const cut = p.int(base.length);
      return { source: base.slice(0, cut) + c + base.slice(cut) };
    },
    () => ({ source: base.replace(/"([^"\n]*)"/, (_, s: string) => `"${s}${p.pick(CONTROL)}"`) }),
    () => ({ source: base.replace(/"([^"\n]*)"/, (_, s: string) => `"${s}\\u${p.pick(["0000", "001b", "007f", "202e", "2028", "0085"])}"`) }),
    // unicode in ids, urls and names
    () => ({ source: `${base}\n[mcp.${p.chance(0.5) ? p.pick(UNICODE) : `"${p.pick(UNICODE)}"`}]\nurl = "https://${p.pick(UNICODE)}.example/mcp"\n` }),
    () => ({ source: `${base}\n[agent."${p.pick(UNICODE)}"]\nmcp = ["${p.pick(UNICODE)}"]\n` }),
    // reserved names: always an error that says so
    () => {
      const name = p.pick(RESERVED);
      const quoted = p.chance(0.3) ? `"${name}"` : name;
      const source = p.pick([
        `${base}\n[mcp.${quoted}]\nurl = "https://r.example/mcp"\n`,
        `${base}\n[agent.${quoted}]\nmcp = []\n`,
        `${quoted} = 1\n${base}`,
        `${base}\n[mcp.r]\nurl = "https://r.example/mcp"\noauth = { ${quoted} = "x" }\n`,
        `${base}\n[[mcp.r.${quoted}]]\n`,
        `${base}\n[agent.r]\nmcp = [{ id = "a", tools = { ${quoted} = true } }]\n`,
        `mcp.${quoted}.url = "https://r.example/mcp"\n${base}`,
      ]);
      return { source, expect: { codes: [2], stderr: new RegExp(`^substructure\\.toml:\\d+:\\d+: \`${name}\` is a reserved name`, "m") } };
    },
    // many tables naming what does not exist
    () => {
      const n = 200 + p.int(1500);
      // Dotted keys at the top level: after a [table] of the base they would land inside it.
      const parts: string[] = [];
      for (let i = 0; i < n; i++) parts.push(`mcp.s${i}.url = "https://s.io"\nagent.g${i}.mcp = ["m${p.int(n)}"]\n`);
      return { source: parts.join("\n"), expect: { codes: [2], stderr: /names connection `m\d+`, which is not declared/ } };
    },
    () => ({ source: base.replace(/\n/g, () => (p.chance(0.1) ? p.pick(["\r\n", "\r", "\n\n", " \\\n", "\u2028"]) : "\n")) }),
    () => ({ source: base.replace(/"[^"\n]*"/, () => p.pick(['"', "'''", '"""', "1979-05-27T07:32:00Z", "inf", "-nan", "0x1F", "[]", "{}", "true", "1e400"])) }),
  ];
  return p.pick(mutations)();
}

const fixture = (name: string) => readFileSync(path.join(REPO, "fixtures", "config", name), "utf8");
const validBases = [fixture("valid-full.toml"), readFileSync(path.join(REPO, "substructure.toml.example"), "utf8")];
const invalidBases = readdirSync(path.join(REPO, "fixtures", "config")).filter((f) => f !== "valid-full.toml").map(fixture);

/** A fixture of fixtures/config/ or the example file, mutated (test/config-fuzz.test.ts: mostly valid files, so that both outcomes come up). */
export function mutatedFile(random: () => number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  // Mostly valid files, so that a mutation can leave them valid and both outcomes are exercised.
  const base = random() < 0.8 ? pick(validBases) : pick(invalidBases);
  const lines = base.split("\n");
  const at = Math.floor(random() * (lines.length + 1));
  const mutations: Array<() => string> = [
    () => lines.filter((_, n) => n !== at).join("\n"),
    () => [...lines.slice(0, at), lines[at] ?? "", ...lines.slice(at)].join("\n"),
    () => base.slice(0, Math.floor(random() * base.length)),
    () => {
      const bytes = Array.from({ length: 1 + Math.floor(random() * 12) }, () => String.fromCharCode(Math.floor(random() * 256))).join("");
      const cut = Math.floor(random() * base.length);
      return base.slice(0, cut) + bytes + base.slice(cut);
    },
    () => `${base}\n[mcp.huge]\nurl = "https://example.com/${"x".repeat(200_000)}"\n`,
    () => `${base}\nnested = ${"[".repeat(5000)}${"]".repeat(5000)}\n`,
    () => `${base}\nnested = ${"{ a = ".repeat(3000)}1${" }".repeat(3000)}\n`,
    () => `${base}\n[mcp.${pick(["ñandú", "café", "日本", "a\u200bb", "ид"])}]\nurl = "https://u.example/mcp"\n`,
    () => `${base}\n[mcp."${pick(["ñandú", "🙂", "a b", "", "x\\u0000y"])}"]\nurl = "https://u.example/mcp"\n`,
    () =>
      Array.from({ length: 1000 + Math.floor(random() * 2000) }, (_, n) => `[mcp.s${n}]\nurl = "https://s${n}.example/mcp"\n`).join("\n") +
      `\n[agent.all]\nmcp = ["s1", "s2", "missing${Math.floor(random() * 10)}"]\n`,
    () => base.replace(/"[^"\n]*"/, () => pick(['"', "'''", '"""', "1979-05-27T07:32:00Z", "inf", "nan", "0x1F", "[]", "{}", "true"])),
    () => base.replace(/\n/g, () => (random() < 0.1 ? pick(["\r\n", "\r", "\n\n", " \\\n"]) : "\n")),
  ];
  return pick(mutations)();
}

