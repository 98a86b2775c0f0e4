// Linux perf over a window of a bench: `perf record -g` of one process (all its threads) at a fixed rate on
// CPU time, so a profile shows what the cores ran, not what a descheduled thread was in (V8's --cpu-prof
// samples wall time: on busy cores it blames whatever a waiting thread had on its stack). The target should
// run with `node --perf-basic-prof-only-functions` (PERF_NODE_ARGS) so JIT frames get names (/tmp/perf-PID.map).
// Read with `perf report -i FILE --tid PID` (the main thread's tid is the pid) or `perf script -i FILE`.
// Thread: bench main thread. Not on a hot path; perf's sampling interrupts cost the target a few % of CPU.
import { execFileSync, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

/** Node flags that make a process's JIT-compiled functions visible to perf. */
export const PERF_NODE_ARGS = ['--perf-basic-prof-only-functions'] as const;
/** perf attaches to each thread before it samples; what starts sooner is not in the profile. */
const ATTACH_MS = 1500;

export interface PerfRecording {
  /** Ends the recording (SIGINT, as Ctrl-C) once perf has written `file`. */
  stop(): Promise<void>;
}

/** Starts `perf record` on `pid` into `file` and resolves once it is sampling. Rejects when perf cannot run. */
export async function startPerfRecord(pid: number, file: string, hz = 4000): Promise<PerfRecording> {
  const perf = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', String(hz), '-g', '-p', String(pid), '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  perf.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<number | null>((resolve) => perf.once('close', (code) => resolve(code)));
  const failed = new Promise<never>((_, reject) => perf.once('error', (err) => reject(new Error(`perf: ${err.message} (is linux-perf installed?)`))));
  const early = exited.then((code) => { throw new Error(`perf record exited (${code}) before the window: ${stderr.trim()}`); });
  await Promise.race([sleep(ATTACH_MS), failed, early]);
  return {
    async stop(): Promise<void> {
      perf.kill('SIGINT');
      await exited;
    },
  };
}

export interface PerfFrame {
  /** Share of the thread's samples whose innermost frame is this symbol (self time). */
  pct: number;
  symbol: string;
}

/**
 * The symbols with the most self samples on thread `tid` of a recording (`perf report --no-children --sort
 * sym --percentage relative`: shares of that thread's samples): kernel frames show as `[k] name`, JIT frames by
 * their V8 names (`JS:*name file:line`, `Builtins_…`).
 */
export function perfTopFrames(file: string, tid: number, limit = 20): PerfFrame[] {
  const out = execFileSync('perf', ['report', '-i', file, '--tid', String(tid), '--no-children', '--sort', 'sym', '--stdio', '-g', 'none', '--percentage', 'relative', '--percent-limit', '0.3'],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] });
  const frames: PerfFrame[] = [];
  for (const line of out.split('\n')) {
    const m = /^\s+([\d.]+)%\s+(\[[k.]\]\s+.*)$/.exec(line);
    if (m) frames.push({ pct: Number(m[1]), symbol: m[2]!.trim().replace(/\s+/g, ' ') });
    if (frames.length >= limit) break;
  }
  return frames;
}
