import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { counterChild, histogramChild } from '../../../src/metrics/fast-children.ts';

const BUCKETS = [0.001, 0.01, 0.1, 1];

/** The same families in two registries: one recorded through fast children, one through prom-client's own API. */
function twins() {
  const make = (reg: Registry) => ({
    h: new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['route', 'pool'] as const, buckets: BUCKETS, registers: [reg] }),
    c: new Counter({ name: 'x_total', help: 'c', labelNames: ['pool', 'kind', 'a'] as const, registers: [reg] }),
  });
  const fastReg = new Registry();
  const stockReg = new Registry();
  return { fastReg, stockReg, fast: make(fastReg), stock: make(stockReg) };
}

test('fast children expose exactly what prom-client exposes for the same calls, and take the fast path', async () => {
  const { fastReg, stockReg, fast, stock } = twins();
  // Label names deliberately not in sorted order: the series key sorts them.
  const fh = histogramChild(fast.h, 'chat', 'p1');
  const fh2 = histogramChild(fast.h, 'completions', 'p1');
  const fc = counterChild(fast.c, 'p1', 'input', 'z');
  const sh = stock.h.labels('chat', 'p1');
  const sh2 = stock.h.labels('completions', 'p1');
  const sc = stock.c.labels('p1', 'input', 'z');
  assert.equal(fh.fast, false, 'no series before the first call');
  for (const v of [0.0005, 0.001, 0.002, 0.05, 0.5, 1, 7, 0]) {
    fh.observe(v);
    sh.observe(v);
  }
  fh2.observe(0.3);
  sh2.observe(0.3);
  fc.inc();
  fc.inc(5);
  fc.inc(0);
  sc.inc();
  sc.inc(5);
  sc.inc(0);
  assert.equal(fh.fast, true, 'the histogram series was found under the computed key');
  assert.equal(fc.fast, true, 'the counter series was found under the computed key');
  assert.equal(await fastReg.metrics(), await stockReg.metrics());
  assert.match(await fastReg.metrics(), /x_seconds_bucket\{le="0.001",route="chat",pool="p1"\} 3/);
  assert.match(await fastReg.metrics(), /x_total\{pool="p1",kind="input",a="z"\} 6/);
});

test('after a registry reset the children start a new series and count only what came after', async () => {
  const { fastReg, fast } = twins();
  const fh = histogramChild(fast.h, 'chat', 'p1');
  const fc = counterChild(fast.c, 'p1', 'output', 'y');
  fh.observe(0.5);
  fc.inc(3);
  fastReg.resetMetrics();
  assert.equal(fh.fast, false);
  fh.observe(0.05);
  fh.observe(0.05);
  fc.inc(2);
  const text = await fastReg.metrics();
  assert.match(text, /x_seconds_count\{route="chat",pool="p1"\} 2/);
  assert.match(text, /x_seconds_sum\{route="chat",pool="p1"\} 0.1/);
  assert.match(text, /x_total\{pool="p1",kind="output",a="y"\} 2/);
});

test('bad values get prom-client\'s own errors, and a wrong label count fails at setup', () => {
  const { fast } = twins();
  const fh = histogramChild(fast.h, 'chat', 'p1');
  const fc = counterChild(fast.c, 'p1', 'input', 'z');
  fh.observe(1);
  fc.inc(1);
  assert.throws(() => fh.observe(Number.NaN), TypeError);
  assert.throws(() => fh.observe(Infinity), TypeError);
  assert.throws(() => fc.inc(-1), /decrease/);
  assert.throws(() => fc.inc(Infinity), TypeError);
  assert.throws(() => histogramChild(fast.h, 'chat'), /label/i);
});
