// Property-based tests of the request body parser (parseBody, upstreamBody): arbitrary JSON, arbitrary bytes
// and damaged valid bodies only ever give a parsed body or a typed rejection (never a throw); a valid request
// keeps every field through parse and the upstream rewrite. Bounded runs from a fixed seed (test/helpers/fuzz.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check, fc } from '../../helpers/fuzz.ts';
import { parseBody, upstreamBody, type ParsedBody, type Route } from '../../../src/pipeline/parse-body.ts';
import type { Rejection } from '../../../src/errors/rejection.ts';

const ROUTES: Route[] = ['chat', 'completions'];
const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'];

/** Throws (failing the property) unless `r` is a ParsedBody or a rejection the pipeline answers as a 400. */
function assertTyped(r: ParsedBody | Rejection): void {
  if ('code' in r) {
    assert.ok(r.code === 'invalid_json' || r.code === 'invalid_value', r.code);
    assert.equal(typeof r.message, 'string');
    assert.ok(r.param === undefined || typeof r.param === 'string');
    if (r.code === 'invalid_value') assert.ok(typeof r.param === 'string' && r.param !== '', 'invalid_value names its param');
  } else {
    assert.equal(typeof r.model, 'string');
    assert.ok(r.model !== '');
    assert.ok(Number.isInteger(r.n) && r.n >= 1 && r.n <= 16);
    assert.ok(r.maxTokens === null || (Number.isInteger(r.maxTokens) && r.maxTokens >= 1));
  }
}

const route = fc.constantFrom(...ROUTES);

test('arbitrary JSON values: a parsed body or a typed rejection, never a throw', () => {
  check(fc.property(route, fc.jsonValue({ maxDepth: 8 }), (rt, v) => {
    assertTyped(parseBody(rt, Buffer.from(JSON.stringify(v) ?? 'null')));
  }), 400);
});

test('arbitrary objects with the fields the gateway reads, set to anything: never a throw', () => {
  const anything = fc.jsonValue({ maxDepth: 3 });
  const body = fc.record({
    model: fc.oneof(fc.constant('m'), anything), messages: fc.oneof(fc.array(fc.record({ role: fc.oneof(fc.constantFrom(...ROLES), anything), content: anything })), anything),
    prompt: anything, stream: anything, stream_options: anything, max_tokens: anything, max_completion_tokens: anything, n: anything, tools: anything,
  }, { requiredKeys: [] });
  check(fc.property(route, body, (rt, b) => assertTyped(parseBody(rt, Buffer.from(JSON.stringify(b))))), 400);
});

test('arbitrary bytes, and valid bodies truncated or with bytes overwritten: never a throw', () => {
  check(fc.property(route, fc.uint8Array({ maxLength: 300 }), (rt, bytes) => assertTyped(parseBody(rt, Buffer.from(bytes)))), 300);
  const valid = Buffer.from('{"model":"gpt-fast","messages":[{"role":"user","content":"héllo 🦙"}],"prompt":"x","max_tokens":5,"n":2,"stream":true}');
  check(fc.property(route, fc.nat(valid.length), fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), (rt, cut, edits) => {
    const b = Buffer.from(valid);
    for (const [at, byte] of edits) b[at] = byte;
    assertTyped(parseBody(rt, b.subarray(0, cut)));
  }), 300);
});

test('any string content, lone surrogates included: accepted exactly when it is well-formed Unicode', () => {
  const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: fc.integer({ min: 0xd7f0, max: 0xe010 }).map((c) => String.fromCharCode(c)), maxLength: 6 }));
  check(fc.property(text, (s) => {
    const r = parseBody('completions', Buffer.from(JSON.stringify({ model: 'm', prompt: s })));
    const ok = (s as unknown as { isWellFormed(): boolean }).isWellFormed();
    if (ok) assert.ok(!('code' in r), JSON.stringify(r));
    else assert.deepEqual('code' in r && r.code, 'invalid_json');
  }), 400);
});

test('a valid request keeps its fields through parseBody and upstreamBody; unknown fields pass through', () => {
  const text = fc.string({ unit: 'binary', maxLength: 30 });
  const request = fc.record({
    model: text.filter((s) => s !== ''),
    messages: fc.array(fc.record({ role: fc.constantFrom(...ROLES), content: text }, { noNullPrototype: true }), { minLength: 1, maxLength: 4 }),
    stream: fc.option(fc.boolean(), { nil: undefined }),
    max_tokens: fc.option(fc.integer({ min: 1, max: 1 << 30 }), { nil: undefined }),
    n: fc.option(fc.integer({ min: 1, max: 16 }), { nil: undefined }),
    temperature: fc.option(fc.double({ min: 0, max: 2, noNaN: true }), { nil: undefined }),
    extra: fc.option(fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => k !== '__proto__'), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 3 }), { nil: undefined }),
  }, { requiredKeys: ['model', 'messages'], noNullPrototype: true });
  check(fc.property(request, fc.integer({ min: 1, max: 4096 }), (req, mt) => {
    const body = JSON.stringify(req);
    const p = parseBody('chat', Buffer.from(body));
    assert.ok(!('code' in p), JSON.stringify(p));
    assert.equal(p.model, req.model);
    assert.equal(p.stream, req.stream === true);
    assert.equal(p.maxTokens, req.max_tokens ?? null);
    assert.equal(p.n, req.n ?? 1);
    assert.deepEqual(p.messages, req.messages);
    const up = JSON.parse(upstreamBody(p, 'served', mt)) as Record<string, unknown>;
    const want: Record<string, unknown> = { ...(JSON.parse(body) as Record<string, unknown>), model: 'served', max_tokens: mt };
    if (req.stream === true) want.stream_options = { include_usage: true };
    assert.deepEqual(up, want);
  }), 300);
});
