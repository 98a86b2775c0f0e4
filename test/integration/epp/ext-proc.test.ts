// The endpoint picker over Envoy's ext_proc protocol, with a grpc-js client playing Envoy (Envoy's field
// numbers) in front of a real gateway and two real mock replicas: one request through both phases (the pick,
// the body echoed, the response echoed as it arrives, the ledger released at its end), prefix affinity across
// two requests, the subset hint, 429 and 503 as ImmediateResponse, cancellation, 413, a headers-only pick,
// and the health service. Cases follow llm-d's test/integration/epp (split body, subset match / partial /
// none, header-only, SSE passthrough).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_POOL, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';
import { EnvoyPlayer, isPick, type Immediate, type Pick } from './envoy-player.ts';

let stack: TestStack;
let envoy: EnvoyPlayer;
const names = new Map<string, string>();

before(async () => {
  stack = await startStack({
    // The mock replicas run in this process: on a loaded machine their decode steps, as the GPU-time model
    // measures them through the response phase, come out at 100+ ms, and an idle replica would be judged
    // over its TPOT target. Wide targets keep this file about the protocol, not about that measurement.
    pools: [{ ...DEFAULT_POOL, engine: { tpot_target_ms: 5000, ttft_target_ms: 10_000 } }],
    config: {
      epp: { host: '127.0.0.1', port: 0, pool: '8b', max_body_bytes: 200_000, fallbacks: 1, tenant_header: 'x-tenant' },
      // One connection per replica and a queue of one: two requests in flight fill the pool, a third waits in
      // the queue, a fourth is shed. (A replica still scraped busy from the test before makes a request wait a
      // scrape or two in the queue, not fail.)
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, max_attempts: 3, connections_per_replica: 1 },
      admission: { max_queued_requests: 1, tpot_target_ms: 5000, ttft_ms_by_tier: { standard: 10_000 } },
    },
  });
  envoy = new EnvoyPlayer(stack.gateway.epp!.port);
  for (const [id, r] of stack.replicas) names.set(id, r.url.replace('http://', ''));
});

after(async () => {
  envoy.close();
  await stack.close();
});

const PREAMBLE = 'You are reviewing a long design document about gateways, caches and schedulers. '.repeat(12);

function chat(question: string, stream = true): Buffer {
  return Buffer.from(JSON.stringify({
    model: 'llama-3.1-8b-instruct', stream, max_tokens: 8,
    messages: [{ role: 'system', content: PREAMBLE }, { role: 'user', content: question }],
  }));
}

function slotOf(endpoint: string): number {
  const id = [...names].find(([, n]) => n === endpoint)![0];
  return stack.gateway.registry.slotOf(id);
}

function inflight(endpoint: string): number {
  return stack.gateway.registry.ledger.get(slotOf(endpoint), LEDGER_INFLIGHT);
}

/**
 * Both replicas idle as admission sees them: their engines run nothing and two scrapes (50 ms each) have
 * reported it. With one connection per replica and no queue, a replica still scraped busy would shed the next
 * request, which the tests of the subset hint and of the shed must not inherit from the test before them.
 */
async function idle(): Promise<void> {
  await waitFor(() => [...stack.replicas.values()].every((r) => { const st = r.engine.snapshot(); return st.running + st.waiting === 0; }), 5000);
  await new Promise((r) => setTimeout(r, 150));
}

async function pick(req: Parameters<EnvoyPlayer['open']>[0]): Promise<{ d: Pick | Immediate; s: ReturnType<EnvoyPlayer['open']> }> {
  const s = envoy.open(req);
  return { d: await envoy.decision(s.replies, s.stream, req.chunks !== undefined), s };
}

test('one request through both phases: pick with a fallback, body echoed, SSE echoed chunk by chunk, ledger released at the end', async () => {
  const body = chat('What does a router do?');
  const { d, s } = await pick({ chunks: [body.subarray(0, 100), body.subarray(100)], headers: { 'x-request-id': 'epp-both-phases' } });
  assert.ok(isPick(d), `picked: ${JSON.stringify(d)}`);
  const endpoints = d.endpoints.split(',');
  assert.equal(endpoints.length, 2, 'primary then one fallback (epp.fallbacks: 1)');
  assert.notEqual(endpoints[0], endpoints[1]);
  for (const e of endpoints) assert.ok([...names.values()].includes(e), `${e} is a replica of the pool`);
  assert.equal(d.metadataEndpoints, d.endpoints, 'envoy.lb carries the same value');
  assert.equal(d.clearRouteCache, true);
  assert.equal(d.contentLength, String(body.length));
  assert.deepEqual(Buffer.concat(d.echoed), body, 'the body is echoed unchanged');
  assert.equal(d.echoEnd, true);
  // Dispatched: the replica's ledger holds the request until its response ends.
  assert.equal(inflight(endpoints[0]!), 1);
  const res = await envoy.forward(s.stream, s.replies, d, '/v1/chat/completions');
  assert.equal(res.status, 200);
  assert.ok(res.chunks >= 3, `the replica streamed several chunks (${res.chunks})`);
  assert.deepEqual(res.body, res.sent, 'the SSE response is echoed byte for byte');
  assert.match(res.body.toString(), /data: \[DONE\]/);
  const explained = s.replies.find((r) => r.response_headers !== undefined)!.response_headers!.response!.header_mutation!.set_headers!;
  assert.match(Buffer.from(explained[0]!.header.raw_value).toString(), new RegExp(`^replica=8b-\\d; policy=kv-aware;`), 'the route explanation rides on the response headers');
  await waitFor(() => inflight(endpoints[0]!) === 0, 2000);
  s.stream.end();
  const metrics = await stack.gateway.metrics.render();
  assert.match(metrics, /gateway_requests_total\{[^}]*status="200"[^}]*\} [1-9]/, 'the request counts in the gateway metrics');
});

