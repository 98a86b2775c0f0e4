import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import { renderChatSegments } from '../../../src/tokenize/chat-template.ts';
import type { ChatMessage, PromptWork, TokenizerName } from '../../../src/tokenize/types.ts';
import { fingerprint } from '../../../src/tokenize/segment-cache.ts';
import { chatPromptTokens, completionPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTiktokenTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { corpus, seededRandom } from './corpus.ts';

void before(async () => {
  await initBlockHasher();
});

const texts = corpus.map((c) => c.text);
const longSystem = `You are the support assistant for Acme. ${texts.join('\n')}`;

/** The uncached truth: tiktoken alone, the pure template, hashing the whole prompt from block 0. */
function uncached(work: PromptWork): { tokens: number[]; hashes: number[] } {
  const tok = getTiktokenTokenizer(work.tokenizer as TokenizerName);
  const tokens = work.kind === 'chat' ? chatPromptTokens(tok, work.template, work.messages ?? [], null, work.tools ?? null) : completionPromptTokens(tok, work.prompt ?? '');
  return { tokens: Array.from(tokens), hashes: Array.from(blockHashes(tokens, work.blockSize, work.adapter)) };
}

function check(encoder: CachedPromptEncoder, work: PromptWork, label: string): void {
  const want = uncached(work);
  // measure() first, so it sees the cache state encode() would have seen, then encode() on the warmer cache
  const measured = encoder.measure(work);
  assert.equal(measured.promptTokens, want.tokens.length, `${label}: measured count`);
  assert.deepEqual(Array.from(measured.blockHashes), want.hashes, `${label}: measured hashes`);
  const tailStart = want.tokens.length - (want.tokens.length % work.blockSize);
  assert.deepEqual(Array.from(measured.tailTokens), want.tokens.slice(tailStart), `${label}: the ids after the last full block`);
  const got = encoder.encode(work);
  assert.deepEqual(Array.from(got.tokens), want.tokens, `${label}: tokens`);
  assert.deepEqual(Array.from(got.blockHashes), want.hashes, `${label}: hashes`);
}

const chat = (messages: ChatMessage[], adapter: string | null = null, template: PromptWork['template'] = 'llama3.1', tokenizer: PromptWork['tokenizer'] = 'llama3'): PromptWork =>
  ({ tokenizer, template, blockSize: 16, kind: 'chat', messages, adapter });

void test('growing multi-turn conversations: cached == uncached at every turn, for two adapters', () => {
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024);
  for (const adapter of [null, 'acme-sql', null]) {
    const messages: ChatMessage[] = [{ role: 'system', content: longSystem }];
    for (let turn = 0; turn < 8; turn++) {
      messages.push({ role: 'user', content: texts[turn % texts.length] as string });
      check(encoder, chat([...messages], adapter), `turn ${turn} adapter ${adapter}`);
      messages.push({ role: 'assistant', content: texts[(turn * 5 + 3) % texts.length] as string });
    }
  }
  assert.ok(encoder.cacheBytes().segments > 0 && encoder.cacheBytes().prefixes > 0);
});

void test('messages sharing prefixes, the same text under different roles, and repeated requests', () => {
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024);
  const random = seededRandom(4242);
  for (let i = 0; i < 200; i++) {
    const a = texts[Math.floor(random() * texts.length)] as string;
    const cut = Math.floor(random() * a.length);
    const shared = a.slice(0, cut);
    const messages: ChatMessage[] = random() < 0.7 ? [{ role: 'system', content: random() < 0.5 ? longSystem : shared }] : [];
    messages.push({ role: random() < 0.5 ? 'user' : 'assistant', content: shared });
    if (random() < 0.5) messages.push({ role: 'user', content: `${shared}${a.slice(cut)}` });
    if (random() < 0.3) messages.push({ role: 'user', content: [{ type: 'text', text: shared }, { type: 'text', text: a }] });
    check(encoder, chat(messages, random() < 0.3 ? 'acme-support' : null), `case ${i}`);
  }
});

