// A finished reply's block hashes, live: a real gateway in front of real mock replicas, with a policy that
// records what `finished` hands it. The hashes the gateway computes from the reply it relayed are exactly the
// next turn's prompt hashes at the blocks after the previous prompt's, and the replica that served the turn
// reports cached_tokens covering every one of them on the next turn (prompt and reply). Streams and JSON, chat
// and completions, stop and length.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import type { Decision, RouteRequest, RoutingFeedback, RoutingPolicy } from '../../../src/router/types.ts';
import { planOutput } from '../../mock-replica/output-text.ts';

/** Everything to the first eligible replica; keeps each request's prompt hashes and reply hashes. */
class RecordingPolicy implements RoutingPolicy, RoutingFeedback {
  readonly name = 'recording';
  prompts: Float64Array[] = [];
  replies: Array<Float64Array | null> = [];
  pick(_req: RouteRequest, eligible: readonly number[], _fleet: unknown, out: Decision): number {
    out.slot = eligible[0]!;
    return out.slot;
  }
  describe(): string {
    return '';
  }
  dispatched(_slot: number, req: RouteRequest): void {
    this.prompts.push(req.blockHashes.slice());
  }
  finished(_slot: number, _req: RouteRequest, _d: Decision, _cached: number | null, replyHashes: Float64Array | null): void {
    this.replies.push(replyHashes);
  }
}

const policy = new RecordingPolicy();
let stack: TestStack;
before(async () => {
  stack = await startStack({ routingPolicy: () => policy });
});
beforeEach(() => {
  policy.prompts = [];
  policy.replies = [];
});
after(async () => {
  await stack.close();
});

/** A request seed whose natural reply on the mock (replica seed 0) stops after 40 to 120 tokens. */
function longStopSeed(): number {
  for (let seed = 1; ; seed++) {
    const plan = planOutput(500, false, seed, 0, true);
    if (plan.finishReason === 'stop' && plan.outputTokens >= 40 && plan.outputTokens <= 120) return seed;
  }
}

async function call(path: string, body: Record<string, unknown>): Promise<{ text: string; cached: number; finish: string | null }> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', ...body }),
  });
  assert.equal(res.status, 200);
  const raw = await res.text();
  const chat = path.includes('chat');
  if (body.stream !== true) {
    const j = JSON.parse(raw) as { choices: Array<{ message?: { content: string }; text?: string; finish_reason: string }>; usage: { prompt_tokens_details: { cached_tokens: number } | null } };
    return { text: (chat ? j.choices[0]!.message!.content : j.choices[0]!.text)!, cached: j.usage.prompt_tokens_details?.cached_tokens ?? 0, finish: j.choices[0]!.finish_reason };
  }
  let text = '';
  let cached = 0;
  let finish: string | null = null;
  for (const ev of raw.split('\n\n')) {
    if (!ev.startsWith('data: {')) continue;
    const j = JSON.parse(ev.slice(6)) as { choices: Array<{ delta?: { content?: string }; text?: string; finish_reason: string | null }>; usage?: { prompt_tokens_details?: { cached_tokens: number } } };
    for (const c of j.choices) {
      text += (chat ? c.delta?.content : c.text) ?? '';
      finish = c.finish_reason ?? finish;
    }
    cached = j.usage?.prompt_tokens_details?.cached_tokens ?? cached;
  }
  return { text, cached, finish };
}

/** Waits for the n-th `finished` (the hashes come right after the response ended). */
async function finishedCount(n: number): Promise<void> {
  for (let i = 0; i < 200 && policy.replies.length < n; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(policy.replies.length, n);
}

/** Turn 1's reply hashes = turn 2's prompt hashes right after turn 1's prompt blocks; the replica hit them all. */
function checkTurns(turn2Cached: number): void {
  const [p1, p2] = policy.prompts;
  const reply = policy.replies[0]!;
  assert.ok(reply !== null && reply.length >= 2, `the reply fills blocks (${reply?.length})`);
  const k = p1!.length;
  assert.deepEqual(Array.from(p2!.subarray(k, k + reply.length)), Array.from(reply));
  assert.equal(turn2Cached, (k + reply.length) * 16, 'the replica holds exactly the prompt and reply blocks the gateway hashed');
}

const SYSTEM = { role: 'system', content: 'You are a patient assistant. Explain things step by step.' };
/** Each test's own first question, so no test finds another's blocks on the replica. */
const q1 = (topic: string): { role: string; content: string } => ({ role: 'user', content: `How does a prefix cache decide which blocks to keep, for ${topic}?` });
const Q2 = { role: 'user', content: 'And what happens to the blocks of my previous answer?' };

for (const stream of [true, false]) {
  test(`chat, ${stream ? 'streamed' : 'JSON'}, natural stop: the next turn's prompt carries the reply's hashes and hits them`, async () => {
    const seed = longStopSeed();
    const extra = stream ? { stream: true, stream_options: { include_usage: true } } : {};
    const Q1 = q1(stream ? 'streams' : 'JSON answers');
    const t1 = await call('/v1/chat/completions', { messages: [SYSTEM, Q1], seed, max_tokens: 500, ...extra });
    assert.equal(t1.finish, 'stop');
    await finishedCount(1);
    const t2 = await call('/v1/chat/completions', { messages: [SYSTEM, Q1, { role: 'assistant', content: t1.text }, Q2], max_tokens: 1, ...extra });
    await finishedCount(2);
    checkTurns(t2.cached);
  });
}

test('chat cut by max_tokens (length): the reply\'s last token is not counted as cached', async () => {
  const q = { role: 'user', content: 'Write a long paragraph about GPU memory.' };
  const t1 = await call('/v1/chat/completions', { messages: [q], max_tokens: 50, ignore_eos: true, stream: true });
  assert.equal(t1.finish, 'length');
  await finishedCount(1);
  const t2 = await call('/v1/chat/completions', { messages: [q, { role: 'assistant', content: t1.text }, Q2], max_tokens: 1 });
  await finishedCount(2);
  checkTurns(t2.cached);
});

test('completions: the prompt extended by the reply text hits the reply\'s blocks', async () => {
  const prompt = 'The engine keeps every block of sixteen tokens it has computed, so';
  const t1 = await call('/v1/completions', { prompt, max_tokens: 60, ignore_eos: true });
  assert.equal(t1.finish, 'length');
  await finishedCount(1);
  const t2 = await call('/v1/completions', { prompt: `${prompt}${t1.text} and then`, max_tokens: 1 });
  await finishedCount(2);
  checkTurns(t2.cached);
});
