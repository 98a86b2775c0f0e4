// Starts native-bench/harness/minimal-relay.ts (the uWS + undici floor of the gateway's stack) in its own
// process on a free port, ready when it answers HTTP. Thread: bench main thread. Not on a hot path.
import { join } from 'node:path';
import { freePort, spawnTsx, waitForHttp } from './processes.ts';
import type { Proc } from './processes.ts';

export interface FloorRelay {
  url: string;
  proc: Proc;
  stop(): Promise<void>;
}

export async function startFloorRelay(o: { repoRoot: string; logDir: string; upstreams: readonly string[]; cpus?: string;
  client?: 'undici' | 'raw'; server?: 'uws' | 'node'; }): Promise<FloorRelay> {
  const client = o.client ?? 'undici';
  const server = o.server ?? 'uws';
  const port = await freePort();
  const proc = spawnTsx({
    name: `floor relay (${server} + ${client})`,
    script: join(o.repoRoot, 'native-bench/harness/minimal-relay.ts'),
    args: ['--port', String(port), '--client', client, '--server', server, ...o.upstreams.flatMap((u) => ['--upstream', u])],
    cwd: o.repoRoot,
    logPath: join(o.logDir, `floor-relay-${server}-${client}.log`),
    cpus: o.cpus,
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    // uWS answers an unrouted GET with 404: any answer means it listens.
    await waitForHttp(proc, `${url}/ready`, 20_000, true);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { url, proc, stop: () => proc.stop() };
}
