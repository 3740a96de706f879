// The files an operator gives the deployment that hold a secret (the key, the client secrets, the
// store's password) and those the docs tell them to make (the same, and backups): the real CLI
// refuses one that group or others may use, that another user owns, or that is not a regular
// file, naming it, its mode or owner and the fix; and the shell recipes of
// docs/deployment-server.md, run as written under a permissive umask, make every file 0600.
// The recipes' `subs` run the built CLI (bin/subs.cjs) in a child, as do serve, token create and
// rotate-key for the first mode refused, serve's refusals of a key named by $SUBS_DEPLOYMENT_KEY_FILE,
// of a FIFO, a directory and a device (read in this process, a wrong open of a FIFO or /dev/zero
// would block or fill the test's own process, not fail it) and of another user's client-secrets
// file; their other runs are the same `run()` in this process, where what is checked is the refusal
// printed and the files left, not the process (a child costs a Node start-up and the bundle's load).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { newKeyText } from "../../src/deployment/keys.ts";
import { privateFileProblems, type FileFacts } from "../../src/deployment/private-file.ts";
import { openSqliteStore } from "../../src/deployment/store/sqlite.ts";
import { BIN, REPO, runAs, type How } from "../support/cli.ts";
import { serveOnce } from "../support/serve-once.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-secret-files-"));
  dirs.push(dir);
  return dir;
};
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** Another user: `nobody` on Debian and most systems. The tests run as root, who may give a file away. */
const NOBODY = 65534;
const giveAway = (file: string) => {
  chownSync(file, NOBODY, NOBODY);
  assert.equal(statSync(file).uid, NOBODY, "chown works here (the tests run as root)");
};
/** `subs` in `dir`, as `how` says (HOME there either way, as the child gets it). */
const subs = (how: How, argv: string[], dir: string) => runAs(how, argv, { cwd: dir, env: { HOME: dir } });
/** A directory holding a key file with this mode. */
function withKey(mode: number) {
  const dir = tempDir();
  const file = path.join(dir, "deployment.key");
  writeFileSync(file, `${newKeyText()}\n`);
  chmodSync(file, mode);
  return { dir, file };
}

