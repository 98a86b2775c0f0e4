// The simulator's event loop on a fleet small enough to work out by hand: one or two `tiny` replicas, a
// handful of requests at chosen times, the TTFT and prefix hits they must get.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { fleetFromConfig } from '../../../native-bench/sim/fleet.ts';
import { chain53 } from '../../../native-bench/sim/prng.ts';
import { FleetSim } from '../../../native-bench/sim/sim-run.ts';
import { LEDGER_DISPATCHED_BLOCKS } from '../../../src/registry/inflight-ledger.ts';
import type { SimRequest, Workload } from '../../../native-bench/sim/workload-types.ts';
import { decodeStepMs, idlePrefillMs, PROFILES } from '../../../test/mock-replica/engine/profiles.ts';

const tiny = PROFILES.tiny;

function tinyFleet(replicas: number, policy: 'round-robin' | 'least-outstanding-tokens') {
  return fleetFromConfig('tiny', parseConfig({
    routing: { policy },
    pools: [{
      id: 't', model: 'tiny-model', mock_profile: 'tiny', max_context_tokens: 2048,
      replicas: Array.from({ length: replicas }, (_, i) => ({ id: `t-${i + 1}`, url: `http://t-${i + 1}.sim:8000` })),
    }],
  }));
}

function hashes(key: number, blocks: number): Float64Array {
  const out = new Float64Array(blocks);
  let parent = 0;
  for (let i = 0; i < blocks; i++) out[i] = parent = chain53(parent, key, i);
  return out;
}

class ListWorkload implements Workload {
  readonly name = 'list';
  private i = 0;
  constructor(private readonly reqs: SimRequest[]) {}
  next(): SimRequest | null {
    return this.reqs[this.i++] ?? null;
  }
}

function req(seq: number, atMs: number, prompt: number, output: number, key: number): SimRequest {
  return { seq, atMs, adapter: null, promptTokens: prompt, outputTokens: output, maxTokens: output, blockHashes: hashes(key, Math.floor(prompt / 16)), replyHashes: null };
}

function run(replicas: number, policy: 'round-robin' | 'least-outstanding-tokens', reqs: SimRequest[]) {
  const fleet = tinyFleet(replicas, policy);
  const sim = new FleetSim({ pool: fleet.pools[0]!, fleet, policy, workload: new ListWorkload(reqs), durationMs: 1000, gateways: 1, seed: 1 });
  return sim.run().figures;
}

test('a lone request: TTFT is the idle prefill, TPOT the batch-1 decode step', () => {
  const f = run(1, 'round-robin', [req(0, 500, 100, 5, 7)]);
  assert.equal(f.offered, 1);
  assert.equal(f.completed, 1);
  assert.equal(f.met, 1);
  assert.ok(Math.abs(f.ttftP50 - idlePrefillMs(tiny, 100)) < 1e-9, `ttft ${f.ttftP50}`);
  // Decode steps after the first token read 100..103 tokens of context: the mean of those four steps.
  let sum = 0;
  for (let ctx = 100; ctx < 104; ctx++) sum += decodeStepMs(tiny, 1, ctx);
  assert.ok(Math.abs(f.tpotP95 - sum / 4) < 1e-9, `tpot ${f.tpotP95}`);
  assert.equal(f.hitMeasured, 0);
});

test('the warm-up is not measured: a request in the first 10 % of the run counts nowhere', () => {
  const f = run(1, 'round-robin', [req(0, 50, 100, 5, 7), req(1, 500, 100, 5, 8)]);
  assert.equal(f.offered, 1);
  assert.equal(f.completed, 1);
});

test('a repeated prompt on the same replica hits every full block but the last token\'s', () => {
  // 160 tokens = 10 full blocks; the engine caches floor(min(160, 159) / 16) * 16 = 144 of the second.
  const f = run(1, 'round-robin', [req(0, 200, 160, 2, 9), req(1, 400, 160, 2, 9)]);
  assert.equal(f.completed, 2);
  assert.ok(Math.abs(f.hitMeasured - 144 / 320) < 1e-12, `hit ${f.hitMeasured}`);
  // The second prefill is 16 tokens instead of 160.
  assert.ok(f.ttftP50 < idlePrefillMs(tiny, 160));
});

test('round robin sends the repeat to the other replica: no hit', () => {
  const f = run(2, 'round-robin', [req(0, 200, 160, 2, 9), req(1, 400, 160, 2, 9)]);
  assert.equal(f.completed, 2);
  assert.equal(f.hitMeasured, 0);
  assert.equal(f.hitPredicted, 0);
});

