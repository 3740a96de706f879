// Loaded by scripts/test.mjs into the process of each test file (`--import`), so that no test can
// hang the suite:
//
// - Every test and every hook that names no `{ timeout }` of its own gets $TEST_TIMEOUT_MS. A test
//   that overruns it fails under its own name ("test timed out after …ms"), its file's hooks run,
//   and the file goes on. Node 20's `--test-timeout` cannot do this: it bounds each test *file* as
//   a whole and names only the file (Node 22 passes it on to each test), so a file of many quick
//   tests would fail as a unit. node:test's Test reads its `timeout` when it starts and takes its
//   parent's when none is given; a suite (`describe`) stays unbounded as a whole, its tests are
//   bounded one by one. test/runner.test.ts proves each of these on the Node in use.
// - A file whose tests have all ended but whose process stays alive (a server or child process
//   left running, the loop of a test that timed out) is ended after a grace, failing, with what was
//   still open, instead of keeping the run waiting for ever.
import { createHook } from "node:async_hooks";
import { after } from "node:test";

const limit = Number(process.env.TEST_TIMEOUT_MS);
// As long as half a test may take: a file's after hooks close what its tests opened (servers,
// processes, a Postgres) well within it.
const GRACE_MS = limit / 2;

// Only in a test file's own process: the runner's process (`node --test`) loads this too.
if (process.env.NODE_TEST_CONTEXT && limit > 0) {
  // Registered before the hook below is enabled: the file's root test and this hook keep Node's
  // own (unbounded) timeout, so the suites the root's timeout would pass down stay unbounded.
  after(() => lingering());
  const created = [];
  createHook({
    init(_asyncId, type, _trigger, resource) {
      // The async resource of every node:test Test (a test, a hook, a suite) is of type "Test".
      if (type !== "Test") return;
      const kind = resource.constructor.name;
      if (kind === "Test") created.push(new WeakRef(resource));
      if (kind === "Suite") return;
      let timeout;
      Object.defineProperty(resource, "timeout", {
        configurable: true,
        enumerable: true,
        get: () => timeout,
        set: (value) => {
          timeout = value == null || value === Infinity ? limit : value;
        },
      });
    },
  }).enable();

  function lingering() {
    const timer = setTimeout(() => {
      if (created.some((ref) => ref.deref()?.finished === false)) return lingering();
      const open = new Map();
      for (const r of process.getActiveResourcesInfo()) open.set(r, (open.get(r) ?? 0) + 1);
      const listed = [...open].map(([r, n]) => `${r} ×${n}`).join(", ");
      process.stderr.write(`\nThis test file's tests have all ended, but its process was still running ${GRACE_MS / 1000} s later; ending it. Still open: ${listed}.\n`);
      process.exit(1);
    }, GRACE_MS);
    timer.unref();
  }
}
