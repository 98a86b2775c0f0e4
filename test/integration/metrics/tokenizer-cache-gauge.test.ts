// gateway_tokenizer_cache_bytes on a live gateway: it counts what the inline encoder (short prompts) and the
// tokenizer worker (long prompts) cache, and however many distinct prompts arrive it stays within
// tokenizer.cache_bytes: bounded growth an operator (and the soak) can tell from a leak.
// A worker's part of the gauge is its latest snapshot: a scrape waits 50 ms for fresh ones, and a busy worker
// (or a loaded machine) misses that, but every worker pushes one each 5 s. So growth is awaited over scrapes
// with a deadline past two pushes, never read from a single scrape.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALPHA_KEY, startStack, waitFor } from '../../helpers/start-gateway.ts';
import { parseExposition, sumOf, valueOf } from '../../unit/metrics/prom-text.ts';

const CACHE_BYTES = 256 * 1024;
/** Two worker pushes (5 s each) and then some: only a gauge that never moves misses it. */
const DEADLINE_MS = 15_000;

async function cacheBytes(url: string): Promise<number> {
  const v = valueOf(parseExposition(await (await fetch(`${url}/metrics`)).text()), 'gateway_tokenizer_cache_bytes');
  assert.ok(v !== undefined, 'gateway_tokenizer_cache_bytes is exposed');
  return v;
}

/** Prompts tokenized so far, by where: the acceptor's inline encoder or the worker. */
async function tokenized(url: string): Promise<{ inline: number; pool: number }> {
  const samples = parseExposition(await (await fetch(`${url}/metrics`)).text());
  const count = (kind: string): number => sumOf(samples, 'gateway_tokenize_duration_seconds_count', { kind });
  return { inline: count('inline'), pool: count('pool') };
}

/** Scrapes until the gauge exceeds `than`; returns that reading, or fails after DEADLINE_MS. */
async function grownPast(url: string, than: number, what: string): Promise<number> {
  let last = than;
  try {
    return await waitFor(async () => {
      last = await cacheBytes(url);
      return last > than ? last : null;
    }, DEADLINE_MS, 50);
  } catch {
    assert.fail(`${what}: the gauge stayed at ${last}, not above ${than}`);
  }
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
  // The rendered chat (the template's system header and turn markers included) of the short prompt is about
  // 250 characters: under 1,000 it stays on the acceptor; the long ones (1,800 and more) go to the worker.
  const stack = await startStack({ config: { tokenizer: { threads: 1, inline_max_chars: 1000, cache_bytes: CACHE_BYTES } } });
  t.after(() => stack.close());
  const idle = await cacheBytes(stack.url);

  await chat(stack.url, 'A short question, tokenized inline.');
  assert.deepEqual(await tokenized(stack.url), { inline: 1, pool: 0 }, 'the short prompt was tokenized inline');
  const afterInline = await grownPast(stack.url, idle, "inline encoder's entry counted");

  await chat(stack.url, `A long prompt for the worker. ${'Words that the worker tokenizes and caches. '.repeat(40)}`);
  // The worker's count arrives with its snapshot, as its cache size does: awaited the same way.
  await waitFor(async () => (await tokenized(stack.url)).pool === 1, DEADLINE_MS, 50);
  assert.equal((await tokenized(stack.url)).inline, 1, 'the long prompt went to the worker');
  await grownPast(stack.url, afterInline, "worker's entry counted");

  // Far more distinct text than the cache holds: the gauge climbs to the bound and stops there.
  const seen: number[] = [];
  for (let i = 0; i < 60; i++) {
    await chat(stack.url, `Distinct prompt ${i}: ${`token${i} filler text number ${i} `.repeat(120)}`);
    if (i % 10 === 9) seen.push(await cacheBytes(stack.url));
  }
  t.diagnostic(`gauge after each 10 prompts: ${seen.join(', ')} (bound ${CACHE_BYTES})`);
  for (const v of seen) assert.ok(v <= CACHE_BYTES, `${v} bytes cached, bound ${CACHE_BYTES}`);
  const filled = await grownPast(stack.url, CACHE_BYTES / 4, 'the caches filled a good part of their bound');
  assert.ok(filled <= CACHE_BYTES, `${filled} bytes cached, bound ${CACHE_BYTES}`);
});
