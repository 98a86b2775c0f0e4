import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BUCKET_MAX, SegmentCache, fingerprint, type CachedSegment } from '../../../src/tokenize/segment-cache.ts';

let nextId = 1;
const seg = (text: string, tokenizer: CachedSegment['tokenizer'] = 'llama3'): CachedSegment =>
  ({ text, tokenizer, tokens: Uint32Array.of(nextId), id: nextId++, bytes: 2 * text.length + 4 + 128 });

/** Long texts (over 512 chars) that differ only at one odd offset in the middle, which the stride-2 sample skips. */
function collidingTexts(count: number): string[] {
  const base = 'abcdefghij'.repeat(100); // 1,000 chars: edges of 128 in full, then every 2nd char
  const out: string[] = [];
  for (let k = 0; k < count; k++) {
    const at = 301 + 2 * k;
    out.push(`${base.slice(0, at)}${String.fromCharCode(0x41 + k)}${base.slice(at + 1)}`);
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
  // a copy of the text built another way is the same key
  assert.equal(cache.get(a.slice(0, 500) + a.slice(500), 'llama3'), sa);
});

test('short texts are fingerprinted in full: one changed character changes the fingerprint', () => {
  const t = 'x'.repeat(400);
  for (const at of [0, 1, 199, 200, 399]) assert.notEqual(fingerprint(t), fingerprint(`${t.slice(0, at)}y${t.slice(at + 1)}`), `offset ${at}`);
  assert.notEqual(fingerprint('ab'), fingerprint('ba'));
  assert.notEqual(fingerprint(''), fingerprint('\u0000'));
});

test('a bucket keeps at most BUCKET_MAX texts: the oldest leaves, and its bytes with it', () => {
  const texts = collidingTexts(BUCKET_MAX + 2);
  const cache = new SegmentCache(1 << 20);
  const segs = texts.map((t) => seg(t));
  for (const s of segs) cache.add(s);
  assert.equal(cache.get(texts[0]!, 'llama3'), undefined);
  assert.equal(cache.get(texts[1]!, 'llama3'), undefined);
  for (let i = 2; i < texts.length; i++) assert.equal(cache.get(texts[i]!, 'llama3'), segs[i]);
  assert.equal(cache.bytes, segs.slice(2).reduce((n, s) => n + s.bytes, 0));
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
  assert.equal(cache.bytes, l2.bytes + c.bytes);
});