void test('pools with different tokenizers and templates do not see each other\'s cached segments', () => {
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024);
  const messages: ChatMessage[] = [{ role: 'system', content: longSystem }, { role: 'user', content: 'Hello there' }];
  for (let round = 0; round < 2; round++) {
    check(encoder, chat(messages), 'llama3');
    check(encoder, chat(messages, null, 'chatml', 'cl100k_base'), 'cl100k chatml');
    check(encoder, chat(messages, null, 'chatml', 'o200k_base'), 'o200k chatml');
    check(encoder, chat(messages, null, 'chatml', 'llama3'), 'llama3 chatml');
  }
});

void test('completions (string and ids) and a cache of zero bytes give the same results', () => {
  for (const encoder of [new CachedPromptEncoder(0), new CachedPromptEncoder(1 << 20)]) {
    for (const text of texts.slice(0, 10)) {
      check(encoder, { tokenizer: 'llama3', template: 'llama3.1', blockSize: 16, kind: 'completion', prompt: text, adapter: 'x' }, 'completion');
    }
    check(encoder, { tokenizer: 'llama3', template: 'llama3.1', blockSize: 16, kind: 'completion', prompt: [1, 2, 3], adapter: null }, 'ids');
    check(encoder, chat([{ role: 'system', content: longSystem }, { role: 'user', content: 'q' }]), 'chat');
    check(encoder, chat([{ role: 'system', content: longSystem }, { role: 'user', content: 'q' }]), 'chat again');
  }
});

void test('the cache memory bound holds under many distinct prompts', () => {
  const capacity = 2 * 1024 * 1024;
  const encoder = new CachedPromptEncoder(capacity);
  const random = seededRandom(7);
  let peak = 0;
  for (let i = 0; i < 3000; i++) {
    const system = `${i} ${longSystem.slice(0, 200 + Math.floor(random() * 3000))}`;
    const messages: ChatMessage[] = [{ role: 'system', content: system }, { role: 'user', content: `question ${i}: ${texts[i % texts.length] as string}` }];
    encoder.encode(chat(messages, i % 3 === 0 ? 'a' : null));
    const used = encoder.cacheBytes();
    peak = Math.max(peak, used.segments + used.prefixes);
  }
  assert.ok(peak <= capacity, `peak ${peak} > ${capacity}`);
  assert.ok(peak > capacity / 2, `the cache was used (${peak})`);
});

void test('requests with tools: cached == uncached, and tools change the prompt', () => {
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024);
  const tools = [{ type: 'function', function: { name: 'lookup', description: 'Look a thing up', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }];
  const messages: ChatMessage[] = [{ role: 'system', content: longSystem }, { role: 'user', content: 'Find the <|eot_id|> docs' }];
  for (let round = 0; round < 2; round++) {
    check(encoder, { ...chat(messages), tools }, `tools round ${round}`);
    check(encoder, chat(messages), `no tools round ${round}`);
  }
  assert.notEqual(encoder.encode({ ...chat(messages), tools }).tokens.length, encoder.encode(chat(messages)).tokens.length);
});

void test('two system prompts whose rendered segments share a fingerprint are each tokenized as themselves', () => {
  // Vary one character of a long system prompt until two rendered system segments collide (they differ where
  // the fingerprint's sample does not look); then alternate them through one encoder.
  const base = `${longSystem.slice(0, 3000)}`;
  const variants: string[] = [];
  const seen = new Map<number, string>();
  for (let at = 1500; at < 1600 && variants.length < 2; at++) {
    const v = `${base.slice(0, at)}#${base.slice(at + 1)}`;
    const fp = fingerprint(renderChatSegments('llama3.1', [{ role: 'system', content: v }])[0]!);
    const other = seen.get(fp);
    if (other !== undefined) variants.push(other, v);
    else seen.set(fp, v);
  }
  assert.equal(variants.length, 2, 'found two colliding system prompts');
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024);
  for (let i = 0; i < 6; i++) {
    check(encoder, chat([{ role: 'system', content: variants[i % 2]! }, { role: 'user', content: texts[i % texts.length] as string }]), `alternation ${i}`);
  }
});
