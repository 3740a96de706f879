// Tables fit the terminal: on a terminal the longest columns are shortened with
// `…` so every line fits the width; piped output keeps whole values, tab-separated.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { terminalColumns } from "../src/context.ts";
import { loadStyles, styleFor } from "../src/output/style.ts";
import { columnWidths, renderTable } from "../src/output/table.ts";
import { displayWidth, truncateToWidth } from "../src/output/width.ts";
import { runCli, runInProcess } from "./support/cli.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const SGR = /\x1b\[[0-9;]*m/g;
const lines = (text: string) => text.split("\n").filter((l) => l !== "");

describe("display width", () => {
  test("wide characters count two, combining and zero-width ones none, colours none", () => {
    assert.equal(displayWidth("abc"), 3);
    assert.equal(displayWidth("日本語"), 6);
    assert.equal(displayWidth("ｆｕｌｌ"), 8);
    assert.equal(displayWidth("e\u0301"), 1, "e + combining acute is one column");
    assert.equal(displayWidth("🔥"), 2);
    assert.equal(displayWidth("👩‍💻"), 2, "a ZWJ sequence is one emoji");
    assert.equal(displayWidth("a\u200bb"), 2, "zero width space");
    assert.equal(displayWidth("\x1b[32mok\x1b[39m"), 2);
  });

  test("a cut falls between clusters, ends with …, never exceeds the width, and keeps every colour code", () => {
    assert.equal(truncateToWidth("abcdef", 6), "abcdef");
    assert.equal(truncateToWidth("abcdefg", 6), "abcde…");
    // A wide character that would straddle the edge is left out whole.
    assert.equal(truncateToWidth("ab日本語", 5), "ab日…");
    assert.equal(truncateToWidth("ab日本語", 6), "ab日…", "日本 would take the sixth column the … needs");
    assert.equal(truncateToWidth("ab日本語", 7), "ab日本…");
    assert.equal(truncateToWidth("abé́cdef", 4), "abé́…");
    assert.equal(truncateToWidth("👩‍💻👩‍💻👩‍💻", 5), "👩‍💻👩‍💻…");
    const colored = "\x1b[32mauthorized (expires in 3h)\x1b[39m · tail";
    const cut = truncateToWidth(colored, 12);
    assert.equal(cut, "\x1b[32mauthorized …\x1b[39m");
    assert.equal(displayWidth(cut), 12);
    for (const width of [1, 2, 5, 13, 20, 30]) {
      const c = truncateToWidth(colored, width);
      assert.ok(displayWidth(c) <= width, `${width}: ${JSON.stringify(c)}`);
      assert.deepEqual(c.match(SGR), colored.match(SGR), "no colour code is cut or lost");
    }
  });
});

