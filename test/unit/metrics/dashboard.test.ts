import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GatewayMetrics } from '../../../src/metrics/metrics.ts';
import { parseExposition } from './prom-text.ts';
import { metricsTestConfig, scriptedRun } from './scripted-run.ts';

const dashboardPath = new URL('../../../deploy/grafana/expediter-dashboard.json', import.meta.url);

interface Panel { type: string; title: string; targets?: { expr: string }[]; panels?: Panel[]; fieldConfig?: { defaults?: { thresholds?: { steps: { value: number | null }[] } } } }
interface Dashboard { panels: Panel[]; templating: { list: { query?: unknown }[] } }

const PROMQL_WORDS = new Set([
  'sum', 'avg', 'min', 'max', 'count', 'rate', 'irate', 'increase', 'histogram_quantile', 'scalar', 'vector',
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'label_values',
]);

/** Every metric selector in an expression, with the label names its matchers use. */
export function selectors(expr: string): { metric: string; labels: string[] }[] {
  const out: { metric: string; labels: string[] }[] = [];
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  // drop range/subquery brackets and grouping clauses so their contents are not taken for metric names
  const cleaned = noStrings.replace(/\[[^\]]*\]/g, '').replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const re = /([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?/g;
  for (const m of cleaned.matchAll(re)) {
    const [, name, matchers, call] = m;
    if (call || PROMQL_WORDS.has(name!) || /^\d/.test(name!)) continue;
    const before = cleaned.slice(0, m.index);
    if (/[a-zA-Z0-9_.]$/.test(before)) continue; // part of a number such as 1e9
    const labels = matchers ? [...matchers.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((x) => x[1]!) : [];
    out.push({ metric: name!, labels });
  }
  return out;
}

function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

function expressions(d: Dashboard): string[] {
  const exprs = allPanels(d.panels).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
  for (const v of d.templating.list) {
    const q = v.query;
    if (typeof q === 'string' && q !== 'prometheus') exprs.push(q);
    else if (q && typeof q === 'object' && 'query' in q) exprs.push(String((q as { query: unknown }).query));
  }
  return exprs;
}

/** Metric name → label names, from what a GatewayMetrics actually renders after a scripted run. */
async function exported(): Promise<Map<string, Set<string>>> {
  const m = new GatewayMetrics(metricsTestConfig());
  try {
    m.setSources({
      inflight: () => 1, tokenizerQueueDepth: () => 0, replicaUp: () => [['8b-1', 1]],
      replicaStalenessSeconds: () => [['8b-1', 0.1]], kvOccupancy: () => [['8b', 0.5]],
    });
    scriptedRun(m);
    m.thread.tokenizeInline.observe(0.001);
    m.cancelled('queued', 0.001);
    m.admission('8b', 'shed');
    const out = new Map<string, Set<string>>();
    for (const s of parseExposition(await m.render())) {
      const labels = out.get(s.name) ?? new Set<string>();
      for (const k of Object.keys(s.labels)) labels.add(k);
      out.set(s.name, labels);
    }
    return out;
  } finally {
    m.close();
  }
}

void test('the selector extractor finds metric names and matcher labels, not functions or durations', () => {
  assert.deepEqual(
    selectors('histogram_quantile(0.99, sum by (le, pool) (rate(gateway_ttft_seconds_bucket{pool=~"$pool",le="0.4"}[5m]))) / scalar(sum(rate(x_total[1m]))) * 60'),
    [{ metric: 'gateway_ttft_seconds_bucket', labels: ['pool', 'le'] }, { metric: 'x_total', labels: [] }],
  );
  assert.deepEqual(selectors('label_values(gateway_requests_total, pool)'), [{ metric: 'gateway_requests_total', labels: [] }, { metric: 'pool', labels: [] }]);
});

void test('the dashboard parses and every query names only metrics and labels the gateway exports', async () => {
  const d = JSON.parse(readFileSync(dashboardPath, 'utf8')) as Dashboard;
  const known = await exported();
  const exprs = expressions(d);
  assert.ok(exprs.length >= 20, `expected the SLA panels' queries, found ${exprs.length}`);
  const problems: string[] = [];
  for (const expr of exprs) {
    // label_values(metric, label): the second argument is a label name
    const lv = /^label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)$/.exec(expr);
    const found = lv ? [{ metric: lv[1]!, labels: [lv[2]!] }] : selectors(expr);
    assert.ok(found.length > 0, `no metric in ${expr}`);
    for (const { metric, labels } of found) {
      const have = known.get(metric);
      if (!have) {
        problems.push(`${metric} is not exported (in ${expr})`);
        continue;
      }
      for (const l of labels) if (!have.has(l)) problems.push(`${metric} has no label ${l} (in ${expr})`);
    }
  }
  assert.deepEqual(problems, []);
});

void test('the SLA panels draw the design thresholds', () => {
  const d = JSON.parse(readFileSync(dashboardPath, 'utf8')) as Dashboard;
  const thresholds = (title: RegExp): (number | null)[] => {
    const p = allPanels(d.panels).find((x) => title.test(x.title));
    assert.ok(p, `panel ${title} exists`);
    return (p.fieldConfig?.defaults?.thresholds?.steps ?? []).map((s) => s.value);
  };
  assert.ok(thresholds(/^TTFT p50 \/ p99/).includes(0.18) && thresholds(/^TTFT p50 \/ p99/).includes(0.4));
  assert.ok(thresholds(/^TPOT p95/).includes(0.05));
  assert.ok(thresholds(/^Gateway overhead p99 against/).includes(0.01));
  assert.ok(thresholds(/^KV-cache occupancy/).includes(0.75));
  const titles = allPanels(d.panels).map((p) => p.title).join('\n');
  for (const want of [/Shed/, /Error rate/, /Tokens per minute/]) assert.match(titles, want);
});
