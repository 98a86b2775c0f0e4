// Where each replica is in its current engine step, from the tokens this gateway thread relays: every token
// that comes back ends a step, and the engine has already begun the next one without a request arriving now.
// Thread: the acceptor (one per GpuTimeModel). Hot path: tokens() is one store per relayed chunk that carries
// a token; residualMs() is a load and a few flops per prediction. src/gpu-time/README.md has the measurements.

export class StepPhase {
  /** When a token last came back from the slot (fleet clock): the end of the latest step seen there. */
  private readonly endAt: Float64Array;

  constructor(slots: number) {
    this.endAt = new Float64Array(slots).fill(Number.NEGATIVE_INFINITY);
  }

  /** A step of `slot` ended at `now` (a token came back). */
  ended(slot: number, now: number): void {
    this.endAt[slot] = now;
  }

  /** The replica restarted or left: its last token says nothing about its next step. */
  reset(slot: number): void {
    this.endAt[slot] = Number.NEGATIVE_INFINITY;
  }

  /**
   * What is left of the step in progress at `now`. Steps last `stepMs / (1 − ρ)` on average when a share ρ of
   * the time prefills. Where only decode runs (`onlyDecode`: nothing awaits a first token there and the scrape
   * shows no one this gateway does not know of, whose prompt could be prefilling in chunks) a step lasts the
   * decode step, so what is left is that less the time since the last token, when a token came within it.
   * Otherwise (a step may carry a prefill chunk of unknown size, or no token came lately) half a mean step,
   * the mean residual of a step at a random instant. Where the requests there are mostly ours (`mostlyOwn`),
   * it is never less than what is left of the decode step since the last token, which the step in progress
   * lasts at least. Just after a step ended (a stream's last token, the queue dispatching into the slot it
   * freed) that is nearly a whole step: half a mean step there put the seed mix's TTFT prediction ~15 % under
   * the engines' at 5,000 requests/s. Where another gateway's requests run too, the decode step this one
   * learned carries their prefill chunks as well, and a floor built on it shed what the replica could serve
   * (four gateways lost 12-27 % of kv-aware's goodput). GpuTimeModel decides `mostlyOwn` (FOREIGN_SHARE_MAX).
   */
  residualMs(slot: number, now: number, stepMs: number, rho: number, onlyDecode: boolean, mostlyOwn: boolean): number {
    const since = now - this.endAt[slot]!;
    const inStep = since >= 0 && since < stepMs;
    if (onlyDecode && inStep) return stepMs - since;
    const random = (0.5 * stepMs) / (1 - rho);
    if (!mostlyOwn || !inStep) return random;
    const left = stepMs - since;
    return left > random ? left : random;
  }
}
