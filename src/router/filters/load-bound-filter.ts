// The load bound (consistent hashing with bounded loads, in tokens): a candidate may take the request
// when its in-flight tokens with the request added stay within (1 + ε) × the mean over the candidates,
// that mean including the request (ε = routing.load_bound_epsilon), or when it is idle. When none may (a
// request larger than the bound leaves room for anywhere busy), the rule is applied to the load before the
// request instead, which the least loaded candidate always passes, so near-equal candidates stay eligible
// and cold placement keeps its rendezvous order. The picker takes a candidate past the bound only if it fits and
// none within the bound does (pickers/tiered-picker.ts).
// In-flight tokens are the ledger's outstanding tokens: prompt not yet prefilled + output not yet generated.
// kv-aware has two: a tight ε for cold prompts, a looser one for warm prompts (policies/kv-aware.ts says why).
// Thread: the acceptor. Hot path: two passes over the candidates.
import type { CandidateTable } from '../candidate-table.ts';

export class LoadBoundFilter {
  readonly name = 'load-bound-filter';
  private readonly factor: number;

  constructor(epsilon: number) {
    this.factor = 1 + epsilon;
  }

  /** Marks t.allowed; returns how many candidates are within the bound (0 = the fallback applied). */
  mark(t: CandidateTable): number {
    const n = t.n;
    const factor = this.factor;
    let sum = 0;
    for (let i = 0; i < n; i++) sum += t.outstanding[i]!;
    let within = 0;
    for (let i = 0; i < n; i++) {
      const out = t.outstanding[i]!;
      const add = t.addTokens[i]!;
      const ok = out <= 0 || out + add <= (factor * (sum + add)) / n;
      t.allowed[i] = ok ? 1 : 0;
      if (ok) within++;
    }
    if (within === 0) {
      // Bounded loads' admission rule, before the request's own tokens: always true of the least loaded.
      for (let i = 0; i < n; i++) t.allowed[i] = t.outstanding[i]! <= (factor * (sum + t.addTokens[i]!)) / n ? 1 : 0;
    }
    return within;
  }
}
