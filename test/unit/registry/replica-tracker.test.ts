import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { EVENT, ReplicaTracker } from '../../../src/registry/poll/replica-tracker.ts';
import { FAILURE_KIND } from '../../../src/registry/poll/protocol.ts';
import { ParsedMetrics, parseVllmMetrics } from '../../../src/registry/poll/vllm-metrics-parser.ts';
import { ROW_FLAG, ROW_STATE } from '../../../src/registry/replica-table-layout.ts';

const V1 = readFileSync(new URL('../../fixtures/vllm-metrics/v1-0.12-lora.txt', import.meta.url), 'utf8');
const MULTIPROC = readFileSync(new URL('../../fixtures/vllm-metrics/v1-dp2-multiprocess-block32.txt', import.meta.url), 'utf8');

function page(text: string, edits: Record<string, string> = {}): ParsedMetrics {
  let t = text;
  for (const [from, to] of Object.entries(edits)) t = t.split(from).join(to);
  const m = new ParsedMetrics();
  assert.ok(parseVllmMetrics(t, m));
  return m;
}

void test('the first good scrape brings a replica up; down only after down_after_failures failures in a row', () => {
  const tr = new ReplicaTracker(0, 1, 'r', 'http://x:1', 16);
  assert.equal(tr.onGood(page(V1), 1000, 3), EVENT.STATE | EVENT.ADAPTERS);
  assert.equal(tr.row.state, ROW_STATE.UP);
  assert.equal(tr.row.lastGoodScrapeMs, 1000);
  assert.equal(tr.onFailure(FAILURE_KIND.TIMEOUT, '', 1100, 2), 0);
  assert.equal(tr.row.state, ROW_STATE.UP, 'one failure is noise');
  assert.equal(tr.onGood(page(V1), 1200, 3), 0, 'a good scrape resets the count');
  tr.onFailure(FAILURE_KIND.UNREACHABLE, 'ECONNREFUSED', 1300, 2);
  assert.equal(tr.onFailure(FAILURE_KIND.UNREACHABLE, 'ECONNREFUSED', 1400, 2), EVENT.STATE);
  assert.equal(tr.row.state, ROW_STATE.DOWN);
  assert.match(tr.reason, /2 consecutive failed scrapes, last: unreachable \(ECONNREFUSED\)/);
  assert.equal(tr.row.lastGoodScrapeMs, 1200, 'the last good scrape time stays: readers see how stale the figures are');
});

void test('a changed process start time is a restart: new generation, event, same slot', () => {
  const tr = new ReplicaTracker(3, 9, 'r', 'http://x:1', 16);
  tr.onGood(page(V1), 1000, 1);
  const gen = tr.row.generation;
  assert.equal(tr.onGood(page(V1, { 'process_start_time_seconds 1.76230119012e+09': 'process_start_time_seconds 1.76230999e+09' }), 2000, 1) & EVENT.RESTART, EVENT.RESTART);
  assert.equal(tr.row.generation, gen + 1);
  assert.equal(tr.row.restarts, 1);
  assert.match(tr.reason, /start time changed/);
  assert.equal(tr.onGood(page(V1, { 'process_start_time_seconds 1.76230119012e+09': 'process_start_time_seconds 1.76230999e+09' }), 3000, 1) & EVENT.RESTART, 0);
});

void test('without a start time, counters going backwards are a restart', () => {
  const tr = new ReplicaTracker(0, 1, 'r', 'http://x:1', 32);
  tr.onGood(page(MULTIPROC), 1000, 1);
  assert.equal(tr.onGood(page(MULTIPROC), 1100, 1) & EVENT.RESTART, 0);
  const reset = page(MULTIPROC, { 'vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 300.0': 'vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0' });
  assert.equal(tr.onGood(reset, 1200, 1) & EVENT.RESTART, EVENT.RESTART);
  assert.match(tr.reason, /counters went backwards/);
});

void test('without a start time, coming back after being unreachable is a restart; after a timeout it is not', () => {
  const a = new ReplicaTracker(0, 1, 'r', 'http://x:1', 32);
  a.onGood(page(MULTIPROC), 1000, 1);
  a.onFailure(FAILURE_KIND.UNREACHABLE, '', 1100, 2);
  a.onFailure(FAILURE_KIND.UNREACHABLE, '', 1200, 2);
  assert.equal(a.onGood(page(MULTIPROC), 1300, 1), EVENT.STATE | EVENT.RESTART);
  assert.equal(a.row.flags & ROW_FLAG.UNREACHABLE, 0);

  const b = new ReplicaTracker(0, 1, 'r', 'http://x:1', 32);
  b.onGood(page(MULTIPROC), 1000, 1);
  b.onFailure(FAILURE_KIND.TIMEOUT, '', 1100, 2);
  b.onFailure(FAILURE_KIND.TIMEOUT, '', 1200, 2);
  assert.equal(b.onGood(page(MULTIPROC), 1300, 1), EVENT.STATE);
});

void test('prefix hit rate and preemptions are per interval, from counter deltas', () => {
  const tr = new ReplicaTracker(0, 1, 'r', 'http://x:1', 16);
  tr.onGood(page(V1), 1000, 1);
  assert.ok(Number.isNaN(tr.row.prefixHitRate), 'unknown until two scrapes');
  tr.onGood(page(V1, {
    '} 1.843212e+06\n# HELP vllm:prefix_cache_queries_created': '} 1.844212e+06\n# HELP vllm:prefix_cache_queries_created',
    'vllm:prefix_cache_hits_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.126384e+06': 'vllm:prefix_cache_hits_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.127134e+06',
    'vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0': 'vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0',
  }), 1100, 1);
  assert.equal(tr.row.prefixHitRate, 0.75);
  assert.equal(tr.row.preemptionsDelta, 3);
  assert.equal(tr.row.preemptionsTotal, 3);
});

void test('a block size other than the pool\'s switches prefix affinity off and is reported once', () => {
  const tr = new ReplicaTracker(0, 1, 'r', 'http://x:1', 16);
  assert.equal(tr.onGood(page(MULTIPROC), 1000, 1) & EVENT.BLOCK_SIZE_MISMATCH, EVENT.BLOCK_SIZE_MISMATCH);
  assert.ok(tr.row.flags & ROW_FLAG.PREFIX_AFFINITY_OFF);
  assert.equal(tr.onGood(page(MULTIPROC), 1100, 1) & EVENT.BLOCK_SIZE_MISMATCH, 0, 'not again while unchanged');
  assert.ok(tr.row.flags & ROW_FLAG.PREFIX_AFFINITY_OFF);
  tr.onGood(page(V1), 1200, 1);
  assert.equal(tr.row.flags & ROW_FLAG.PREFIX_AFFINITY_OFF, 0);
  assert.ok(tr.row.flags & ROW_FLAG.LORA_ENABLED);
  assert.ok(tr.row.flags & ROW_FLAG.METRICS_V1);
});
