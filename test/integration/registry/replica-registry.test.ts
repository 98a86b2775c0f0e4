import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load.ts';
import type { GatewayConfig } from '../../../src/config/schema.ts';
import { ReplicaRegistry } from '../../../src/registry/replica-registry.ts';
import { ReplicaRow } from '../../../src/registry/replica-table.ts';
import { ROW_FLAG, ROW_STATE } from '../../../src/registry/replica-table-layout.ts';
import { VllmPageServer, waitFor } from './vllm-page-server.ts';

const INTERVAL_MS = 100;

function config(replicas: Array<{ id: string; url: string; drain?: boolean; adapters?: string[] }>, blockSize = 16, intervalMs = INTERVAL_MS): GatewayConfig {
  return parseConfig({
    pools: [{ id: 'p', model: 'm', block_size: blockSize, adapters: ['sql-lora', 'chat-lora'], replicas }],
    registry: { scrape_interval_ms: intervalMs, scrape_timeout_ms: 500, down_after_failures: 2, max_replicas: 4 },
  });
}

interface Logged { level: string; message: string }

async function setup(t: { after: (fn: () => Promise<void>) => void }, n: number, intervalMs = INTERVAL_MS): Promise<{ servers: VllmPageServer[]; reg: ReplicaRegistry; logs: Logged[] }> {
  const servers: VllmPageServer[] = [];
  for (let i = 0; i < n; i++) servers.push(await VllmPageServer.start());
  const logs: Logged[] = [];
  const reg = await ReplicaRegistry.start(config(servers.map((s, i) => ({ id: `r${i}`, url: s.url })), 16, intervalMs), {
    log: (level, message) => logs.push({ level, message }),
  });
  t.after(async () => {
    await reg.close();
    for (const s of servers) await s.close();
  });
  return { servers, reg, logs };
}

void test('start() returns with every replica scraped: healthy, figures in the table, adapters known', async (t) => {
  const { servers, reg } = await setup(t, 2);
  servers[1]!.knobs.running = 7;
  assert.deepEqual(reg.candidates('p'), [reg.slotOf('r0'), reg.slotOf('r1')]);
  assert.deepEqual(reg.candidates('nope'), []);
  const s0 = reg.slotOf('r0');
  assert.ok(reg.isHealthy(s0));
  assert.deepEqual(reg.replica(s0), { id: 'r0', url: servers[0]!.url, poolId: 'p', adapters: null, draining: false });
  const row = new ReplicaRow();
  assert.ok(reg.table.read(s0, row));
  assert.equal(row.state, ROW_STATE.UP);
  assert.equal(row.running, 1);
  assert.equal(row.kvUsage, 0.25);
  assert.equal(row.numGpuBlocks, 27648);
  assert.equal(row.blockSize, 16);
  assert.equal(row.maxLoras, 4);
  assert.equal(row.processStartSeconds, 1762301190.5);
  assert.ok(row.flags & ROW_FLAG.METRICS_V1);
  assert.ok(row.lastGoodScrapeMs > 0 && row.lastGoodScrapeMs <= Date.now(), 'scraped before start() returned');
  assert.deepEqual(reg.residentAdapters(s0), ['sql-lora', 'chat-lora']);
  assert.equal(reg.slotOf('unknown'), -1);
  // The poller keeps scraping: a changed figure shows up within an interval or two.
  const s1 = reg.slotOf('r1');
  await waitFor(() => reg.table.read(s1, row) && row.running === 7, 100 * INTERVAL_MS, 'running=7 to be scraped');
  assert.ok((servers[0]!.hits.get('/health') ?? 0) >= 1);
});

void test('a replica whose server closes is down after two failed scrapes; back on the same port it is up and reported restarted', async (t) => {
  const { servers, reg } = await setup(t, 2);
  const slot = reg.slotOf('r1');
  const restarts: number[] = [];
  reg.onRestart((s) => restarts.push(s));
  const generationBefore = reg.table.generation(slot);

  await servers[1]!.close();
  // Down exactly when down_after_failures (2) consecutive scrapes have failed: every row read on the way shows
  // UP with fewer failures and DOWN with two or more (however late a busy machine lets this thread look).
  const row = new ReplicaRow();
  const seen: Array<[number, number]> = [];
  await waitFor(() => {
    if (reg.table.read(slot, row)) seen.push([row.scrapeFailures, row.state]);
    return !reg.isHealthy(slot);
  }, 100 * INTERVAL_MS, 'r1 to be marked down');
  for (const [failures, state] of seen) assert.equal(state, failures >= 2 ? ROW_STATE.DOWN : ROW_STATE.UP, `state ${state} with ${failures} failed scrapes`);
  assert.ok(seen.some(([f, st]) => f >= 2 && st === ROW_STATE.DOWN), `marked down after two failed scrapes: ${JSON.stringify(seen.slice(-3))}`);
  assert.equal(reg.table.state(slot), ROW_STATE.DOWN);
  assert.ok(reg.table.flags(slot) & ROW_FLAG.UNREACHABLE);
  assert.ok(reg.isHealthy(reg.slotOf('r0')), 'the other replica is unaffected');

  await servers[1]!.restart();
  await waitFor(() => reg.isHealthy(slot), 100 * INTERVAL_MS, 'r1 to come back');
  await waitFor(() => restarts.length > 0, 100 * INTERVAL_MS, 'the restart to be reported');
  assert.deepEqual(restarts, [slot]);
  assert.notEqual(reg.table.generation(slot), generationBefore);
  assert.equal(reg.slotOf('r1'), slot, 'a restart keeps the slot');
});

