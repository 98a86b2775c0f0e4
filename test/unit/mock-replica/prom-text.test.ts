// Float and label formatting of the mock's /metrics, checked against what Python's prometheus_client prints.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { goFloat, labelText, PromWriter, pyRepr } from '../../mock-replica/prom-text.ts';

void test('pyRepr matches Python repr(float)', () => {
  const cases: Array<[number, string]> = [
    [0, '0.0'], [42, '42.0'], [0.1, '0.1'], [0.2731, '0.2731'], [1e-5, '1e-05'], [0.0001, '0.0001'],
    [123456789012345678, '1.2345678901234568e+17'], [1e16, '1e+16'], [9999999999999998, '9999999999999998.0'],
    [2.5, '2.5'], [-3, '-3.0'], [1762304118.7123456, '1762304118.7123456'], [3.6e-7, '3.6e-07'],
  ];
  for (const [x, want] of cases) assert.equal(pyRepr(x), want, String(x));
});

void test('goFloat switches to exponent form like floatToGoString', () => {
  const cases: Array<[number, string]> = [
    [1843212, '1.843212e+06'], [402117, '402117.0'], [1762300000, '1.7623e+09'], [1, '1.0'], [0.001, '0.001'],
    [2560, '2560.0'], [100000, '100000.0'], [1000000, '1e+06'], [Infinity, '+Inf'], [1.7623041187e9, '1.7623041187e+09'],
  ];
  for (const [x, want] of cases) assert.equal(goFloat(x), want, String(x));
});

void test('labels are sorted by name and values escaped', () => {
  assert.equal(labelText({ model_name: 'm', le: '0.1', engine: '0' }), '{engine="0",le="0.1",model_name="m"}');
  assert.equal(labelText({ a: 'x"y\\z\n' }), '{a="x\\"y\\\\z\\n"}');
  assert.equal(labelText({}), '');
});

void test('a histogram renders the same text on every scrape (bucket label text built once per series)', () => {
  const labels = { model_name: 'm', engine: '0' }; // one object, as a replica passes: the second render reads the cache
  const render = (counts: number[], count: number, sum: number): string => {
    const w = new PromWriter();
    w.histogram('vllm:time_to_first_token_seconds', 'TTFT.', labels, { buckets: [0.001, 0.5, 2560], counts, count, sum }, 1762300000);
    return w.text();
  };
  const want = (c: [number, number, number], count: string, sum: string): string => [
    '# HELP vllm:time_to_first_token_seconds TTFT.', '# TYPE vllm:time_to_first_token_seconds histogram',
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} ${c[0]}.0`,
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} ${c[1]}.0`,
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="2560.0",model_name="m"} ${c[2]}.0`,
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} ${count}`,
    `vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} ${count}`,
    `vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} ${sum}`,
    '# HELP vllm:time_to_first_token_seconds_created TTFT.', '# TYPE vllm:time_to_first_token_seconds_created gauge',
    'vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7623e+09', '',
  ].join('\n');
  assert.equal(render([0, 2, 3], 3, 0.75), want([0, 2, 3], '3.0', '0.75'));
  assert.equal(render([1, 5, 9], 9, 12.5), want([1, 5, 9], '9.0', '12.5'));
  // From 1e6 on a count is written in exponent form, in every bucket line as in the count.
  assert.match(render([0, 0, 2000000], 2000000, 3), /le="2560\.0",model_name="m"\} 2e\+06\n.*le="\+Inf",model_name="m"\} 2e\+06\n/);
});
