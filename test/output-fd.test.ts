// fdOutput (src/context.ts): stdout and stderr written with write(2) when they are not terminals.
// What a stream gave for free must still hold: every byte, in order, before `write`
// returns, and a reader that went away ends the process quietly.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { fdOutput } from "../src/context.ts";
import { BIN, ensureBuilt } from "./support/cli.ts";

const errno = (code: string) => Object.assign(new Error(code), { code });

/** A write(2) stand-in: takes at most `max` bytes per call, after the failures queued in `fail`. */
function fakeFd(max: number, fail: string[] = []) {
  const written: Buffer[] = [];
  const write = (_fd: number, bytes: Uint8Array, offset: number, length: number) => {
    const code = fail.shift();
    if (code) throw errno(code);
    const n = Math.min(max, length);
    written.push(Buffer.from(bytes.subarray(offset, offset + n)));
    return n;
  };
  return { write, text: () => Buffer.concat(written).toString("utf8") };
}

describe("fdOutput", () => {
  test("a write the kernel takes in pieces goes on from where it stopped, multi-byte characters intact", () => {
    const fd = fakeFd(3);
    const out = fdOutput(1, { onBrokenPipe: () => assert.fail("no broken pipe"), write: fd.write });
    out.write("authorized ✔ · 東京\n");
    out.write("next\n");
    assert.equal(fd.text(), "authorized ✔ · 東京\nnext\n");
  });

  test("a full non-blocking pipe (EAGAIN) is waited on, not dropped", () => {
    const fd = fakeFd(1024, ["EAGAIN", "EAGAIN"]);
    const pauses: number[] = [];
    const out = fdOutput(1, { onBrokenPipe: () => assert.fail("no broken pipe"), write: fd.write, pause: (ms) => pauses.push(ms) });
    out.write('{"id":"sentry"}\n');
    assert.equal(fd.text(), '{"id":"sentry"}\n');
    assert.equal(pauses.length, 2);
  });

  test("a reader that has gone (EPIPE) is reported to onBrokenPipe; other errors are thrown as they are", () => {
    let broken = 0;
    const gone = fdOutput(1, { onBrokenPipe: () => broken++, write: fakeFd(10, ["EPIPE"]).write });
    assert.throws(() => gone.write("x"), { code: "EPIPE" });
    assert.equal(broken, 1);
    const full = fdOutput(1, { onBrokenPipe: () => broken++, write: fakeFd(10, ["ENOSPC"]).write });
    assert.throws(() => full.write("x"), { code: "ENOSPC" });
    assert.equal(broken, 1);
  });
});

/** A file of `n` connections: `mcp list --json` prints about 350 bytes for each. */
function bigEnvironment(n: number): string {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-fd-"));
  const lines = Array.from({ length: n }, (_, i) => `[mcp.c${i}]\nurl = "https://s${i}.example.com/mcp"\n`);
  writeFileSync(path.join(dir, "substructure.toml"), lines.join("\n"));
  return dir;
}

describe("the real CLI's stdout", () => {
  // Another program can hand subs a pipe in non-blocking mode (Node cannot make one for a child:
  // libuv makes a child's stdio blocking, so python3 starts it). With a stream, output beyond the
  // pipe's 64 KiB was queued and lost at process.exit: a reader got cut-off JSON and exit 0.
  test("a non-blocking pipe read slowly still gets every byte of a long --json", () => {
    ensureBuilt();
    const dir = bigEnvironment(600);
    const script = [
      "import fcntl, os, subprocess, sys, time",
      "r, w = os.pipe()",
      "fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)",
      "child = subprocess.Popen(sys.argv[1:], stdout=w, cwd=os.environ['SUBS_DIR'])",
      "os.close(w)",
      "time.sleep(0.3)",
      "data = b''",
      "while True:",
      "    chunk = os.read(r, 4096)",
      "    if not chunk: break",
      "    data += chunk",
      "sys.stdout.buffer.write(data)",
      "sys.exit(child.wait())",
    ].join("\n");
    const result = spawnSync("python3", ["-c", script, process.execPath, BIN, "mcp", "list", "--json"], {
      env: { PATH: process.env.PATH, HOME: dir, SUBS_DIR: dir },
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    assert.equal(result.status, 0, result.stderr);
    assert.ok(result.stdout.length > 128 * 1024, `only ${result.stdout.length} bytes: the test must overflow the pipe`);
    assert.equal(JSON.parse(result.stdout).length, 600);
  });

  test("a reader that closes early (`subs … | head -c 1`) ends subs quietly with exit 0", () => {
    ensureBuilt();
    const dir = bigEnvironment(600);
    // A shell pipe (64 KiB), so subs is still writing when head has gone.
    const result = spawnSync("bash", ["-c", '"$NODE" "$BIN" mcp list --json 2>"$DIR/stderr" | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}"; cat "$DIR/stderr"'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, NODE: process.execPath, BIN, DIR: dir },
      encoding: "utf8",
    });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, "0\n", "subs's exit code, then its stderr (empty)");
  });
});
