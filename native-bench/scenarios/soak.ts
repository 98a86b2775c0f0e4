// `npm run bench -- soak [--minutes 30] [--rps 6] [--replicas 3] [--time-scale 0.2] [--fault-every-s 60]
// [--sample-s S] [--warmup-s S] [--tokenizer-cache-mb 16] [--seed 1] [--plot PATH.svg]`
// Question: does the gateway hold its memory and latency over a long run of realistic traffic with faults?
// Setup: a private redis-server (quota backend, fail-open), `--replicas` mock 8B replicas as processes
// (time-scaled), the gateway as its own process (kv-aware routing). Load: the seed mix (sim/seed-mix.ts: the
// design's prompt/output mix, shared system prompts, multi-turn chats, bursts) at `--rps`, open loop, 80 %
// streamed. Faults, alternating every `--fault-every-s`: one replica SIGKILLed and restarted on its port
// 5 s later; Redis SIGKILLed and restarted 3 s later. Samples gateway RSS, V8 heap, event-loop delay and
// failures every `--sample-s`; prints a table, writes the SVG. Fails (exit 1) when RSS grew more than 5 %
// from the end of warm-up (`--warmup-s`, or later once the tokenizer caches have levelled off) to the end of the run, when any answer was broken (not a complete answer, a
// cleanly cut stream or an HTTP error), or when requests stay in flight in the gateway after the load.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { OwnRedis } from '../../test/integration/quota/own-redis.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../test/helpers/mock-replicas.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { SeedMixWorkload } from '../sim/seed-mix.ts';
import { sendSoakRequest, type Outcome } from '../soak/client.ts';
import { writeSoakSvg, type SoakFault, type SoakPoint } from '../soak/plot.ts';
import { soakRequest } from '../soak/requests.ts';
import { sampleGateway } from '../soak/sampler.ts';
import { CACHE_SETTLED, summarizeSoak, warmupEnd, type Interval } from '../soak/summary.ts';
import type { BenchScenario } from '../types.ts';

const MODEL = 'llama-3.1-8b-instruct';
const API_KEY = 'sk-soak-bench';
const MAX_LEN = 32_768;
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The schema's A100 8B engine defaults (src/config/schema.ts) on a GPU `scale` times as slow (scale < 1: faster).
 * The TTFT target stays at its default: on a shared machine the gateway's own queueing is most of a TTFT.
 */
function scaledEngine(scale: number): Record<string, number> {
  return {
    prefill_tokens_per_second: 12000 / scale, decode_base_ms: 10.5 * scale, decode_per_seq_ms: 0.025 * scale,
    decode_per_1k_kv_tokens_ms: 0.085 * scale, adapter_load_ms: 40 * scale, tpot_target_ms: 50 * scale,
  };
}

/** On a loaded machine redis-server can miss OwnRedis's 5 s start window: try again a few times. */
async function restartRedis(redis: OwnRedis): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await redis.restart();
      return;
    } catch (err) {
      await redis.kill();
      if (attempt >= 5) throw err;
      await sleep(1000);
    }
  }
}

