// kv-events scenario: how many KV events can one subscriber thread apply, and what share of a core does the
// seed fleet's event rate take? And how soon does a replica fall back once its publisher dies?
//
// Part 1 (apply rate, one thread, in process): --replicas streams (64), each a replica's steady state with a
// full prefix cache: per engine step one BlockStored of --blocks-per-step consecutive blocks (continuing a
// request's chain, 16 token ids each, uniform 64-bit hashes as vLLM's, the one full-attention KV-cache group,
// new requests every --request-blocks blocks) and one BlockRemoved of as
// many of its oldest blocks (an LRU at --capacity blocks). Batches are encoded beforehand as the mock's
// publisher encodes them; the timed part is exactly the subscriber's work per batch: ReplicaStream.onLive =
// msgpack decode, sequence check, the gateway's xxhash64 per stored block (rebuilt from token ids and the
// parent), the engine→gateway map, the SharedArrayBuffer index writes. CPU from process.cpuUsage.
// Seed fleet: 64 replicas × ~700 blocks/s stored and as many evicted (8B on an A100 prefills ~11-12k tokens/s).
//
// Part 2 (fallback time, real loopback ZeroMQ): a mock replica's publisher and a KvEventSubscriber on this
// thread; the publisher is closed and the time until the replica's stream leaves Live is measured, then it is
// reopened and the time until Live again; --rounds times.
// Thread: bench main thread.
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { EventsIndex, Stat, StreamState } from '../../src/registry/kv-events/events-index.ts';
import { ReplicaStream } from '../../src/registry/kv-events/replica-stream.ts';
import { KvEventSubscriber } from '../../src/registry/kv-events/subscriber.ts';
import { encodeBatch, type KvEvent } from '../../src/registry/kv-events/wire.ts';
import { ReplicaTable } from '../../src/registry/replica-table.ts';
import { initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { startMockReplica } from '../../test/mock-replica/server.ts';
import { freeKvEventsEndpoint } from '../../test/helpers/port-pair.ts';

const BS = 16;
const MASK64 = (1n << 64n) - 1n;

/** splitmix64's finaliser: the generator's block hashes are uniform 64-bit values, as vLLM's (the low 64 bits of a sha256). */
function mix64(x: bigint): bigint {
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return x ^ (x >> 31n);
}

interface Gen { seq: number; next: bigint; parent: bigint | null; inRequest: number; fifo: bigint[]; head: number; token: number }

function step(g: Gen, blocks: number, requestBlocks: number, capacity: number): Uint8Array {
  const events: KvEvent[] = [];
  const hashes: bigint[] = [];
  const tokens: number[] = [];
  const parentAtStart = g.parent;
  for (let i = 0; i < blocks; i++) {
    if (g.inRequest === requestBlocks) {
      // A new request: flush this chain's event and start another from the root.
      if (hashes.length > 0) events.push({ type: 'BlockStored', blockHashes: hashes.splice(0), parentBlockHash: parentAtStart, tokenIds: tokens.splice(0), blockSize: BS, loraId: null, loraName: null, medium: 'GPU', extraKeys: null, groupIdx: 0, kvCacheSpecKind: 'full_attention', kvCacheSpecSlidingWindow: null });
      g.parent = null;
      g.inRequest = 0;
    }
    const h = mix64(g.next++);
    hashes.push(h);
    for (let t = 0; t < BS; t++) tokens.push((g.token++ * 2654435761) % 128000);
    g.fifo.push(h);
    g.parent = h;
    g.inRequest++;
  }
  if (hashes.length > 0) {
    const first = g.fifo.length - hashes.length - 1;
    events.push({ type: 'BlockStored', blockHashes: hashes, parentBlockHash: g.inRequest > hashes.length ? g.fifo[first]! : null, tokenIds: tokens, blockSize: BS, loraId: null, loraName: null, medium: 'GPU', extraKeys: null, groupIdx: 0, kvCacheSpecKind: 'full_attention', kvCacheSpecSlidingWindow: null });
  }
  const over = g.fifo.length - g.head - capacity;
  if (over > 0) {
    events.push({ type: 'BlockRemoved', blockHashes: g.fifo.slice(g.head, g.head + over), medium: 'GPU', groupIdx: 0 });
    g.head += over;
    if (g.head > 1 << 16) {
      g.fifo = g.fifo.slice(g.head);
      g.head = 0;
    }
  }
  return encodeBatch({ ts: Date.now() / 1000, events, dataParallelRank: 0 });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const scenario: BenchScenario = async (args) => {
  const { values: v } = parseArgs({ args, options: {
    replicas: { type: 'string', default: '64' }, capacity: { type: 'string', default: '4096' },
    'blocks-per-step': { type: 'string', default: '14' }, 'request-blocks': { type: 'string', default: '100' },
    steps: { type: 'string', default: '600' }, rounds: { type: 'string', default: '5' },
  } });
  const replicas = Number(v.replicas);
  const capacity = Number(v.capacity);
  const perStep = Number(v['blocks-per-step']);
  const requestBlocks = Number(v['request-blocks']);
  const steps = Number(v.steps);
  await initBlockHasher();

  // Part 1.
  const index = new EventsIndex({ entries: 2 * replicas * capacity, slots: Math.max(replicas, 1) });
  const gens: Gen[] = [];
  const streams: ReplicaStream[] = [];
  for (let r = 0; r < replicas; r++) {
    gens.push({ seq: 0, next: BigInt(r + 1) << 40n, parent: null, inRequest: 0, fifo: [], head: 0, token: r * 7919 });
    const s = new ReplicaStream(index, { slot: r, blockSize: BS, silenceTicks: 3, tickMs: 100, capacityBlocks: () => capacity, nowMs: Date.now }, { requestReplay: () => {} });
    s.onConnected();
    s.onReplayEnd(true);
    streams.push(s);
  }
  // Warm-up: fill every replica's cache to capacity (not timed).
  const warmSteps = Math.ceil(capacity / perStep) + 10;
  for (let k = 0; k < warmSteps; k++) for (let r = 0; r < replicas; r++) streams[r]!.onLive(gens[r]!.seq++, step(gens[r]!, perStep, requestBlocks, capacity));
  // The timed traffic, encoded beforehand.
  const batches: Uint8Array[][] = gens.map((g) => Array.from({ length: steps }, () => step(g, perStep, requestBlocks, capacity)));
  const firstSeq = gens.map((g) => g.seq);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let k = 0; k < steps; k++) for (let r = 0; r < replicas; r++) streams[r]!.onLive(firstSeq[r]! + k, batches[r]![k]!);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system;
  const blockOps = replicas * steps * perStep * 2; // stored + removed
  const events = replicas * steps * 2;
  const usPerBlock = cpuUs / blockOps;
  const seedOpsPerSec = 64 * 700 * 2;
  const seedCore = (seedOpsPerSec * usPerBlock) / 1e6;
  if (!streams.every((s) => s.live)) throw new Error(`a stream left Live during the run: ${index.reason(streams.findIndex((s) => !s.live))}`);
  const unmapped = streams.reduce((n, _, r) => n + index.stat(r, Stat.Unmapped), 0);
  if (unmapped > 0) throw new Error(`${unmapped} blocks could not be mapped: the generator's chains are wrong`);

  // Part 3 (lookup, the acceptor's side): 64 live candidates, a hot prefix of 2,000 blocks held by 3 of them;
  // prompts of 112 and 2,000 blocks on that prefix; each lookup timed alone.
  const lix = new EventsIndex({ entries: 1 << 20, slots: 64 });
  const hot = Float64Array.from({ length: 2000 }, (_, i) => (i + 1) * 1_000_003 + 7);
  for (const slot of [3, 17, 42]) for (const h of hot) lix.add(slot, h);
  for (let slot = 0; slot < 64; slot++) for (let i = 0; i < 4000; i++) lix.add(slot, slot * 1e9 + i * 31 + 5);
  const cands = Array.from({ length: 64 }, (_, i) => i);
  const out = new Int32Array(64);
  const lookupUs = (blocks: number): { p50: number; p99: number } => {
    const hashes = hot.subarray(0, blocks);
    const ts: number[] = [];
    for (let i = 0; i < 3000; i++) {
      const t = process.hrtime.bigint();
      lix.lookup(hashes, cands, out);
      ts.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    if (out[3] !== blocks || out[0] !== 0) throw new Error('lookup returned the wrong runs');
    ts.sort((a, b) => a - b);
    return { p50: ts[Math.floor(ts.length / 2)]!, p99: ts[Math.floor(ts.length * 0.99)]! };
  };
  const l112 = lookupUs(112);
  const l2000 = lookupUs(2000);

  // Part 2.
  const endpoint = await freeKvEventsEndpoint();
  const mock = await startMockReplica({ profile: 'tiny', timeScale: 0.1, kvEvents: endpoint });
  const eix = new EventsIndex({ entries: 1024, slots: 1 });
  const sub = new KvEventSubscriber(eix, new ReplicaTable(1), { tickMs: 100, silenceTicks: 3, replayTimeoutMs: 2000, reconnectIntervalMs: 100, heartbeatIntervalMs: 100, heartbeatTimeoutMs: 300 });
  sub.assign({ slot: 0, id: 'm', endpoint, blockSize: BS, loraIds: [] });
  const waitState = async (want: boolean): Promise<number> => {
    const t = performance.now();
    while ((eix.state(0) === StreamState.Live) !== want) {
      if (performance.now() - t > 10_000) throw new Error('stream state did not change within 10 s');
      await new Promise((r) => setImmediate(r));
    }
    return performance.now() - t;
  };
  await waitState(true);
  const down: number[] = [];
  const up: number[] = [];
  for (let i = 0; i < Number(v.rounds); i++) {
    await mock.kvEvents!.close();
    down.push(await waitState(false));
    await mock.kvEvents!.open();
    up.push(await waitState(true));
  }
  sub.close();
  await mock.close();

  return {
    title: 'KV events: subscriber apply rate on one thread, and fallback time when a publisher dies',
    columns: ['measurement', 'value'],
    rows: [
      ['replicas × steps (batches applied)', `${replicas} × ${steps} (${replicas * steps})`],
      ['blocks per batch (stored + removed)', `${perStep} + ${perStep}`],
      ['CPU per block op (store or remove), µs', usPerBlock.toFixed(2)],
      ['CPU per batch, µs', (cpuUs / (replicas * steps)).toFixed(1)],
      ['block ops/s on one core', Math.round(1e6 / usPerBlock).toLocaleString('en-US')],
      ['events/s on one core (BlockStored or BlockRemoved)', Math.round((events / cpuUs) * 1e6).toLocaleString('en-US')],
      ['seed fleet (64 × 700 stored + 700 removed blocks/s): share of a core', `${(seedCore * 100).toFixed(1)} %`],
      ['wall time of the timed run, ms', wallMs.toFixed(0)],
      ['exact lookup, 64 live candidates, 112 blocks (3 hold all), p50 / p99 µs', `${l112.p50.toFixed(1)} / ${l112.p99.toFixed(1)}`],
      ['exact lookup, 64 live candidates, 2,000 blocks (3 hold all), p50 / p99 µs', `${l2000.p50.toFixed(1)} / ${l2000.p99.toFixed(1)}`],
      ['publisher closed → fallback, ms (median / max)', `${median(down).toFixed(1)} / ${Math.max(...down).toFixed(1)}`],
      ['publisher reopened → events again, ms (median / max)', `${median(up).toFixed(1)} / ${Math.max(...up).toFixed(1)}`],
    ],
    notes: [
      `Steady state: each replica's cache full at --capacity ${capacity} blocks (index entries ${replicas * capacity}, ${index.bytesPerEntry} B each), every step storing and evicting ${perStep} blocks; requests of ${requestBlocks} blocks.`,
      'CPU from process.cpuUsage (nothing else runs in the process meanwhile) around the apply loop only; batches were encoded before it. The subscriber thread\'s socket work (ZeroMQ receive, one per batch) is not included.',
      'Fallback: the SUB socket\'s disconnect event (the heartbeat bounds a silent peer at 300 ms); back: reconnect, replay check of the last batch, live.',
    ],
    extra: { usPerBlock, seedCore, down, up, cpuUs, blockOps, lookup112: l112, lookup2000: l2000 },
  };
};

export default scenario;
