// The gateway stack every client-compatibility test drives: a real gateway (test/helpers/start-gateway.ts) in
// front of in-process mock replicas, with the tenants the scenarios need, and the checks each client family
// makes the same way (usage record of a request, replica-side abort, the retryable 429's set-up).
// Thread: main (test process).
import { createHash } from 'node:crypto';
import { ALPHA_KEY, TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { setFault } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';

export { ALPHA_KEY, TINY_KEY, type TestStack };

/** A tenant with one request in flight: a second one is a 429 concurrency_limit_exceeded with Retry-After. */
export const RETRY_KEY = 'sk-test-retry';
export const BASE_MODEL = 'llama-3.1-8b-instruct';
export const LORA_BASE = 'llama-3.1-8b-lora';

const sha = (k: string): string => createHash('sha256').update(k).digest('hex');

export async function startClientStack(): Promise<TestStack> {
  return await startStack({
    pools: [
      {
        // A context long enough that max_tokens 5,000 reaches the quota (the never-fits 429), not the context check.
        id: '8b', model: BASE_MODEL, aliases: ['gpt-fast'], maxContextTokens: 8192,
        replicas: [{ profile: 'tiny' }, { profile: 'tiny' }],
      },
      {
        id: 'lora', model: LORA_BASE, adapters: ['acme-sql', 'globex-legal'],
        replicas: [
          { profile: 'tiny', maxLoras: 2, loras: ['acme-sql'], configAdapters: ['acme-sql'] },
          { profile: 'tiny', maxLoras: 2, loras: ['globex-legal'], configAdapters: ['globex-legal'] },
        ],
      },
    ],
    config: {
      tenants: [
        { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 },
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 100, burst_tokens: 4000, max_inflight: 2 },
        { name: 'retry', api_keys: [{ sha256: sha(RETRY_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 1 },
      ],
    },
  });
}

/** Every usage record written for `requestId`, in order (the sink is flushed first). */
export async function recordsOf(stack: TestStack, requestId: string): Promise<UsageRecord[]> {
  return (await stack.usage()).filter((r) => r.request_id === requestId);
}

/** The one usage record of `requestId`, waiting for it to be written (a cancelled request settles after the client has gone). */
export async function recordOf(stack: TestStack, requestId: string): Promise<UsageRecord> {
  return await waitFor(async () => (await recordsOf(stack, requestId)).at(-1), 15_000, 10);
}

/** The engine phase of `requestId` on the replica that served it ('running', 'finished', 'aborted', …). */
export function replicaPhase(stack: TestStack, replica: string, requestId: string): string | undefined {
  return stack.replicas.get(replica)?.engine.snapshot().requests.find((r) => r.id === requestId)?.state;
}

/** The replica whose engine holds `requestId`, if any. */
export function replicaOf(stack: TestStack, requestId: string): string | undefined {
  for (const [id, r] of stack.replicas) if (r.engine.snapshot().requests.some((q) => q.id === requestId)) return id;
  return undefined;
}

/**
 * Waits until the gateway has recorded `requestId` as cancelled by its client and the replica's engine has
 * aborted it; returns the record. The engine knows a completion by the gateway's request id and a Responses
 * request by its response id: `engineId` picks it out on the replica the record names.
 */
export async function assertCancelled(
  stack: TestStack, requestId: string, engineId: (replica: string) => string | undefined = () => requestId,
): Promise<UsageRecord> {
  const rec = await recordOf(stack, requestId);
  if (!rec.cancelled || rec.status !== 499) throw new Error(`record of ${requestId}: status ${rec.status}, cancelled ${rec.cancelled}`);
  const replica = rec.replica;
  if (!replica) throw new Error(`record of ${requestId} names no replica`);
  try {
    await waitFor(() => replicaPhase(stack, replica, engineId(replica) ?? '') === 'aborted', 15_000, 5);
  } catch {
    const id = engineId(replica) ?? '';
    throw new Error(`${requestId}: engine request ${JSON.stringify(id)} on ${replica} is ${replicaPhase(stack, replica, id) ?? 'unknown'}, not aborted, 15 s after the gateway recorded the cancel (record: ${rec.output_tokens} output tokens)`);
  }
  return rec;
}

/** Every engine request id the replicas hold now (to tell a later request's id apart). */
export function engineIds(stack: TestStack): Set<string> {
  const ids = new Set<string>();
  for (const r of stack.replicas.values()) for (const q of r.engine.snapshot().requests) ids.add(q.id);
  return ids;
}

/** The one engine request on `replica` that is not in `before`. */
export function newEngineId(stack: TestStack, replica: string, before: Set<string>): string | undefined {
  const fresh = stack.replicas.get(replica)?.engine.snapshot().requests.filter((q) => !before.has(q.id)) ?? [];
  return fresh.length === 1 ? fresh[0]!.id : undefined;
}

/** Slows every replica to `delayMs` per token, so a stream is still running when its first text arrives. */
export async function slowReplicas(stack: TestStack, delayMs: number): Promise<void> {
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: delayMs > 0 ? 'slow' : 'none', delay_ms: delayMs });
}

/**
 * Makes the next stream on each replica die after `afterTokens` tokens, so the gateway ends it with one
 * `data: {"error":…}` event (upstream_error) and no [DONE].
 */
export async function dieMidStream(stack: TestStack, afterTokens: number): Promise<void> {
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'die_mid_stream', after_tokens: afterTokens, count: 1 });
}

/**
 * Runs `call` (a request of the RETRY_KEY tenant named `requestId`, made by a client that retries) while another
 * stream holds the tenant's one slot, and frees the slot as soon as the gateway has refused the first attempt:
 * the client's retry, a Retry-After (1 s) later, then finds the slot free. No timing is assumed beyond the
 * client waiting its Retry-After. Returns what `call` settled with.
 */
export async function afterOneRetryable429<T>(stack: TestStack, requestId: string, call: () => Promise<T>): Promise<{ value?: T; error?: unknown }> {
  await slowReplicas(stack, 20);
  const holder = new AbortController();
  try {
    const held = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST', signal: holder.signal,
      headers: { authorization: `Bearer ${RETRY_KEY}`, 'content-type': 'application/json', 'x-request-id': `${requestId}-holder` },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hold' }], max_tokens: 400, stream: true }),
    });
    if (held.status !== 200) throw new Error(`holder: ${held.status} ${await held.text()}`);
    const settled = call().then((value) => ({ value }), (error: unknown) => ({ error }));
    await waitFor(async () => (await recordsOf(stack, requestId)).some((r) => r.status === 429), 5000, 10);
    holder.abort();
    await recordOf(stack, `${requestId}-holder`);
    return await settled;
  } finally {
    holder.abort();
    await slowReplicas(stack, 0);
  }
}
