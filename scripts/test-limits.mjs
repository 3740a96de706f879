// Loaded by scripts/test.mjs into the process of each test file (`--import`), so that no test can
// hang the suite, and so that a file's async hooks cost it little:
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
// - node:test's harness (Node 20, lib/internal/test_runner/harness.js) finds the test that code runs
//   for (the parent of a `test()` or `before()` called in a `describe`, the test an uncaught
//   exception fails) by `testResources.get(executionAsyncId())`, a map it fills with an async hook
//   of its own: `init` maps every new async resource (every promise) to its trigger's test, and
//   `destroy` removes it, so every promise of the file pays for a call, a map entry and a destroy
//   tracking (a weak callback). Here one hook with `init` only does that job as AsyncLocalStorage
//   does: each resource carries its test in a property, the harness's map holds the tests alone,
//   and the harness's `executionAsyncId` reads the test from the resource that runs. The 3,000
//   calls of test/mcp-proxy.e2e.test.ts, all in its own process, took 12.1 s of CPU with the
//   harness's hook and 10.7 s with this one (three runs each, interleaved, on a 2-core VM).
//   test/runner.test.ts proves that errors from callbacks still fail their test and that what a
//   test or suite declares is still its child.
import { createRequire } from "node:module";

const limit = Number(process.env.TEST_TIMEOUT_MS);
// As long as half a test may take: a file's after hooks close what its tests opened (servers,
// processes, a Postgres) well within it.
const GRACE_MS = limit / 2;

// Only in a test file's own process: the runner's process (`node --test`) loads this too.
if (process.env.NODE_TEST_CONTEXT && limit > 0) {
  // harness.js takes createHook and executionAsyncId from this module object when it loads (at the
  // import of node:test below), and calls createHook when the file's root test is set up (at the
  // after() below): both are swapped for that while.
  const asyncHooks = createRequire(import.meta.url)("node:async_hooks");
  const { createHook, executionAsyncId, executionAsyncResource } = asyncHooks;
  const TEST = Symbol("node:test Test this resource runs for");
  /** The harness's own hook callbacks: its `init` records a Test in its map. */
  let harness;
  asyncHooks.createHook = (callbacks) => {
    harness = callbacks;
    return { enable() {}, disable() {} };
  };
  asyncHooks.executionAsyncId = () => executionAsyncResource()?.[TEST]?.asyncId() ?? executionAsyncId();
  const { after } = await import("node:test");
  // The file's root test and this hook are made before the hook below is enabled: they keep Node's
  // own (unbounded) timeout, so the suites the root's timeout would pass down stay unbounded.
  after(() => lingering());
  asyncHooks.createHook = createHook;
  asyncHooks.executionAsyncId = executionAsyncId;
  if (typeof harness?.init !== "function") throw new Error("scripts/test-limits.mjs: node:test set up no async hook (its internals changed); see the comment at the top");

  const created = [];
  createHook({
    init(asyncId, type, trigger, resource) {
      // The async resource of every node:test Test (a test, a hook, a suite) is of type "Test".
      if (type !== "Test") {
        const test = executionAsyncResource()?.[TEST];
        if (test !== undefined) resource[TEST] = test;
        return;
      }
      resource[TEST] = resource;
      harness.init(asyncId, type, trigger, resource);
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
