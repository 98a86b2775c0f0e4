// `--plot PATH.svg`: for each pool, TTFT p99 (log scale) and goodput against offered load, one line per
// policy, labelled axes and a legend. Hand-written SVG (no dependency); small enough to commit.
// Thread: main. Formatting only.
import { writeFileSync } from 'node:fs';
import type { RunOutput } from './run-types.ts';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const W = 420;
const H = 260;
const M = { l: 62, r: 12, t: 28, b: 44 };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceTicks(lo: number, hi: number, n: number): number[] {
  const span = hi - lo || 1;
  const raw = span / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Number(v.toPrecision(6)));
  return out;
}

function label(v: number): string {
  return Math.abs(v) >= 1000 ? `${(v / 1000).toFixed(v % 1000 === 0 ? 0 : 1)}k` : `${Number(v.toPrecision(3))}`;
}

interface Series {
  name: string;
  pts: Array<[number, number]>;
}

function panel(x0: number, y0: number, title: string, xLabel: string, yLabel: string, series: Series[], logY: boolean): string {
  const all = series.flatMap((s) => s.pts);
  if (all.length === 0) return '';
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => (logY ? Math.log10(Math.max(1, p[1])) : p[1]));
  const xLo = 0;
  const xHi = Math.max(...xs) * 1.05 || 1;
  const yLo = logY ? Math.floor(Math.min(...ys)) : 0;
  const yHi = logY ? Math.max(yLo + 1, Math.ceil(Math.max(...ys))) : (Math.max(...ys) * 1.1 || 1);
  const pw = W - M.l - M.r;
  const ph = H - M.t - M.b;
  const sx = (x: number): number => x0 + M.l + ((x - xLo) / (xHi - xLo)) * pw;
  const sy = (y: number): number => y0 + M.t + ph - ((y - yLo) / (yHi - yLo)) * ph;
  const out: string[] = [];
  out.push(`<text x="${x0 + W / 2}" y="${y0 + 16}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${x0 + M.l}" y="${y0 + M.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  for (const t of niceTicks(xLo, xHi, 5)) {
    out.push(`<line x1="${sx(t).toFixed(1)}" y1="${y0 + M.t + ph}" x2="${sx(t).toFixed(1)}" y2="${y0 + M.t + ph + 4}" stroke="#888"/>`);
    out.push(`<text x="${sx(t).toFixed(1)}" y="${y0 + M.t + ph + 16}" text-anchor="middle">${label(t)}</text>`);
  }
  const yTicks = logY ? Array.from({ length: yHi - yLo + 1 }, (_, i) => yLo + i) : niceTicks(yLo, yHi, 5);
  for (const t of yTicks) {
    out.push(`<line x1="${x0 + M.l}" y1="${sy(t).toFixed(1)}" x2="${x0 + M.l + pw}" y2="${sy(t).toFixed(1)}" stroke="#eee"/>`);
    out.push(`<text x="${x0 + M.l - 4}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${label(logY ? 10 ** t : t)}</text>`);
  }
  out.push(`<text x="${x0 + M.l + pw / 2}" y="${y0 + H - 8}" text-anchor="middle">${esc(xLabel)}</text>`);
  out.push(`<text transform="translate(${x0 + 14},${y0 + M.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length]!;
    const pts = s.pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(logY ? Math.log10(Math.max(1, y)) : y).toFixed(1)}`);
    out.push(`<polyline fill="none" stroke="${c}" stroke-width="2" points="${pts.join(' ')}"/>`);
    for (const p of pts) {
      const [px, py] = p.split(',');
      out.push(`<circle cx="${px}" cy="${py}" r="2.5" fill="${c}"/>`);
    }
  });
  return out.join('\n');
}

/** The SVG document for a sweep. */
export function sweepSvg(outs: readonly RunOutput[], caption: string): string {
  const pools = [...new Set(outs.map((o) => o.json.pool))];
  const policies = [...new Set(outs.map((o) => o.json.policy))];
  const legendH = 22;
  const height = 30 + pools.length * H + legendH;
  const width = 2 * W;
  const body: string[] = [];
  body.push(`<text x="${width / 2}" y="18" text-anchor="middle" font-size="13">${esc(caption)}</text>`);
  pools.forEach((pool, pi) => {
    const y0 = 30 + pi * H;
    const series = (pick: (o: RunOutput) => number | null): Series[] => policies.map((name) => ({
      name,
      pts: outs.filter((o) => o.json.pool === pool && o.json.policy === name)
        .map((o) => [o.json.offered_rps, pick(o)] as [number, number | null])
        .filter((p): p is [number, number] => p[1] !== null)
        .sort((a, b) => a[0] - b[0]),
    }));
    body.push(panel(0, y0, `pool ${pool}: TTFT p99`, 'offered load (requests/s)', 'TTFT p99 (ms, log)', series((o) => o.json.ttft_ms.p99), true));
    body.push(panel(W, y0, `pool ${pool}: goodput`, 'offered load (requests/s)', 'goodput (requests/s in SLO)', series((o) => o.json.goodput_rps), false));
  });
  const ly = 30 + pools.length * H + 12;
  let lx = M.l;
  policies.forEach((name, i) => {
    const c = COLORS[i % COLORS.length]!;
    body.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 18}" y2="${ly}" stroke="${c}" stroke-width="3"/>`);
    body.push(`<text x="${lx + 22}" y="${ly + 4}">${esc(name)}</text>`);
    lx += 32 + name.length * 7;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n${body.join('\n')}\n</svg>\n`;
}

export function writeSvg(path: string, svg: string): void {
  writeFileSync(path, svg);
}
