// Float and label formatting of the mock's /metrics, checked against what Python's prometheus_client prints.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { goFloat, labelText, pyRepr } from '../../mock-replica/prom-text.ts';

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