test('prefix affinity: a second request sharing the first one\'s long prefix is picked to the same replica', async () => {
  const first = await pick({ chunks: [chat('First question about caches?', false)] });
  assert.ok(isPick(first.d));
  const firstRes = await envoy.forward(first.s.stream, first.s.replies, first.d, '/v1/chat/completions');
  assert.equal(firstRes.status, 200);
  first.s.stream.end();
  const second = await pick({ chunks: [chat('Second question about schedulers?', false)] });
  assert.ok(isPick(second.d));
  assert.equal(second.d.endpoints.split(',')[0], first.d.endpoints.split(',')[0]);
  const secondRes = await envoy.forward(second.s.stream, second.s.replies, second.d, '/v1/chat/completions');
  assert.equal(secondRes.status, 200);
  assert.match(secondRes.body.toString(), /"cached_tokens":[1-9]/, 'the replica served the shared prefix from its cache');
  second.s.stream.end();
});

test('subset hint: the pick is restricted to it; a hint naming none of the pool is a 503 ImmediateResponse', async () => {
  await idle();
  for (const only of names.values()) {
    const { d, s } = await pick({ chunks: [chat('Subset?')], subset: [only, '192.168.1.99:8000'] });
    assert.ok(isPick(d), JSON.stringify(d));
    assert.equal(d.endpoints, only, 'only the subset member, no fallback outside it');
    s.stream.cancel();
    await waitFor(() => inflight(only) === 0, 2000);
    await idle();
  }
  const { d } = await pick({ chunks: [chat('Nowhere?')], subset: ['192.168.1.99:8000'] });
  assert.ok(!isPick(d));
  assert.equal(d.status, 503);
  assert.equal(JSON.parse(d.body).error.code, 'no_healthy_replica');
});

test('a shed is a 429 ImmediateResponse with Retry-After and the OpenAI error body; cancelled streams release at once', async () => {
  await idle();
  const held = [await pick({ chunks: [chat('Hold one?')] }), await pick({ chunks: [chat('Hold two?')] })];
  const primaries = held.map(({ d }) => (d as Pick).endpoints.split(',')[0]!);
  assert.deepEqual(new Set(primaries).size, 2, 'one request on each replica');
  // The third waits in the queue, or is shed already when the pool's drain rate, learned from the earlier
  // tests' picks (held open while few requests completed, at this file's wide TPOT target), says its wait
  // passes its allowance: either way the fourth finds no room. What this test is about is the answer's shape.
  const queued = envoy.open({ chunks: [chat('Queue me?')] });
  await waitFor(() => stack.gateway.services.admission.pool('8b').queueDepth > 0 || queued.replies.length > 0, 2000);
  const { d } = await pick({ chunks: [chat('Shed me?')] });
  assert.ok(!isPick(d), 'the fourth request is refused');
  assert.equal(d.status, 429);
  assert.ok(Number(d.headers.get('retry-after')) >= 1);
  assert.equal(d.headers.get('content-type'), 'application/json');
  assert.equal(d.headers.get('x-ratelimit-limit-tokens'), undefined, 'an unmetered request has no rate-limit headers');
  assert.equal(JSON.parse(d.body).error.code, 'server_overloaded');
  // Envoy closes both streams (its client went away): everything is released at once.
  queued.stream.cancel();
  for (const h of held) h.s.stream.cancel();
  await waitFor(() => primaries.every((p) => inflight(p) === 0), 1000);
  await waitFor(() => stack.gateway.services.admission.pool('8b').queueDepth === 0, 1000);
});

test('a tenant named by epp.tenant_header has its quotas: over its concurrency, a 429 ImmediateResponse with its rate-limit headers', async () => {
  await idle();
  const tiny = { 'x-tenant': 'tiny' };
  const held = [await pick({ chunks: [chat('Mine one?')], headers: tiny }), await pick({ chunks: [chat('Mine two?')], headers: tiny })];
  for (const h of held) assert.ok(isPick(h.d));
  const { d } = await pick({ chunks: [chat('Mine three?')], headers: tiny });
  assert.ok(!isPick(d));
  assert.equal(d.status, 429);
  assert.equal(JSON.parse(d.body).error.code, 'concurrency_limit_exceeded');
  assert.equal(d.headers.get('x-ratelimit-limit-requests'), '2');
  for (const h of held) h.s.stream.cancel();
  await waitFor(() => [...names.values()].every((n) => inflight(n) === 0), 2000);
});

