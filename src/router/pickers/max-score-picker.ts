// llm-d's max-score-picker: the candidate with the highest score; ties broken uniformly at random (a
// seeded PRNG, reservoir-style over the tied candidates, so the result is reproducible).
// Thread: the acceptor. Hot path: one pass over the candidates.
import type { SeededRandom } from '../seeded-random.ts';

export class MaxScorePicker {
  readonly name = 'max-score-picker';
  private readonly random: SeededRandom;

  constructor(random: SeededRandom) {
    this.random = random;
  }

  /** Position of the highest score among the first n; -1 when n is 0. */
  pick(n: number, scores: Float64Array): number {
    let best = -1;
    let ties = 0;
    for (let i = 0; i < n; i++) {
      if (best < 0 || scores[i]! > scores[best]!) {
        best = i;
        ties = 1;
      } else if (scores[i] === scores[best] && this.random.next() * ++ties < 1) {
        best = i;
      }
    }
    return best;
  }

  /** Position of the lowest cost: the same picker on negated keys. */
  pickMin(n: number, costs: Float64Array): number {
    let best = -1;
    let ties = 0;
    for (let i = 0; i < n; i++) {
      if (best < 0 || costs[i]! < costs[best]!) {
        best = i;
        ties = 1;
      } else if (costs[i] === costs[best] && this.random.next() * ++ties < 1) {
        best = i;
      }
    }
    return best;
  }
}