test('a killed replica: requests on it before their first token are retried elsewhere, and routing avoids it', () => {
  const fleet = tinyFleet(2, 'round-robin');
  // 1,000-token prompts take four 256-token prefill steps (~14 ms); t-1 dies at 300 ms inside the first
  // request's prefill. That request is retried on t-2. Round robin's cursor keeps turning, so the requests
  // at 310 and 320 ms are each sent to t-1 first (up in the registry until two scrapes fail), refused, and
  // retried at once on t-2; the second refusal is the data plane's second failure, which takes t-1 out of
  // rotation, so the request at 600 ms goes straight to t-2. Replies of 16 tokens: a 2-token stream has one
  // gap, which a 1,000-token prefill riding in its step would push past the TPOT target, so admission would
  // (rightly) hold the retried requests back from the stream still prefilling on t-2.
  const reqs = [req(0, 299.99, 1000, 16, 1), req(1, 310, 1000, 16, 2), req(2, 320, 1000, 16, 3), req(3, 600, 1000, 16, 4)];
  const sim = new FleetSim({ pool: fleet.pools[0]!, fleet, policy: 'round-robin', workload: new ListWorkload(reqs), durationMs: 1000, gateways: 1, seed: 1, kills: [{ replica: 't-1', atS: 0.3 }] });
  const f = sim.run().figures;
  assert.equal(f.offered, 4);
  assert.equal(f.completed, 4);
  assert.equal(f.failed, 0);
  assert.equal(sim.retries, 3);
  // The retried request restarted its prefill from scratch on t-2 at 300 ms.
  assert.ok(f.ttftP99 > idlePrefillMs(tiny, 1000));
});

test('--dispatch-ms: a dispatched request reaches the engine that much later, and its TTFT says so', () => {
  const fleet = tinyFleet(1, 'round-robin');
  const go = (dispatchMs: number) => new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'round-robin', workload: new ListWorkload([req(0, 500, 100, 5, 7)]), durationMs: 1000, gateways: 1, seed: 1, dispatchMs,
  }).run().figures;
  assert.ok(Math.abs(go(0).ttftP50 - idlePrefillMs(tiny, 100)) < 1e-9);
  assert.ok(Math.abs(go(2).ttftP50 - (2 + idlePrefillMs(tiny, 100))) < 1e-9, `ttft ${go(2).ttftP50}`);
});

test('--dispatch-ms: a request sent the instant a step ends misses the step that starts then', () => {
  // Two prompts on one replica: the first (not measured: before the warm-up's end) reaches the engine at 299 ms, and the second arrives at the gateway
  // the instant the first one's prefill step ends. With no latency it joins the step that begins then; 1.5 ms
  // on the way, it lands in the middle of a later step (the tiny profile's decode steps are ~1 ms) and waits
  // for it to end: its TTFT grows by more than the 1.5 ms.
  const fleet = tinyFleet(1, 'least-outstanding-tokens');
  const first = idlePrefillMs(tiny, 100);
  const go = (dispatchMs: number) => new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'least-outstanding-tokens', durationMs: 1000, warmupMs: 300, gateways: 1, seed: 1, dispatchMs,
    workload: new ListWorkload([req(0, 299 - dispatchMs, 100, 50, 7), req(1, 299 + first, 32, 5, 8)]),
  }).run().figures;
  const zero = go(0);
  const late = go(1.5);
  assert.equal(zero.completed, 1);
  assert.equal(late.completed, 1);
  assert.ok(late.ttftP99 > zero.ttftP99 + 1.5 + 0.2, `the late one's TTFT: ${zero.ttftP99} with no latency, ${late.ttftP99} with 1.5 ms`);
});

test('--dispatch-ms: a replica killed while a request is on its way drops it, and the request is retried elsewhere', () => {
  const fleet = tinyFleet(2, 'round-robin');
  // Sent to t-1 at 299 ms, due there at 304 ms; t-1 dies at 300 ms.
  const sim = new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'round-robin', durationMs: 1000, gateways: 1, seed: 1, dispatchMs: 5,
    workload: new ListWorkload([req(0, 299, 100, 5, 7)]), kills: [{ replica: 't-1', atS: 0.3 }],
  });
  const f = sim.run().figures;
  assert.equal(f.completed, 1);
  assert.equal(f.failed, 0);
  assert.equal(sim.retries, 1);
  // Refused at 304 ms, sent to t-2 and on its way another 5 ms: its first token after 5 + 5 ms + the prefill.
  assert.ok(Math.abs(f.ttftP50 - (10 + idlePrefillMs(tiny, 100))) < 1e-9, `ttft ${f.ttftP50}`);
});

