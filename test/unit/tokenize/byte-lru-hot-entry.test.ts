// ByteLru with entries of very different sizes, as the tokenize caches hold them (a one-line user message is
// ~150 B with overhead, a pasted document up to 1/8 of the budget): an entry hit before every insertion (a
// shared system prompt) is never the one evicted, even when the many small entries in front of it are all the
// bytes there are to evict and the few big ones behind it hold most of the budget. Evicting it would
// re-tokenize the hottest prompt (and with a worker pool its uncached length can send the request off the
// inline path).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ByteLru } from '../../../src/tokenize/byte-lru.ts';

test('an entry hit before every insertion is never the one evicted', () => {
  const lru = new ByteLru<string, string>(1000); // entries up to 125 bytes
  for (let i = 0; i < 20; i++) lru.set(`small-${i}`, 'older one-off chats', 1);
  lru.set('system-prompt', 'hot', 1);
  for (let i = 0; i < 12; i++) {
    assert.equal(lru.get('system-prompt'), 'hot', `hit ${i}: the hot entry was evicted by the insertion that followed hit ${i - 1}`);
    lru.set(`document-${i}`, 'a large pasted document', 125);
  }
});
