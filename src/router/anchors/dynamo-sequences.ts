// Dynamo's KV router load accounting, per worker, with its KvRouterConfig defaults (ai-dynamo/dynamo
// lib/kv-router/src/scheduling/config.rs: router_track_active_blocks true, router_track_output_blocks false,
// router_assume_kv_reuse true, router_track_prefill_tokens true; the accounting itself is ActiveSequences in
// lib/llm/src/kv_router/sequence.rs):
//   - active blocks = the unique block hashes of the worker's active requests (a shared system prompt counts
//     once: the hashes are the prompt's real sequence hashes, refcounted); no output blocks;
//   - active prefill tokens = Σ over requests not yet past prefill of (isl − overlap × block size), the
//     overlap being what the indexer matched on that worker when the request was routed;
//   - potential blocks for a request = active blocks + its blocks not already active there;
//   - potential prefill tokens = active prefill tokens + (isl − overlap × block size).
// A request is added at dispatch, leaves the prefill count at its first token (mark_prefill_completed) and
// is freed when it ends. Keyed by the routing Decision (one per attempt).
// Thread: the acceptor (or the simulator's run). Hot path: newBlocks() is O(log prompt blocks) table reads;
// add() and free() O(prompt blocks), each hash's count in the worker's open-addressing table (hash-int-map.ts).
import { HashIntMap } from './hash-int-map.ts';

interface Active {
  slot: number;
  generation: number;
  hashes: Float64Array;
  prefillTokens: number;
}

/** Tokens a request of `isl` prompt tokens would prefill where `overlapBlocks` of it are cached (new_tokens). */
export function dynamoNewTokens(isl: number, overlapBlocks: number, blockSize: number): number {
  const t = isl - overlapBlocks * blockSize;
  return t > 0 ? t : 0;
}

export class DynamoSequences {
  /** Per worker: active block hash → how many of its active requests hold it. */
  private readonly unique: HashIntMap[];
  private readonly prefillTokens: Float64Array;
  /** Bumped when a worker is reset, so requests routed before it free nothing afterwards. */
  private readonly generation: Int32Array;
  private readonly active = new Map<object, Active>();

  constructor(slots: number) {
    this.unique = Array.from({ length: slots }, () => new HashIntMap());
    this.prefillTokens = new Float64Array(slots);
    this.generation = new Int32Array(slots);
  }

  /** Unique active blocks on the worker. */
  activeBlocks(slot: number): number {
    return this.unique[slot]!.size;
  }

  /** Prompt tokens routed to the worker and not yet prefilled (net of their overlap at routing). */
  activePrefillTokens(slot: number): number {
    return this.prefillTokens[slot]!;
  }

  /**
   * Blocks of `hashes` not among the worker's active blocks. Block hashes are chained (each one covers the
   * whole prefix before it), so an active request holding block i holds blocks 0..i-1 too: the request's
   * active blocks on a worker are a prefix of its chain, found by bisection in O(log blocks) map reads.
   */
  newBlocks(slot: number, hashes: Float64Array): number {
    const u = this.unique[slot]!;
    if (u.size === 0) return hashes.length;
    let lo = 0;
    let hi = hashes.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (u.get(hashes[mid]!) >= 0) lo = mid + 1;
      else hi = mid;
    }
    return hashes.length - lo;
  }

  /** add_request: the request (keyed by `key`) is now active on `slot`, with `prefill` tokens to prefill. */
  add(key: object, slot: number, hashes: Float64Array, prefill: number): void {
    if (this.active.has(key)) return;
    const u = this.unique[slot]!;
    for (let i = 0; i < hashes.length; i++) u.adjust(hashes[i]!, 1);
    this.prefillTokens[slot]! += prefill;
    this.active.set(key, { slot, generation: this.generation[slot]!, hashes, prefillTokens: prefill });
  }

  /** mark_prefill_completed: its prompt no longer counts as pending prefill. */
  prefillDone(key: object): void {
    const a = this.active.get(key);
    if (a === undefined || a.prefillTokens === 0) return;
    if (a.generation === this.generation[a.slot]) this.prefillTokens[a.slot]! -= a.prefillTokens;
    a.prefillTokens = 0;
  }

  /** free: the request ended; its blocks leave the worker's active set unless another request shares them. */
  free(key: object): void {
    const a = this.active.get(key);
    if (a === undefined) return;
    this.prefillDone(key);
    this.active.delete(key);
    if (a.generation !== this.generation[a.slot]) return;
    const u = this.unique[a.slot]!;
    for (let i = 0; i < a.hashes.length; i++) u.adjust(a.hashes[i]!, -1);
  }

  /** The worker restarted or left: it has nothing active (requests routed there before free nothing). */
  reset(slot: number): void {
    this.unique[slot]!.clear();
    this.prefillTokens[slot] = 0;
    this.generation[slot]!++;
  }

  /** Requests tracked (for tests and leak checks). */
  get size(): number {
    return this.active.size;
  }
}
