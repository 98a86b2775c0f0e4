// The markdown the simulator prints: each pool's capacity first, then one table per pool with a row per
// policy and load point (every figure the contract's JSON carries), and the sweep's check of the capacity.
// Thread: main. Formatting only.
import type { PoolCapacity } from './capacity.ts';
import type { RunOutput } from './run-types.ts';
import type { SweepPlan } from './sweep.ts';

function fmt(x: number | null, digits: number): string {
  return x === null ? '–' : x.toFixed(digits);
}

function pct(x: number | null): string {
  return x === null ? '–' : `${(x * 100).toFixed(1)} %`;
}

export function capacityTable(caps: readonly PoolCapacity[], workload: string): string {
  const lines = [
    `### Pool capacity on ${workload} (requests/s within TTFT and TPOT ≤ 50 ms, from the step-time model, no cache hits)`,
    '',
    '| pool | replicas | profile | mean prompt / output tokens | prefill ms / request | decode context tokens | capacity rps | per replica | bound by |',
    '| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const c of caps) {
    lines.push(`| ${c.pool} | ${c.replicas} | ${c.profile} | ${c.meanPromptTokens.toFixed(0)} / ${c.meanOutputTokens.toFixed(0)} | ` +
      `${c.prefillMs.toFixed(0)} | ${c.decodeContextTokens.toFixed(0)} | ${c.capacityRps.toFixed(1)} | ${c.perReplicaRps.toFixed(2)} | ${c.boundBy} |`);
  }
  return lines.join('\n');
}

function point(o: RunOutput): string {
  const j = o.json;
  if (j.load !== null) return `${j.load}×`;
  if (j.rps !== null) return `${j.rps} rps`;
  return `speed ${j.speed}`;
}

export function poolTables(plan: SweepPlan, outs: readonly RunOutput[]): string {
  const parts: string[] = [];
  plan.pools.forEach((pool, pi) => {
    const cap = plan.capacities[pi]!;
    const rows = outs.filter((o) => o.json.pool === pool.id);
    if (rows.length === 0) return;
    const lines = [
      `### Pool ${pool.id}: ${pool.replicas.length} × ${pool.profile}, ${plan.workload.kind === 'seed-mix' ? 'seed-mix' : rows[0] && plan.specs[rows[0].index]!.workload}, gateways ${rows[0]!.json.gateways}`,
      '',
      '| policy | admission | point | offered rps | goodput rps | SLO met | TTFT p50 ms | TTFT p99 ms | TPOT p95 ms | KV occupancy | preemptions | hit measured | hit predicted | in-flight max/mean | shed | shed at arrival | shed answer p99 ms | failed | admitted within SLO | TTFT prediction error p50 / p90 |',
      '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ];
    for (const o of rows) {
      const j = o.json;
      lines.push(`| ${j.policy} | ${j.admission} | ${point(o)} | ${fmt(j.offered_rps, 1)} | ${fmt(j.goodput_rps, 1)} | ${pct(j.slo_attainment)} | ` +
        `${fmt(j.ttft_ms.p50, 0)} | ${fmt(j.ttft_ms.p99, 0)} | ${fmt(j.tpot_ms.p95, 1)} | ${pct(j.kv_occupancy_mean)} | ${j.preemptions} | ` +
        `${pct(j.prefix_hit_rate.measured)} | ${pct(j.prefix_hit_rate.predicted)} | ${fmt(j.inflight_tokens_max_over_mean, 2)} | ` +
        `${j.shed} | ${j.shed_at_arrival} | ${fmt(j.shed_answer_ms_p99, 2)} | ${o.failed} | ${pct(j.admitted_within_slo)} | ` +
        `${j.ttft_prediction ? `${fmt(j.ttft_prediction.median_abs_error_pct, 1)} / ${fmt(j.ttft_prediction.p90_abs_error_pct, 1)} %` : '–'} |`);
    }
    // The sweep's check of the computed capacity: the highest offered rate some policy served with ≥ 90 %
    // of its requests inside the SLO.
    let best: RunOutput | null = null;
    for (const o of rows) if (o.json.slo_attainment >= 0.9 && (!best || o.json.offered_rps > best.json.offered_rps)) best = o;
    lines.push('', best
      ? `Capacity check: computed ${cap.capacityRps.toFixed(1)} rps; highest offered rate with ≥ 90 % SLO attainment in this sweep: ${best.json.offered_rps.toFixed(1)} rps (${best.json.policy}, ${point(best)}).`
      : `Capacity check: computed ${cap.capacityRps.toFixed(1)} rps; no run of this sweep reached 90 % SLO attainment.`);
    parts.push(lines.join('\n'));
  });
  return parts.join('\n\n');
}
