// gateway_tokenizer_cache_bytes on a live gateway: it counts what the inline encoder (short prompts) and the
// tokenizer worker (long prompts) cache, and however many distinct prompts arrive it stays within
// tokenizer.cache_bytes: bounded growth an operator (and the soak) can tell from a leak.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALPHA_KEY, startStack } from '../../helpers/start-gateway.ts';
import { parseExposition, valueOf } from '../../unit/metrics/prom-text.ts';

const CACHE_BYTES = 256 * 1024;

async function cacheBytes(url: string): Promise<number> {
  const v = valueOf(parseExposition(await (await fetch(`${url}/metrics`)).text()), 'gateway_tokenizer_cache_bytes');
  assert.ok(v !== undefined, 'gateway_tokenizer_cache_bytes is exposed');
  return v;
}

async function chat(url: string, content: string): Promise<void> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content }], max_tokens: 1 }),
  });
  assert.equal(res.status, 200, await res.text());
}

test('the tokenizer cache gauge counts inline and worker caches and stays within tokenizer.cache_bytes', async (t) => {
  const stack = await startStack({ config: { tokenizer: { threads: 1, inline_max_chars: 200, cache_bytes: CACHE_BYTES } } });
  t.after(() => stack.close());
  const idle = await cacheBytes(stack.url);

  await chat(stack.url, 'A short question, tokenized inline.');
  const afterInline = await cacheBytes(stack.url);
  assert.ok(afterInline > idle, `inline encoder's entry counted (${idle} -> ${afterInline})`);

  await chat(stack.url, `A long prompt for the worker. ${'Words that the worker tokenizes and caches. '.repeat(40)}`);
  const afterWorker = await cacheBytes(stack.url);
  assert.ok(afterWorker > afterInline, `worker's entry counted (${afterInline} -> ${afterWorker})`);

  // Far more distinct text than the cache holds: the gauge climbs to the bound and stops there.
  const seen: number[] = [];
  for (let i = 0; i < 60; i++) {
    await chat(stack.url, `Distinct prompt ${i}: ${`token${i} filler text number ${i} `.repeat(120)}`);
    if (i % 10 === 9) seen.push(await cacheBytes(stack.url));
  }
  t.diagnostic(`gauge after each 10 prompts: ${seen.join(', ')} (bound ${CACHE_BYTES})`);
  for (const v of seen) assert.ok(v <= CACHE_BYTES, `${v} bytes cached, bound ${CACHE_BYTES}`);
  assert.ok(seen[seen.length - 1]! > CACHE_BYTES / 4, 'the caches filled a good part of their bound');
});
