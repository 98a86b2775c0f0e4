import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InflightList } from '../../../src/server/inflight-list.ts';
import { RequestContext } from '../../../src/pipeline/request-context.ts';
import type { ClientSink } from '../../../src/relay/client-sink.ts';

const ctx = (id: string): RequestContext => new RequestContext(id, 'chat', {} as ClientSink, 0);

test('holds what was added and not deleted, in any order of deletes, and counts it', () => {
  const list = new InflightList();
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(ctx) as [RequestContext, RequestContext, RequestContext, RequestContext];
  for (const x of [a, b, c, d]) list.add(x);
  assert.equal(list.size, 4);
  list.delete(c); // middle
  list.delete(d); // head
  list.delete(a); // tail
  assert.deepEqual(list.snapshot().map((x) => x.id), ['b']);
  assert.equal(list.size, 1);
  list.delete(a); // a second delete does nothing
  assert.equal(list.size, 1);
  list.delete(b);
  assert.equal(list.size, 0);
  assert.deepEqual(list.snapshot(), []);
  list.add(a); // a context can come back after it left
  assert.deepEqual(list.snapshot().map((x) => x.id), ['a']);
});

test('a snapshot can be walked while its entries leave the list (shutdown aborts them)', () => {
  const list = new InflightList();
  const all = Array.from({ length: 5 }, (_, i) => ctx(`r${i}`));
  for (const x of all) list.add(x);
  const seen: string[] = [];
  for (const x of list.snapshot()) {
    seen.push(x.id);
    list.delete(x);
  }
  assert.equal(seen.length, 5);
  assert.equal(list.size, 0);
});