void test('a reload that removes a replica drains it: out of rotation at once, slot freed only when nothing is in flight', async (t) => {
  const { servers, reg } = await setup(t, 2);
  const slot = reg.slotOf('r1');
  const entry = reg.ledger.dispatch(slot, 100, 10, 16); // a request still streaming from r1

  reg.reload(config([{ id: 'r0', url: servers[0]!.url }]));
  assert.deepEqual(reg.candidates('p'), [reg.slotOf('r0')]);
  assert.equal(reg.slotOf('r1'), -1);
  assert.equal(reg.replica(slot).draining, true, 'the in-flight request can still look its replica up');
  assert.equal(reg.replica(slot).id, 'r1');
  await new Promise((r) => setTimeout(r, 3 * INTERVAL_MS));
  assert.equal(reg.table.state(slot), ROW_STATE.UP, 'still polled while it drains');
  assert.equal(reg.drainingCount(), 1);

  reg.ledger.end(entry);
  await waitFor(() => reg.table.state(slot) === ROW_STATE.EMPTY, 100 * INTERVAL_MS, 'the slot to be freed');
  assert.equal(reg.drainingCount(), 0);
  assert.throws(() => reg.replica(slot), RangeError);

  // The freed slot is reused by the next replica added, under a new generation, with a zeroed ledger.
  const generationFreed = reg.table.generation(slot);
  const s2 = await VllmPageServer.start();
  t.after(() => s2.close());
  reg.reload(config([{ id: 'r0', url: servers[0]!.url }, { id: 'r2', url: s2.url }]));
  assert.equal(reg.slotOf('r2'), slot);
  await waitFor(() => reg.isHealthy(slot), 100 * INTERVAL_MS, 'r2 to be healthy');
  assert.notEqual(reg.table.generation(slot), generationFreed);
  assert.equal(reg.replica(slot).id, 'r2');
});

void test('a reload that adds a replica puts it into rotation after its first good scrape; drain flags apply at once', async (t) => {
  // 15 s between scrapes (the most the default 30 s stall timeout allows): healthy well before the next tick
  // means it was scraped at once.
  const SLOW_MS = 15_000;
  const { servers, reg } = await setup(t, 1, SLOW_MS);
  const s1 = await VllmPageServer.start();
  t.after(() => s1.close());
  reg.reload(config([{ id: 'r0', url: servers[0]!.url }, { id: 'new', url: s1.url, adapters: ['sql-lora'] }], 16, SLOW_MS));
  const slot = reg.slotOf('new');
  assert.ok(slot >= 0);
  assert.deepEqual(reg.candidates('p'), [reg.slotOf('r0'), slot]);
  await waitFor(() => reg.isHealthy(slot), SLOW_MS / 2, 'the new replica to be healthy (scraped at once, not at the next tick)');
  assert.deepEqual(reg.replica(slot).adapters, ['sql-lora']);

  reg.reload(config([{ id: 'r0', url: servers[0]!.url, drain: true }, { id: 'new', url: s1.url }], 16, SLOW_MS));
  assert.deepEqual(reg.candidates('p'), [slot]);
  assert.equal(reg.replica(reg.slotOf('r0')).draining, true);
  assert.equal(reg.slotOf('r0'), 0, 'a drained replica keeps its slot and its id');
});

void test('data-plane connection failures take a replica out at once; the next good scrape lets it back', async (t) => {
  const { reg } = await setup(t, 1);
  const slot = reg.slotOf('r0');
  reg.reportDataPlaneFailure(slot);
  assert.ok(reg.isHealthy(slot), 'one failure is not enough');
  reg.reportDataPlaneSuccess(slot);
  reg.reportDataPlaneFailure(slot);
  reg.reportDataPlaneFailure(slot);
  assert.equal(reg.isHealthy(slot), false, 'two in a row: out without waiting for a scrape');
  await waitFor(() => reg.isHealthy(slot), 100 * INTERVAL_MS, 'a good scrape to bring it back');
});

