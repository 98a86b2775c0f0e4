// Tracing configured by the standard environment alone (OTEL_EXPORTER_OTLP_ENDPOINT, _PROTOCOL=http/protobuf,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_SCHEDULE_DELAY) on a gateway with two acceptor threads:
// each thread exports its own spans, over protobuf, with the same resource. And tracing off: with the config's
// `enabled: false` over an environment that names a collector, nothing reaches it and the replica's request
// carries no traceparent of the gateway's.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, DEFAULT_POOL, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { startCountingProxy, type CountingProxy } from '../../helpers/counting-proxy.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.ts';

const MODEL = DEFAULT_POOL.model;
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

const hex = (n: number): string => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');

async function chat(stack: TestStack, traceId: string): Promise<number> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    // A new connection per request: the kernel spreads them over the acceptor threads' sockets.
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', connection: 'close', traceparent: `00-${traceId}-${hex(16)}-01` },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Name three rivers.' }], max_tokens: 4 }),
  });
  await res.text();
  return res.status;
}

async function started(env: Record<string, string>, config: Record<string, unknown>): Promise<{ stack: TestStack; receiver: OtlpReceiver; proxy: CountingProxy }> {
  const receiver = await startOtlpReceiver();
  closers.push(() => receiver.close());
  const replica: MockReplica = await startMockReplica({ profile: 'tiny', model: MODEL });
  closers.push(() => replica.close());
  const proxy = await startCountingProxy(replica.url);
  closers.push(() => proxy.close());
  const stack = await startStack({
    pools: [{ id: '8b', model: MODEL, replicas: [] }],
    externalReplicas: { '8b': [proxy.url] },
    env: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replace('RECEIVER', receiver.url)])),
    // A loaded machine slows the mocks' first tokens: the GPU-time model must not shed these requests.
    config: { admission: { ttft_ms_by_tier: { standard: 10_000 } }, ...config },
  });
  closers.push(() => stack.close());
  return { stack, receiver, proxy };
}

test('two acceptor threads export over OTLP/protobuf as configured by the OTEL_ environment, one resource for both', async () => {
  const { stack, receiver } = await started({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'RECEIVER',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'gw-from-env',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,team=inference%20platform',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  }, { server: { host: '127.0.0.1', port: 0, threads: 2, shutdown_grace_ms: 2000 } });
  const ids = Array.from({ length: 8 }, () => hex(32));
  for (const id of ids) assert.equal(await chat(stack, id), 200);
  // Exported by each thread's batch processor within its 100 ms delay: no flush from the test.
  const roots = await waitFor(() => {
    const r = receiver.spans.filter((s) => s.name === `chat ${MODEL}`);
    return ids.every((id) => r.some((s) => s.traceId === id)) ? r : null;
  }, 10000);
  for (const r of roots) {
    assert.equal(r.encoding, 'protobuf');
    assert.equal(r.resource['service.name'], 'gw-from-env');
    assert.equal(r.resource['deployment.environment.name'], 'test');
    assert.equal(r.resource['team'], 'inference platform');
    assert.equal(r.resource['service.instance.id'], roots[0]!.resource['service.instance.id'], 'every thread exports under one service instance');
    assert.equal(typeof r.attributes['thread.id'], 'number');
    assert.equal(r.attributes['gen_ai.usage.output_tokens'], 4);
  }
  const threads = new Set(roots.map((r) => r.attributes['thread.id']));
  assert.ok(!threads.has(0), 'spans come from the acceptor threads, not the main thread');
});

test('tracing off (enabled: false over an OTEL_ endpoint): nothing is exported, no traceparent is added', async () => {
  const { stack, receiver, proxy } = await started({ OTEL_EXPORTER_OTLP_ENDPOINT: 'RECEIVER', OTEL_BSP_SCHEDULE_DELAY: '50' }, { tracing: { enabled: false } });
  assert.equal(stack.gateway.services.tracing, null);
  const id = hex(32);
  assert.equal(await chat(stack, id), 200);
  await stack.close();
  const sent = proxy.posts.filter((p) => p.path === '/v1/chat/completions');
  assert.equal(sent.length, 1);
  // The client's own traceparent is not forwarded either: the gateway adds one only when it traces.
  assert.equal(sent[0]!.headers.traceparent, undefined);
  assert.equal(receiver.posts, 0);
});
