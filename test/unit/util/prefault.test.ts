// prefaultPages: every page of a new SharedArrayBuffer is resident after it (the process's resident set grows
// by the buffer's size), and no value in it changes (a prefix index's header is written before it runs).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { PrefixIndex } from '../../../src/router/prefix-index.ts';
import { prefaultPages } from '../../../src/util/prefault.ts';

/** Resident memory of this process, bytes (Linux: /proc/self/status VmRSS, in kB). */
function residentBytes(): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  assert.ok(m, 'VmRSS in /proc/self/status');
  return Number(m[1]) * 1024;
}

void test('a new buffer is not resident until prefaultPages touches each of its pages; then all of it is', () => {
  const bytes = 64 * 1024 * 1024;
  const before = residentBytes();
  const buffer = new SharedArrayBuffer(bytes);
  const allocated = residentBytes();
  assert.ok(allocated - before < bytes / 4, `allocation alone made ${allocated - before} bytes resident`);
  assert.equal(prefaultPages(buffer), bytes / 4096);
  const after = residentBytes();
  assert.ok(after - allocated >= bytes * 0.9, `prefaulting made ${after - allocated} of ${bytes} bytes resident`);
  const words = new Int32Array(buffer);
  for (let i = 0; i < words.length; i += 997) assert.equal(words[i], 0);
});

void test('what the buffer holds survives: an index built on it can still be opened from its buffer', () => {
  const index = new PrefixIndex({ entries: 1 << 16, slots: 4 });
  index.insert(Float64Array.of(11, 22, 33), 0, 2);
  prefaultPages(index.buffer);
  const reopened = new PrefixIndex(index.buffer);
  const out = new Int32Array(1);
  assert.equal(reopened.lookup(Float64Array.of(11, 22, 33), [2], out), 3);
  const words = new Int32Array(new SharedArrayBuffer(3 * 4096));
  words[0] = 7; words[1024] = -5; words[2048 + 3] = 9;
  prefaultPages(words.buffer as SharedArrayBuffer);
  assert.deepEqual([words[0], words[1024], words[2048 + 3]], [7, -5, 9]);
});

void test('a buffer whose size is not a whole number of pages has its last page touched too', () => {
  assert.equal(prefaultPages(new SharedArrayBuffer(4096 * 3 + 8)), 4);
  assert.equal(prefaultPages(new SharedArrayBuffer(8)), 1);
});
