// `perf stat` of kernel events (syscall tracepoints, context switches) over a window of a bench, one counter set
// per group of pids, so a proxy and the mocks behind it are counted apart in the same run. Counts do not move
// with a noisy neighbour the way CPU time does. Needs Debian's linux-perf and permission to trace.
// Thread: bench main thread. Not on a hot path.
import { execFileSync, spawn } from 'node:child_process';

export function assertPerf(): void {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error('perf is not installed (Debian: apt-get install linux-perf)');
  }
}

/**
 * Counts of each event over `work`, one map per group of pids (one `perf stat -x,` each, CSV on stderr). An
 * empty group gets an empty map.
 */
export async function countDuring(groups: ReadonlyArray<readonly number[]>, events: readonly string[], work: () => Promise<void>): Promise<Array<Map<string, number>>> {
  const perfs = groups.map((pids) => {
    if (pids.length === 0) return null;
    const perf = spawn('perf', ['stat', '-x', ',', '-e', events.join(','), '-p', pids.join(',')], { stdio: ['ignore', 'ignore', 'pipe'] });
    const out = { err: '', exited: new Promise<void>((resolve) => perf.on('close', () => resolve())), perf };
    perf.stderr.on('data', (d: Buffer) => { out.err += d.toString(); });
    return out;
  });
  await new Promise((r) => setTimeout(r, 300)); // perf attaches before the load starts
  try {
    await work();
  } finally {
    for (const p of perfs) p?.perf.kill('SIGINT');
    await Promise.all(perfs.map((p) => p?.exited));
  }
  return perfs.map((p) => {
    const counts = new Map<string, number>();
    if (p === null) return counts;
    for (const line of p.err.split('\n')) {
      const [value, , event] = line.split(',');
      const n = Number(value);
      if (event !== undefined && Number.isFinite(n)) counts.set(event, n);
    }
    if (counts.size === 0) throw new Error(`perf stat counted nothing: ${p.err.trim().split('\n').slice(-2).join(' ')}`);
    return counts;
  });
}
