// The simulator's policy configs: every schema policy is offered, and the llm-d anchors scrape at llm-d's
// own metrics refresh (50 ms, llm-d-router pkg/epp/server/options.go) while the others keep the registry's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { seedConfig } from '../../../native-bench/sim/fleet.ts';
import { policyNames, withPolicy } from '../../../native-bench/sim/policies.ts';

void test('llm-d and llm-d-precise scrape every 50 ms; every other policy at the registry interval', () => {
  const cfg = seedConfig();
  assert.equal(cfg.registry.scrape_interval_ms, 100);
  assert.ok(policyNames().includes('llm-d-precise'));
  for (const name of policyNames()) {
    const c = withPolicy(cfg, name);
    assert.equal(c.routing.policy, name);
    assert.equal(c.registry.scrape_interval_ms, name.startsWith('llm-d') ? 50 : 100, name);
  }
  assert.equal(cfg.registry.scrape_interval_ms, 100, 'the fleet config is not changed');
});
