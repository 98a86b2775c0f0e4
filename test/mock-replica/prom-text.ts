// Prometheus text exposition the way Python's prometheus_client writes it (vLLM's /metrics): floats in
// Python repr via floatToGoString, labels sorted, counters as `_total` plus a separate `_created` gauge
// family, histograms as `_bucket` … `+Inf`, `_count`, `_sum`, then `_created`. Thread: main (mock process).
// Per scrape only; cost is string building proportional to the number of series.
import type { HistogramSnapshot } from './engine/stats.ts';

/** Python's repr(float) (shortest round-trip, exponent when exp < -4 or >= 16). */
export function pyRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, expText] = x.toExponential().split('e') as [string, string];
  const exp = Number(expText);
  if (exp < -4 || exp >= 16) {
    const e = Math.abs(exp) < 10 ? `0${Math.abs(exp)}` : String(Math.abs(exp));
    return `${mant}e${exp < 0 ? '-' : '+'}${e}`;
  }
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  let out: string;
  if (exp >= 0) {
    const intLen = exp + 1;
    out = digits.length <= intLen ? `${digits.padEnd(intLen, '0')}.0` : `${digits.slice(0, intLen)}.${digits.slice(intLen)}`;
  } else {
    out = `0.${'0'.repeat(-exp - 1)}${digits}`;
  }
  return neg ? `-${out}` : out;
}

/** prometheus_client.utils.floatToGoString, used for sample values and `le` labels. */
export function goFloat(x: number): string {
  // Counts are integers: `12.0`, as repr writes a float; from 1e6 on floatToGoString switches to `1.2e+06`.
  if (Number.isInteger(x) && x > -1e16 && x < 1e6 && !Object.is(x, -0)) return `${x}.0`;
  if (x === Infinity) return '+Inf';
  if (x === -Infinity) return '-Inf';
  if (Number.isNaN(x)) return 'NaN';
  const s = pyRepr(x);
  const dot = s.indexOf('.');
  if (x > 0 && dot > 6) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** `{a="1",b="2"}` with keys sorted; '' for no labels. */
export function labelText(labels: Record<string, string>): string {
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return '';
  return `{${keys.map((k) => `${k}="${escapeLabel(labels[k]!)}"`).join(',')}}`;
}

/**
 * Per histogram series: each bucket's `name_bucket{…,le="…"} ` prefix, built on the series' first scrape. A scrape
 * renders every bucket of every histogram; building the label text per bucket per scrape (sort, escape, Python
 * float repr of `le`) made the mock's /metrics cost ~5 % of a core at the gateway's 100 ms scrape interval.
 * Keyed by the labels object (a replica passes the same one every scrape), then name and bucket count.
 */
const bucketPrefixes = new WeakMap<Record<string, string>, Map<string, string[]>>();

export class PromWriter {
  private out = '';

  header(name: string, help: string, type: 'gauge' | 'counter' | 'histogram'): void {
    this.out += `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n`;
  }

  sample(name: string, labels: Record<string, string>, value: number): void {
    this.out += `${name}${labelText(labels)} ${goFloat(value)}\n`;
  }

  gauge(name: string, help: string, series: Array<[Record<string, string>, number]>): void {
    this.header(name, help, 'gauge');
    for (const [l, v] of series) this.sample(name, l, v);
  }

  /** `name` without `_total`; writes `<name>_total` and `<name>_created`. */
  counter(name: string, help: string, series: Array<[Record<string, string>, number]>, createdSeconds: number): void {
    this.header(`${name}_total`, help, 'counter');
    for (const [l, v] of series) this.sample(`${name}_total`, l, v);
    this.header(`${name}_created`, help, 'gauge');
    for (const [l] of series) this.sample(`${name}_created`, l, createdSeconds);
  }

  /** `h.counts` are cumulative (counts[i] = observations <= buckets[i]). */
  histogram(name: string, help: string, labels: Record<string, string>, h: HistogramSnapshot, createdSeconds: number): void {
    this.header(name, help, 'histogram');
    let series = bucketPrefixes.get(labels);
    if (series === undefined) bucketPrefixes.set(labels, series = new Map());
    let prefixes = series.get(name);
    if (prefixes === undefined || prefixes.length !== h.buckets.length + 1) {
      prefixes = h.buckets.map((b) => `${name}_bucket${labelText({ ...labels, le: goFloat(b) })} `);
      prefixes.push(`${name}_bucket${labelText({ ...labels, le: '+Inf' })} `);
      series.set(name, prefixes);
    }
    for (let i = 0; i < h.buckets.length; i++) this.out += `${prefixes[i]!}${goFloat(h.counts[i]!)}\n`;
    this.out += `${prefixes[h.buckets.length]!}${goFloat(h.count)}\n`;
    this.sample(`${name}_count`, labels, h.count);
    this.sample(`${name}_sum`, labels, h.sum);
    this.header(`${name}_created`, help, 'gauge');
    this.sample(`${name}_created`, labels, createdSeconds);
  }

  text(): string {
    return this.out;
  }
}
