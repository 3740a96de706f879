// Several `subs deployment serve` processes on one data directory (SQLite in WAL mode with a busy
// timeout serves several processes on one machine) or one Postgres database (its URL kept in that
// directory, so each process and each restart finds the same one), behind the round-robin balancer
// of balancer.ts, whose URL is their public URL: the replicated topology on one machine.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBalancer, type Balancer, type BalancerOptions } from "./balancer.ts";
import { startServedDeployment, type ServedDeployment, type ServeOptions } from "./deployment-serve.ts";

export type Replicas = {
  balancer: Balancer;
  replicas: ServedDeployment[];
  /** The first replica: its admin token and the public URL, for callServed and authorizeServed. */
  readonly front: ServedDeployment;
  /** kill -9 replica `n`: the balancer then answers its share 502 until `revive(n)`. */
  kill(n: number): Promise<void>;
  /** Starts a new process in place of replica `n`, on the same store. */
  revive(n: number): Promise<void>;
  /** Stops every process (SIGTERM), then starts as many again on the same data directory (or `count`, fewer, in their place). */
  restartAll(count?: number): Promise<void>;
  close(): Promise<void>;
};

export async function startReplicas(count: number, options: Omit<ServeOptions, "dir"> = {}, balancing: BalancerOptions = {}): Promise<Replicas> {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-replicas-"));
  const balancer = await startBalancer([], balancing);
  // The balancer's URL is their public URL, unless the test puts another front before them (Caddy).
  const env = { SUBS_DEPLOYMENT_PUBLIC_URL: balancer.url, ...options.env };
  const startAll = async (n = count) => {
    // One after the other: the first creates the store and its key check.
    const started: ServedDeployment[] = [];
    while (started.length < n) started.push(await startServedDeployment({ ...options, dir, env }));
    return started;
  };
  let replicas = await startAll().catch(async (error) => {
    await balancer.close();
    throw error;
  });
  balancer.backends = replicas.map((r) => r.direct);
  const set: Replicas = {
    balancer,
    get replicas() {
      return replicas;
    },
    get front() {
      return replicas[0]!;
    },
    async kill(n) {
      await replicas[n]!.kill();
    },
    async revive(n) {
      const dead = replicas[n]!;
      await dead.close();
      replicas[n] = await startServedDeployment({ ...options, dir, env });
      balancer.backends[n] = replicas[n]!.direct;
    },
    async restartAll(n) {
      await Promise.all(replicas.map((r) => r.close()));
      replicas = await startAll(n);
      balancer.backends = replicas.map((r) => r.direct);
    },
    async close() {
      await Promise.all(replicas.map((r) => r.close()));
      await balancer.close();
      rmSync(dir, { recursive: true, force: true });
    },
  } as Replicas;
  return set;
}
