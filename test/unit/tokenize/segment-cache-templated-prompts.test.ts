// Per-user system prompts built from one template with a fixed-width field in the middle (an account number, a
// user id, a date). The fingerprint of a long segment reads the first and last 128 characters and one character
// in every `step` (≈ length/256, 18 for this 5 KB system segment) in between, so most such users share one
// fingerprint (w varying characters: odds ≈ 1 - w/step, 8 in 9 here). Each user's segment must stay cached
// however many users share the fingerprint, as a Map keyed by the full text would keep it: one re-tokenized on
// every request costs ≈ 40× a warm request (src/tokenize/README.md), and with a worker pool its length sends
// each of those requests off the inline path.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import { renderChatSegments } from '../../../src/tokenize/chat-template.ts';
import type { ChatMessage, PromptWork } from '../../../src/tokenize/types.ts';
import { fingerprint } from '../../../src/tokenize/segment-cache.ts';
import { corpus } from './corpus.ts';

void before(async () => {
  await initBlockHasher();
});

const texts = corpus.map((c) => c.text);
const body = texts.join('\n').slice(0, 6000);
const systemFor = (user: number): string =>
  `You are the support assistant for Acme.\n${body.slice(0, 3000)}\nThe customer's account id is ACC-${String(100000 + user)}.\n${body.slice(3000)}`;
const chat = (messages: ChatMessage[]): PromptWork => ({ tokenizer: 'llama3', template: 'llama3.1', blockSize: 16, kind: 'chat', messages, adapter: null });

void test('per-user system prompts from one template stay cached while the cache has room for all of them', () => {
  const users = 12;
  const systemSegments = Array.from({ length: users }, (_, u) => renderChatSegments('llama3.1', [{ role: 'system', content: systemFor(u) }])[0]!);
  assert.equal(new Set(systemSegments.map(fingerprint)).size, 1, 'fixture: the template\'s account field lies between sampled offsets');
  const encoder = new CachedPromptEncoder(16 * 1024 * 1024); // room for hundreds of such prompts
  const missed: string[] = [];
  for (let round = 0; round < 3; round++) {
    for (let u = 0; u < users; u++) {
      const work = chat([{ role: 'system', content: systemFor(u) }, { role: 'user', content: texts[(round * users + u) % texts.length]! }]);
      if (round > 0 && encoder.uncachedChars(work, [systemSegments[u]!]) > 0) missed.push(`round ${round} user ${u}`);
      encoder.measure(work);
    }
  }
  assert.deepEqual(missed, [], `${missed.length} of ${2 * users} returning requests re-tokenized their ${systemSegments[0]!.length}-char system segment`);
});
