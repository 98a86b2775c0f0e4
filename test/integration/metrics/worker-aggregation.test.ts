import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROMTOOL_SKIP, promtoolCheck } from '../../helpers/promtool.ts';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { parseConfig } from '../../../src/config/load.ts';
import { GatewayMetrics, type MetricsSnapshot } from '../../../src/metrics/metrics.ts';
import { WorkerMetrics } from '../../../src/metrics/worker-metrics.ts';
import { parseExposition, valueOf } from '../../unit/metrics/prom-text.ts';

const cfg = parseConfig({ pools: [{ id: '8b', model: 'm', replicas: [{ id: '8b-1', url: 'http://127.0.0.1:1' }] }] });
const workerUrl = new URL('./metrics-worker.ts', import.meta.url);
const tsxApi = import.meta.resolve('tsx/esm/api');

async function startWorker(id: string, channelName?: string): Promise<Worker> {
  // A worker started from a .ts URL fails on Node 20 before tsx's hooks load (--import in execArgv does not
  // help), so a tiny eval bootstrap loads the entry through tsx's tsImport.
  const boot = `import(${JSON.stringify(tsxApi)}).then(({ tsImport }) => tsImport(${JSON.stringify(workerUrl.href)}, ${JSON.stringify(import.meta.url)}))`;
  const w = new Worker(boot, { eval: true, workerData: { id, channelName } });
  await once(w, 'online');
  return w;
}

/** A worker-shaped registry snapshot with n tokenize observations, built without a thread. */
async function snapshotOf(n: number): Promise<MetricsSnapshot> {
  const metrics = new WorkerMetrics({ channelName: 'test:metrics:nobody-listens', pushIntervalMs: 0 });
  try {
    for (let i = 0; i < n; i++) metrics.tokenized(0.002);
    return await metrics.snapshot();
  } finally {
    metrics.close();
  }
}

/** Polls `done` on real time (setInterval is not mocked) until it holds or `ms` pass. */
function settlesWithin(done: () => boolean, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const iv = setInterval(() => {
      if (done() || Date.now() - t0 > ms) {
        clearInterval(iv);
        resolve(done());
      }
    }, 5);
  });
}

async function record(w: Worker, tokenized: number, scraped: number): Promise<void> {
  w.postMessage({ tokenized, scraped });
  await once(w, 'message');
}

void test('render merges every worker thread registry into one page that promtool accepts', async (t) => {
  const m = new GatewayMetrics(cfg, { workerCollectTimeoutMs: 2000 });
  t.after(() => m.close());
  const [a, b] = await Promise.all([startWorker('tokenizer-1'), startWorker('poller')]);
  t.after(() => Promise.all([a.terminate(), b.terminate()]));
  await record(a, 3, 0);
  await record(b, 0, 5);
  m.thread.tokenizeInline.observe(0.0004);

  await m.render(); // first scrape: workers announce themselves
  let s = parseExposition(await m.render());
  assert.equal(valueOf(s, 'gateway_tokenize_duration_seconds_count', { kind: 'pool' }), 3);
  assert.equal(valueOf(s, 'gateway_tokenize_duration_seconds_count', { kind: 'inline' }), 1);
  assert.equal(valueOf(s, 'gateway_replica_scrapes_total', { result: 'ok' }), 5);
  assert.equal(valueOf(s, 'gateway_replica_scrape_duration_seconds_bucket', { le: '0.005' }), 5);

  // The next scrape pulls fresh numbers (no push interval configured): both workers add and it sums.
  await record(a, 2, 0);
  await record(b, 1, 1);
  const page = await m.render();
  s = parseExposition(page);
  assert.equal(valueOf(s, 'gateway_tokenize_duration_seconds_count', { kind: 'pool' }), 6);
  assert.equal(valueOf(s, 'gateway_replica_scrapes_total', { result: 'ok' }), 6);
  assert.equal(valueOf(s, 'gateway_process_start_time_seconds') !== undefined, true, 'main-thread process metrics survive the merge');
  await t.test('promtool check metrics accepts the merged page', { skip: PROMTOOL_SKIP }, () => {
    assert.deepEqual(promtoolCheck(page), { status: 0, output: '' });
  });
});

void test('dead workers keep their last counts, stop delaying scrapes, then fold into one retired sum', async (t) => {
  const m = new GatewayMetrics(cfg, { workerCollectTimeoutMs: 300, retireWorkerAfterMissed: 4 });
  t.after(() => m.close());
  const w1 = await startWorker('short-lived');
  await record(w1, 4, 0);
  m.absorbWorker('handed-over', await snapshotOf(1)); // a snapshot passed in directly, never refreshed
  await m.render();
  const count = (page: string): number | undefined =>
    valueOf(parseExposition(page), 'gateway_tokenize_duration_seconds_count', { kind: 'pool' });
  assert.equal(count(await m.render()), 5);
  assert.equal(m.workerSnapshotCount, 2);
  await w1.terminate();
  // From here the collect timeout runs on a mock clock: a scrape that waits for the silent workers settles only
  // once the clock moves past the timeout, and one that no longer waits settles without it.
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const waited: boolean[] = [];
  for (let i = 0; i < 6; i++) { // the 4th silent scrape folds both into the retired sum
    let page: string | null = null;
    const rendered = m.render().then((p) => { page = p; });
    waited.push(!(await settlesWithin(() => page !== null, 1500)));
    t.mock.timers.tick(300);
    await rendered;
    assert.equal(count(page!), 5, 'counters never go backwards');
    if (i === 5) {
      await t.test('promtool check metrics accepts the page with the retired sum', { skip: PROMTOOL_SKIP }, () => {
        assert.deepEqual(promtoolCheck(page!), { status: 0, output: '' });
      });
    }
  }
  t.mock.timers.reset();
  assert.deepEqual(waited, [true, true, true, false, false, false], 'waited for the missing workers three times, then stopped waiting');
  assert.equal(m.workerSnapshotCount, 1, 'two dead workers became one retired sum');
  // a replacement adds to the retired sum rather than replacing it
  m.absorbWorker('replacement', await snapshotOf(3));
  assert.equal(count(await m.render()), 8);
  assert.equal(m.workerSnapshotCount, 2);
});

void test('two gateways in one process keep their workers apart by channel name', async (t) => {
  const a = new GatewayMetrics(cfg, { workerChannel: 'test:metrics:a', workerCollectTimeoutMs: 2000 });
  const b = new GatewayMetrics(cfg, { workerChannel: 'test:metrics:b', workerCollectTimeoutMs: 2000 });
  t.after(() => { a.close(); b.close(); });
  const [wa, wb] = await Promise.all([startWorker('wa', a.workerChannel), startWorker('wb', b.workerChannel)]);
  t.after(() => Promise.all([wa.terminate(), wb.terminate()]));
  await record(wa, 2, 0);
  await record(wb, 7, 0);
  await Promise.all([a.render(), b.render()]);
  const count = async (m: GatewayMetrics): Promise<number | undefined> =>
    valueOf(parseExposition(await m.render()), 'gateway_tokenize_duration_seconds_count', { kind: 'pool' });
  assert.equal(await count(a), 2);
  assert.equal(await count(b), 7);
});
