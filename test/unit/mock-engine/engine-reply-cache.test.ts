// A finished reply's blocks stay in the mock's prefix cache under the hashes of its sampled ids, so the next
// turn of the conversation (the reply trimmed, then <|eot_id|>, then the new user turn) hits them, as in
// vLLM. Prompts go through the gateway's own encoder and template; the engine runs on a VirtualClock.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import type { ChatMessage, EncodedPrompt } from '../../../src/tokenize/types.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { fullText, planOutput, type OutputPlan } from '../../mock-replica/output-text.ts';
import { outputBlockHashes, outputTokenIds } from '../../mock-replica/reply-hashes.ts';
import { addRecorded, engineOnVirtualClock } from './harness.ts';

const BS = 16;
let encoder: CachedPromptEncoder;
before(async () => {
  await initBlockHasher();
  encoder = new CachedPromptEncoder(1 << 22);
});

function chat(messages: ChatMessage[]): EncodedPrompt {
  return encoder.encode({ tokenizer: 'llama3', template: 'llama3.1', blockSize: BS, kind: 'chat', messages, adapter: null });
}

function completion(prompt: string): EncodedPrompt {
  return encoder.encode({ tokenizer: 'llama3', template: 'llama3.1', blockSize: BS, kind: 'completion', prompt, adapter: null });
}

const TURN1: ChatMessage[] = [
  { role: 'system', content: 'You are a patient assistant who answers in full sentences.' },
  { role: 'user', content: 'Tell me how a prefix cache works in an inference server.' },
];

/** The first request seed whose natural output (uncapped) stops after 60 to 200 tokens. */
function stoppingPlan(chatReply: boolean): OutputPlan {
  for (let seed = 1; ; seed++) {
    const plan = planOutput(10_000, false, seed, 0, chatReply);
    if (plan.outputTokens >= 60 && plan.outputTokens <= 200) return plan;
  }
}

/** Runs turn 1 to its end (or to `abortAfter` sampled tokens), then turn 2; returns turn 2's cached tokens. */
function twoTurns(p1: EncodedPrompt, plan: OutputPlan, nextPrompt: (visibleText: string) => EncodedPrompt, abortAfter = -1): { cached: number; finish: string | null } {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  let sampled = 0;
  const first = addRecorded(engine, clock, {
    promptTokens: p1.tokens.length, blockHashes: p1.blockHashes, outputTokens: plan.outputTokens, finishReason: plan.finishReason,
    outputBlockHashes: outputBlockHashes(p1, plan, BS, null),
  }, (rec, kind) => {
    if (kind === 'token' && ++sampled === abortAfter) engine.abort(rec.id);
  });
  clock.runUntilIdle();
  const shown = abortAfter > 0 ? abortAfter : plan.outputTokens;
  const p2 = nextPrompt(fullText(plan, shown));
  const second = addRecorded(engine, clock, { promptTokens: p2.tokens.length, blockHashes: p2.blockHashes, outputTokens: 1 });
  clock.runUntilIdle();
  assert.deepEqual(engine.audit(), []);
  return { cached: second.cachedTokens, finish: first.finishReason };
}

function nextTurn(reply: string): EncodedPrompt {
  return chat([...TURN1, { role: 'assistant', content: reply }, { role: 'user', content: 'And when is a block evicted?' }]);
}

void test('the next chat turn carries the reply as sampled, and hits every block turn 1 computed (stop)', () => {
  const p1 = chat(TURN1);
  const plan = stoppingPlan(true);
  assert.equal(plan.finishReason, 'stop');
  const n = plan.outputTokens;
  const ids = outputTokenIds(plan);
  assert.equal(ids[n - 1], getTokenizer('llama3').specialId('<|eot_id|>'), 'a natural stop samples EOS last');
  // Turn 2's prompt = turn 1's prompt, then the sampled ids (EOS = the template's <|eot_id|>), then the new turn.
  const p2 = nextTurn(fullText(plan, n));
  assert.deepEqual(p2.tokens.subarray(0, p1.tokens.length + n), Uint32Array.from([...p1.tokens, ...ids]));

  const { cached, finish } = twoTurns(p1, plan, nextTurn);
  assert.equal(finish, 'stop');
  // Computed: the prompt and every sampled token but EOS; every full block of those is hit.
  const computed = p1.tokens.length + n - 1;
  assert.equal(cached, Math.floor(computed / BS) * BS);
  assert.ok(cached > Math.floor(p1.tokens.length / BS) * BS + 2 * BS, `the reply's blocks are hit too (${cached} of ${computed})`);
});