const soak: BenchScenario = async (argv) => {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '30' }, rps: { type: 'string', default: '6' },
      replicas: { type: 'string', default: '3' }, 'time-scale': { type: 'string', default: '0.2' },
      'fault-every-s': { type: 'string', default: '60' }, 'sample-s': { type: 'string' },
      'warmup-s': { type: 'string' }, seed: { type: 'string', default: '1' }, plot: { type: 'string' },
      'tokenizer-cache-mb': { type: 'string', default: '16' },
    },
  });
  const minutes = Number(values.minutes);
  const runMs = minutes * 60_000;
  const rps = Number(values.rps);
  const nReplicas = Number(values.replicas);
  const timeScale = values['time-scale'];
  const faultEveryMs = Number(values['fault-every-s']) * 1000;
  const sampleMs = values['sample-s'] ? Number(values['sample-s']) * 1000 : minutes <= 5 ? 5000 : 10_000;
  // V8 grows its heap for the first minutes and the tokenizer caches fill to their bound: growth is judged
  // after both (warmupEnd). The caches are sized so that they fill within the first minutes at the default
  // rate (16 MiB: about 3 minutes at 6 req/s of the seed mix).
  const minWarmMs = values['warmup-s'] ? Number(values['warmup-s']) * 1000 : Math.min(300_000, runMs / 4);
  const cacheBytes = Number(values['tokenizer-cache-mb']) * 2 ** 20;
  const plotPath = values.plot ?? join(repoRoot, 'native-bench/results/soak.svg');
  if (!(minutes > 0 && rps > 0 && nReplicas >= 2 && faultEveryMs > 0)) throw new Error('--minutes, --rps > 0, --replicas >= 2');

  const logDir = mkdtempSync(join(tmpdir(), 'soak-'));
  mkdirSync(join(repoRoot, 'native-bench/results'), { recursive: true });
  const redis = await OwnRedis.start();
  const replicaArgs = (i: number, port: number): string[] => ['--model', MODEL, '--profile', 'llama-8b-a100',
    '--max-model-len', String(MAX_LEN), '--time-scale', timeScale, '--seed', String(i), '--port', String(port)];
  const replicas: SpawnedReplica[] = [];
  let gateway: Awaited<ReturnType<typeof startGatewayProcess>> | null = null;
  try {
    for (let i = 0; i < nReplicas; i++) replicas.push(await spawnMockReplica(replicaArgs(i, 0)));
    const ids = replicas.map((_, i) => `soak-${i}`);
    gateway = await startGatewayProcess({
      repoRoot, logDir, model: MODEL, apiKey: API_KEY, policy: 'kv-aware', replicas: [], readyTimeoutMs: 120_000,
      configOverrides: {
        quota: { backend: 'redis', redis_url: redis.url, failure_mode: 'open' },
        tokenizer: { cache_bytes: cacheBytes },
        // The mock GPUs run `timeScale` times faster than an A100: tell the router's cost model so.
        pools: [{ id: 'soak', model: MODEL, max_context_tokens: MAX_LEN, engine: scaledEngine(Number(timeScale)), replicas: replicas.map((r, i) => ({ id: ids[i], url: r.url })) }],
      },
    });
    const gw = gateway;
    const workload = new SeedMixWorkload({ pool: { id: 'soak', maxModelLen: MAX_LEN, blockSize: 16, adapters: [] }, rps, durationMs: runMs, seed: Number(values.seed) });

    const t0 = performance.now();
    const nowS = (): number => (performance.now() - t0) / 1000;
    const intervals: Interval[] = [];
    let cur: Interval = { tS: 0, sent: 0, ok: 0, cut: 0, httpErrors: 0, broken: 0, statuses: {}, sample: null };
    const faults: SoakFault[] = [];
    const brokenDetails: string[] = [];
    const pending = new Set<Promise<void>>();
    const count = (o: Outcome, status: number, detail: string): void => {
      const key = `${status} ${detail}`;
      if (o === 'ok') cur.ok++;
      else if (o === 'cut') cur.cut++;
      else if (o === 'http_error') { cur.httpErrors++; cur.statuses[key] = (cur.statuses[key] ?? 0) + 1; }
      else { cur.broken++; if (brokenDetails.length < 5) brokenDetails.push(detail); }
    };

    // Samples: close the current interval with the gateway's figures.
    const sampler = setInterval(() => {
      const closing = cur;
      closing.tS = nowS();
      cur = { tS: 0, sent: 0, ok: 0, cut: 0, httpErrors: 0, broken: 0, statuses: {}, sample: null };
      intervals.push(closing);
      sampleGateway(gw.proc.pid, gw.url).then((s) => { closing.sample = s; }, () => { /* a missed scrape leaves a gap */ });
    }, sampleMs);

    // Faults: replica k/2 mod n killed (SIGKILL) and restarted on its port; Redis killed and restarted.
    let k = 0;
    const faulter = setInterval(() => {
      if (performance.now() - t0 > runMs - 15_000) return;
      const n = k++;
      if (n % 2 === 0) {
        const idx = (n / 2) % nReplicas;
        const victim = replicas[idx]!;
        faults.push({ tS: nowS(), what: `replica ${ids[idx]} killed` });
        void victim.kill('SIGKILL').then(() => sleep(5000)).then(() => spawnMockReplica(replicaArgs(idx, victim.port)))
          .then((r) => { replicas[idx] = r; }, (err: Error) => { brokenDetails.push(`restart failed: ${err.message}`); });
      } else {
        faults.push({ tS: nowS(), what: 'redis restarted' });
        void redis.kill().then(() => sleep(3000)).then(() => restartRedis(redis))
          .catch((err: Error) => { brokenDetails.push(`redis restart failed: ${err.message}`); });
      }
    }, faultEveryMs);

    // Open-loop arrivals at the workload's times.
    for (let r = workload.next(); r !== null; r = workload.next()) {
      const req = soakRequest(r, MODEL, 0.8);
      const wait = req.atMs - (performance.now() - t0);
      if (wait > 0) await sleep(wait);
      cur.sent++;
      const p: Promise<void> = sendSoakRequest(gw.url, API_KEY, req.body, req.stream, 120_000)
        .then((a) => count(a.outcome, a.status, a.detail)).finally(() => pending.delete(p));
      pending.add(p);
    }
    clearInterval(faulter);
    await Promise.all(pending);
    clearInterval(sampler);
    cur.tS = nowS();
    intervals.push(cur);
    // Let the gateway settle the last requests before asking what it still holds.
    let final = await sampleGateway(gw.proc.pid, gw.url);
    for (let i = 0; i < 50 && final.inflight !== 0; i++) {
      await sleep(100);
      final = await sampleGateway(gw.proc.pid, gw.url);
    }
    const { warmS, cacheSettledS } = warmupEnd(intervals, minWarmMs / 1000, cacheBytes);
    const summary = summarizeSoak(intervals, warmS, final, brokenDetails);
    const points: SoakPoint[] = intervals.filter((iv) => iv.sample !== null).map((iv) => ({
      tS: iv.tS, rssMb: iv.sample!.rssBytes / 2 ** 20, heapMb: iv.sample!.heapUsedBytes / 2 ** 20,
      loopP99Ms: iv.sample!.loopP99Ms, failures: iv.cut + iv.httpErrors + iv.broken,
    }));
    writeSoakSvg(plotPath, `soak: ${minutes} min, seed mix at ${rps} req/s, ${nReplicas} mock replicas (time scale ${timeScale}), a fault every ${faultEveryMs / 1000} s`,
      points, faults, warmS);
    return {
      title: `Soak: ${minutes} min of the seed mix at ${rps} req/s with a fault every ${faultEveryMs / 1000} s (gateway process)`,
      columns: summary.columns,
      rows: summary.rows,
      notes: [...summary.notes,
        cacheSettledS === null
          ? `tokenizer caches still growing in the run's last third (bound tokenizer.cache_bytes ${values['tokenizer-cache-mb']} MiB): growth judged from ${(minWarmMs / 60_000).toFixed(1)} min, their filling included`
          : `tokenizer caches levelled off (never again +${CACHE_SETTLED * 100} % of their ${values['tokenizer-cache-mb']} MiB bound) at ${(cacheSettledS / 60).toFixed(1)} min; warm-up ended at ${(warmS / 60).toFixed(1)} min`,
        `faults: ${faults.length} (${faults.filter((f) => f.what.startsWith('replica')).length} replica kills, ${faults.filter((f) => f.what.startsWith('redis')).length} Redis restarts)`, `plot: ${plotPath}; gateway and replica logs: ${logDir}`],
      failed: summary.failed,
      extra: { intervals, faults, final },
    };
  } finally {
    await gateway?.stop();
    await Promise.all(replicas.map((r) => r.kill('SIGKILL')));
    await redis.stop();
  }
};

export default soak;
