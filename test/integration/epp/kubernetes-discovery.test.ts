// epp.kubernetes: the pool's replicas are the pods a Kubernetes API lists and watches. The API here is a small
// HTTP server in this test speaking the list and watch wire format (a PodList with its resourceVersion, then
// one JSON watch event per line on a held response); the replicas are real mock vLLM servers on two loopback
// addresses with the same port, as two pods share the InferencePool's target port. A pod added (not ready yet),
// made ready, and deleted changes what the picker picks; readiness follows.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../../src/config/load.ts';
import { startGateway, type Gateway } from '../../../src/gateway.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { TEST_INDEX_SIZES, waitFor } from '../../helpers/start-gateway.ts';
import { EnvoyPlayer, isPick } from './envoy-player.ts';
import type { Pod } from '../../../src/epp/kubernetes/pod-watch.ts';

/** The list and watch of one namespace's pods, as the API server answers them. */
class FakeApi {
  readonly server = http.createServer((req, res) => this.handle(req, res));
  readonly seen: Array<{ path: string; authorization: string | undefined }> = [];
  private watchers: http.ServerResponse[] = [];
  private version = 1;
  private readonly pods = new Map<string, Pod>();

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/api/v1/namespaces/llm/pods' || url.searchParams.get('labelSelector') !== 'app=vllm-8b') {
      res.writeHead(404).end();
      return;
    }
    if (url.searchParams.get('watch') === '1') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      this.watchers.push(res);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: String(this.version) }, items: [...this.pods.values()] }));
  }

  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', pod: Pod): void {
    pod.metadata.resourceVersion = String(++this.version);
    if (type === 'DELETED') this.pods.delete(pod.metadata.name);
    else this.pods.set(pod.metadata.name, pod);
    for (const w of this.watchers) w.write(JSON.stringify({ type, object: pod }) + '\n');
  }

  close(): Promise<void> {
    for (const w of this.watchers) w.end();
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

function pod(name: string, ip: string | undefined, ready: boolean): Pod {
  return {
    metadata: { name },
    status: { phase: ip === undefined ? 'Pending' : 'Running', ...(ip !== undefined ? { podIP: ip } : {}), conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

let api: FakeApi;
let gateway: Gateway;
let envoy: EnvoyPlayer;
let replicas: MockReplica[] = [];
let port = 0;
let dir = '';

before(async () => {
  // Two "pods" on one port: 127.0.0.1:P and 127.0.0.2:P (the whole of 127/8 is loopback).
  const a = await startMockReplica({ profile: 'tiny', model: 'llama-3.1-8b-instruct' });
  port = Number(new URL(a.url).port);
  const b = await startMockReplica({ profile: 'tiny', model: 'llama-3.1-8b-instruct', host: '127.0.0.2', port });
  replicas = [a, b];
  api = new FakeApi();
  await new Promise<void>((r) => api.server.listen(0, '127.0.0.1', () => r()));
  dir = mkdtempSync(join(tmpdir(), 'epp-k8s-'));
  writeFileSync(join(dir, 'token'), 'service-account-token\n');
  const cfg = parseConfig({
    server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 500 },
    registry: { scrape_interval_ms: 50, down_after_failures: 2 },
    routing: TEST_INDEX_SIZES,
    tokenizer: { threads: 0 },
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', max_context_tokens: 2048, replicas: [] }],
    epp: {
      host: '127.0.0.1', port: 0, pool: '8b', fallbacks: 0,
      kubernetes: { namespace: 'llm', label_selector: 'app=vllm-8b', target_port: port, token_file: join(dir, 'token'), ca_file: join(dir, 'none') },
    },
  }, { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String((api.server.address() as { port: number }).port) });
  // The environment names an https API in a pod; this test's API speaks plain HTTP.
  const plain = { ...cfg, epp: { ...cfg.epp!, kubernetes: { ...cfg.epp!.kubernetes!, api_server: cfg.epp!.kubernetes!.api_server!.replace('https:', 'http:') } } };
  gateway = await startGateway(plain, { logger: createLogger('silent'), metricsChannel: `epp-k8s-${process.pid}` });
  envoy = new EnvoyPlayer(gateway.epp!.port);
});

after(async () => {
  envoy.close();
  await gateway.close(0);
  await api.close();
  await Promise.all(replicas.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
});

const chat = Buffer.from(JSON.stringify({ model: 'llama-3.1-8b-instruct', max_tokens: 4, messages: [{ role: 'user', content: 'Which pod?' }] }));

async function pickIn(subset: string[]): Promise<number | string> {
  const s = envoy.open({ chunks: [chat], subset });
  const d = await envoy.decision(s.replies, s.stream, true);
  s.stream.cancel();
  return isPick(d) ? d.endpoints : d.status;
}

test('pods added, made ready and deleted change the pool; readiness follows; the API sees the service-account token', async () => {
  const A = `127.0.0.1:${port}`;
  const B = `127.0.0.2:${port}`;
  // Listed: no pod yet. The picker answers but is not ready.
  await waitFor(() => api.seen.some((s) => s.path.includes('watch=1')), 5000);
  assert.equal(await envoy.client.check('readiness'), 2, 'NOT_SERVING with no pod');
  assert.equal(await pickIn([A]), 503);

  api.event('ADDED', pod('vllm-a', '127.0.0.1', true));
  await waitFor(async () => (await envoy.client.check('readiness')) === 1, 5000);
  assert.equal(await pickIn([A, B]), A);

  // Added but not ready (no IP yet): not a replica.
  api.event('ADDED', pod('vllm-b', undefined, false));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await pickIn([B]), 503);
  // Made ready.
  api.event('MODIFIED', pod('vllm-b', '127.0.0.2', true));
  await waitFor(async () => (await pickIn([B])) === B, 5000, 100);

  // Deleted: gone from the pool.
  api.event('DELETED', pod('vllm-a', '127.0.0.1', true));
  await waitFor(async () => (await pickIn([A])) === 503, 5000, 100);
  assert.equal(await pickIn([A, B]), B);

  const list = api.seen.find((s) => !s.path.includes('watch=1'))!;
  assert.equal(list.authorization, 'Bearer service-account-token');
  assert.match(api.seen.find((s) => s.path.includes('watch=1'))!.path, /resourceVersion=1(&|$)/, 'the watch starts at the list\'s version');
});