void test('a reply cut by max_tokens (length, no EOS) is hit up to its last computed token', () => {
  const p1 = chat(TURN1);
  const plan = planOutput(45, true, 9, 0, true);
  assert.equal(plan.finishReason, 'length');
  const { cached, finish } = twoTurns(p1, plan, nextTurn);
  assert.equal(finish, 'length');
  // The last sampled token (the 45th) was never computed.
  assert.equal(cached, Math.floor((p1.tokens.length + 45 - 1) / BS) * BS);
});

void test('an aborted request leaves the blocks it computed in the cache: a retry carrying its partial reply hits them', () => {
  const p1 = chat(TURN1);
  const plan = planOutput(300, true, 4, 0, true);
  const { cached, finish } = twoTurns(p1, plan, nextTurn, 50);
  assert.equal(finish, 'abort');
  assert.equal(cached, Math.floor((p1.tokens.length + 50 - 1) / BS) * BS);
});

void test('completions: a prompt extended by the reply text hits the reply\'s blocks', () => {
  const text = 'The cache keys each block of sixteen tokens by the hash of its parent block and its own token ids, so';
  const p1 = completion(text);
  const plan = stoppingPlan(false);
  const { cached } = twoTurns(p1, plan, (reply) => completion(`${text}${reply} more`));
  assert.equal(cached, Math.floor((p1.tokens.length + plan.outputTokens - 1) / BS) * BS);
});

void test('without outputBlockHashes a reply is cached under per-request hashes that the next turn misses', () => {
  const p1 = chat(TURN1);
  const plan = stoppingPlan(true);
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  addRecorded(engine, clock, { promptTokens: p1.tokens.length, blockHashes: p1.blockHashes, outputTokens: plan.outputTokens, finishReason: 'stop' });
  clock.runUntilIdle();
  const p2 = nextTurn(fullText(plan, plan.outputTokens));
  const second = addRecorded(engine, clock, { promptTokens: p2.tokens.length, blockHashes: p2.blockHashes, outputTokens: 1 });
  clock.runUntilIdle();
  assert.equal(second.cachedTokens, Math.floor(p1.tokens.length / BS) * BS, 'only the prompt\'s full blocks');
});

void test('a request preempted by recompute re-hits the blocks its generated tokens filled', () => {
  // 20 usable blocks, 4 seqs: two requests that each grow to 192 tokens (12 blocks) cannot both fit.
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', numGpuBlocks: 21, maxNumSeqs: 4 });
  const output = (seed: number): number[] => Array.from({ length: 8 }, (_, i) => 5e12 + seed * 1000 + i); // blocks 4..11
  const hashes = (seed: number): number[] => [1, 2, 3, 4].map((i) => 4e12 + seed * 1000 + i);
  const a = addRecorded(engine, clock, { promptTokens: 64, outputTokens: 128, blockHashes: hashes(1), outputBlockHashes: output(1) }, () => assert.deepEqual(engine.audit(), []));
  const b = addRecorded(engine, clock, { promptTokens: 64, outputTokens: 128, blockHashes: hashes(2), outputBlockHashes: output(2) }, () => assert.deepEqual(engine.audit(), []));
  clock.runUntilIdle();
  assert.ok(engine.snapshot().preemptions > 0);
  assert.equal(a.finishReason, 'stop');
  assert.equal(b.finishReason, 'stop');
  // Nothing is shared between the two, so every hit is a preempted request finding its own blocks again; more
  // than the 64-token prompt means blocks of generated tokens were among them.
  const hits = engine.stats().prefix_cache_hits_total;
  assert.ok(hits > 64 && hits % BS === 0, `re-admission hit ${hits} tokens`);
});
