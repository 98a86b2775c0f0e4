// Fault state: validation, defaults, and `count` consumed by completion requests only.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FaultState } from '../../mock-replica/faults.ts';

void test('defaults fill the unset fields and count runs down to none', () => {
  const f = new FaultState();
  assert.equal(f.set({ mode: 'slow', count: 2 }), null);
  assert.deepEqual(f.current(), { mode: 'slow', status: 500, after_tokens: 5, delay_ms: 200, count: 2 });
  assert.equal(f.takeForCompletion().mode, 'slow');
  assert.equal(f.is('slow'), true);
  assert.equal(f.takeForCompletion().mode, 'slow');
  assert.equal(f.takeForCompletion().mode, 'none');
});

void test('without count a fault stays until mode none', () => {
  const f = new FaultState();
  f.set({ mode: 'hang' });
  for (let i = 0; i < 5; i++) assert.equal(f.takeForCompletion().mode, 'hang');
  f.set({ mode: 'none' });
  assert.equal(f.takeForCompletion().mode, 'none');
});

void test('invalid bodies are refused and leave the fault unchanged', () => {
  const f = new FaultState();
  f.set({ mode: 'unhealthy' });
  for (const bad of [null, [], { mode: 'boom' }, { mode: 'slow', delay_ms: -1 }, { mode: 'error_before_first_token', status: 700 }, { mode: 'slow', count: 0 }]) {
    assert.notEqual(f.set(bad), null, JSON.stringify(bad));
  }
  assert.equal(f.current().mode, 'unhealthy');
});