describe("the key file", () => {
  test("group or others may read it (0644, 0640, 0604): serve, token create and rotate-key refuse it (exit 2) naming the file, its mode, chmod 600 and a rotation; nothing is opened", async () => {
    for (const mode of [0o644, 0o640, 0o604]) {
      // The first mode as a person meets it, from the built CLI; the others in-process. (With 0640
      // let through by src/deployment/private-file.ts, the in-process serve listened, was stopped
      // on its `listening` line and failed here: 0 !== 2.)
      const how: How = mode === 0o644 ? "cli" : "in-process";
      const { dir, file } = withKey(mode);
      const shown = (mode & 0o7777).toString(8).padStart(4, "0");
      const refusal = new RegExp(`--key-file ${escape(file)}: others may read it \\(mode ${shown}\\); it must be a regular file of the user running subs that no one else may read \\(mode 0600\\)`);
      const fix = new RegExp(`hint: \`chmod 600 ${escape(file)}\`; what it holds may have been copied: once it is private, move to a new key \\(\`subs deployment rotate-key\`\\)`);
      const served = await serveOnce(["--key-file", "deployment.key"], { cwd: dir, how });
      assert.equal(served.code, 2, `${shown}: ${served.stderr}`);
      assert.equal(served.listening, undefined);
      assert.match(served.stderr, refusal);
      assert.match(served.stderr, fix);
      const token = await subs(how, ["deployment", "token", "create", "--name", "ci", "--role", "apply", "--key-file", "deployment.key", "--store", "subs-deployment"], dir);
      assert.equal(token.code, 2, token.stderr);
      assert.equal(token.stdout, "", "no token made");
      assert.match(token.stderr, refusal);
      const rotated = await subs(how, ["deployment", "rotate-key", "--key-file", "deployment.key", "--new-key-file", "new.key"], dir);
      assert.equal(rotated.code, 2, rotated.stderr);
      assert.match(rotated.stderr, refusal);
      assert.equal(existsSync(path.join(dir, "subs-deployment")), false, `${shown}: no store opened or made`);
      assert.equal(existsSync(path.join(dir, "new.key")), false);
      assert.equal(statSync(file).mode & 0o777, mode, "the file is left as it was: the operator decides");
    }
    // From the variable, the refusal names the variable; one others may only write is refused too.
    const { dir, file } = withKey(0o620);
    const fromEnv = await serveOnce([], { cwd: dir, env: { SUBS_DEPLOYMENT_KEY_FILE: file } });
    assert.equal(fromEnv.code, 2);
    assert.match(fromEnv.stderr, new RegExp(`\\$SUBS_DEPLOYMENT_KEY_FILE ${escape(file)}: others may change it \\(mode 0620\\)`));
    assert.doesNotMatch(fromEnv.stderr, /may have been copied/, "write access alone leaked nothing");
  });

  test("another user's key file (0600, owned by nobody) is refused by serve and token create, naming its owner and the chown", async () => {
    const { dir, file } = withKey(0o600);
    giveAway(file);
    const owner = new RegExp(`--key-file ${escape(file)}: belongs to another user \\(uid ${NOBODY}\\), not to the user subs runs as \\(uid 0\\)`);
    const served = await serveOnce(["--key-file", "deployment.key"], { cwd: dir, how: "in-process" });
    assert.equal(served.code, 2, served.stderr);
    assert.match(served.stderr, owner);
    assert.match(served.stderr, new RegExp(`\`chown 0 ${escape(file)}\` \\(or run subs as its owner\\)`));
    const token = await subs("in-process", ["deployment", "token", "create", "--name", "ci", "--role", "apply", "--key-file", "deployment.key", "--store", "subs-deployment"], dir);
    assert.equal(token.code, 2);
    assert.equal(token.stdout, "");
    assert.match(token.stderr, owner);
  });

  test("a symbolic link is followed and the file it leads to checked; a FIFO, a directory or a device is refused at once", async () => {
    const { dir, file } = withKey(0o600);
    symlinkSync(file, path.join(dir, "link.key"));
    const linked = await serveOnce(["--key-file", "link.key"], { cwd: dir, how: "in-process" });
    assert.equal(linked.code, 0, linked.stderr);
    assert.ok(linked.listening, "a link to a private key serves");
    chmodSync(file, 0o644);
    const open = await serveOnce(["--key-file", "link.key"], { cwd: dir, how: "in-process" });
    assert.equal(open.code, 2);
    assert.match(open.stderr, /link\.key: others may read it \(mode 0644\)/);

    const fifo = path.join(dir, "fifo.key");
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    mkdirSync(path.join(dir, "dir.key"));
    for (const [name, kind] of [
      [fifo, "a FIFO"],
      [path.join(dir, "dir.key"), "a directory"],
      ["/dev/zero", "a device"],
    ] as const) {
      const result = await serveOnce(["--key-file", name], { cwd: dir });
      assert.equal(result.code, 2, `${name}: ${result.stderr}`);
      assert.match(result.stderr, new RegExp(`${escape(path.basename(name))}: is ${kind}, not a regular file`));
    }
  });

  test("rotate-key: an existing --new-key-file others may read is refused, and nothing is re-encrypted", async () => {
    const { dir } = withKey(0o600);
    // A store the server made (rotate-key refuses one that does not exist).
    const made = await serveOnce(["--key-file", "deployment.key"], { cwd: dir, how: "in-process" });
    assert.equal(made.code, 0, made.stderr);
    writeFileSync(path.join(dir, "new.key"), `${newKeyText()}\n`);
    chmodSync(path.join(dir, "new.key"), 0o644);
    const rotated = await subs("in-process", ["deployment", "rotate-key", "--key-file", "deployment.key", "--new-key-file", "new.key"], dir);
    assert.equal(rotated.code, 2, rotated.stderr);
    assert.match(rotated.stderr, /--new-key-file .*new\.key: others may read it \(mode 0644\)/);
    assert.doesNotMatch(rotated.stderr, /re-encrypted/);
  });
});

test("the client-secrets file of another user is refused at start, naming its owner", async () => {
  const { dir } = withKey(0o600);
  const secrets = path.join(dir, "client-secrets.json");
  writeFileSync(secrets, JSON.stringify({ "team-app": "team-app-secret-7c2e" }), { mode: 0o600 });
  giveAway(secrets);
  const served = await serveOnce(["--key-file", "deployment.key", "--client-secrets", "client-secrets.json"], { cwd: dir });
  assert.equal(served.code, 2, served.stderr);
  assert.match(served.stderr, new RegExp(`--client-secrets client-secrets\\.json: belongs to another user \\(uid ${NOBODY}\\)`));
  assert.match(served.stderr, /what it holds may have been copied: have the authorization servers issue new client secrets/);
  assert.ok(!served.stderr.includes("team-app-secret-7c2e"));
});

