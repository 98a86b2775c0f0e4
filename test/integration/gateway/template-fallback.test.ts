// A chat template the gateway cannot render as vLLM does is not a client error: the request is served, routed
// on a token estimate, and counted in gateway_template_fallback_total{pool,reason}; the template's own
// raise_exception stays a 400, as in vLLM. At startup, and at a reload for the pools whose template it
// changes, the gateway renders a representative set of conversations and warns, by name, of each the
// template cannot render. Real gateway over loopback HTTP, in-process mock replicas.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { REPRESENTATIVE_CONVERSATIONS } from '../../../src/tokenize/template-check.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { parseExposition, valueOf } from '../../unit/metrics/prom-text.ts';

const template = (name: string): string => fileURLToPath(new URL(`../../fixtures/tokenizer/templates/${name}`, import.meta.url));

let stack: TestStack;
const lines: string[] = [];
before(async () => {
  const replica = { profile: 'tiny' } as const;
  stack = await startStack({
    pools: [
      { id: 'odd', model: 'odd-template', tokenizer: 'llama3', chatTemplate: template('unsupported.jinja'), replicas: [replica] },
      { id: 'strict', model: 'strict-template', tokenizer: 'llama3', chatTemplate: template('raises.jinja'), replicas: [replica] },
    ],
    config: { expose_route_header: true },
    logger: createLogger('warn', { destination: { write: (line: string) => void lines.push(line) } }),
  });
});
after(async () => {
  await stack?.close();
});

async function chat(model: string, messages: Array<{ role: string; content: string }>): Promise<{ status: number; code: string | null; route: string }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 4, messages }),
  });
  const json = await res.json() as { error?: { code?: string } };
  return { status: res.status, code: json.error?.code ?? null, route: res.headers.get('x-gateway-route') ?? '' };
}

async function fallbacks(pool: string, reason: string): Promise<number> {
  const samples = parseExposition(await (await fetch(`${stack.url}/metrics`)).text());
  return valueOf(samples, 'gateway_template_fallback_total', { pool, reason }) ?? 0;
}

void test('a template feature the renderer lacks: served (200) on an estimate, counted per pool and reason', async () => {
  const question = 'How many words are in this question of ten words, roughly?';
  const a = await chat('odd-template', [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: question }]);
  assert.equal(a.status, 200, `code ${a.code}`);
  const promptTokens = Number(/prompt_tokens=(\d+)/.exec(a.route)?.[1]);
  // The estimate: the messages' text plus 4 tokens of markup per message and 4 for the generation prompt.
  assert.ok(promptTokens >= 20 && promptTokens <= 40, `estimated prompt_tokens ${promptTokens}`);
  assert.equal(await fallbacks('odd', 'unsupported'), 1);
  assert.equal((await chat('odd-template', [{ role: 'user', content: 'again' }])).status, 200);
  assert.equal(await fallbacks('odd', 'unsupported'), 2);
});

void test("the template's own raise_exception is still a 400 invalid_value, and no fallback is counted", async () => {
  const three = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }];
  const a = await chat('strict-template', three);
  assert.equal(a.status, 400);
  assert.equal(a.code, 'invalid_value');
  assert.equal(await fallbacks('strict', 'unsupported'), 0);
  assert.equal((await chat('strict-template', three.slice(0, 2))).status, 200);
});

/** The template warnings logged since `from`: pool → conversation → reason. */
function templateWarnings(from = 0): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const l of lines.slice(from)) {
    const o = JSON.parse(l) as { component?: string; pool?: string; conversation?: string; reason?: string };
    if (o.component !== 'tokenize' || o.conversation === undefined) continue;
    (out[o.pool!] ??= {})[o.conversation] = o.reason!;
  }
  return out;
}

void test('at startup each pool\'s template is tried on the representative conversations; each it cannot render is named', () => {
  const w = templateWarnings();
  // raises.jinja refuses more than two messages: the three-message conversations, as the template's own verdict.
  assert.deepEqual(w.strict, { 'multi-turn': 'raises', 'tool round trip': 'raises', reasoning: 'raises' });
  // unsupported.jinja runs every user turn through a filter the renderer lacks: every conversation.
  assert.equal(Object.keys(w.odd ?? {}).length, REPRESENTATIVE_CONVERSATIONS.length);
  assert.ok(Object.values(w.odd!).every((r) => r === 'unsupported'), JSON.stringify(w.odd));
});

void test('a reload checks the templates it changes, and the next request is rendered with the new one', async () => {
  const three = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }];
  const from = lines.length;
  const raw = stack.cfg as unknown as { pools: Array<Record<string, unknown>> };
  const swapped = { ...raw, pools: raw.pools.map((p) => (p.id === 'strict' ? { ...p, chat_template: template('unsupported.jinja') } : p)) };
  await stack.gateway.reload(parseConfig(swapped));
  const w = templateWarnings(from);
  assert.deepEqual(Object.keys(w), ['strict'], 'only the pool whose template changed is checked again');
  assert.equal(Object.keys(w.strict!).length, REPRESENTATIVE_CONVERSATIONS.length);
  // The new template has no raise_exception: three messages are served, on an estimate.
  assert.equal((await chat('strict-template', three)).status, 200);
  const back = lines.length;
  await stack.gateway.reload(stack.cfg);
  assert.deepEqual(templateWarnings(back), { strict: { 'multi-turn': 'raises', 'tool round trip': 'raises', reasoning: 'raises' } });
  assert.equal((await chat('strict-template', three)).status, 400);
});
