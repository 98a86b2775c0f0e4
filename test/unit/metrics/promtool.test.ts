import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayMetrics } from '../../../src/metrics/metrics.ts';
import { metricsTestConfig, scriptedRun } from './scripted-run.ts';
import { PROMTOOL_SKIP, promtoolCheck } from '../../helpers/promtool.ts';

// promtool comes from the Debian `prometheus` package; .ci/run installs it, and under CI=true its absence fails.

void test('promtool check metrics passes clean on a fresh gateway and after a scripted run', { skip: PROMTOOL_SKIP }, async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  m.setSources({
    inflight: () => 1, tokenizerQueueDepth: () => 0,
    replicaUp: () => [['8b-1', 1], ['8b-2', 1], ['70b-1', 0]],
    replicaStalenessSeconds: () => [['8b-1', 0.1], ['8b-2', 0.2], ['70b-1', 6]],
    kvOccupancy: () => [['8b', 0.7], ['70b', 0.4]],
  });
  const fresh = promtoolCheck(await m.render());
  assert.deepEqual(fresh, { status: 0, output: '' });
  scriptedRun(m);
  m.thread.tokenizeInline.observe(0.003);
  const after = promtoolCheck(await m.render());
  assert.deepEqual(after, { status: 0, output: '' });
});

void test('promtool itself rejects a malformed exposition, so the check above can fail', { skip: PROMTOOL_SKIP }, () => {
  const bad = promtoolCheck('# TYPE gateway_bad_total gauge\ngateway_bad_total 1\n');
  assert.notEqual(bad.status, 0);
  assert.match(bad.output, /_total/);
});
