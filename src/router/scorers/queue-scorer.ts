// llm-d's queue-scorer: scraped waiting requests, min-max normalised over the candidates:
// (maxQueue − queue) / (maxQueue − minQueue), every candidate 1.0 when all queues are equal. Range [0, 1].
// Thread: the acceptor. Hot path: two passes over the candidates.

export class QueueScorer {
  readonly name = 'queue-scorer';

  score(n: number, waiting: Float64Array, out: Float64Array): void {
    let min = Infinity;
    let max = -Infinity;
    for (let i = 0; i < n; i++) {
      if (waiting[i]! < min) min = waiting[i]!;
      if (waiting[i]! > max) max = waiting[i]!;
    }
    const span = max - min;
    for (let i = 0; i < n; i++) out[i] = span > 0 ? (max - waiting[i]!) / span : 1;
  }
}
