// The trace readers and replay: record counts and spans of the two public traces, Mooncake's hash-id
// expansion (32 chained 16-token blocks per 512-token id, equal ids → equal blocks), Azure's distinct
// prompts, time compression, the clients' max_tokens, and each seed's window of the trace. Small inline files cover the formats; the public traces themselves are data
// kept outside the repository: with SIM_TRACE_DIR naming a folder that holds them, their counts are checked.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { azureTimeMs, CLIENT_CAPS, expandHashIds, readAzure, readMooncake, traceLapMs, traceSpanMs, TraceWorkload } from '../../../native-bench/sim/traces.ts';
import { makeWorkload, parseWorkload, traceRecords, windowStartMs } from '../../../native-bench/sim/workloads.ts';
import { forEachLine } from '../../../native-bench/sim/trace-lines.ts';
import type { PoolShape } from '../../../native-bench/sim/workload-types.ts';

const pool: PoolShape = { id: '8b', maxModelLen: 131_072, blockSize: 16, adapters: [] };
const dir = mkdtempSync(join(tmpdir(), 'sim-traces-'));

/** Writes a trace file into the test's directory (lines joined with LF; a string is written as is). */
function fixture(name: string, content: string | readonly string[]): string {
  const path = join(dir, name);
  writeFileSync(path, typeof content === 'string' ? content : content.join('\n'));
  return path;
}

test('Mooncake: records, and each hash id expands to 32 chained blocks; equal ids give equal blocks', () => {
  const path = fixture('m.jsonl', [
    '{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}',
    '{"timestamp": 10, "input_length": 1030, "output_length": 7, "hash_ids": [1, 2, 9]}',
    '{"timestamp": 25, "input_length": 600, "output_length": 3, "hash_ids": [4, 2]}',
    '',
  ]);
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
  const path = fixture('a.csv', 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,4808,8\n2023-11-16 18:17:05.4799600,100,1\n');
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

test('Azure 2024: a UTC offset on TIMESTAMP, CRLF lines, a byte-order mark and a quoted header are read as 2023\'s', () => {
  assert.equal(azureTimeMs('2024-05-10 00:00:00.009930+00:00'), Date.UTC(2024, 4, 10) + 9.93);
  assert.equal(azureTimeMs('2024-05-10T02:00:00+02:00'), Date.UTC(2024, 4, 10));
  assert.equal(azureTimeMs('2024-05-09 19:30:00-0430'), Date.UTC(2024, 4, 10));
  assert.equal(azureTimeMs('2024-05-10 00:00:00Z'), Date.UTC(2024, 4, 10));
  assert.ok(Number.isNaN(azureTimeMs('2024-05-10 00:00:00 UTC+1')));
  const path = fixture('a2024.csv', '\ufeff"TIMESTAMP","ContextTokens","GeneratedTokens"\r\n2024-05-10 00:00:00.009930+00:00,4808,10\r\n2024-05-10 00:00:01.509930+00:00,100,1\r\n');
  const recs = readAzure(path);
  assert.deepEqual(recs.map((r) => [Math.round(r.atMs * 1000) / 1000, r.inputTokens, r.outputTokens]), [[0, 4808, 10], [1500, 100, 1]]);
});

test('a trace cut from a longer one, or out of order, replays from its earliest record in time order', () => {
  const path = fixture('cut.jsonl', [
    '{"timestamp": 90500, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
    '{"timestamp": 90000, "input_length": 20, "output_length": 1, "hash_ids": [2]}',
    '{"timestamp": 90500, "input_length": 30, "output_length": 1, "hash_ids": [3]}',
  ]);
  const recs = readMooncake(path);
  // equal times keep the file's order (a chat's turns)
  assert.deepEqual(recs.map((r) => [r.atMs, r.inputTokens]), [[0, 20], [500, 10], [500, 30]]);
  const csv = fixture('late.csv', 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:05.0000000,1,1\n2023-11-16 18:17:04.0000000,2,1\n');
  assert.deepEqual(readAzure(csv).map((r) => [r.atMs, r.inputTokens]), [[0, 2], [1000, 1]]);
});

test('lines are read whole across reads, multi-byte characters too', () => {
  const lines = ['first', 'é日本語 ✓ 👍🏽', '', 'last without a newline'];
  const path = fixture('lines.txt', `\ufeff${lines.join('\r\n')}`);
  for (const chunk of [1, 2, 3, 7, 1 << 20]) {
    const got: string[] = [];
    forEachLine(path, (l, n) => {
      assert.equal(n, got.length + 1);
      got.push(l);
    }, chunk);
    assert.deepEqual(got, lines, `chunks of ${chunk} bytes`);
  }
});

test('a replay stops at the run\'s duration and clips what the pool cannot take', () => {
  const path = fixture('long.jsonl', '{"timestamp": 0, "input_length": 20000, "output_length": 100, "hash_ids": []}\n{"timestamp": 5000, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n');
  const w = new TraceWorkload('m', readMooncake(path), { ...pool, maxModelLen: 16_384 }, 1, 4000);
  const r = w.next()!;
  assert.equal(r.promptTokens + r.outputTokens, 16_384);
  assert.equal(w.next(), null);
  assert.equal(w.clipped, 1);
});

test('bad lines are errors that name the line', () => {
  const path = fixture('bad.jsonl', '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}\n{"timestamp": 1}\n');
  assert.throws(() => readMooncake(path), /bad\.jsonl:2/);
  const csv = fixture('bad.csv', 'A,B\n1,2\n');
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

/** A Mooncake-format trace of `n` records a second apart, output lengths spread over 1..8,000 tokens. */
function spreadTrace(name: string, n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const output = 1 + ((i * 7919) % 8000);
    lines.push(JSON.stringify({ timestamp: i * 1000, input_length: 1000 + (i % 50) * 10, output_length: output, hash_ids: [i] }));
  }
  return fixture(name, lines);
}

test('max_tokens is what clients send: half none (the context left), half a cap of 256..8192 at least the reply; never the recorded length as such', () => {
  const recs = readMooncake(spreadTrace('caps.jsonl', 4000));
  const w = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 7, maxTokens: 'caps', windowStartMs: 0 });
  let none = 0;
  let capped = 0;
  let equalToReply = 0;
  const capsSeen = new Set<number>();
  for (let r = w.next(); r !== null; r = w.next()) {
    assert.ok(r.maxTokens >= r.outputTokens, `max_tokens ${r.maxTokens} below the reply's ${r.outputTokens}`);
    if (r.maxTokens === pool.maxModelLen - r.promptTokens) none++;
    else {
      assert.ok((CLIENT_CAPS as readonly number[]).includes(r.maxTokens), `cap ${r.maxTokens}`);
      capsSeen.add(r.maxTokens);
      capped++;
    }
    if (r.maxTokens === r.outputTokens) equalToReply++;
  }
  assert.equal(none + capped, 4000);
  assert.ok(Math.abs(none / 4000 - 0.5) < 0.04, `${none} of 4000 sent none`);
  assert.deepEqual([...capsSeen].sort((a, b) => a - b), [...CLIENT_CAPS]);
  assert.ok(equalToReply < 40, `${equalToReply} requests' max_tokens equal their reply's length`);
  // A reply longer than every cap: a capping client's 8192 cuts it there; a client that sent none gets it whole.
  const longRecs = readMooncake(fixture('long-reply.jsonl', Array.from({ length: 40 }, (_, i) => `{"timestamp": ${i}, "input_length": 100, "output_length": 9000, "hash_ids": [${i}]}`)));
  const long = new TraceWorkload('m', longRecs, pool, 1, Infinity, { seed: 7, maxTokens: 'caps', windowStartMs: 0 });
  for (let r = long.next(); r !== null; r = long.next()) {
    assert.ok(r.maxTokens === 8192 ? r.outputTokens === 8192 : r.maxTokens === pool.maxModelLen - 100 && r.outputTokens === 9000);
  }
  // --max-tokens recorded is the hindsight the race no longer has.
  const rec = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 7, maxTokens: 'recorded', windowStartMs: 0 });
  for (let r = rec.next(); r !== null; r = rec.next()) assert.equal(r.maxTokens, r.outputTokens);
  // The same seed draws the same caps; another seed other ones.
  const again = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 7, maxTokens: 'caps', windowStartMs: 0 });
  const other = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 8, maxTokens: 'caps', windowStartMs: 0 });
  const w2 = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 7, maxTokens: 'caps', windowStartMs: 0 });
  let same = 0;
  for (let i = 0; i < 200; i++) {
    const a = again.next()!;
    const b = w2.next()!;
    assert.equal(a.maxTokens, b.maxTokens);
    if (other.next()!.maxTokens === a.maxTokens) same++;
  }
  assert.ok(same < 150, `seed 8 drew ${same} of 200 caps as seed 7 did`);
});

