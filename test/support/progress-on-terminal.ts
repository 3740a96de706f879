// Child-process half of test/progress.test.ts: yocto-spinner decides from the process's own
// environment whether a stream is interactive (CI, TERM), so the animated case runs in a child
// whose environment the test sets, whatever machine runs the suite. Prints what the "terminal" got.
import { PassThrough } from "node:stream";
import { loadSpinner, startProgress } from "../../src/output/progress.ts";

const stream = Object.assign(new PassThrough(), { isTTY: true, columns: 80, cursorTo() {}, clearLine() {}, moveCursor() {} });
let text = "";
stream.on("data", (d) => (text += d));
await loadSpinner();
let t = 0;
const env = { TERM: "xterm-256color" };
const progress = startProgress({ stderr: stream, stderrIsTTY: true, stderrColor: false, env, now: () => (t += 1500) }, "Waiting for consent");
await new Promise((r) => setTimeout(r, 250));
progress.succeed("Authorized");
await new Promise((r) => setImmediate(r));
process.stdout.write(JSON.stringify(text));
