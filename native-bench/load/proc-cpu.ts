// CPU time of a target process (and, optionally, every descendant) read from /proc/<pid>/stat, so a run can
// report CPU microseconds per request for the proxy under test rather than wall-clock throughput alone.
// Thread: the bench process's main thread, read once before and once after a measured window.
// Not on a hot path. Linux only; resolution is one clock tick (10 ms at CLK_TCK=100), so windows should
// last seconds, not milliseconds. Threads (Piscina, the registry poller) are already folded into their
// process's utime/stime; descendants matter for nginx (master + workers) and anything run through a wrapper.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond = 0;
function clockTicksPerSecond(): number {
  if (ticksPerSecond === 0) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

interface StatFields {
  ppid: number;
  /** utime + stime of the process itself, in clock ticks. */
  ownTicks: number;
}

/** Parses /proc/<pid>/stat; `comm` may hold spaces and parentheses, so split after the last ')'. */
function readStat(pid: number): StatFields | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field n sits at rest[n - 3]: ppid = 4, utime = 14, stime = 15.
  return { ppid: Number(rest[1]), ownTicks: Number(rest[11]) + Number(rest[12]) };
}

/** Every live descendant of `rootPid` (children, grandchildren, ...), found by walking ppid links once. */
export function descendantsOf(rootPid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (stat === null) continue;
    const list = children.get(stat.ppid);
    if (list) list.push(pid);
    else children.set(stat.ppid, [pid]);
  }
  const out: number[] = [];
  const stack = [rootPid];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    for (const child of children.get(pid) ?? []) {
      out.push(child);
      stack.push(child);
    }
  }
  return out;
}

/**
 * CPU time in microseconds consumed so far by `pids` (and their descendants when asked).
 * A process that exited in between simply stops contributing, so compare windows over stable process trees.
 */
export function cpuMicros(pids: readonly number[], includeDescendants = true): number {
  const all = new Set<number>(pids);
  if (includeDescendants) for (const pid of pids) for (const d of descendantsOf(pid)) all.add(d);
  let ticks = 0;
  for (const pid of all) ticks += readStat(pid)?.ownTicks ?? 0;
  return (ticks * 1e6) / clockTicksPerSecond();
}

/** Start/stop meter over a fixed set of process trees. */
export class CpuMeter {
  private readonly pids: readonly number[];
  private startMicros = 0;

  constructor(pids: readonly number[]) {
    this.pids = pids;
  }

  start(): void {
    this.startMicros = cpuMicros(this.pids);
  }

  /** CPU microseconds used since start(). */
  stop(): number {
    return cpuMicros(this.pids) - this.startMicros;
  }
}
