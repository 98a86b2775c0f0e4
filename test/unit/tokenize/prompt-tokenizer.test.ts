import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { BroadcastChannel } from 'node:worker_threads';
import { poolSchema, type PoolConfig } from '../../../src/config/schema.ts';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import type { ChatMessage, TokenizerName } from '../../../src/tokenize/types.ts';
import { chatPromptTokens, completionPromptTokens } from '../../../src/tokenize/prompt.ts';
import { PromptTokenizer, type TokenizeRequest } from '../../../src/tokenize/prompt-tokenizer.ts';
import { getTiktokenTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { corpus, seededRandom } from './corpus.ts';

// One pooled tokenizer (one worker) shared by every test: starting a worker costs seconds of CPU here.
// Tests read counter deltas. Prompts over 1,024 uncached chars go to the pool, the rest run inline.
let tk: PromptTokenizer;
let inlineOnly: PromptTokenizer;
const metricsChannel = `test:tokenize-metrics:${process.pid}`;
const inlineSeconds: number[] = [];
void before(async () => {
  await initBlockHasher();
  tk = await PromptTokenizer.create({ threads: 1, inline_max_chars: 1024, cache_bytes: 8 << 20 }, {
    tokenizers: ['llama3', 'cl100k_base'], metricsChannel, inlineObserver: { observe: (s) => inlineSeconds.push(s) },
  });
  inlineOnly = await PromptTokenizer.create({ threads: 0, inline_max_chars: 100, cache_bytes: 8 << 20 }, ['llama3', 'cl100k_base']);
});
void after(async () => {
  await tk.close();
});

const pool = (over: Partial<PoolConfig> = {}): PoolConfig =>
  ({ ...poolSchema.parse({ id: 'p8b', model: 'llama-3.1-8b-instruct', replicas: [{ id: '8b-1', url: 'http://127.0.0.1:9' }] }), ...over });
const texts = corpus.map((c) => c.text);
const system = `You are a careful assistant. ${texts.join('\n')}`;

function requests(): TokenizeRequest[] {
  const out: TokenizeRequest[] = [];
  for (let i = 0; i < texts.length; i++) {
    const messages: ChatMessage[] = [{ role: 'system', content: system }, { role: 'user', content: texts[i] as string }];
    out.push({ pool: pool(), kind: 'chat', messages, adapter: i % 3 === 0 ? 'acme-sql' : null });
    if (i % 3 === 1) out.push({ pool: pool({ tokenizer: 'cl100k_base', chat_template: 'chatml', block_size: 32 }), kind: 'chat', messages, adapter: null });
    out.push({ pool: pool(), kind: 'completion', prompt: `${'Complete this text, which is long enough to go to the pool. '.repeat(20)}${texts[i] as string}`, adapter: null });
  }
  out.push({ pool: pool(), kind: 'completion', prompt: Array.from({ length: 2000 }, (_, i) => 1000 + i), adapter: 'x' });
  return out;
}

function expected(req: TokenizeRequest): { promptTokens: number; blockHashes: number[]; tailTokens: number[] } {
  const tok = getTiktokenTokenizer(req.pool.tokenizer as TokenizerName);
  const tokens = req.kind === 'chat' ? chatPromptTokens(tok, req.pool.chat_template, req.messages ?? []) : completionPromptTokens(tok, req.prompt ?? '');
  const tailStart = tokens.length - (tokens.length % req.pool.block_size);
  return { promptTokens: tokens.length, blockHashes: Array.from(blockHashes(tokens, req.pool.block_size, req.adapter)), tailTokens: Array.from(tokens.subarray(tailStart)) };
}

const plain = (r: { promptTokens: number; blockHashes: Float64Array; tailTokens: Uint32Array }): { promptTokens: number; blockHashes: number[]; tailTokens: number[] } =>
  ({ promptTokens: r.promptTokens, blockHashes: Array.from(r.blockHashes), tailTokens: Array.from(r.tailTokens) });

/** Distinct words, so the piece cache misses and encoding takes a while (~1 µs a word). */
function slowPrompt(words: number, seed: number): string {
  const random = seededRandom(seed);
  let s = '';
  for (let i = 0; i < words; i++) s += ` q${Math.floor(random() * 2 ** 32).toString(36)}`;
  return s;
}


const delta = (before: ReturnType<PromptTokenizer['stats']>): ReturnType<PromptTokenizer['stats']> => {
  const now = tk.stats();
  return {
    inline: now.inline - before.inline, pooled: now.pooled - before.pooled, completed: now.completed - before.completed,
    skipped: now.skipped - before.skipped, stopped: now.stopped - before.stopped, running: now.running,
    replyInline: now.replyInline - before.replyInline, replyPooled: now.replyPooled - before.replyPooled,
  };
};

void test('pooled and inline (threads 0) results equal the uncached computation, cold then warm', async () => {
  const start = tk.stats();
  const reqs = requests();
  for (let round = 0; round < 2; round++) {
    for (const req of reqs) {
      const want = expected(req);
      assert.deepEqual(plain(await tk.tokenize(req)), want);
      assert.deepEqual(plain(await inlineOnly.tokenize(req)), want);
    }
  }
  assert.deepEqual(delta(start), { inline: 0, pooled: 2 * reqs.length, completed: 2 * reqs.length, skipped: 0, stopped: 0, running: 0, replyInline: 0, replyPooled: 0 });
  assert.equal(inlineOnly.stats().pooled, 0);
  assert.equal(tk.queueDepth(), 0);
});

void test('the cut-off sends prompts up to inline_max_chars inline and larger ones to the pool', async () => {
  const start = tk.stats();
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'x'.repeat(1024), adapter: null });
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'x'.repeat(1025), adapter: null });
  await tk.tokenize({ pool: pool(), kind: 'chat', messages: [{ role: 'user', content: 'y'.repeat(600) }, { role: 'user', content: 'z'.repeat(600) }], adapter: null });
  await tk.tokenize({ pool: pool(), kind: 'chat', messages: [{ role: 'user', content: 'y'.repeat(60) }], adapter: null });
  assert.deepEqual([delta(start).inline, delta(start).pooled], [2, 2]);
});

