// sim-fidelity scenario: how close is the simulator's TTFT to a live gateway's on the same requests? Runs the
// fidelity workload (test/integration/sim/fidelity-run.ts: 46 chats live through a real gateway and four
// in-process mock replicas at time scale 1, then in the simulator at the times they were sent) --runs times,
// each on a fresh fleet, and reports hit rates, TTFT p50 both ways and their ratio, with the machine's load
// average. The integration test asserts the hit rates and the ratio's lower bound; the ratio's upper side moves
// with the machine's load (the live path's own CPU), so it is reported here, not asserted.
// Thread: bench main thread (gateway acceptor, mock replicas, client); the tokenizer pool and poller are their
// own threads, as in production.
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { runFidelity, startFidelityFleet } from '../../test/integration/sim/fidelity-run.ts';

const simFidelity: BenchScenario = async (args) => {
  const { values } = parseArgs({ args, options: { runs: { type: 'string', default: '3' } } });
  const runs = Number(values.runs);
  const rows: Array<Array<string | number>> = [];
  const ratios: number[] = [];
  for (let i = 0; i < runs; i++) {
    const fleet = await startFidelityFleet();
    try {
      const r = await runFidelity(fleet);
      ratios.push(r.liveP50 / r.simP50);
      rows.push([i + 1, (100 * r.liveHit).toFixed(1), (100 * r.simHit).toFixed(1), r.liveP50.toFixed(1), r.simP50.toFixed(1),
        (r.liveP50 / r.simP50).toFixed(2), loadavg()[0]!.toFixed(1)]);
    } finally {
      await fleet.close();
    }
  }
  return {
    title: 'Simulator fidelity: the same requests live and simulated',
    columns: ['run', 'hit rate live %', 'hit rate sim %', 'TTFT p50 live ms', 'TTFT p50 sim ms', 'live / sim', `load avg (${cpus().length} cores)`],
    rows,
    notes: ['40 measured chats 320 ms apart after 6 warm-ups, kv-aware, the demo fleet\'s 8B pool (4 x llama-8b-a100, time scale 1)'],
    extra: { ratios },
  };
};

export default simFidelity;