test('a request body over epp.max_body_bytes is a 413 ImmediateResponse', async () => {
  const big = Buffer.alloc(120_000, 'a');
  const { d } = await pick({ chunks: [big, big] });
  assert.ok(!isPick(d));
  assert.equal(d.status, 413);
  assert.equal(JSON.parse(d.body).error.code, 'request_too_large');
});

test('invalid JSON is a 400 ImmediateResponse; a headers-only request is picked on its headers', async () => {
  const bad = await pick({ chunks: [Buffer.from('no healthy upstream')] });
  assert.ok(!isPick(bad.d));
  assert.equal(bad.d.status, 400);
  const get = await pick({ method: 'GET', path: '/v1/models' });
  assert.ok(isPick(get.d));
  assert.ok([...names.values()].includes(get.d.endpoints.split(',')[0]!));
  assert.equal(get.d.contentLength, undefined);
  get.s.stream.end();
});

test('a protocol error closes the stream with a gRPC status', async () => {
  const s = envoy.client.process();
  s.on('error', () => undefined);
  const status = new Promise<{ code: number }>((resolve) => s.on('status', resolve));
  s.write({ response_body: { body: Buffer.from('x'), end_of_stream: true } });
  assert.equal((await status).code, 9, 'FAILED_PRECONDITION');
});

test('grpc.health.v1: liveness serves; readiness follows the registry; unknown services are NOT_FOUND', async () => {
  assert.equal(await envoy.client.check('liveness'), 1);
  assert.equal(await envoy.client.check(''), 1);
  assert.equal(await envoy.client.check('envoy.service.ext_proc.v3.ExternalProcessor'), 1);
  await assert.rejects(envoy.client.check('nope'), (err: { code?: number }) => err.code === 5);
});

test('the body is echoed byte for byte at any chunking, including a cut inside a UTF-8 character, in pieces of at most 62,000 bytes', async () => {
  await idle();
  const fc = (await import('fast-check')).default;
  const text = 'héllo 日本語 — 🎉 naïve façade';
  const body = chat(text);
  const multibyteAt = body.indexOf(Buffer.from('日')) + 1;
  const sizes = [...stack.replicas.keys()].map((id) => stack.gateway.registry.slotOf(id));
  const release = async (s: ReturnType<EnvoyPlayer['open']>): Promise<void> => {
    s.stream.cancel();
    await waitFor(() => sizes.every((slot) => stack.gateway.registry.ledger.get(slot, LEDGER_INFLIGHT) === 0), 2000);
  };
  const check = async (chunks: Buffer[], whole: Buffer): Promise<void> => {
    const { d, s } = await pick({ chunks });
    assert.ok(isPick(d), `picked: ${JSON.stringify(d)}`);
    assert.deepEqual(Buffer.concat(d.echoed), whole);
    assert.ok(d.echoed.every((c) => c.length <= 62_000));
    await release(s);
  };
  // A cut one byte into the three-byte 日: neither chunk is valid UTF-8 on its own.
  await check([body.subarray(0, multibyteAt), body.subarray(multibyteAt)], body);
  await check([...[...body].slice(0, 40).map((b) => Buffer.from([b])), body.subarray(40)], body);
  await fc.assert(fc.asyncProperty(
    fc.string({ unit: 'grapheme', maxLength: 60 }),
    fc.uniqueArray(fc.nat({ max: 400 }), { maxLength: 6 }),
    async (content, cuts) => {
      const b = chat(content);
      const at = [...new Set(cuts.map((c) => c % b.length))].sort((x, y) => x - y).filter((c) => c > 0);
      const pieces = [0, ...at].map((start, i) => b.subarray(start, at[i] ?? b.length));
      await check(pieces, b);
    },
  ), { numRuns: 15, seed: 43 });
  // Larger than one streamed message: split into pieces of at most 62,000 bytes (a path picked on its headers).
  const big = Buffer.alloc(150_000, 'x');
  const { d, s } = await pick({ path: '/v1/embeddings', chunks: [big] });
  assert.ok(isPick(d));
  assert.deepEqual(d.echoed.map((c) => c.length), [62_000, 62_000, 26_000]);
  assert.deepEqual(Buffer.concat(d.echoed), big);
  await release(s);
});

test('a response phase that never comes is released at the first-token deadline (upstream.first_token_timeout_ms, 5 s here)', async () => {
  await idle();
  const { d, s } = await pick({ chunks: [chat('Nobody answers?')] });
  assert.ok(isPick(d));
  const primary = d.endpoints.split(',')[0]!;
  const t0 = performance.now();
  assert.equal(inflight(primary), 1);
  await waitFor(() => inflight(primary) === 0, 9000, 50);
  const held = performance.now() - t0;
  assert.ok(held > 4000 && held < 8000, `released after ${held.toFixed(0)} ms`);
  // Envoy still holds the stream: a late response phase is echoed, nothing is released twice.
  s.stream.write({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] }, end_of_stream: true } });
  await waitFor(() => s.replies.some((r) => r.response_headers !== undefined), 2000);
  assert.equal(inflight(primary), 0);
  s.stream.end();
});
