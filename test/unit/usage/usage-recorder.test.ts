// UsageRecorder with jsonl sinks (real files in a temp dir): one line per record in order, every sink gets
// every record, flush() means the lines are on disk, close() flushes, and a sink that cannot write does not
// throw into the request path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UsageRecorder } from '../../../src/usage/usage-recorder.ts';
import { JsonlSink } from '../../../src/usage/jsonl-sink.ts';
import { parseConfig } from '../../../src/config/load.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';

const record = (i: number, over: Partial<UsageRecord> = {}): UsageRecord => ({
  request_id: `req-${i}`, tenant: 'alpha', model: 'gpt-fast', pool: '8b', adapter: null, replica: '8b-1', status: 200,
  finish_reason: 'length', input_tokens: 40 + i, output_tokens: i, cached_tokens: 0, predicted_cached_tokens: 0, ttft_ms: 12.5, duration_ms: 80.1,
  retries: 0, cancelled: false, queue_ms: 0, ts: new Date(0).toISOString(), ...over,
});

const lines = (path: string): UsageRecord[] => readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as UsageRecord);

function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'usage-unit-'));
  return fn(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

test('fromConfig builds one jsonl sink per spec; every record reaches every sink, one line each, in order', () => withDir(async (dir) => {
  const a = join(dir, 'a.jsonl');
  const b = join(dir, 'nested', 'deeper', 'b.jsonl');
  const cfg = parseConfig({
    pools: [{ id: '8b', model: 'm', replicas: [{ id: 'r1', url: 'http://127.0.0.1:1' }] }],
    usage: { sinks: [`jsonl:${a}`, `jsonl:${b}`] },
  });
  const rec = UsageRecorder.fromConfig(cfg);
  const sent = Array.from({ length: 500 }, (_, i) => record(i, i % 7 === 0 ? { status: 499, cancelled: true, ttft_ms: null, finish_reason: null } : {}));
  for (const r of sent) rec.record(r);
  await rec.flush();
  assert.deepEqual(lines(a), sent, 'flush() resolves once every record is in the file');
  assert.deepEqual(lines(b), sent, 'the second sink (its directory created) got the same records');
  rec.record(record(999));
  await rec.close();
  assert.equal(lines(a).length, 501, 'close() flushes what was recorded last');
}));

test('a jsonl sink appends to an existing file and never splits a record across lines', () => withDir(async (dir) => {
  const path = join(dir, 'u.jsonl');
  const first = new JsonlSink(path);
  first.write(`${JSON.stringify(record(1))}\n`, record(1));
  await first.close();
  const second = new UsageRecorder([new JsonlSink(path)]);
  const tricky = record(2, { model: 'line\nbreak "quoted" \u2028 model' });
  second.record(tricky);
  await second.close();
  const got = lines(path);
  assert.deepEqual(got, [record(1), tricky]);
  assert.equal(readFileSync(path, 'utf8').split('\n').length, 3, 'two lines and the trailing newline');
}));

test('a sink whose file cannot be opened drops records without throwing into the request path', () => withDir(async (dir) => {
  const blocked = join(dir, 'is-a-dir');
  mkdirSync(blocked);
  const rec = new UsageRecorder([new JsonlSink(blocked)]);
  await new Promise((r) => setTimeout(r, 50)); // the open error arrives asynchronously
  assert.doesNotThrow(() => rec.record(record(1)));
  await rec.flush();
  await rec.close();
  assert.ok(existsSync(blocked));
}));

test('a recorder with no sinks is inactive, accepts records and flushes at once', async () => withDir(async (dir) => {
  const rec = new UsageRecorder([]);
  assert.equal(rec.active, false, 'callers skip building records');
  const withSink = new UsageRecorder([new JsonlSink(join(dir, 'u.jsonl'))]);
  assert.equal(withSink.active, true);
  await withSink.close();
  assert.doesNotThrow(() => rec.record(record(1)));
  // "at once": both settle before the next turn of the event loop (no timer, no I/O waited for)
  const settled: string[] = [];
  void rec.flush().then(() => settled.push('flush'));
  void rec.close().then(() => settled.push('close'));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(settled, ['flush', 'close']);
}));
