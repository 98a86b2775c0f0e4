// A finished reply's block hashes (PromptTokenizer.replyHashes) are the hashes the gateway computes for the
// next request's prompt at the same block indices: a real two-turn chat (Llama 3.1, trimmed content; ChatML,
// content as is), a completions prompt extended by its reply, with an adapter, inline and on a worker.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { poolSchema, type PoolConfig } from '../../../src/config/schema.ts';
import { initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { PromptTokenizer, type TokenizeRequest } from '../../../src/tokenize/prompt-tokenizer.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';

// Replies over 200 chars go to the worker; threads 0 is always inline.
let pooled: PromptTokenizer;
let inline: PromptTokenizer;
before(async () => {
  await initBlockHasher();
  pooled = await PromptTokenizer.create({ threads: 1, inline_max_chars: 200, cache_bytes: 4 << 20 }, ['llama3', 'cl100k_base']);
  inline = await PromptTokenizer.create({ threads: 0, inline_max_chars: 200, cache_bytes: 4 << 20 }, ['llama3', 'cl100k_base']);
});
after(async () => {
  await pooled.close();
});

const pool = (over: Partial<PoolConfig> = {}): PoolConfig =>
  ({ ...poolSchema.parse({ id: 'p8b', model: 'llama-3.1-8b-instruct', replicas: [{ id: '8b-1', url: 'http://127.0.0.1:9' }] }), ...over });

const TURN1: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant. Answer in a few sentences.' },
  { role: 'user', content: 'Why does a prefix cache make the second turn of a chat faster?' },
];
const SHORT_REPLY = '  Because the KV of the earlier turns is already on the GPU, so only the new tokens need a prefill.\n';
const LONG_REPLY = `${'The engine keys each full block of sixteen tokens by a hash chained from the block before it. '.repeat(6)}So the next turn finds them all.`;

/** Reply blocks = next prompt's blocks from the first one after the prompt's full blocks. */
async function checkChat(tk: PromptTokenizer, p: PoolConfig, adapter: string | null, reply: string, finishReason: 'stop' | 'length'): Promise<number> {
  const first: TokenizeRequest = { pool: p, kind: 'chat', messages: TURN1, adapter };
  const p1 = await tk.tokenize(first);
  const next = await tk.tokenize({ ...first, messages: [...TURN1, { role: 'assistant', content: reply }, { role: 'user', content: 'And the third turn?' }] });
  const hashes = await tk.replyHashes({ pool: p, kind: 'chat', adapter, prompt: p1, replyText: reply, finishReason });
  const k = p1.blockHashes.length;
  assert.deepEqual(Array.from(hashes), Array.from(next.blockHashes.subarray(k, k + hashes.length)));
  // How many: the full blocks of prompt + reply ids (the template trims Llama 3.1 content), less the last id
  // of a 'length' finish, whose KV the replica never computed.
  const text = p.chat_template === 'llama3.1' ? reply.trim() : reply;
  const ids = getTokenizer(p.tokenizer as string).encodeWithSpecials(text).length - (finishReason === 'length' ? 1 : 0);
  assert.equal(hashes.length, Math.floor((p1.promptTokens + ids) / p.block_size) - k);
  return hashes.length;
}

void test('Llama 3.1 chat: the reply\'s blocks are the next turn\'s, inline and on a worker, stop and length', async () => {
  for (const tk of [inline, pooled]) {
    for (const reply of [SHORT_REPLY, LONG_REPLY]) {
      for (const finish of ['stop', 'length'] as const) {
        const n = await checkChat(tk, pool(), null, reply, finish);
        assert.ok(n >= 1, `${reply.length}-char reply fills a block`);
      }
    }
  }
  // The 100-char reply was hashed inline, the 600-char one on the worker (4 calls each per tokenizer).
  assert.deepEqual([pooled.stats().replyInline, pooled.stats().replyPooled], [2, 2]);
  assert.deepEqual([inline.stats().replyInline, inline.stats().replyPooled], [4, 0]);
});

void test('with an adapter the reply\'s hashes carry its key; a 32-token block size and ChatML (untrimmed) agree too', async () => {
  await checkChat(inline, pool(), 'acme-sql', LONG_REPLY, 'stop');
  await checkChat(pooled, pool(), 'acme-sql', LONG_REPLY, 'stop');
  const withAdapter = await inline.replyHashes({ pool: pool(), kind: 'chat', adapter: 'acme-sql', prompt: await inline.tokenize({ pool: pool(), kind: 'chat', messages: TURN1, adapter: 'acme-sql' }), replyText: LONG_REPLY, finishReason: 'stop' });
  const base = await inline.replyHashes({ pool: pool(), kind: 'chat', adapter: null, prompt: await inline.tokenize({ pool: pool(), kind: 'chat', messages: TURN1, adapter: null }), replyText: LONG_REPLY, finishReason: 'stop' });
  assert.notEqual(withAdapter[0], base[0]);
  const chatml = pool({ tokenizer: 'cl100k_base', chat_template: 'chatml', block_size: 32 });
  await checkChat(inline, chatml, null, LONG_REPLY, 'stop');
  await checkChat(pooled, chatml, null, LONG_REPLY, 'length');
});

void test('completions: the reply\'s blocks are those of the prompt extended by the reply text', async () => {
  const prompt = 'A prefix cache stores the attention keys and values of every full block of the prompt, so';
  for (const tk of [inline, pooled]) {
    const p1 = await tk.tokenize({ pool: pool(), kind: 'completion', prompt, adapter: null });
    const reply = ` ${LONG_REPLY}`;
    const next = await tk.tokenize({ pool: pool(), kind: 'completion', prompt: `${prompt}${reply} Next`, adapter: null });
    const hashes = await tk.replyHashes({ pool: pool(), kind: 'completion', adapter: null, prompt: p1, replyText: reply, finishReason: 'length' });
    const k = p1.blockHashes.length;
    assert.ok(hashes.length >= 3);
    assert.deepEqual(Array.from(hashes), Array.from(next.blockHashes.subarray(k, k + hashes.length)));
  }
});

void test('a reply that fills no block (or an empty one) gives no hashes; a prompt with no full block chains from the root', async () => {
  const p1 = await inline.tokenize({ pool: pool(), kind: 'completion', prompt: 'Hi', adapter: null });
  assert.equal(p1.blockHashes.length, 0);
  assert.equal((await inline.replyHashes({ pool: pool(), kind: 'completion', adapter: null, prompt: p1, replyText: '', finishReason: 'stop' })).length, 0);
  assert.equal((await inline.replyHashes({ pool: pool(), kind: 'completion', adapter: null, prompt: p1, replyText: ' there', finishReason: 'length' })).length, 0);
  const reply = ' there, how are you doing today? I hope all is well with you and yours.';
  const next = await inline.tokenize({ pool: pool(), kind: 'completion', prompt: `Hi${reply}`, adapter: null });
  const hashes = await inline.replyHashes({ pool: pool(), kind: 'completion', adapter: null, prompt: p1, replyText: reply, finishReason: 'stop' });
  assert.ok(hashes.length >= 1);
  assert.deepEqual(Array.from(hashes), Array.from(next.blockHashes.subarray(0, hashes.length)));
});
