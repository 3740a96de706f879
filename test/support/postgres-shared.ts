// The whole suite's one Postgres (test/support/postgres.ts): scripts/test.mjs runs this as a child
// before the test files start. It starts a server, writes its address as one JSON line on stdout
// (what the files get in $SUBS_TEST_POSTGRES), and stops it and removes its directory when its
// stdin ends: when the suite is done, or when scripts/test.mjs dies, however it dies (the pipe
// closes with it).
import { startCluster, type SharedPostgres } from "./postgres.ts";

const cluster = await startCluster();
const address: SharedPostgres = { port: cluster.port, user: cluster.user, password: cluster.password };
process.stdout.write(`${JSON.stringify(address)}\n`);
process.stdin.resume();
process.stdin.once("end", () => void cluster.remove().finally(() => process.exit(0)));
// A signal (Ctrl-C reaches the whole process group) stops it the same way.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void cluster.remove().finally(() => process.exit(0)));