test('each seed replays its own window of a trace, wrapping past its end; every run at that seed replays the same one', () => {
  const path = spreadTrace('windows.jsonl', 600);
  const wk = parseWorkload(`mooncake:${path}`);
  const recs = traceRecords(wk);
  const starts = [1, 2, 3, 4, 5].map((s) => windowStartMs(wk, s)!);
  assert.equal(new Set(starts).size, 5, `windows ${starts.join(', ')}`);
  assert.ok(starts.every((s) => s >= 0 && s < traceLapMs(recs)));
  const opts = (seed: number, speed: number) => ({ rps: 0, speed, durationMs: 120_000, seed: seed * 1000, traceSeed: seed, maxTokens: 'caps' as const });
  const firstPrompts = (seed: number, speed = 1): string => {
    const w = makeWorkload(wk, pool, opts(seed, speed));
    const out: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = w.next()!;
      out.push(`${r.promptTokens}:${r.blockHashes[0]}`);
    }
    return out.join(',');
  };
  assert.notEqual(firstPrompts(1), firstPrompts(2), 'two seeds replay different windows');
  assert.equal(firstPrompts(3), firstPrompts(3), 'one seed replays one window');
  assert.equal(firstPrompts(3, 1), firstPrompts(3, 2), 'at any speed: every contender at a seed replays the same window');
  // A window that starts near the end wraps to the trace's start, a mean gap after its last record.
  const late = new TraceWorkload('m', recs, pool, 1, Infinity, { seed: 1, maxTokens: 'caps', windowStartMs: 599_000 });
  const a = late.next()!;
  const b = late.next()!;
  assert.equal(a.atMs, 0);
  assert.equal(b.atMs, 1000);
  assert.equal(b.blockHashes[0], expandHashIds([0], 1000, 16)[0], 'the trace\'s first record comes next');
  let n = 2;
  while (late.next() !== null) n++;
  assert.equal(n, 600, 'a window replays each record once');
});
