import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load.ts';
import { ReplicaRegistry } from '../../../src/registry/replica-registry.ts';
import { spawnWorker } from '../../../src/util/spawn-worker.ts';
import type { ThreadData, ThreadResult } from '../../unit/registry/table-threads.ts';
import { VllmPageServer } from './vllm-page-server.ts';

const THREADS_URL = new URL('../../unit/registry/table-threads.ts', import.meta.url);
const REPLICAS = 4;
const RUN_MS = 1500;

void test('readers on other threads never get a torn row while the real poller thread rewrites rows from live scrapes', async (t) => {
  const servers: VllmPageServer[] = [];
  let k = 0;
  for (let i = 0; i < REPLICAS; i++) {
    const s = await VllmPageServer.start();
    // Every page carries a new k: running = waiting = k, KV usage = k / 1e6. A row mixing two pages shows.
    s.beforeRender = (knobs) => {
      k++;
      knobs.running = k;
      knobs.waiting = k;
      knobs.kvUsage = k / 1e6;
    };
    servers.push(s);
  }
  const t0 = Date.now();
  const reg = await ReplicaRegistry.start(parseConfig({
    pools: [{ id: 'p', model: 'm', replicas: servers.map((s, i) => ({ id: `r${i}`, url: s.url })) }],
    registry: { scrape_interval_ms: 5, scrape_timeout_ms: 1000, max_replicas: REPLICAS },
  }), { log: () => {} });
  const control = new SharedArrayBuffer(8);
  const gate = new Int32Array(control);
  const d: ThreadData = { role: 'reader', check: 'scrape', tableBuffer: reg.table.buffer, control, slots: REPLICAS };
  const readers = [0].map(() => spawnWorker(THREADS_URL, { workerData: d }));
  t.after(async () => {
    Atomics.store(gate, 1, 1);
    for (const w of readers) await w.terminate();
    await reg.close();
    for (const s of servers) await s.close();
  });
  const results = readers.map((w) => new Promise<ThreadResult>((resolve, reject) => {
    w.on('message', (m: ThreadResult | 'waiting') => { if (m !== 'waiting') resolve(m); });
    w.on('error', reject);
  }));
  await new Promise<void>((resolve) => {
    let waiting = 0;
    for (const w of readers) w.on('message', (m) => { if (m === 'waiting' && ++waiting === readers.length) resolve(); });
  });
  t.diagnostic(`setup ${Date.now() - t0} ms`);
  const pagesBefore = k;
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0);
  await new Promise((r) => setTimeout(r, RUN_MS));
  Atomics.store(gate, 1, 1);
  for (const r of await Promise.all(results)) {
    t.diagnostic(`reads ${r.operations}, distinct scraped rows seen ${r.distinctKeys}, torn reads retried ${r.torn}`);
    assert.equal(r.inconsistent, 0, `a torn row was returned: ${r.example}`);
    assert.ok(r.distinctKeys > 1, 'the reader saw the rows change');
  }
  t.diagnostic(`pages served during the run: ${k - pagesBefore}`);
  assert.ok(k - pagesBefore > 20, 'the poller kept scraping');
});