describe("renderTable", () => {
  const header = ["ID", "URL", "STATUS"];
  const rows = [
    ["sentry", "https://mcp.sentry.dev/mcp/with/a/rather/long/path/that/goes/on/and/on", "needs login · subs mcp login sentry"],
    ["日本", "https://例え.jp/mcp", "authorized (expires in 59m, refreshable)"],
  ];

  for (const columns of [60, 80, 120]) {
    test(`at ${columns} columns every line fits, ids stay whole`, () => {
      const out = renderTable(header, rows, { tty: true, columns });
      for (const line of lines(out)) assert.ok(displayWidth(line) <= columns, `${displayWidth(line)} > ${columns}: ${line}`);
      assert.match(out, /^sentry /m);
      assert.match(out, /^日本 /m);
    });
  }

  test("what follows ` · ` (the next step to type) stays whole at any width; what comes before it is cut first", () => {
    for (const columns of [40, 60, 80]) {
      const out = renderTable(header, rows, { tty: true, columns });
      assert.match(out, /· subs mcp login sentry\n/, `${columns}: ${out}`);
    }
    const narrow = renderTable(["ID", "STATUS"], [["x", "reachable · needs login"]], { tty: true, columns: 20 });
    assert.match(narrow, /^x +r\S*… · needs login$/m);
    assert.deepEqual(columnWidths([6, 70, 40], header, { columns: 80, floors: [0, 0, 36] }), [6, 34, 36]);
  });

  test("wide enough: nothing is cut", () => {
    const out = renderTable(header, rows, { tty: true, columns: 200 });
    assert.equal(out, renderTable(header, rows, { tty: true }));
    assert.doesNotMatch(out, /…/);
  });

  test("at 80 columns the long URL is cut with …", () => {
    const out = renderTable(header, rows, { tty: true, columns: 80 });
    assert.match(out, /https:\/\/mcp\.sentry\.\S*…/);
    assert.ok(lines(out).some((l) => displayWidth(l) === 80), "the table uses the width it has");
  });

  test("piped: whole values, tab-separated, whatever the width", () => {
    assert.equal(renderTable(header, rows, { tty: false, columns: 20 }), rows.map((r) => r.join("\t") + "\n").join(""));
  });

  test("columns shrink down to their header, the widest first", () => {
    assert.deepEqual(columnWidths([6, 70, 40], header, { columns: 80 }), [6, 35, 35]);
    // Too narrow even so: the ids are never cut, the rest stop at their minimum.
    assert.deepEqual(columnWidths([6, 70, 40], header, { columns: 10 }), [6, 6, 6]);
  });

  test("coloured cells: the cut keeps the colour codes whole", async () => {
    await loadStyles();
    const style = styleFor(true);
    const colored = [["a", style.green("authorized (expires in 59 minutes, refreshable)")]];
    const out = renderTable(["ID", "STATUS"], colored, { tty: true, columns: 20, style: style.bold });
    for (const line of lines(out)) assert.ok(displayWidth(line) <= 20, line);
    assert.match(out, /\x1b\[32mauthorized \(exp…\x1b\[39m/);
  });
});

describe("the terminal's width", () => {
  test("$COLUMNS wins when it is a positive integer; else the terminal's; else unknown", () => {
    assert.equal(terminalColumns({ COLUMNS: "100" }, 80), 100);
    assert.equal(terminalColumns({ COLUMNS: "wide" }, 80), 80);
    assert.equal(terminalColumns({ COLUMNS: "0" }, 80), 80);
    assert.equal(terminalColumns({}, 120), 120);
    assert.equal(terminalColumns({}, undefined), undefined);
    assert.equal(terminalColumns({}, 0), undefined);
  });
});

describe("commands fit their tables to ctx.stdoutColumns", () => {
  const LONG = "https://mcp.example.com/a/very/long/path/to/the/model/context/protocol/endpoint/mcp";
  const dir = mkdtempSync(path.join(tmpdir(), "subs-width-"));
  dirs.push(dir);
  writeFileSync(
    path.join(dir, "substructure.toml"),
    `[mcp.sentry]\nurl = "${LONG}"\n\n[mcp.docs]\nurl = "https://docs.example/mcp"\n\n[agent.support]\nmcp = [{ id = "sentry", tools = { read_only = true, include = ["search_*", "get_*"], exclude = ["*_delete"] } }, "docs"]\n`,
  );

  for (const columns of [80, 120]) {
    test(`mcp list and agent list at ${columns} columns`, async () => {
      for (const [argv, id] of [
        [["mcp", "list"], "sentry"],
        [["agent", "list"], "support"],
      ] as const) {
        const r = await runInProcess([...argv], { cwd: dir, stdoutIsTTY: true, stdoutColumns: columns });
        assert.equal(r.code, 0, r.stderr);
        for (const line of lines(r.stdout)) assert.ok(displayWidth(line) <= columns, `${argv.join(" ")}: ${displayWidth(line)} > ${columns}: ${line}`);
        assert.match(r.stdout, new RegExp(`^${id} `, "m"), "the id stays whole");
      }
      const list = await runInProcess(["mcp", "list"], { cwd: dir, stdoutIsTTY: true, stdoutColumns: columns });
      assert.match(list.stdout, /^sentry +https:\/\/mcp\.\S*… /m);
      // The next step a person types is never cut: the URL gives way instead.
      assert.match(list.stdout, /needs login · subs mcp login sentry/);
    });
  }

  test("piped (the real CLI): whole values, tab-separated, even with $COLUMNS set", async () => {
    const r = await runCli(["mcp", "list"], { cwd: dir, env: { COLUMNS: "40" } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.split("\n")[0], `sentry\t${LONG}\toauth\tneeds login · subs mcp login sentry\tsupport`);
  });
});
