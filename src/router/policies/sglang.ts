// sglang (the SGLang router's cache_aware policy with its CLI defaults), for comparison:
//   loads = requests in flight per worker (this gateway's ledger)
//   if max − min > 64 and max > 1.5 × min → least loaded
//   else if matched blocks / prompt blocks > 0.3 → the worker with the longest match (ties: less loaded)
//   else → least loaded
// Prefix from its own approximate index, written at dispatch and bounded per worker by the tree's own size
// (max_tree_size 2^26 characters, sgl-project/sglang sgl-router router_args.py; at 4 characters per token,
// 2^20 blocks of 16 tokens): SGLang's router never learns the engines' KV size. No correction, reply blocks
// or headroom.
// Thread: the acceptor. Hot path: one index lookup + one ledger load per candidate.
import { LEDGER_INFLIGHT } from '../../registry/inflight-ledger.ts';
import type { Decision, FleetView, RouteRequest } from '../types.ts';
import { AnchorPolicy } from './anchor-policy.ts';

export const SGLANG_DEFAULTS = { balanceAbsThreshold: 64, balanceRelThreshold: 1.5, cacheThreshold: 0.3 } as const;
/** max_tree_size (2^26 characters) in 16-token blocks at 4 characters per token. */
export const SGLANG_TREE_BLOCKS = 2 ** 26 / 4 / 16;

export class SglangPolicy extends AnchorPolicy {
  readonly name = 'sglang';

  constructor(slots: number) {
    super(slots, { feed: 'dispatch', capacity: SGLANG_TREE_BLOCKS });
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    const maxMatch = this.matchAll(req, eligible, fleet);
    const t = this.table;
    let least = 0;
    let most = 0;
    for (let i = 0; i < n; i++) {
      t.inflight[i] = fleet.ledger.get(t.slot[i]!, LEDGER_INFLIGHT);
      if (t.inflight[i]! < t.inflight[least]!) least = i;
      if (t.inflight[i]! > t.inflight[most]!) most = i;
    }
    const min = t.inflight[least]!;
    const max = t.inflight[most]!;
    let chosen = least;
    out.why = 'policy';
    const imbalanced = max - min > SGLANG_DEFAULTS.balanceAbsThreshold && max > SGLANG_DEFAULTS.balanceRelThreshold * min;
    const blocks = req.blockHashes.length;
    const key = this.rankKey;
    if (!imbalanced && blocks > 0 && maxMatch / blocks > SGLANG_DEFAULTS.cacheThreshold) {
      chosen = -1;
      for (let i = 0; i < n; i++) {
        if (t.matched[i] === maxMatch && (chosen < 0 || t.inflight[i]! < t.inflight[chosen]!)) chosen = i;
        // Ranked by match, then load (≤ 2^20 requests in flight on one worker).
        key[i] = -t.matched[i]! * 1_048_576 + t.inflight[i]!;
      }
      out.why = 'prefix';
    } else {
      for (let i = 0; i < n; i++) key[i] = t.inflight[i]!;
    }
    this.rankedBy(false, chosen);
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    return out.slot;
  }
}
