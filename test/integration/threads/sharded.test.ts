// The sharded mode (server.threads: 2) in front of two mock replicas, over real HTTP on fresh connections:
// the kernel spreads connections over both acceptor threads (gateway_acceptor_requests_total), one tenant's
// burst is held to its concurrency and token limits exactly although its requests land on both threads, the
// in-flight ledger returns to zero, the usage file holds one whole record per request, a reload reaches
// every thread, and one the shared quota table has no room for is refused whole. One gateway for the file: starting two acceptor threads costs seconds on a loaded machine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { startStack, waitFor, ALPHA_KEY, type TestStack } from '../../helpers/start-gateway.ts';
import { setFault } from '../mock-replica/http-client.ts';
import { parseConfig } from '../../../src/config/load.ts';
import { LEDGER_DISPATCHED_BLOCKS, LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';

const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const CONC_KEY = 'sk-threads-conc';
const BUCKET_KEY = 'sk-threads-bucket';
const LATE_KEY = 'sk-threads-late';
const tenants = [
  { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 },
  { name: 'conc', api_keys: [{ sha256: sha(CONC_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 3 },
  { name: 'bucket', api_keys: [{ sha256: sha(BUCKET_KEY) }], tokens_per_second: 1, burst_tokens: 5000, max_inflight: 100 },
];

let stack: TestStack;
let sent = 0;

before(async () => {
  stack = await startStack({
    config: { server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, threads: 2 }, tokenizer: { threads: 0 }, tenants },
  });
});
after(async () => {
  await stack?.close();
});

/** One completion on a connection of its own (agent: false), so each lands where the kernel puts it. */
function complete(key: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<{ status: number; code: string | null }> {
  sent++;
  return new Promise((resolve, reject) => {
    const req = request(`${stack.url}/v1/chat/completions`, {
      method: 'POST', agent: false, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      ...(signal ? { signal } : {}),
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        const code = res.statusCode === 200 ? null : ((JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null);
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', (err) => (signal?.aborted ? resolve({ status: 0, code: 'aborted' }) : reject(err)));
    req.end(JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...body }));
  });
}

async function perAcceptor(): Promise<number[]> {
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  const out = [0, 0];
  for (const m of page.matchAll(/^gateway_acceptor_requests_total\{acceptor="(\d+)"\} (\d+)$/gm)) out[Number(m[1])] = Number(m[2]);
  return out;
}

async function slowReplicas(delayMs: number): Promise<void> {
  for (const r of stack.replicas.values()) await setFault(r.url, delayMs > 0 ? { mode: 'slow', delay_ms: delayMs } : { mode: 'none' });
}

test('connections spread over both acceptor threads, each counted in /metrics', async () => {
  const before = await perAcceptor();
  const results = [];
  for (let i = 0; i < 24; i += 8) results.push(...await Promise.all(Array.from({ length: 8 }, () => complete(ALPHA_KEY, {}))));
  assert.deepEqual(results.map((r) => r.status), Array(24).fill(200));
  const counts = await waitFor(async () => {
    const now = await perAcceptor();
    return now[0]! + now[1]! - before[0]! - before[1]! === 24 ? now : null;
  }, 5000, 50);
  // 24 connections all hashed to one socket of two: odds 2^-23.
  assert.ok(counts[0]! > before[0]! && counts[1]! > before[1]!, `per acceptor: ${counts.join(', ')}`);
});

test('gateway_client_connections counts the idle connections held by both threads, once each', async () => {
  const gauge = async (): Promise<{ accepted: number; queued: number; fds: number; pageFds: number }> => {
    const page = await (await fetch(`${stack.url}/metrics`)).text();
    const one = (re: RegExp): number => [...page.matchAll(re)].length === 1 ? Number(re.exec(page)![1]) : Number.NaN;
    return {
      accepted: one(/^gateway_client_connections\{state="accepted"\} (\S+)$/gm), queued: one(/^gateway_client_connections\{state="queued"\} (\S+)$/gm),
      fds: one(/^gateway_process_max_fds (\S+)$/gm), pageFds: one(/^gateway_process_open_fds (\S+)$/gm),
    };
  };
  const base = await gauge();
  assert.ok(base.fds > 0 && base.pageFds > 0, `process fd gauges, one sample each: ${JSON.stringify(base)}`);
  const idle: Socket[] = Array.from({ length: 12 }, () => connect(Number(new URL(stack.url).port), '127.0.0.1'));
  try {
    // 12 fresh connections, spread by the kernel over both listen sockets, none sending a byte.
    const held = await waitFor(async () => {
      const g = await gauge();
      return g.accepted >= base.accepted + 12 ? g : null;
    }, 5000, 50);
    assert.equal(held.accepted, base.accepted + 12, JSON.stringify(held));
    assert.equal(held.queued, 0);
  } finally {
    for (const s of idle) s.destroy();
  }
  await waitFor(async () => (await gauge()).accepted <= base.accepted, 5000, 50);
});

/**
 * A burst of `n` requests from one tenant while the replicas accept and never answer, so no admitted request
 * settles (and frees its lease or refunds) before every acquire is decided, however slowly a busy machine
 * delivers the burst. Waits until all but the admitted ones were refused and the ledger holds exactly the
 * admitted ones at the replicas, then hangs those up.
 */
async function heldBurst(key: string, n: number, admitted: number, code: string, body: Record<string, unknown>): Promise<void> {
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'hang' });
  const hangUp = new AbortController();
  // one listener per request of the burst on this one signal: not a leak, so no MaxListenersExceededWarning
  setMaxListeners(n, hangUp.signal);
  const ledger = stack.gateway.registry.ledger;
  const atReplicas = (): number => {
    let sum = 0;
    for (let slot = 0; slot < ledger.slots; slot++) sum += ledger.get(slot, LEDGER_INFLIGHT);
    return sum;
  };
  try {
    const refused: Array<{ status: number; code: string | null }> = [];
    const all = Array.from({ length: n }, () => complete(key, body, hangUp.signal).then((r) => {
      if (r.status !== 0) refused.push(r);
      return r;
    }));
    await waitFor(() => refused.length >= n - admitted && atReplicas() >= admitted, 10_000, 20);
    assert.deepEqual(refused.map((r) => [r.status, r.code]), Array(n - admitted).fill([429, code]), JSON.stringify(refused));
    assert.equal(atReplicas(), admitted, 'exactly the admitted requests reached the replicas');
    hangUp.abort();
    const results = await Promise.all(all);
    assert.equal(results.filter((r) => r.status === 0).length, admitted, JSON.stringify(results));
  } finally {
    hangUp.abort();
    await slowReplicas(0);
  }
}

test('one tenant burst across threads is held to its concurrency limit exactly', async () => {
  await heldBurst(CONC_KEY, 12, 3, 'concurrency_limit_exceeded', {});
});

test('one tenant burst across threads is held to its token bucket exactly', async () => {
  // cost = prompt (under 50 tokens) + max_tokens 1200: four fit in 5,000 tokens, a fifth does not
  await heldBurst(BUCKET_KEY, 10, 4, 'rate_limit_exceeded', { max_tokens: 1200 });
});

test('the ledger returns to zero and the usage file holds one whole record per request', async () => {
  const ledger = stack.gateway.registry.ledger;
  await waitFor(() => {
    // Every field but the dispatched-blocks running total (never decremented) counts work still in flight.
    for (let slot = 0; slot < ledger.slots; slot++) for (let f = 0; f < LEDGER_DISPATCHED_BLOCKS; f++) if (ledger.get(slot, f) !== 0) return false;
    return true;
  }, 5000, 20);
  // Records cross from the acceptor threads on their ports: wait until every one is written.
  const records = await waitFor(async () => {
    const r = await stack.usage();
    return r.length >= sent ? r : null;
  }, 5000, 50);
  assert.equal(records.length, sent);
  assert.equal(new Set(records.map((r) => r.request_id)).size, sent);
});

test('a reload reaches every acceptor thread', async () => {
  const before = await perAcceptor();
  const refused = await complete(LATE_KEY, {});
  assert.equal(refused.status, 401);
  sent--; // an unknown key leaves no usage record
  const next = parseConfig({
    ...JSON.parse(JSON.stringify(stack.cfg)),
    tenants: [...tenants, { name: 'late', api_keys: [{ sha256: sha(LATE_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 64 }],
  });
  await stack.gateway.reload(next);
  const results = await Promise.all(Array.from({ length: 24 }, () => complete(LATE_KEY, {})));
  assert.deepEqual(results.map((r) => r.status), Array(24).fill(200));
  const counts = await waitFor(async () => {
    const now = await perAcceptor();
    return now[0]! + now[1]! - before[0]! - before[1]! === 25 ? now : null;
  }, 5000, 50);
  assert.ok(counts[0]! - before[0]! >= 2 && counts[1]! - before[1]! >= 2, `per acceptor after reload: ${counts.join(', ')} (before ${before.join(', ')})`);
});

test('a reload the shared quota table has no room for is refused whole; the running config keeps serving', async () => {
  const running = stack.gateway.services.cfg;
  const huge = { name: 'huge', api_keys: [{ sha256: sha('sk-threads-huge') }], tokens_per_second: 1, burst_tokens: 10, max_inflight: 100_000 };
  const next = parseConfig({ ...JSON.parse(JSON.stringify(stack.cfg)), tenants: [...running.tenants, huge] });
  await assert.rejects(stack.gateway.reload(next), /shared memory table is full/);
  assert.equal(stack.gateway.services.cfg, running, 'the running config stays');
  const results = await Promise.all(Array.from({ length: 8 }, () => complete(LATE_KEY, {})));
  assert.deepEqual(results.map((r) => r.status), Array(8).fill(200));
});
