// Top frames of a V8 .cpuprofile (from `node --cpu-prof`) by self time, and self time summed per source file,
// so a bench run can name where the gateway spends its CPU. Thread: bench main thread, after the run.
// Not on a hot path. Run alone: `node --import tsx native-bench/harness/cpuprofile-top.ts FILE [N]`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: CpuProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface FrameShare {
  frame: string;
  selfMs: number;
  selfPct: number;
}

function shortUrl(url: string): string {
  const i = url.indexOf('/node_modules/');
  if (i !== -1) return url.slice(i + 1);
  const j = url.indexOf('/src/');
  if (j !== -1) return url.slice(j + 1);
  return url.replace(/^file:\/\//, '');
}

export function topFrames(profilePath: string, limit = 20): { byFrame: FrameShare[]; byFile: FrameShare[]; totalMs: number; idlePct: number } {
  const p = JSON.parse(readFileSync(profilePath, 'utf8')) as CpuProfile;
  const byId = new Map<number, CpuProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the gap before sample i; attribute it to the sampled node, as DevTools does.
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  let totalUs = 0;
  let idleUs = 0;
  const frames = new Map<string, number>();
  const files = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const cf = byId.get(id)?.callFrame;
    if (!cf) continue;
    totalUs += us;
    const name = cf.functionName || '(anonymous)';
    if (name === '(idle)') { idleUs += us; continue; }
    const file = cf.url ? shortUrl(cf.url) : '(native)';
    const key = cf.url ? `${name} ${file}:${cf.lineNumber + 1}` : name;
    frames.set(key, (frames.get(key) ?? 0) + us);
    files.set(file, (files.get(file) ?? 0) + us);
  }
  const busyUs = Math.max(1, totalUs - idleUs);
  const rank = (m: Map<string, number>): FrameShare[] => [...m.entries()]
    .sort((a, b) => b[1] - a[1]).slice(0, limit)
    .map(([frame, us]) => ({ frame, selfMs: us / 1000, selfPct: (100 * us) / busyUs }));
  return { byFrame: rank(frames), byFile: rank(files), totalMs: totalUs / 1000, idlePct: (100 * idleUs) / Math.max(1, totalUs) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, n] = process.argv.slice(2);
  if (!file) {
    console.error('usage: cpuprofile-top.ts FILE.cpuprofile [N]');
    process.exit(2);
  }
  const r = topFrames(file, Number(n ?? 25));
  console.log(`profile ${r.totalMs.toFixed(0)} ms, idle ${r.idlePct.toFixed(1)}%; shares below are of non-idle time`);
  console.log('\nself time by frame');
  for (const f of r.byFrame) console.log(`${f.selfPct.toFixed(1).padStart(5)}%  ${f.selfMs.toFixed(0).padStart(6)} ms  ${f.frame}`);
  console.log('\nself time by file');
  for (const f of r.byFile) console.log(`${f.selfPct.toFixed(1).padStart(5)}%  ${f.selfMs.toFixed(0).padStart(6)} ms  ${f.frame}`);
}
