// gateway_threads_memory_bytes on a live gateway: summed over every thread, so the tokenizer worker's heap and
// its tokenizer's WASM memory show up beside the main thread's, which prom-client's default gauges alone see.
// This is the split the soak reads to tell V8's heap sizing from native growth.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALPHA_KEY, startStack } from '../../helpers/start-gateway.ts';
import { parseExposition, valueOf } from '../../unit/metrics/prom-text.ts';

const MB = 2 ** 20;

test('thread memory gauges sum the worker threads: committed heap above the main heap, WASM memory in external', async (t) => {
  const stack = await startStack({ config: { tokenizer: { threads: 1, inline_max_chars: 200 } } });
  t.after(() => stack.close());
  // A long prompt goes to the worker, which then holds its own Llama 3 tokenizer (tiktoken's WASM memory).
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: `Tokenized in the worker. ${'Some words. '.repeat(60)}` }], max_tokens: 1 }),
  });
  assert.equal(res.status, 200, await res.text());

  const page = parseExposition(await (await fetch(`${stack.url}/metrics`)).text());
  const v = (name: string, labels: Record<string, string> = {}): number => {
    const x = valueOf(page, name, labels);
    assert.ok(x !== undefined && Number.isFinite(x), `${name} ${JSON.stringify(labels)} exposed`);
    return x;
  };
  const committed = v('gateway_threads_memory_bytes', { kind: 'heap_committed' });
  const used = v('gateway_threads_heap_used_bytes');
  const external = v('gateway_threads_memory_bytes', { kind: 'external' });
  const malloced = v('gateway_threads_memory_bytes', { kind: 'malloced' });
  const mainTotal = v('gateway_nodejs_heap_size_total_bytes');
  const mainExternal = v('gateway_nodejs_external_memory_bytes');
  assert.ok(committed >= used, `committed ${committed} >= used ${used}`);
  assert.ok(committed > mainTotal + 4 * MB, `all threads' committed heap ${(committed / MB).toFixed(1)} MB > the main thread's ${(mainTotal / MB).toFixed(1)} MB plus the worker and poller`);
  assert.ok(external > mainExternal + 16 * MB, `all threads' external ${(external / MB).toFixed(1)} MB holds the worker's tokenizer WASM beside the main thread's ${(mainExternal / MB).toFixed(1)} MB`);
  assert.ok(malloced > 0);
});