void test('chat text already in the inline cache does not count toward the cut-off', async () => {
  const systemPrompt = `${'You answer questions about the Acme catalogue. '.repeat(12)}`; // ~570 chars
  const question = (n: number): string => `Question ${n}: ${'which of the listed items ships to Norway? '.repeat(14)}`; // ~600 chars
  const start = tk.stats();
  // First request: preamble + system + question ≈ 1,300 uncached chars > 1,024 → pool.
  await tk.tokenize({ pool: pool(), kind: 'chat', messages: [{ role: 'system', content: systemPrompt }, { role: 'user', content: question(1) }], adapter: null });
  // A request with only the system prompt is small enough to run inline, which caches its segment there.
  await tk.tokenize({ pool: pool(), kind: 'chat', messages: [{ role: 'system', content: systemPrompt }], adapter: null });
  // Now only the new question (~650 chars) is uncached: inline, although the whole prompt is ~1,300 chars.
  await tk.tokenize({ pool: pool(), kind: 'chat', messages: [{ role: 'system', content: systemPrompt }, { role: 'user', content: question(2) }], adapter: null });
  assert.deepEqual([delta(start).inline, delta(start).pooled], [2, 1]);
});

void test('a task aborted while queued rejects with AbortError and the worker skips it', async () => {
  const start = tk.stats();
  const busy = tk.tokenize({ pool: pool(), kind: 'completion', prompt: slowPrompt(100_000, 1), adapter: null });
  const controller = new AbortController();
  const queued = tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'queued prompt '.repeat(100), adapter: null }, controller.signal);
  assert.ok(tk.queueDepth() >= 1);
  controller.abort();
  await assert.rejects(queued, { name: 'AbortError' });
  assert.ok((await busy).promptTokens > 100_000);
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'after '.repeat(200), adapter: null });
  assert.deepEqual([delta(start).skipped, delta(start).stopped, delta(start).completed], [1, 0, 2]);
  assert.equal(tk.queueDepth(), 0);
});

void test('a task aborted while running rejects at once and the worker stops encoding', async () => {
  const start = tk.stats();
  const controller = new AbortController();
  const running = tk.tokenize({ pool: pool(), kind: 'completion', prompt: slowPrompt(600_000, 2), adapter: null }, controller.signal);
  while (tk.stats().running === 0) await new Promise((resolve) => setTimeout(resolve, 2));
  const abortedAt = performance.now();
  controller.abort();
  await assert.rejects(running, { name: 'AbortError' });
  assert.ok(performance.now() - abortedAt < 50, 'the promise rejects without waiting for the worker');
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'next '.repeat(300), adapter: null });
  assert.deepEqual([delta(start).stopped, delta(start).skipped, delta(start).completed], [1, 0, 1]);
});

void test('an aborted signal rejects before any work, inline or pooled', async () => {
  const start = tk.stats();
  const signal = AbortSignal.abort();
  await assert.rejects(tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'a', adapter: null }, signal), { name: 'AbortError' });
  await assert.rejects(tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'a'.repeat(2000), adapter: null }, signal), { name: 'AbortError' });
  assert.deepEqual([delta(start).inline, delta(start).pooled], [0, 0]);
});

void test('a template refusal is a ChatTemplateError, found on the acceptor before any pool work', async () => {
  const start = tk.stats();
  const call = { function: { name: 'f', arguments: '{}' } };
  for (const content of ['short', 'long'.repeat(30)]) {
    const messages: ChatMessage[] = [{ role: 'user', content }, { role: 'assistant', content: null, tool_calls: [call, call] }];
    await assert.rejects(tk.tokenize({ pool: pool(), kind: 'chat', messages, adapter: null }), { name: 'ChatTemplateError' });
  }
  assert.deepEqual([delta(start).inline, delta(start).pooled], [2, 0]);
});

void test('the worker reports its task times on the metrics channel; inline times go to the observer', async () => {
  const before = inlineSeconds.length;
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'small', adapter: null });
  await tk.tokenize({ pool: pool(), kind: 'completion', prompt: 'large '.repeat(400), adapter: null });
  assert.equal(inlineSeconds.length, before + 1);
  assert.ok((inlineSeconds.at(-1) as number) >= 0 && (inlineSeconds.at(-1) as number) < 1);
  const channel = new BroadcastChannel(metricsChannel);
  try {
    const snapshot = await new Promise<unknown>((resolve, reject) => {
      setTimeout(() => reject(new Error('no snapshot from the worker within 5 s')), 5000).unref();
      channel.onmessage = (ev: unknown) => {
        const msg = (ev as { data: { type: string; seq: number; metrics: unknown } }).data;
        if (msg.type === 'snapshot' && msg.seq === 7) resolve(msg.metrics);
      };
      channel.postMessage({ type: 'collect', seq: 7 });
    });
    const family = (snapshot as Array<{ name: string; values: Array<{ metricName?: string; labels: Record<string, string>; value: number }> }>)
      .find((m) => m.name === 'gateway_tokenize_duration_seconds');
    const count = family?.values.find((v) => v.metricName === 'gateway_tokenize_duration_seconds_count' && v.labels.kind === 'pool');
    assert.ok(count !== undefined && count.value >= tk.stats().completed, JSON.stringify(count));
  } finally {
    channel.close();
  }
});
