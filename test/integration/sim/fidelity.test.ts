// Fidelity of the fleet simulator: the workload of fidelity-run.ts live through a real gateway and in the
// simulator, at the same arrival times. Asserted: every request's prompt length agrees; the prefix hit rate
// (cached / prompt tokens of the measured requests) within 5 points; live TTFT p50 (send to the first content
// delta at the client) no lower than 0.8 × the simulated one (the live path adds work the simulator does not
// model, never removes it). How far above the simulated one the live TTFT lands depends on how busy the
// machine is (the gateway's and the mocks' tokenization, HTTP, event-loop delays): a figure, not a property, so
// it is printed here and measured over several runs by `npm run bench -- sim-fidelity`.
// `FIDELITY_TABLE=1` prints every request both ways.
import { strict as assert } from 'node:assert';
import { after, before, test } from 'node:test';
import { POOL, REQUESTS, WARMUPS, runFidelity, startFidelityFleet, type FidelityFleet } from './fidelity-run.ts';

let fleet: FidelityFleet;

before(async () => {
  fleet = await startFidelityFleet();
});

after(async () => {
  await fleet?.close();
});

test('the simulator and a live gateway agree on prefix hit rate, and live TTFT is not below the simulated', { timeout: 120_000 }, async () => {
  const run = await runFidelity(fleet);
  assert.equal(run.sim.figures.completed, WARMUPS + REQUESTS, 'every simulated request completes');
  for (let i = 0; i < WARMUPS + REQUESTS; i++) {
    const l = run.live[i]!;
    const o = run.sim.outcomes[i]!;
    assert.equal(l.promptTokens, fleet.planned[i]!.promptTokens, `request ${i}: same prompt length both ways`);
    assert.ok(!Number.isNaN(l.ttftMs), `request ${i}: a content delta arrived`);
    if (process.env.FIDELITY_TABLE) console.log(`${i} sent ${l.sentMs.toFixed(0)} prompt ${l.promptTokens} | live ${l.replica} cached ${l.cachedTokens} ttft ${l.ttftMs.toFixed(1)} | sim ${POOL}-${o.slot + 1} cached ${o.cachedTokens} ttft ${o.ttftMs.toFixed(1)}`);
  }
  console.log(`fidelity: ${run.report}`);

  // A workload that shares nothing would agree trivially: the tenants' prompts must be hit most of the time.
  assert.ok(run.simHit > 0.4, `the workload exercises the prefix cache (${run.report})`);
  assert.ok(Math.abs(run.liveHit - run.simHit) <= 0.05, `prefix hit rates within 5 points: ${run.report}`);
  assert.ok(run.liveP50 >= 0.8 * run.simP50, `live TTFT p50 not below the simulated one by more than 20 %: ${run.report}`);
});
