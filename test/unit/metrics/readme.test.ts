import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GatewayMetrics } from '../../../src/metrics/metrics.ts';
import { parseExposition } from './prom-text.ts';
import { metricsTestConfig, scriptedRun } from './scripted-run.ts';

const readme = readFileSync(new URL('../../../src/metrics/README.md', import.meta.url), 'utf8');

/** name → "type|sorted labels" from the README's metrics table. */
function documented(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readme.split('\n')) {
    const m = /^\| `(gateway_[a-z0-9_]+)` \| (counter|gauge|histogram) \| *([a-z, ]*?) *\|/.exec(line);
    if (m) out.set(m[1]!, `${m[2]}|${m[3]!.split(',').map((x) => x.trim()).filter(Boolean).sort().join(',')}`);
  }
  return out;
}

/** The same, from a rendered page in which every family has at least one sample. */
async function rendered(): Promise<Map<string, string>> {
  // acceptor: the per-thread family exists only on acceptor threads (server.threads > 1).
  const m = new GatewayMetrics(metricsTestConfig(), { acceptor: 0 });
  try {
    m.setSources({
      inflight: () => 1, tokenizerQueueDepth: () => 0, replicaUp: () => [['8b-1', 1]],
      replicaStalenessSeconds: () => [['8b-1', 0.1]], kvOccupancy: () => [['8b', 0.5]], admissionQueueDepth: () => [['8b', 2]],
      clientConnections: async () => ({ accepted: 3, queued: 1 }),
      kvEvents: {
        counters: () => [{ replica: '8b-1', events: 5, gaps: 1, replays: 2, replayed: 1, unmapped: 0 }],
        fallbacks: () => [{ replica: '8b-1', reason: 'silent', count: 1 }],
        lagSeconds: () => [['8b-1', 0.002]], live: () => [['8b-1', 1]], blocks: () => [['8b-1', 40]], precision: () => [['8b-1', 0.98]],
        occupancy: () => ({ entries: 40, capacity: 1024 }),
      },
      gpuPrefillRate: () => [['8b-1', 11_000]], gpuDecodeBase: () => [['8b-1', 0.0105]], gpuDecodePerSeq: () => [['8b-1', 0.000025]],
      replyLengthErrorP50: () => [['8b', 0.4]], replyLengthErrorP90: () => [['8b', 1.2]],
    });
    scriptedRun(m);
    m.shed('8b', 'arrival');
    m.infeasible('8b', 'premium', 'prompt_length');
    m.ttftPrediction('8b', 110, 100);
    m.thread.tokenizeInline.observe(0.001);
    m.thread.scrapeSeconds.observe(0.01);
    m.thread.scrapes.ok.inc();
    const text = await m.render();
    const types = new Map<string, string>();
    for (const l of text.split('\n')) {
      const x = /^# TYPE (gateway_\S+) (\S+)$/.exec(l);
      if (x && !/^gateway_(process|nodejs)_/.test(x[1]!)) types.set(x[1]!, x[2]!);
    }
    const labels = new Map<string, Set<string>>();
    for (const s of parseExposition(text)) {
      const family = s.name.replace(/_(bucket|sum|count)$/, '');
      const fam = types.has(s.name) ? s.name : types.has(family) ? family : null;
      if (!fam) continue;
      const set = labels.get(fam) ?? new Set<string>();
      for (const k of Object.keys(s.labels)) if (k !== 'le') set.add(k);
      labels.set(fam, set);
    }
    return new Map([...types].map(([name, type]) => [name, `${type}|${[...(labels.get(name) ?? [])].sort().join(',')}`]));
  } finally {
    m.close();
  }
}

void test('the metrics table in src/metrics/README.md matches the exported families, types and labels', async () => {
  const docs = documented();
  assert.ok(docs.size >= 25, `table found (${docs.size} rows)`);
  assert.deepEqual(Object.fromEntries([...docs].sort()), Object.fromEntries([...(await rendered())].sort()));
});