test("the rules on a file's stat, whoever runs the tests: another owner, group or other access, not a regular file", () => {
  const facts = (mode: number, uid: number, kind: "file" | "dir" | "fifo" = "file"): FileFacts => ({
    mode,
    uid,
    isFile: () => kind === "file",
    isDirectory: () => kind === "dir",
    isFIFO: () => kind === "fifo",
    isSocket: () => false,
    isCharacterDevice: () => false,
    isBlockDevice: () => false,
  });
  const problems = (stat: FileFacts) => privateFileProblems(stat, 1000, "k").map((p) => p.problem);
  assert.deepEqual(problems(facts(0o100600, 1000)), []);
  assert.deepEqual(problems(facts(0o100400, 1000)), []);
  assert.deepEqual(problems(facts(0o100600, 1001)), ["belongs to another user (uid 1001), not to the user subs runs as (uid 1000)"]);
  assert.deepEqual(problems(facts(0o100644, 0)), ["belongs to another user (uid 0), not to the user subs runs as (uid 1000)", "others may read it (mode 0644)"]);
  assert.deepEqual(problems(facts(0o100602, 1000)), ["others may change it (mode 0602)"]);
  assert.deepEqual(problems(facts(0o100610, 1000)), ["others have access to it (mode 0610)"]);
  assert.deepEqual(problems(facts(0o40700, 1000, "dir")), ["is a directory, not a regular file"]);
  assert.deepEqual(problems(facts(0o10600, 1000, "fifo")), ["is a FIFO, not a regular file"]);
  assert.deepEqual(privateFileProblems(facts(0o100600, 1001), undefined, "k"), [], "no uid (Windows): the mode alone");
  assert.deepEqual(privateFileProblems(facts(0o100644, 1000), 1000, "my key").map((p) => p.fix), ['`chmod 600 "my key"`'], "the path quoted for a shell");
});

/**
 * The docs' shell blocks that make a file (a redirection, `touch`, `install`, `cp`, `tee`,
 * `subs deployment backup`, `--file`, `--new-key-file`), run as written in a temporary root under umask
 * 022, in document order (the rotation finds the key the first recipe made). The directories they
 * name (/etc/subs, /var/lib/subs, /backup) are moved into that root; the real `subs` (the built
 * CLI), `openssl` and the shell's own tools run; stand-ins take the place of `systemctl` (nothing
 * to stop), `useradd`, `chown`, `journalctl` and `npm root -g`, and of `pg_dump` (no server here),
 * which makes its output file as pg_dump does: created with the usual mode, less the umask, never
 * chmod-ed, so only the recipe decides the mode.
 */
