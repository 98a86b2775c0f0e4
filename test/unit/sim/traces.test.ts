// The trace readers and replay: record counts and spans of the two public traces, Mooncake's hash-id
// expansion (32 chained 16-token blocks per 512-token id, equal ids → equal blocks), Azure's distinct
// prompts, time compression. Small inline files cover the formats; the public traces themselves are data
// kept outside the repository: with SIM_TRACE_DIR naming a folder that holds them, their counts are checked.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { expandHashIds, readAzure, readMooncake, traceSpanMs, TraceWorkload } from '../../../native-bench/sim/traces.ts';
import type { PoolShape } from '../../../native-bench/sim/workload-types.ts';

const pool: PoolShape = { id: '8b', maxModelLen: 131_072, blockSize: 16, adapters: [] };
const dir = mkdtempSync(join(tmpdir(), 'sim-traces-'));

test('Mooncake: records, and each hash id expands to 32 chained blocks; equal ids give equal blocks', () => {
  const path = join(dir, 'm.jsonl');
  writeFileSync(path, [
    '{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}',
    '{"timestamp": 10, "input_length": 1030, "output_length": 7, "hash_ids": [1, 2, 9]}',
    '{"timestamp": 25, "input_length": 600, "output_length": 3, "hash_ids": [4, 2]}',
    '',
  ].join('\n'));
  const recs = readMooncake(path);
  assert.equal(recs.length, 3);
  assert.deepEqual(recs.map((r) => r.atMs), [0, 10, 25]);
  const w = new TraceWorkload('m', recs, pool, 1, Infinity);
  const a = w.next()!;
  const b = w.next()!;
  const c = w.next()!;
  assert.equal(w.next(), null);
  assert.equal(a.blockHashes.length, Math.floor(1100 / 16)); // 68: ids 1, 2 whole (64 blocks), 4 of id 3
  assert.equal(b.blockHashes.length, Math.floor(1030 / 16));
  // Ids 1 and 2 are shared: blocks 0..63 equal; id 3 vs 9 differ from block 64 on.
  for (let i = 0; i < 64; i++) assert.equal(a.blockHashes[i], b.blockHashes[i]);
  assert.notEqual(a.blockHashes[64], b.blockHashes[64]);
  // The same id 2 after a different first id is a different prefix: nothing shared.
  assert.notEqual(c.blockHashes[32], a.blockHashes[32]);
  assert.equal(new Set(a.blockHashes).size, a.blockHashes.length);
  assert.equal(expandHashIds([5], 512, 16).length, 32);
});

test('Azure: wall-clock times become ms from the first record; every prompt is distinct', () => {
  const path = join(dir, 'a.csv');
  writeFileSync(path, 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,4808,8\n2023-11-16 18:17:05.4799600,100,1\n');
  const recs = readAzure(path);
  assert.equal(recs.length, 3);
  assert.ok(Math.abs(recs[1]!.atMs - 52) < 1e-6 && Math.abs(recs[2]!.atMs - 1500) < 1e-6);
  const w = new TraceWorkload('a', recs, pool, 2, Infinity);
  const a = w.next()!;
  const b = w.next()!;
  assert.equal(b.atMs, 26); // --speed 2 halves the gaps
  assert.equal(a.blockHashes.length, 300);
  assert.notEqual(a.blockHashes[0], b.blockHashes[0]);
});

test('a replay stops at the run\'s duration and clips what the pool cannot take', () => {
  const path = join(dir, 'long.jsonl');
  writeFileSync(path, '{"timestamp": 0, "input_length": 20000, "output_length": 100, "hash_ids": []}\n{"timestamp": 5000, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n');
  const w = new TraceWorkload('m', readMooncake(path), { ...pool, maxModelLen: 16_384 }, 1, 4000);
  const r = w.next()!;
  assert.equal(r.promptTokens + r.outputTokens, 16_384);
  assert.equal(w.next(), null);
  assert.equal(w.clipped, 1);
});

test('bad lines are errors that name the line', () => {
  const path = join(dir, 'bad.jsonl');
  writeFileSync(path, '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}\n{"timestamp": 1}\n');
  assert.throws(() => readMooncake(path), /bad\.jsonl:2/);
  const csv = join(dir, 'bad.csv');
  writeFileSync(csv, 'A,B\n1,2\n');
  assert.throws(() => readAzure(csv), /header/);
});

const traceDir = process.env.SIM_TRACE_DIR ?? '';
const haveTraces = traceDir !== '' && existsSync(join(traceDir, 'mooncake_synthetic_trace.jsonl')) && existsSync(join(traceDir, 'azure2023_code.csv'));
test('the public traces: counts, spans and Mooncake\'s block totals', { skip: !haveTraces && 'SIM_TRACE_DIR does not hold the traces' }, () => {
  const m = readMooncake(join(traceDir, 'mooncake_synthetic_trace.jsonl'));
  assert.equal(m.length, 3993);
  assert.equal(m.reduce((s, r) => s + r.hashIds!.length, 0), 121_877);
  assert.equal(new Set(m.flatMap((r) => r.hashIds!)).size, 43_924);
  assert.ok(Math.abs(traceSpanMs(m) / 60_000 - 17.0) < 0.1);
  const a = readAzure(join(traceDir, 'azure2023_code.csv'));
  assert.equal(a.length, 8819);
  assert.ok(Math.abs(traceSpanMs(a) / 60_000 - 57.3) < 0.1);
});
