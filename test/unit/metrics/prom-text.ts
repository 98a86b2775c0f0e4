// Test helper: parses Prometheus text exposition into samples so tests can read one series' value.
// Thread: test process. Deliberately tiny: label values here never contain escaped quotes or commas.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2]) for (const pair of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one series with this name and (at least) these labels; undefined when absent. */
export function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (hits.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${hits.length} series`);
  return hits[0]?.value;
}

/** Sum over every series with this name matching the labels given. */
export function sumOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const s of samples) {
    if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

/** Distinct values a label takes across every series of a metric family (name prefix). */
export function labelValues(samples: Sample[], family: string, label: string): Set<string> {
  const out = new Set<string>();
  for (const s of samples) if (s.name.startsWith(family) && s.labels[label] !== undefined) out.add(s.labels[label]);
  return out;
}
