// Each pool's capacity: the request rate its replicas can serve within the SLA on a given request mix,
// worked out from the engine's step-time model (profiles.ts) rather than measured, so that --load can be
// stated as a multiple of it and the sweep can check it.
//
// Model. An engine with work runs steps back to back; each step costs a = fixedMs + weightReadMs, plus
// c = perSeqMs + kvReadMsPer1kTokens·ctx/1000 per decoding sequence (ctx = the context a decoding sequence
// carries, weighted by how many tokens it decodes), plus its prefill chunks' compute. At r requests/s per
// replica, each needing p ms of prefill compute and o decode steps, the steps of one second satisfy
//     (1000/T)·a + r·o·c + r·p = 1000      (T = mean step = the TPOT a decoding request sees)
// and the batch is B = r·o·T/1000 (Little). With T at the TPOT bound (50 ms):
//     r = (1000 − 1000·a/T) / (o·c + p),
// capped by max_num_seqs (B ≤ max_num_seqs) and by the KV pool less admission's headroom
// (B·ctx ≤ (1 − headroom)·blocks·block_size). Prefix-cache hits are not counted (p is the whole prompt's),
// so a policy that keeps hits can go past 1×; TTFT queueing is not modelled, which the sweep checks.
// Thread: the run's. Setup only (one pass over a sample of the mix).
import { PROFILES } from '../../test/mock-replica/engine/profiles.ts';
import type { SimPool } from './fleet.ts';
import { SLO_TPOT_MS } from './metrics.ts';
import type { Workload } from './workload-types.ts';

export interface PoolCapacity {
  pool: string;
  replicas: number;
  profile: string;
  /** Requests/s the whole pool serves within the SLA on the mix. */
  capacityRps: number;
  perReplicaRps: number;
  /** Which bound set it: 'tpot', 'max_num_seqs' or 'kv'. */
  boundBy: string;
  meanPromptTokens: number;
  meanOutputTokens: number;
  /** Mean prefill compute per request, ms (no cache hits). */
  prefillMs: number;
  /** Decode-weighted context per sequence, tokens. */
  decodeContextTokens: number;
}

/** Capacity of `pool` on the requests `sample` yields (drawn to its end). */
export function poolCapacity(pool: SimPool, sample: Workload, headroomRatio: number): PoolCapacity {
  const p = PROFILES[pool.profile];
  const chunk = 2048;
  let n = 0;
  let prompt = 0;
  let output = 0;
  let prefill = 0;
  let ctxWeighted = 0;
  for (let r = sample.next(); r; r = sample.next()) {
    n++;
    prompt += r.promptTokens;
    output += r.outputTokens;
    let sq = 0;
    for (let a = 0; a < r.promptTokens; a += chunk) {
      const b = Math.min(r.promptTokens, a + chunk);
      sq += b * b - a * a;
    }
    prefill += ((r.promptTokens + p.attentionCoef * sq) * 1000) / p.prefillTokensPerSecond;
    ctxWeighted += r.outputTokens * (r.promptTokens + r.outputTokens / 2);
  }
  if (n === 0) throw new Error(`no requests in the sample for pool ${pool.id}`);
  const o = output / n;
  const pMs = prefill / n;
  const ctx = ctxWeighted / output;
  const a = p.fixedMs + p.weightReadMs;
  const c = p.perSeqMs + (p.kvReadMsPer1kTokens * ctx) / 1000;
  const T = SLO_TPOT_MS;
  let r = Math.max(0, (1000 - (1000 * a) / T) / (o * c + pMs));
  let boundBy = 'tpot';
  const bySeqs = (p.maxNumSeqs * 1000) / (o * T);
  if (bySeqs < r) {
    r = bySeqs;
    boundBy = 'max_num_seqs';
  }
  const kvTokens = (1 - headroomRatio) * pool.numGpuBlocks * pool.blockSize;
  const byKv = (kvTokens / ctx) * 1000 / (o * T);
  if (byKv < r) {
    r = byKv;
    boundBy = 'kv';
  }
  return {
    pool: pool.id, replicas: pool.replicas.length, profile: pool.profile,
    capacityRps: r * pool.replicas.length, perReplicaRps: r, boundBy,
    meanPromptTokens: prompt / n, meanOutputTokens: o, prefillMs: pMs, decodeContextTokens: ctx,
  };
}
