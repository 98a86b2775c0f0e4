// A client that reads slowly must not make the gateway buffer the stream: when uWS reports backpressure the
// gateway stops reading the replica's socket until the client drains. Observed from outside: the replica (its
// own process) keeps generating, the tokens the gateway has relayed (its in-flight ledger) stop growing, the
// gateway's memory stays flat; on resume every token arrives.
//
// uWS closes a connection that takes no bytes for its fixed send timeout (HTTP_TIMEOUT_S, 10 s counted in 4 s
// ticks: 8-12 s after the write that found the socket full). The first test keeps its client's stall well inside
// that and says so when it cannot; the second pins what a client stalled past it gets: disconnected, the
// replica's request aborted, a cancelled usage record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingMessage } from 'node:http';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';
import { LEDGER_OUTPUT_TOKENS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
let replica: SpawnedReplica;

/** A gateway in this process in front of one mock replica process generating at `timeScale`. */
async function startFleet(timeScale: string): Promise<void> {
  replica = await spawnMockReplica(['--profile', 'llama-8b-a100', '--model', 'llama-3.1-8b-instruct', '--time-scale', timeScale]);
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', maxContextTokens: 131072, replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
  });
}

async function stopFleet(): Promise<void> {
  await stack.close();
  await replica.kill();
}

interface MockRequest { id: string; state: string; output_tokens: number }

async function onReplica(id: string): Promise<MockRequest | undefined> {
  const st = await (await fetch(`${replica.url}/_mock/state`)).json() as { requests: MockRequest[] };
  return st.requests.find((r) => r.id === id);
}

/** Opens a stream, takes its first chunk and stops reading (the socket stays open, unread). */
async function stalledStream(id: string, maxTokens: number): Promise<{ res: IncomingMessage; first: string }> {
  const body = JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'stream a lot' }], max_tokens: maxTokens, ignore_eos: true, stream: true });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    // A fresh connection each time: a socket an earlier test read fast has grown its receive buffer.
    const req = request(`${stack.url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id } }, resolve);
    req.on('error', reject);
    req.end(body);
  });
  assert.equal(res.statusCode, 200);
  const first = await new Promise<string>((resolve) => res.once('data', (c: Buffer) => {
    res.pause(); // synchronously: no chunk may be emitted without a listener
    resolve(c.toString('utf8'));
  }));
  return { res, first };
}

function relayedTokens(): number {
  return stack.gateway.registry.ledger.get(stack.gateway.registry.slotOf('8b-x1'), LEDGER_OUTPUT_TOKENS);
}

/**
 * Waits until the gateway has stopped relaying (its count unchanged for 500 ms) while the replica is at least
 * `ahead` tokens further; returns the count it stopped at and when it stopped (performance.now()).
 */
async function waitUntilHeld(id: string, ahead: number, withinMs: number): Promise<{ held: number; since: number }> {
  const deadline = performance.now() + withinMs;
  let last = -1;
  let since = performance.now();
  for (;;) {
    const now = relayedTokens();
    if (now !== last) {
      last = now;
      since = performance.now();
    }
    const gen = (await onReplica(id))?.output_tokens ?? 0;
    if (performance.now() - since >= 500 && gen - now >= ahead) return { held: now, since };
    if (performance.now() > deadline) {
      assert.fail(`within ${withinMs} ms the replica did not get ${ahead} tokens ahead of a held relay (replica ${gen}, relayed ${now}); ` +
        'the stall must end before uWS closes the connection (10 s)');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('a slow reader pauses the upstream instead of growing the gateway memory, and still gets every token', { timeout: 120_000 }, async (t) => {
  // 0.01: ≈ 8,000 tokens/s, so the replica outruns the few MiB of loopback buffers within seconds.
  await startFleet('0.01');
  t.after(stopFleet);
  const MAX_TOKENS = 60_000;
  const { res, first } = await stalledStream('slow-reader', MAX_TOKENS);
  const rssBefore = process.memoryUsage().rss;

  // Socket buffers fill first (a few MiB on loopback); then the replica runs ahead of the gateway. How long
  // that takes depends on how fast a loaded machine lets the replica generate; uWS's send timeout only starts
  // when the gateway's writes stop going through, which is when the relayed count stops moving.
  const { held, since: heldSince } = await waitUntilHeld('slow-reader', 1000, 20_000);
  const genThen = (await onReplica('slow-reader'))!.output_tokens;
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(relayedTokens(), held, 'the gateway read nothing more from the replica while the client was stalled');
  assert.ok((await onReplica('slow-reader'))!.output_tokens > genThen || genThen >= MAX_TOKENS, 'the replica kept generating');
  const grownMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
  assert.ok(grownMiB < 32, `gateway RSS grew ${grownMiB.toFixed(1)} MiB`);
  // If this machine took so long that uWS's 8-12 s send timeout dropped the client, the stream breaks below
  // and says so; the time itself is not this test's assertion.
  t.diagnostic(`the gateway's writes were blocked ${(performance.now() - heldSince).toFixed(0)} ms before the client read again`);

  // Resume: the whole stream arrives intact, ending with [DONE].
  let tail = first;
  let tokens = 0;
  let sawDone = false;
  res.setEncoding('utf8');
  res.on('data', (c: string) => {
    tail += c;
    const cut = tail.lastIndexOf('\n\n');
    if (cut >= 0) {
      const complete = tail.slice(0, cut);
      tokens += (complete.match(/"delta":\{"content"/g) ?? []).length;
      if (complete.includes('data: [DONE]')) sawDone = true;
      tail = tail.slice(cut);
    }
  });
  const ended = new Promise<void>((resolve, reject) => {
    res.on('end', () => resolve());
    // A connection cut before the end would otherwise leave this test waiting for an 'end' that never comes.
    res.on('error', (err) => reject(new Error(`the stream broke after ${tokens} tokens: ${err.message}`)));
  });
  res.resume();
  await ended;
  tokens += (tail.match(/"delta":\{"content"/g) ?? []).length;
  assert.ok(sawDone || tail.includes('data: [DONE]'), 'the stream ends with [DONE]');
  assert.equal(tokens, MAX_TOKENS, 'every token frame arrived, in one piece');
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'slow-reader'));
  assert.equal(rec.output_tokens, MAX_TOKENS);
});

