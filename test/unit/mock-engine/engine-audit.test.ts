import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockPool } from '../../mock-replica/engine/block-pool.ts';
import { auditEngine } from '../../mock-replica/engine/engine-audit.ts';
import { EngineRequest } from '../../mock-replica/engine/engine-request.ts';
import { resolveConfig } from '../../mock-replica/engine/profiles.ts';

const noEvents = { onFirstToken() {}, onToken() {}, onFinish() {} };
const config = resolveConfig({ profile: 'tiny', numGpuBlocks: 8, maxNumSeqs: 1 });

function request(id: string, adapter: string | null = null): EngineRequest {
  return new EngineRequest({ id, promptTokens: 40, blockHashes: [], outputTokens: 5, finishReason: 'stop', adapter }, noEvents, 16, 1, 0);
}

void test('audit finds nothing wrong in a consistent state', () => {
  const pool = new BlockPool(8);
  const r = request('a');
  r.phase = 'running';
  for (let i = 0; i < 3; i++) r.holdBlock(pool.allocate());
  r.numComputedTokens = 40;
  assert.deepEqual(auditEngine(config, [r], [request('b')], 2, pool), []);
});

void test('audit reports leaked blocks, waiting requests holding blocks and broken limits', () => {
  const pool = new BlockPool(8);
  pool.allocate(); // held by nobody: a leak
  const w = request('w');
  w.holdBlock(pool.allocate());
  const r1 = request('r1', 'x');
  const r2 = request('r2', 'y');
  r1.phase = r2.phase = 'running';
  const problems = auditEngine(config, [r1, r2], [w], 4, pool);
  assert.ok(problems.some((p) => p.startsWith('block 1: 1 refs, 0 holders')), problems.join('; '));
  assert.ok(problems.includes('waiting w holds blocks'));
  assert.ok(problems.some((p) => p.includes('> max_num_seqs 1')));
  assert.ok(problems.some((p) => p.includes('> max_loras 1')));
  assert.ok(problems.includes('4 live requests, 3 queued or running'));
});
