// What an idle replica of a pool's nominal engine reaches, against the targets admission holds requests to:
// the tier's TTFT (admission.ttft_ms_by_tier; prompts over 4,000 tokens get 1.25 × their idle TTFT, always
// reachable) and the pool's TPOT (engine.tpot_target_ms). A request whose targets are out of reach even there
// is not refused for it: it is judged against what an idle replica reaches (gpu-fit.ts) and served best
// effort, and counted (gateway_admission_infeasible_total{pool,tier,reason}); the gateway names such pools
// and tiers at startup and on reload (unreachableTargets).
//   reason step_time:     the pool's own step is the bar: its idle decode step passes the TPOT target, or a
//                         one-token prompt's idle TTFT passes the tier's TTFT;
//   reason prompt_length: the request's own size is: its prompt's idle TTFT passes the TTFT, or the decode step
//                         over its context (prompt + max_tokens) passes the TPOT.
// Thread: the acceptor (infeasibleReason, a few flops and one walk of the prompt's 2,048-token chunks per
// request) and main at setup (unreachableTargets).
import type { GatewayConfig } from '../config/schema.ts';
import { PoolFigures } from '../gpu-time/pool-figures.ts';
import { LONG_PROMPT_FACTOR, SHORT_PROMPT_TOKENS } from '../gpu-time/model-parameters.ts';
import type { InfeasibleReason, SlaTier } from './types.ts';

export type { InfeasibleReason } from './types.ts';

const TIERS: readonly SlaTier[] = ['premium', 'standard', 'batch'];

/** Why a request's targets are out of reach on an idle replica of the pool's nominal engine; null when they are not. */
export function infeasibleReason(fig: PoolFigures, promptTokens: number, contextTokens: number, tierMs: number): InfeasibleReason | null {
  const target = fig.tpotTargetMs;
  if (fig.stepMs(1, 0) > target || fig.idleTtftMs(1) > tierMs) return 'step_time';
  if (fig.stepMs(1, contextTokens) > target) return 'prompt_length';
  // Past 4,000 tokens the budget is 1.25 × the idle TTFT (GpuTimeModel.budgetMs): always reachable.
  if (promptTokens <= SHORT_PROMPT_TOKENS && fig.idleTtftMs(promptTokens) > tierMs) return 'prompt_length';
  return null;
}

export interface UnreachableTarget {
  pool: string;
  tier: SlaTier;
  message: string;
}

const ms = (v: number): string => `${v >= 100 ? Math.round(v).toLocaleString('en-US') : Math.round(v * 10) / 10} ms`;
const tokens = (v: number): string => `${Math.floor(v).toLocaleString('en-US')} tokens`;

/** The longest prompt (≤ 4,000 tokens) an idle replica prefills within `tierMs`; 0 when not even one token. */
function longestWithin(fig: PoolFigures, tierMs: number): number {
  let lo = 0;
  let hi = SHORT_PROMPT_TOKENS;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fig.idleTtftMs(mid) <= tierMs) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Each pool and tier whose targets an idle replica of the pool's nominal engine cannot meet for some request
 * it accepts, with the target and what is reachable: one entry per pool and tier (the gateway logs each once
 * at startup and on reload).
 */
export function unreachableTargets(cfg: Pick<GatewayConfig, 'pools' | 'admission'>): UnreachableTarget[] {
  const out: UnreachableTarget[] = [];
  for (const pool of cfg.pools) {
    const fig = new PoolFigures(pool);
    const target = fig.tpotTargetMs;
    const idleStep = fig.stepMs(1, 0);
    let tpot = '';
    if (idleStep > target) {
      tpot = `TPOT target ${ms(target)} is out of reach: an idle replica's decode step is ${ms(idleStep)}`;
    } else if (fig.stepMs(1, pool.max_context_tokens) > target) {
      const reach = fig.perKvTokenMs > 0 ? (target - idleStep) / fig.perKvTokenMs : Number.POSITIVE_INFINITY;
      tpot = `TPOT target ${ms(target)} is reached on an idle replica up to ${tokens(reach)} of context (prompt + max_tokens; ` +
        `${ms(idleStep)} with none, ${ms(fig.stepMs(1, pool.max_context_tokens))} at the pool's ${tokens(pool.max_context_tokens)})`;
    }
    for (const tier of TIERS) {
      const tierMs = cfg.admission.ttft_ms_by_tier[tier];
      let ttft = '';
      const longest = fig.idleTtftMs(SHORT_PROMPT_TOKENS) > tierMs ? longestWithin(fig, tierMs) : SHORT_PROMPT_TOKENS;
      if (longest === 0) {
        ttft = `TTFT target ${ms(tierMs)} is out of reach: an idle replica takes ${ms(fig.idleTtftMs(1))} for a one-token prompt`;
      } else if (longest < SHORT_PROMPT_TOKENS) {
        ttft = `TTFT target ${ms(tierMs)} is reached on an idle replica by prompts up to ${tokens(longest)} ` +
          `(a ${SHORT_PROMPT_TOKENS.toLocaleString('en-US')}-token prompt takes ${ms(fig.idleTtftMs(SHORT_PROMPT_TOKENS))}; longer ones are held to ${LONG_PROMPT_FACTOR} × their idle TTFT)`;
      }
      if (ttft === '' && tpot === '') continue;
      const parts = [ttft, tpot].filter((s) => s !== '').join('; ');
      out.push({ pool: pool.id, tier, message: `pool ${pool.id}, tier ${tier}: ${parts}. Requests past these are admitted best effort, judged against what an idle replica reaches, and counted in gateway_admission_infeasible_total.` });
    }
  }
  return out;
}
