// The soak's SVG: RSS, V8 heap, event-loop delay p99 and user-visible failures against time, one panel each,
// with the warm-up end and every injected fault marked. Hand-written SVG (no dependency), small enough to commit.
// Thread: main. Formatting only.
import { writeFileSync } from 'node:fs';

export interface SoakPoint {
  tS: number;
  rssMb: number;
  heapMb: number;
  loopP99Ms: number;
  /** Cut streams + HTTP errors + broken answers in the interval ending at tS. */
  failures: number;
}

export interface SoakFault {
  tS: number;
  what: string;
}

const W = 460;
const H = 200;
const M = { l: 56, r: 12, t: 24, b: 34 };

function ticks(hi: number): number[] {
  const raw = (hi || 1) / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = 0; v <= hi + 1e-9; v += step) out.push(Number(v.toPrecision(6)));
  return out;
}

function panel(x0: number, y0: number, title: string, pts: Array<[number, number]>, tHi: number, marks: number[], warmS: number): string {
  const yHi = Math.max(1, ...pts.map((p) => p[1])) * 1.1;
  const pw = W - M.l - M.r;
  const ph = H - M.t - M.b;
  const sx = (x: number): number => x0 + M.l + (x / tHi) * pw;
  const sy = (y: number): number => y0 + M.t + ph - (y / yHi) * ph;
  const out = [`<text x="${x0 + W / 2}" y="${y0 + 15}" text-anchor="middle" font-weight="bold">${title}</text>`,
    `<rect x="${x0 + M.l}" y="${y0 + M.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`];
  for (const t of ticks(yHi)) {
    out.push(`<line x1="${x0 + M.l}" y1="${sy(t).toFixed(1)}" x2="${x0 + M.l + pw}" y2="${sy(t).toFixed(1)}" stroke="#eee"/>`,
      `<text x="${x0 + M.l - 4}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${t}</text>`);
  }
  for (const t of ticks(tHi / 60)) {
    out.push(`<text x="${sx(t * 60).toFixed(1)}" y="${y0 + M.t + ph + 14}" text-anchor="middle">${t}</text>`);
  }
  out.push(`<text x="${x0 + M.l + pw / 2}" y="${y0 + H - 4}" text-anchor="middle">minutes</text>`);
  for (const m of marks) out.push(`<line x1="${sx(m).toFixed(1)}" y1="${y0 + M.t}" x2="${sx(m).toFixed(1)}" y2="${y0 + M.t + ph}" stroke="#f4b6b6"/>`);
  out.push(`<line x1="${sx(warmS).toFixed(1)}" y1="${y0 + M.t}" x2="${sx(warmS).toFixed(1)}" y2="${y0 + M.t + ph}" stroke="#888" stroke-dasharray="4 3"/>`);
  out.push(`<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="${pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}"/>`);
  return out.join('\n');
}

export function writeSoakSvg(path: string, caption: string, pts: readonly SoakPoint[], faults: readonly SoakFault[], warmS: number): void {
  const tHi = Math.max(60, ...pts.map((p) => p.tS));
  const marks = faults.map((f) => f.tS);
  const series = (k: keyof Omit<SoakPoint, 'tS'>): Array<[number, number]> => pts.map((p) => [p.tS, p[k]]);
  const body = [
    `<text x="${W}" y="16" text-anchor="middle" font-size="12">${caption.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</text>`,
    panel(0, 24, 'gateway RSS (MB)', series('rssMb'), tHi, marks, warmS),
    panel(W, 24, 'V8 heap used (MB)', series('heapMb'), tHi, marks, warmS),
    panel(0, 24 + H, 'event-loop delay p99 (ms)', series('loopP99Ms'), tHi, marks, warmS),
    panel(W, 24 + H, 'failed requests per sample (cut, HTTP error, broken)', series('failures'), tHi, marks, warmS),
    `<text x="${M.l}" y="${24 + 2 * H + 14}">dashed: end of warm-up; red: a fault injected (replica SIGKILLed and restarted, or Redis restarted)</text>`,
  ];
  writeFileSync(path, `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${2 * H + 44}" font-family="sans-serif" font-size="11">\n` +
    `<rect width="100%" height="100%" fill="white"/>\n${body.join('\n')}\n</svg>\n`);
}