test('admission in the loop: a burst past the KV budget is shed at once; with --retry-shed it comes back and completes', () => {
  // One tiny replica: 255 usable blocks × 16 = 4,080 tokens, 15 % kept free. Five requests of 1,000 + 500
  // tokens arrive together: two fit, the others are refused the moment they arrive.
  const burst = (): SimRequest[] => [0, 1, 2, 3, 4].map((i) => req(i, 200, 1000, 500, 100 + i));
  const fleet = tinyFleet(1, 'least-outstanding-tokens');
  const plain = new FleetSim({ pool: fleet.pools[0]!, fleet, policy: 'least-outstanding-tokens', workload: new ListWorkload(burst()), durationMs: 1000, gateways: 1, seed: 1 }).run().figures;
  assert.equal(plain.offered, 5);
  assert.equal(plain.admitted, 2);
  assert.equal(plain.completed, 2);
  assert.equal(plain.shed, 3);
  assert.equal(plain.failed, 0);
  assert.equal(plain.shedAnswerP99, 0);
  const retried = new FleetSim({ pool: fleet.pools[0]!, fleet, policy: 'least-outstanding-tokens', workload: new ListWorkload(burst()), durationMs: 1000, gateways: 1, seed: 1, retryShed: true }).run().figures;
  assert.equal(retried.admitted, 2);
  assert.ok(retried.shed >= 3);
  assert.equal(retried.completed, 5);
});

test('a restarted replica comes back empty: the registry sees the new process and the repeat misses', () => {
  const fleet = tinyFleet(1, 'round-robin');
  const sim = new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'round-robin', durationMs: 1000, gateways: 1, seed: 1,
    workload: new ListWorkload([req(0, 200, 160, 2, 9), req(1, 600, 160, 2, 9)]), restarts: [{ replica: 't-1', atS: 0.4 }],
  });
  const state = sim.run();
  assert.equal(state.figures.completed, 2);
  assert.equal(state.figures.hitMeasured, 0);
  assert.equal(state.restartsSeen, 1);
});

test('--gateways 2: requests spread over two gateways, each with its own ledger', () => {
  const fleet = tinyFleet(2, 'least-outstanding-tokens');
  const reqs = Array.from({ length: 40 }, (_, i) => req(i, 200 + i * 10, 64, 4, 1000 + i));
  const sim = new FleetSim({ pool: fleet.pools[0]!, fleet, policy: 'least-outstanding-tokens', workload: new ListWorkload(reqs), durationMs: 1000, gateways: 2, seed: 1 });
  const f = sim.run().figures;
  assert.equal(f.completed, 40);
  const dispatched = sim.gateways.map((g) => g.ledger.get(0, LEDGER_DISPATCHED_BLOCKS) + g.ledger.get(1, LEDGER_DISPATCHED_BLOCKS));
  // 68 tokens reserve 5 blocks each; every request went through exactly one gateway.
  assert.equal(dispatched[0]! + dispatched[1]!, 40 * 5);
  assert.ok(dispatched[0]! > 0 && dispatched[1]! > 0);
});

test('a stream cut by a dying replica after its first token is a failure, never within the SLO', () => {
  const fleet = tinyFleet(2, 'round-robin');
  // 200 output tokens at ~1 ms per decode step: still streaming when t-1 dies 50 ms in.
  const sim = new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'round-robin', durationMs: 1000, gateways: 1, seed: 1,
    workload: new ListWorkload([req(0, 200, 100, 200, 5)]), kills: [{ replica: 't-1', atS: 0.25 }],
  });
  const f = sim.run().figures;
  assert.equal(f.offered, 1);
  assert.equal(f.completed, 0);
  assert.equal(f.failed, 1);
  assert.equal(f.met, 0);
  assert.equal(sim.retries, 0);
});

test('native admission of round robin admits everything: a burst far past the KV budget is queued in the engine, not shed', () => {
  // 40 prompts of 1,000 tokens + 100 output at once on one 256-block (4,096-token) replica: the gateway's
  // admission holds back all but a few and sheds the rest at its queue deadline; with none, every one runs.
  const burst = Array.from({ length: 40 }, (_, i) => req(i, 200 + i * 0.01, 1000, 100, 100 + i));
  const fleet = tinyFleet(1, 'round-robin');
  const go = (admission: 'native' | 'expediter') => new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'round-robin', workload: new ListWorkload(burst), durationMs: 1000, gateways: 1, seed: 1, admission,
  }).run();
  const native = go('native');
  assert.equal(native.figures.shed, 0);
  assert.equal(native.figures.admitted, 40);
  assert.match(native.admission, /^native: none/);
  const gated = go('expediter');
  assert.ok(gated.figures.admitted < 40, `admitted ${gated.figures.admitted}`);
  assert.match(gated.admission, /^expediter: the gateway's AdmissionController/);
});
