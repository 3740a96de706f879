// A script of this repository (TypeScript, importing src/) as plain JavaScript for a child `node`,
// bundled once per test file as scripts/test-bundle.mjs bundles the test files: a child under tsx
// spent about a second of CPU loading it, for what the child is run to show (its answers, its
// deadlines), not how it is loaded. The bundles go into a directory named as scripts/test.mjs names
// its own runs' (run-<pid>), so that the next `npm test` removes it if this process was killed
// before `after` did.
import { rmSync } from "node:fs";
import path from "node:path";
import { after } from "node:test";
import { pathToFileURL } from "node:url";
import { REPO } from "./cli.ts";

const BUNDLES = path.join(REPO, ".test-build", `run-${process.pid}`);
const bundles = new Map<string, Promise<string>>();
after(() => rmSync(BUNDLES, { recursive: true, force: true }));

/** `script` (a path from the repository's root) bundled into one ES module; its path. */
export function scriptBundle(script: string): Promise<string> {
  let bundle = bundles.get(script);
  if (!bundle) {
    bundle = (async () => {
      // Loaded from its own file, not bundled into this one: the bundler writes each module's own
      // `import.meta.url` into its source, and in scripts/test-bundle.mjs those words are its code.
      const { bundleTests } = (await import(pathToFileURL(path.join(REPO, "scripts", "test-bundle.mjs")).href)) as typeof import("../../scripts/test-bundle.mjs");
      const [built] = await bundleTests(REPO, [script], BUNDLES);
      return built!.bundle;
    })();
    bundles.set(script, bundle);
  }
  return bundle;
}
