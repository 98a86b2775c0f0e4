// The stall rule (src/pipeline/stall-watch.ts): an attempt that has sent nothing to its client is given up on
// when the poller's latest look at its replica came at least W after both the attempt's dispatch and the
// replica's last observed progress. Here with a scripted replica table, the real tracker turning scrapes into
// progress stamps, and real UpstreamAttempts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { isStalled, StallWatch, type StallSignals, type Watched } from '../../../src/pipeline/stall-watch.ts';
import { ReplicaTracker } from '../../../src/registry/poll/replica-tracker.ts';
import { FAILURE_KIND } from '../../../src/registry/poll/protocol.ts';
import { ParsedMetrics, parseVllmMetrics } from '../../../src/registry/poll/vllm-metrics-parser.ts';
import { LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';
import { attemptHarness } from './attempt-harness.ts';

const W = 1000;

/** Two replica slots whose scrape stamps the test sets. */
class Signals implements StallSignals {
  attempt = [0, 0];
  progress = [0, 0];
  gen = [1, 1];
  inflight = [0, 0];
  readonly table = {
    lastAttemptMs: (s: number): number => this.attempt[s]!,
    lastProgressMs: (s: number): number => this.progress[s]!,
    generation: (s: number): number => this.gen[s]!,
  };
  readonly ledger = { get: (s: number, f: number): number => (f === LEDGER_INFLIGHT ? this.inflight[s]! : 0) };
}

class Fake implements Watched {
  stallPrev: Watched | null = null;
  stallNext: Watched | null = null;
  stalls = 0;
  constructor(readonly stallSlot: number, readonly stallSince: number, private readonly w: StallWatch) {}
  onStall(): void {
    this.stalls++;
    this.w.unwatch(this); // an aborted attempt settles synchronously and unwatches itself
  }
}

function watch(): { sig: Signals; w: StallWatch; now: { ms: number }; events: Array<[number, number]> } {
  const sig = new Signals();
  const now = { ms: 0 };
  const events: Array<[number, number]> = [];
  const w = new StallWatch(sig, 2, W, (slot, n) => events.push([slot, n]), () => now.ms);
  return { sig, w, now, events };
}

test('the rule: W between the poller\'s last look and the later of dispatch and last progress', () => {
  assert.equal(isStalled(11_000, 9_000, 10_000, W), true, 'dispatched at 10 s, no progress since 9 s, looked at 11 s');
  assert.equal(isStalled(10_900, 9_000, 10_000, W), false, 'looked at only 0.9 s after dispatch');
  assert.equal(isStalled(11_000, 10_500, 10_000, W), false, 'the engine moved after dispatch: 0.5 s of silence');
  assert.equal(isStalled(11_600, 10_500, 10_000, W), true, 'and then nothing for 1.1 s');
  assert.equal(isStalled(9_500, 0, 10_000, W), false, 'a poller that has not looked since dispatch (dead, or late) never declares a stall');
});

test('progress stamps: a scrape whose token counters moved; a page without them counts every good scrape; failures stamp nothing', () => {
  const text = readFileSync(new URL('../../fixtures/vllm-metrics/v1-0.12-lora.txt', import.meta.url), 'utf8');
  const page = (edits: Record<string, string> = {}): ParsedMetrics => {
    let t = text;
    for (const [from, to] of Object.entries(edits)) t = t.split(from).join(to);
    const m = new ParsedMetrics();
    assert.ok(parseVllmMetrics(t, m));
    return m;
  };
  const tr = new ReplicaTracker(0, 1, 'r', 'http://x:1', 16);
  tr.onGood(page(), 1000, 1);
  assert.equal(tr.row.lastProgressMs, 1000, 'the first scrape is the baseline: taken as progress');
  tr.onGood(page(), 2000, 1);
  assert.equal(tr.row.lastProgressMs, 1000, 'same counters: no progress, whatever the gauges say');
  tr.onGood(page({ '402117.0': '402118.0' }), 3000, 1);
  assert.equal(tr.row.lastProgressMs, 3000, 'one generation token');
  tr.onFailure(FAILURE_KIND.TIMEOUT, '', 4000, 2);
  assert.equal(tr.row.lastProgressMs, 3000, 'a failed scrape shows nothing');
  assert.equal(tr.row.lastAttemptMs, 4000);
  const bare = new ReplicaTracker(1, 2, 'b', 'http://x:2', 16);
  const noCounters = page({ 'vllm:prompt_tokens_total{': 'x_p{', 'vllm:generation_tokens_total{': 'x_g{', 'vllm:prefix_cache_queries_total{': 'x_q{' });
  bare.onGood(noCounters, 1000, 1);
  bare.onGood(noCounters, 2000, 1);
  assert.equal(bare.row.lastProgressMs, 2000, 'no counters on the page: a good scrape is all the evidence, never a stall');
});

test('an idle replica holding an old attempt is stalled: its attempts go, the young one too; the other replica is untouched', () => {
  const { sig, w, now, events } = watch();
  const old = new Fake(0, 10_000, w);
  const other = new Fake(1, 10_000, w);
  const young = new Fake(0, 10_800, w);
  w.watch(old);
  w.watch(other);
  w.watch(young);
  sig.progress = [9_000, 10_900];
  sig.attempt = [11_050, 11_050];
  now.ms = 10_999;
  assert.equal(w.tick(now.ms), 0, 'nothing is W old yet');
  now.ms = 11_100;
  assert.equal(w.tick(now.ms), 2);
  assert.deepEqual([old.stalls, young.stalls, other.stalls], [1, 1, 0], 'replica 1 moved at 10.9 s: not stalled');
  assert.deepEqual(events, [[0, 2]]);
  assert.equal(w.stalledAttempts, 2);
  assert.equal(w.tick(now.ms), 0, 'the stalled ones left the list');
});

test('a busy replica (counters moving) and a silent poller never stall an attempt', () => {
  const { sig, w, now } = watch();
  const a = new Fake(0, 10_000, w);
  w.watch(a);
  for (let t = 10_100; t <= 20_000; t += 100) {
    sig.attempt[0] = t;
    sig.progress[0] = t - 100; // the engine moves between every scrape, for other clients' requests
    now.ms = t;
    w.tick(now.ms);
  }
  assert.equal(a.stalls, 0);
  sig.attempt[0] = 20_000; // the poller stops looking
  now.ms = 40_000;
  assert.equal(w.tick(now.ms), 0, 'no look at the replica since: no judgement');
});

test('a stalled replica is held out of routing until it moves, its generation changes, or as a probe once W passed with nothing in flight', () => {
  const { sig, w, now } = watch();
  w.watch(new Fake(0, 10_000, w));
  sig.progress[0] = 9_000;
  sig.attempt[0] = 11_000;
  now.ms = 11_000;
  assert.equal(w.tick(now.ms), 1);
  assert.equal(w.held(0), true);
  assert.equal(w.held(1), false);
  now.ms = 11_999;
  assert.equal(w.held(0), true, 'within W of the judgement');
  now.ms = 12_000;
  sig.inflight[0] = 1;
  assert.equal(w.held(0), true, 'a request of ours is still there: no second probe');
  sig.inflight[0] = 0;
  assert.equal(w.held(0), false, 'W later, nothing in flight: one probe may go');
  sig.progress[0] = 12_500;
  now.ms = 12_600;
  assert.equal(w.held(0), false, 'it moved: the hold is gone for good');
  sig.inflight[0] = 1;
  assert.equal(w.held(0), false);
  // Judged again, then restarted (a new generation): released.
  sig.progress[0] = 9_000;
  w.watch(new Fake(0, 13_000, w));
  sig.attempt[0] = 14_100;
  now.ms = 14_100;
  assert.equal(w.tick(now.ms), 1);
  assert.equal(w.held(0), true);
  sig.gen[0] = 2;
  assert.equal(w.held(0), false, 'a restart (or a new occupant of the slot) is judged afresh');
});

class NullSink implements ClientSink {
  aborted = false;
  started = false;
  begin(_s: number, _h: HeaderList): void {}
  write(): boolean { return true; }
  end(): void {}
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void { fn(); }
}

test('an UpstreamAttempt: watched until its first byte to the client; a stall aborts its call and makes it a stalled retry', async () => {
  const { sig, w, now } = watch();
  const json = attemptHarness(new NullSink(), { stream: false, stalls: w });
  const stream = attemptHarness(new NullSink(), { stream: true, stalls: w });
  const since = Date.now();
  sig.progress[0] = since - 5000;
  sig.attempt[0] = since + W + 1;
  now.ms = since + W + 1;
  stream.a.onStart(200);
  stream.a.onData(Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'));
  assert.equal(w.tick(now.ms), 1, 'the stream relays: no longer watched; the JSON attempt is');
  assert.equal(json.call.aborted, 1);
  assert.equal(stream.call.aborted, 0);
  json.a.onError('aborted', new Error('aborted')); // what the upstream client reports for an aborted call
  const o = await json.outcome;
  assert.equal(o.kind, 'retry');
  assert.equal(o.kind === 'retry' && o.failure, 'stalled');
  assert.equal(o.kind === 'retry' && o.rejection.code, 'upstream_timeout');
  assert.equal(json.ledger.get(0, LEDGER_INFLIGHT), 0, 'its ledger entry is released');
  stream.a.onError('reset', new Error('reset'));
  await stream.outcome;
});
