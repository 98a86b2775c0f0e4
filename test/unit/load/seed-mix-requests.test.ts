// The design's mix as chat bodies: planned sizes, the tenant's shared system prompt, chats that carry their
// earlier turns, and text whose real Llama 3 token count matches the plan.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SeedMixRequests, wordsText } from '../../../native-bench/load/seed-mix-requests.ts';
import type { MixRequest } from '../../../native-bench/load/seed-mix-requests.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';

interface Body { model: string; max_tokens: number; stream: boolean; ignore_eos: boolean; messages: Array<{ role: string; content: string }> }

function draw(rps: number, seconds: number, seed = 1): MixRequest[] {
  const g = new SeedMixRequests({ model: 'm', rps, durationMs: seconds * 1000, seed, maxModelLen: 131_072 });
  const out: MixRequest[] = [];
  for (let r = g.next(); r; r = g.next()) out.push(r);
  return out;
}

const reqs = draw(20, 600);
const bodies = reqs.map((r) => JSON.parse(r.body) as Body);

test('the planned mix: about the asked rate, ~1,800 prompt and ~300 output tokens, tails to 32k and 4k', () => {
  assert.ok(Math.abs(reqs.length / 600 - 20) < 2, `rate ${reqs.length / 600}`);
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  const p = mean(reqs.map((r) => r.promptTokens));
  const o = mean(reqs.map((r) => r.outputTokens));
  assert.ok(p > 1500 && p < 2100, `mean prompt ${p}`);
  assert.ok(o > 250 && o < 350, `mean output ${o}`);
  assert.ok(Math.max(...reqs.map((r) => r.promptTokens)) > 8000, 'heavy prompt tail');
  assert.ok(Math.max(...reqs.map((r) => r.promptTokens)) <= 32_768);
  assert.ok(Math.max(...reqs.map((r) => r.outputTokens)) <= 4096);
  for (let i = 0; i < reqs.length; i++) {
    const b = bodies[i]!;
    assert.equal(b.max_tokens, reqs[i]!.outputTokens);
    assert.equal(b.stream, true);
    assert.equal(b.ignore_eos, true);
  }
});

test('every request of a tenant opens with the same system prompt; tenants differ', () => {
  const byTenant = new Map<number, Set<string>>();
  reqs.forEach((r, i) => {
    const sys = bodies[i]!.messages[0]!;
    assert.equal(sys.role, 'system');
    const set = byTenant.get(r.tenant) ?? new Set<string>();
    set.add(sys.content);
    byTenant.set(r.tenant, set);
  });
  assert.ok(byTenant.size > 5);
  for (const set of byTenant.values()) assert.equal(set.size, 1);
  const distinct = new Set([...byTenant.values()].map((s) => [...s][0]));
  assert.equal(distinct.size, byTenant.size);
});

test('a chat turn carries every earlier turn: its messages extend the previous turn of the same chat', () => {
  // Follow-up turns of chats that started inside the run are remembered: the previous request's messages
  // (system, earlier turns, user) are a prefix of the next turn's.
  let checked = 0;
  const lastBy = new Map<string, Body>();
  reqs.forEach((r, i) => {
    const b = bodies[i]!;
    if (r.carriedTurns > 0) assert.equal(b.messages.length, 2 + 2 * r.carriedTurns);
    const key = `${r.tenant}:${b.messages[1]?.content.slice(0, 40)}`;
    const prev = lastBy.get(key);
    if (prev && r.carriedTurns > 0 && b.messages.length > prev.messages.length) {
      assert.deepEqual(b.messages.slice(0, prev.messages.length), prev.messages);
      assert.equal(b.messages[prev.messages.length]!.role, 'assistant');
      checked++;
    }
    lastBy.set(key, b);
  });
  assert.ok(checked > 10, `follow-ups checked: ${checked}`);
  assert.ok(reqs.filter((r) => r.carriedTurns > 0).length > reqs.length * 0.2, 'multi-turn share');
});

test('the text has the planned size in real Llama 3 tokens (within a few percent plus the template)', () => {
  const tok = getTokenizer('llama3');
  assert.equal(tok.encodeOrdinary(` ${wordsText(9, 1000)}`).length, 1000);
  for (const [i, r] of reqs.slice(0, 40).entries()) {
    const text = bodies[i]!.messages.map((m) => m.content).join(' ');
    const n = tok.encodeOrdinary(text).length;
    assert.ok(Math.abs(n - r.promptTokens) <= 0.03 * r.promptTokens + 20, `planned ${r.promptTokens}, got ${n}`);
  }
});