void test('a failing /health takes a replica down even though /metrics answers', async (t) => {
  const { servers, reg } = await setup(t, 1);
  const slot = reg.slotOf('r0');
  servers[0]!.healthStatus = 503;
  await waitFor(() => !reg.isHealthy(slot), 100 * INTERVAL_MS, 'down on /health 503');
  assert.equal(reg.table.flags(slot) & ROW_FLAG.UNREACHABLE, 0);
  servers[0]!.healthStatus = 200;
  await waitFor(() => reg.isHealthy(slot), 100 * INTERVAL_MS, 'up again');
});

void test('a replica whose block size differs from its pool\'s is logged loudly and loses prefix affinity; adapter changes arrive', async (t) => {
  const { servers, reg, logs } = await setup(t, 1);
  const slot = reg.slotOf('r0');
  assert.equal(reg.prefixAffinityOff(slot), false);
  servers[0]!.knobs.blockSize = 32;
  servers[0]!.knobs.runningAdapters = 'chat-lora';
  servers[0]!.knobs.waitingAdapters = 'sql-lora';
  await waitFor(() => reg.prefixAffinityOff(slot), 100 * INTERVAL_MS, 'prefix affinity to be switched off');
  assert.ok(reg.isHealthy(slot), 'it still serves; only affinity is off');
  await waitFor(() => logs.some((l) => l.level === 'warn' && l.message.includes('block_size 32')), 100 * INTERVAL_MS, 'a warning');
  await waitFor(() => reg.residentAdapters(slot).length === 1, 100 * INTERVAL_MS, 'the adapter set to change');
  assert.deepEqual(reg.residentAdapters(slot), ['chat-lora']);
  assert.deepEqual(reg.waitingAdapters(slot), ['sql-lora']);
  servers[0]!.knobs.blockSize = 16;
  await waitFor(() => !reg.prefixAffinityOff(slot), 100 * INTERVAL_MS, 'affinity back when block sizes agree');
});

// "Not forever": start() resolves (a hang fails the test by its timeout); how long a thread takes to start on a
// busy machine is no part of the assertion.
void test('a replica that never answers is not in rotation, and start() does not wait forever for it', { timeout: 60_000 }, async (t) => {
  const dead = await VllmPageServer.start();
  const url = dead.url;
  await dead.close();
  const reg = await ReplicaRegistry.start(config([{ id: 'gone', url }]), { log: () => {} });
  t.after(() => reg.close());
  const slot = reg.slotOf('gone');
  assert.equal(reg.isHealthy(slot), false);
  await waitFor(() => reg.table.state(slot) === ROW_STATE.DOWN, 100 * INTERVAL_MS, 'down');
});

void test('a crashed poller thread is restarted and adopts its rows: same generation, still healthy, figures fresh again', async (t) => {
  const { servers, reg, logs } = await setup(t, 1);
  const slot = reg.slotOf('r0');
  const generation = reg.table.generation(slot);
  const restarts: number[] = [];
  reg.onRestart((s) => restarts.push(s));
  await reg['worker']!.terminate(); // what an uncaught exception in the poller thread amounts to
  await waitFor(() => logs.some((l) => l.level === 'error' && l.message.includes('poller thread exited')), 10_000, 'the crash to be logged');
  const crashedAt = Date.now();
  servers[0]!.knobs.running = 9;
  const row = new ReplicaRow();
  await waitFor(() => reg.table.read(slot, row) && row.running === 9 && row.lastGoodScrapeMs > crashedAt, 30_000, 'a new poller to scrape again');
  assert.equal(reg.table.generation(slot), generation, 'adopted, not reassigned');
  assert.ok(reg.isHealthy(slot));
  assert.deepEqual(restarts, []);
});

void test('a replica that accepts connections but never answers is down after scrape timeouts, and up once it answers', async (t) => {
  const { servers, reg } = await setup(t, 1); // scrape_timeout_ms 500, down after 2
  const slot = reg.slotOf('r0');
  servers[0]!.hang = true;
  const tookMs = await waitFor(() => !reg.isHealthy(slot), 30_000, 'down after timeouts');
  // Two scrapes must time out: the first up to one interval after the hang began, then 500 ms each.
  assert.ok(tookMs >= 500, `down after ${tookMs} ms: not before a scrape could time out`);
  assert.equal(reg.table.flags(slot) & ROW_FLAG.UNREACHABLE, 0, 'a timeout is not a refused connection');
  servers[0]!.hang = false;
  await waitFor(() => reg.isHealthy(slot), 30_000, 'up again once it answers');
});
