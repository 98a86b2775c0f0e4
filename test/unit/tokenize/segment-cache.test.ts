import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { SegmentCache, fingerprint, type CachedSegment } from '../../../src/tokenize/segment-cache.ts';

let nextId = 1;
const seg = (text: string, tokenizer: CachedSegment['tokenizer'] = 'llama3'): CachedSegment =>
  ({ text, tokenizer, tokens: Uint32Array.of(nextId), id: nextId++, bytes: 2 * text.length + 4 + 128 });

/** Long texts (over 512 chars), each with one '#' at its own odd offset in the middle, which the stride-2 sample skips. */
function collidingTexts(count: number): string[] {
  const base = 'abcdefghij'.repeat(100); // 1,000 chars: edges of 128 in full, then every 2nd char
  const out: string[] = [];
  for (let k = 0; k < count; k++) {
    const at = 301 + 2 * k;
    out.push(`${base.slice(0, at)}#${base.slice(at + 1)}`);
  }
  return out;
}

test('texts that differ only where the sample does not look share a fingerprint, and each still finds its own entry', () => {
  const [a, b] = collidingTexts(2) as [string, string];
  assert.notEqual(a, b);
  assert.equal(fingerprint(a), fingerprint(b), 'the fixture collides');
  const cache = new SegmentCache(1 << 20);
  const sa = seg(a);
  const sb = seg(b);
  cache.add(sa);
  assert.equal(cache.get(b, 'llama3'), undefined, 'a collision is a miss, never the other text\'s tokens');
  cache.add(sb);
  assert.equal(cache.get(a, 'llama3'), sa);
  assert.equal(cache.get(b, 'llama3'), sb);
  assert.equal(cache.get(a.slice(0, 500) + a.slice(500), 'llama3'), sa, 'a copy of the text built another way is the same key');
});

test('any number of colliding texts stay cached while the budget has room (one template, a user id per user)', () => {
  const texts = collidingTexts(60);
  assert.equal(new Set(texts.map(fingerprint)).size, 1);
  const cache = new SegmentCache(1 << 20);
  const segs = texts.map((t) => seg(t));
  for (const s of segs) cache.add(s);
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < texts.length; i++) assert.equal(cache.get(texts[i]!, 'llama3'), segs[i], `text ${i}, round ${round}`);
  }
  assert.equal(cache.bytes, segs.reduce((n, s) => n + s.bytes, 0), 'each entry counted once');
});

test('the byte budget covers fingerprint-keyed and text-keyed entries together', () => {
  const texts = collidingTexts(30);
  const one = seg(texts[0]!).bytes;
  const cache = new SegmentCache(one * 10); // room for ten
  for (const t of texts) cache.add(seg(t));
  assert.ok(cache.bytes <= cache.capacityBytes, `${cache.bytes} <= ${cache.capacityBytes}`);
  const kept = texts.filter((t) => cache.peek(t, 'llama3') !== undefined).length;
  assert.ok(kept >= 9 && kept <= 10, `kept ${kept} of 30 under a budget of ten`);
  assert.ok(cache.peek(texts[29]!, 'llama3') !== undefined, 'the newest is kept');
});

test('short texts are fingerprinted in full: one changed character changes the fingerprint', () => {
  const t = 'x'.repeat(400);
  for (const at of [0, 1, 199, 200, 399]) assert.notEqual(fingerprint(t), fingerprint(`${t.slice(0, at)}y${t.slice(at + 1)}`), `offset ${at}`);
  assert.notEqual(fingerprint('ab'), fingerprint('ba'));
  assert.notEqual(fingerprint(''), fingerprint('\u0000'));
});

test('the fingerprint is seeded per process, so clients cannot compute it to aim segments at one Map bucket', () => {
  const script = "import('./src/tokenize/segment-cache.ts').then((m) => process.stdout.write(String(m.fingerprint('the same text'))))";
  const other = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8', cwd: new URL('../../..', import.meta.url) });
  assert.match(other, /^\d+$/);
  assert.notEqual(Number(other), fingerprint('the same text'), 'another process computes another fingerprint (equal with odds 2^-32)');
});

test('the same text under two tokenizers is two entries; adding a text again replaces it', () => {
  const cache = new SegmentCache(1 << 20);
  const l = seg('hello', 'llama3');
  const c = seg('hello', 'cl100k_base');
  cache.add(l);
  cache.add(c);
  assert.equal(cache.get('hello', 'llama3'), l);
  assert.equal(cache.peek('hello', 'cl100k_base'), c);
  const l2 = seg('hello', 'llama3');
  cache.add(l2);
  assert.equal(cache.get('hello', 'llama3'), l2);
  assert.equal(cache.get('hello', 'cl100k_base'), c);
  assert.equal(cache.bytes, l2.bytes + c.bytes);
});
