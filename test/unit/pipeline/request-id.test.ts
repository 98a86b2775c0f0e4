import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newContext } from '../../../src/pipeline/handle-completion.ts';
import type { ClientSink } from '../../../src/relay/client-sink.ts';

const sink = {} as ClientSink;

test('a request without an id gets 32 random hex characters, never repeated across pool refills', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) { // 1000 ids span four refills of the 4 KiB random pool
    const id = newContext('chat', sink, undefined).id;
    assert.match(id, /^[0-9a-f]{32}$/);
    seen.add(id);
  }
  assert.equal(seen.size, 1000);
});

test('a well-formed client id is kept; a malformed one is replaced', () => {
  assert.equal(newContext('chat', sink, 'req-42.a:b_c').id, 'req-42.a:b_c');
  assert.match(newContext('chat', sink, 'bad id\r\nx: y').id, /^[0-9a-f]{32}$/);
  assert.match(newContext('chat', sink, 'x'.repeat(129)).id, /^[0-9a-f]{32}$/);
});
