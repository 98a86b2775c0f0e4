// Shared helpers for the mock-engine unit tests: an engine on a VirtualClock, synthetic chained block hashes,
// and a recorder of every event a request receives with the virtual time it arrived at.
// Thread: the test's main thread. Not on any hot path.
import assert from 'node:assert/strict';
import { VirtualClock } from '../../mock-replica/engine/clocks.ts';
import { MockEngine } from '../../mock-replica/engine/engine.ts';
import type { EngineOptions, EngineRequestSpec } from '../../mock-replica/engine/types.ts';

export function engineOnVirtualClock(opts: EngineOptions): { engine: MockEngine; clock: VirtualClock } {
  const clock = new VirtualClock();
  return { engine: new MockEngine(opts, clock), clock };
}

/**
 * Block hashes for a prompt of `promptTokens` tokens whose first `sharedTokens` come from a prefix identified by
 * `prefixSeed` and the rest are unique to `uniqueSeed`: blocks lying wholly inside the shared prefix get the
 * same hash in every prompt with that prefix; from the first block touching the unique part on, hashes are
 * unique (the chain guarantees it in the real hasher).
 */
export function blockHashes(promptTokens: number, opts: { prefixSeed?: number; sharedTokens?: number; uniqueSeed: number; blockSize?: number }): number[] {
  const blockSize = opts.blockSize ?? 16;
  const sharedBlocks = Math.floor((opts.sharedTokens ?? 0) / blockSize);
  const out: number[] = [];
  for (let i = 0; i < Math.floor(promptTokens / blockSize); i++) {
    out.push(i < sharedBlocks ? (opts.prefixSeed ?? 0) * 1_000_000 + i + 1 : 1e12 + opts.uniqueSeed * 1_000_000 + i);
  }
  return out;
}

export interface Recorded {
  id: string;
  addedMs: number;
  firstTokenMs: number;
  cachedTokens: number;
  firstTokenCalls: number;
  tokenMs: number[];
  tokenIndexes: number[];
  finishMs: number;
  finishReason: string | null;
  finishCalls: number;
}

let seq = 0;

/** Adds a request and records its events; `spec` fields default to a unique, uncached 100-token prompt. */
export function addRecorded(
  engine: MockEngine, clock: VirtualClock, spec: Partial<EngineRequestSpec> & { promptTokens: number; outputTokens: number },
  onEvent?: (rec: Recorded, kind: 'first' | 'token' | 'finish') => void,
): Recorded {
  const id = spec.id ?? `req-${++seq}`;
  const rec: Recorded = {
    id, addedMs: clock.now(), firstTokenMs: NaN, cachedTokens: -1, firstTokenCalls: 0, tokenMs: [], tokenIndexes: [],
    finishMs: NaN, finishReason: null, finishCalls: 0,
  };
  engine.add({
    id,
    promptTokens: spec.promptTokens,
    outputTokens: spec.outputTokens,
    blockHashes: spec.blockHashes ?? blockHashes(spec.promptTokens, { uniqueSeed: ++seq }),
    finishReason: spec.finishReason ?? 'stop',
    adapter: spec.adapter ?? null,
    ...(spec.outputBlockHashes === undefined ? {} : { outputBlockHashes: spec.outputBlockHashes }),
    ...(spec.tokenDelayMs === undefined ? {} : { tokenDelayMs: spec.tokenDelayMs }),
  }, {
    onFirstToken(info) {
      assert.equal(rec.tokenIndexes.length, 0, `${id}: onFirstToken after a token`);
      rec.firstTokenCalls++;
      rec.firstTokenMs = clock.now();
      rec.cachedTokens = info.cachedTokens;
      onEvent?.(rec, 'first');
    },
    onToken(index) {
      assert.equal(rec.finishCalls, 0, `${id}: token after finish`);
      rec.tokenIndexes.push(index);
      rec.tokenMs.push(clock.now());
      onEvent?.(rec, 'token');
    },
    onFinish(reason) {
      rec.finishCalls++;
      rec.finishMs = clock.now();
      rec.finishReason = reason;
      onEvent?.(rec, 'finish');
    },
  });
  return rec;
}

export function ttftMs(r: Recorded): number {
  return r.firstTokenMs - r.addedMs;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