describe("the recipes of docs/deployment-server.md", () => {
  const DOC = path.join(REPO, "docs", "deployment-server.md");
  const MAKES_A_FILE = /(?<![-=0-9])>(?!&)|\btouch\b|\binstall\b|\bcp\b|\btee\b|\bdeployment backup\b|--file\b|--new-key-file\b/;
  const MOVED = ["/etc/subs", "/var/lib/subs", "/backup", "/etc/systemd/system"];
  /** Absolute paths a recipe names that are no file it makes or reads (useradd's shell). */
  const NAMED_ONLY = ["/dev/null", "/usr/sbin/nologin"];

  /** Each ```sh block (list items' indented ones too), its indentation taken off. */
  function shellBlocks(markdown: string): string[] {
    return [...markdown.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
      body!
        .split("\n")
        .map((line) => line.slice(indent!.length))
        .join("\n"),
    );
  }

  test("every recipe that makes a file makes it 0600 under umask 022: the key, client secrets, the store password, SQLite and pg_dump backups, the rotated keys", async () => {
    const root = tempDir();
    const stubs = path.join(root, ".stubs");
    mkdirSync(stubs);
    const stub = (name: string, body: string) => writeFileSync(path.join(stubs, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    stub("systemctl", "exit 0");
    // The systemd recipe's user and its log: no user is made here, no journal read.
    stub("useradd", "exit 0");
    stub("chown", "exit 0");
    stub("journalctl", "exit 0");
    // install(1) as written, but for -o and -g, which name the user no stand-in made.
    stub("install", `args=""; while [ $# -gt 0 ]; do case "$1" in -o|-g) shift;; *) args="$args $1";; esac; shift; done; exec /usr/bin/install $args`);
    // The package's files where a global install puts them.
    const globalRoot = path.join(root, ".npm-global");
    mkdirSync(globalRoot);
    symlinkSync(REPO, path.join(globalRoot, "substructure"));
    stub("npm", `[ "$1 $2" = "root -g" ] && echo "${globalRoot}"`);
    // pg_dump opens --file with fopen: 0666, less the umask.
    stub("pg_dump", `while [ $# -gt 0 ]; do case "$1" in --file) : > "$2"; shift;; --file=*) : > "\${1#--file=}";; esac; shift; done`);
    stub("pg_restore", "exit 0");
    stub("subs", `exec "${process.execPath}" "${BIN}" "$@"`);
    for (const dir of MOVED) mkdirSync(path.join(root, dir), { recursive: true, mode: 0o755 });
    // The store the server makes on its first start (no recipe starts one): the backup and the
    // rotation run against it. Empty, nothing sealed yet: the rotation seals its check with the key the first recipe made.
    // Made in this process, as the server makes it (src/deployment/store/sqlite.ts: created 0600, so
    // no umask opens it to group or others).
    chmodSync(path.join(root, "/var/lib/subs"), 0o700);
    const made = await openSqliteStore({ storeDir: path.join(root, "/var/lib/subs"), dbPath: path.join(root, "/var/lib/subs/deployment.db"), key: undefined });
    await made.close();
    const work = path.join(root, "work");
    mkdirSync(work);

    const recipes = shellBlocks(readFileSync(DOC, "utf8")).filter((block) => MAKES_A_FILE.test(block));
    assert.ok(recipes.length >= 4, `the recipes that make files are found (${recipes.length})`);
    for (const recipe of recipes) {
      let script = recipe;
      for (const dir of MOVED) script = script.replaceAll(dir, path.join(root, dir));
      // Every absolute path is one moved into the root (or /dev/null): a new one must be added to MOVED.
      // (Not after a URL's scheme, nor after a command substitution, whose output it extends.)
      const elsewhere = [...script.matchAll(/(?<![\w.$}/)-])\/[A-Za-z][\w./-]*/g)].map((m) => m[0]).filter((p) => !p.startsWith(root) && !NAMED_ONLY.includes(p));
      assert.deepEqual(elsewhere, [], `a recipe names a path outside ${MOVED.join(", ")}:\n${recipe}`);
      const run = spawnSync("bash", ["-c", `set -euo pipefail\numask 022\n${script}`], {
        cwd: work,
        encoding: "utf8",
        timeout: 60_000,
        env: { PATH: `${stubs}:${process.env.PATH}`, HOME: root, SUBS_DEPLOYMENT_STORE: "postgres://subs@127.0.0.1:5432/subs" },
      });
      assert.equal(run.status, 0, `the recipe ran:\n${recipe}\n${run.stderr}`);
    }

    const files: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (full === stubs || full === path.join(root, ".npm-global")) continue;
        if (entry.isDirectory()) walk(full);
        else files.push(full);
      }
    };
    walk(root);
    const madeFiles = files.map((f) => path.relative(root, f)).sort();
    // A systemd unit holds no secret, and systemd expects it readable (0644): the one exception.
    const open = files.filter((f) => !f.startsWith(path.join(root, "/etc/systemd/system")) && (statSync(f).mode & 0o077) !== 0).map((f) => `${path.relative(root, f)} ${(statSync(f).mode & 0o777).toString(8)}`);
    assert.deepEqual(open, [], "every file a recipe made is 0600");
    for (const expected of [
      /^etc\/subs\/deployment\.key$/,
      /^etc\/subs\/deployment\.key\.until-\d{4}-\d\d-\d\d-\d{6}$/,
      /^etc\/subs\/deployment\.env$/,
      /^etc\/subs\/client-secrets\.json$/,
      /^etc\/subs\/store-password$/,
      /^backup\/subs-\d{4}-\d\d-\d\d\.db$/,
      /^backup\/subs-\d{4}-\d\d-\d\d\.dump$/,
    ]) {
      assert.ok(madeFiles.some((f) => expected.test(f)), `a recipe made ${expected}: ${madeFiles.join(", ")}`);
    }
  });
});