test('a client that takes no bytes for uWS\'s 10 s send timeout is disconnected, and the replica request is aborted', { timeout: 150_000 }, async (t) => {
  // 0.03: ≈ 2,700 tokens/s, so 120,000 tokens take ≈ 45 s and the replica is still generating when uWS gives up
  // on the client, about 20 s in (buffers fill, then 8-12 s without a byte taken).
  await startFleet('0.03');
  t.after(stopFleet);
  const MAX_TOKENS = 120_000;
  const { res } = await stalledStream('stalled-reader', MAX_TOKENS);
  // Listen now: a stream destroyed while nobody listens would leave the last step waiting for nothing.
  let text = '';
  res.setEncoding('utf8');
  const outcome = new Promise<string>((resolve) => {
    res.on('error', (err) => resolve(`error: ${err.message}`));
    res.on('end', () => resolve('end'));
    res.on('close', () => resolve('close'));
  });
  const { held } = await waitUntilHeld('stalled-reader', 1000, 30_000);
  const heldAt = performance.now();
  // Still connected while the relay is held: the drop comes from the send timeout, not from the stall itself.
  assert.equal((await stack.usage()).some((r) => r.request_id === 'stalled-reader'), false, 'not dropped when the relay stopped');

  // The paused client cannot see the close until it reads; the gateway's side shows it: a cancelled record.
  // uWS starts its timer at the write that found the socket full, half a second or so before `held` was seen.
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'stalled-reader'), 60_000, 100);
  t.diagnostic(`the client was dropped ${((performance.now() - heldAt) / 1000).toFixed(1)} s after the relay stopped`);
  assert.equal(rec.cancelled, true);
  assert.equal(rec.status, 499);
  assert.equal(rec.output_tokens, held, 'billed for the tokens the gateway relayed before the client stalled');
  assert.equal(relayedTokens(), 0, 'nothing left in flight on the replica');
  // The gateway aborted the replica's request while it was still generating.
  await waitFor(async () => (await onReplica('stalled-reader'))?.state === 'aborted', 10_000, 20);
  assert.ok((await onReplica('stalled-reader'))!.output_tokens < MAX_TOKENS);

  // Reading again, the client gets what was buffered, then a broken stream: never a [DONE].
  res.on('data', (c: string) => { text += c; });
  res.resume();
  assert.match(await outcome, /^error: /);
  assert.ok(!text.includes('[DONE]'));
});
