// The per-stream pass of one prediction (stream-slack.ts harm: a pass over every stream on the replica), held
// until someone asks for it. predict() sets the query and leaves the pass pending; kv-aware's scorer predicts
// every candidate and asks only where the TTFT and TPOT already fit, the only place it can change a verdict.
// Only the latest prediction can be completed: the next predict() overwrites the query.
// Thread: the acceptor (one per GpuTimeModel). No allocation.
import type { GpuPrediction } from './gpu-prediction.ts';
import { SlackQuery, type StreamSlack } from './stream-slack.ts';

export class PendingSlack {
  /** The query predict() fills for the prediction it is making. */
  readonly q = new SlackQuery();
  private readonly streams: StreamSlack;
  private slot = -1;
  private owner: GpuPrediction | null = null;

  constructor(streams: StreamSlack) {
    this.streams = streams;
  }

  /** `p` on `slot` has its query in this.q: its harm, harmClearMs and idleMs wait for complete(p). */
  pend(slot: number, p: GpuPrediction): void {
    this.slot = slot;
    this.owner = p;
    p.harmPending = true;
  }

  /** `p.harm` (with harmClearMs and idleMs), running the pass if it is pending. Throws for an outdated `p`. */
  complete(p: GpuPrediction): number {
    if (!p.harmPending) return p.harm;
    if (this.owner !== p) throw new Error('GpuTimeModel.harmOf: a pending prediction outlived its query (another predict() ran since)');
    const s = this.streams;
    p.harm = s.harm(this.slot, this.q);
    p.harmClearMs = s.clearMs;
    p.idleMs = s.idleMs;
    p.harmPending = false;
    this.owner = null;
    return p.harm;
  }
}
