// Property-based tests of the upstream HTTP/1.1 response parser: a valid response (Content-Length, chunked
// with extensions and trailers, read-until-close, after 1xx interim responses, extra headers) fed in any
// chunking parses to the same status, body and keep-alive as fed whole; arbitrary bytes, and valid responses
// with bytes overwritten, give an error or an incomplete parse, never a throw. feed() is synchronous, so a
// hang would be a loop that never returns: every run here returns. Bounded runs, fixed seed (test/helpers/fuzz.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check, cuts, fc, splitAt } from '../../helpers/fuzz.ts';
import { H1ResponseParser } from '../../../src/upstream/h1-response-parser.ts';

interface Result { statuses: number[]; body: Buffer; completes: boolean[]; error: string | null }

/** Feeds `chunks` (then EOF when `eof`), stopping at the first error, as the connection does. */
function parse(chunks: Buffer[], eof: boolean): Result {
  const res: Result = { statuses: [], body: Buffer.alloc(0), completes: [], error: null };
  const parts: Buffer[] = [];
  const p = new H1ResponseParser({
    onHead: (s) => res.statuses.push(s),
    onBody: (c) => parts.push(Buffer.from(c)), // a view of the input: copied, as the relay does
    onComplete: (k) => res.completes.push(k),
  });
  for (const c of chunks) {
    res.error = p.feed(c, 0, c.length);
    if (res.error !== null) break;
  }
  if (res.error === null && eof) res.error = p.eof();
  res.body = Buffer.concat(parts);
  return res;
}

const tchar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-'.split(''));
/** An extra header that does not change framing (x- prefix keeps it away from the three that do). */
const header = fc.tuple(fc.string({ unit: tchar, minLength: 1, maxLength: 12 }), fc.string({ unit: fc.constantFrom(...' !"#$%&()*+,./:;<=>?@[]^_`{|}~abcXYZ019'.split('')), maxLength: 30 }))
  .map(([n, v]) => `x-${n}: ${v.trim()}\r\n`);

const response = fc.record({
  status: fc.constantFrom(200, 201, 400, 404, 422, 500, 503),
  interim: fc.array(fc.constantFrom('HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n'), { maxLength: 2 }),
  headers: fc.array(header, { maxLength: 5 }),
  body: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
  framing: fc.constantFrom('length', 'chunked', 'close'),
  chunkSizes: fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 10 }),
  ext: fc.constantFrom('', ';a=b', ';name="q v"', ' ;x'),
  upper: fc.boolean(),
  trailers: fc.array(header, { maxLength: 2 }),
  connectionClose: fc.boolean(),
});
type Resp = typeof response extends fc.Arbitrary<infer T> ? T : never;

function encode(r: Resp): { bytes: Buffer; keepAlive: boolean } {
  const close = r.framing === 'close' || r.connectionClose;
  let head = `${r.interim.join('')}HTTP/1.1 ${r.status} Whatever\r\n${r.headers.join('')}${r.connectionClose ? 'connection: close\r\n' : ''}`;
  if (r.framing === 'length') return { bytes: Buffer.concat([Buffer.from(`${head}content-length: ${r.body.length}\r\n\r\n`), r.body]), keepAlive: !close };
  if (r.framing === 'close') return { bytes: Buffer.concat([Buffer.from(`${head}\r\n`), r.body]), keepAlive: false };
  head += 'transfer-encoding: chunked\r\n\r\n';
  const parts: Buffer[] = [Buffer.from(head)];
  let at = 0;
  let k = 0;
  while (at < r.body.length) {
    const n = Math.min(r.chunkSizes[k++ % r.chunkSizes.length]!, r.body.length - at);
    const hex = n.toString(16);
    parts.push(Buffer.from(`${r.upper ? hex.toUpperCase() : hex}${r.ext}\r\n`), r.body.subarray(at, at + n), Buffer.from('\r\n'));
    at += n;
  }
  parts.push(Buffer.from(`0${r.ext}\r\n${r.trailers.join('')}\r\n`));
  return { bytes: Buffer.concat(parts), keepAlive: !close };
}

test('any chunking of a valid response parses to the same status, body and keep-alive', () => {
  const arb = response.chain((r) => {
    const enc = encode(r);
    return fc.tuple(fc.constant({ r, ...enc }), cuts(enc.bytes.length, 20));
  });
  check(fc.property(arb, ([{ r, bytes, keepAlive }, at]) => {
    const eof = r.framing === 'close';
    const got = parse(splitAt(bytes, at), eof);
    assert.equal(got.error, null);
    assert.deepEqual(got.statuses, [r.status]);
    assert.deepEqual(got.body, r.body);
    assert.deepEqual(got.completes, [keepAlive]);
    // Fed whole, the same.
    const whole = parse([bytes], eof);
    assert.deepEqual([whole.statuses, whole.body, whole.completes, whole.error], [got.statuses, got.body, got.completes, got.error]);
  }), 400);
});

test('a valid response cut short is reported at EOF (never completed)', () => {
  const arb = response.filter((r) => r.framing !== 'close').chain((r) => {
    const enc = encode(r);
    return fc.tuple(fc.constant(enc.bytes), fc.integer({ min: 0, max: enc.bytes.length - 1 }), cuts(enc.bytes.length, 6));
  });
  check(fc.property(arb, ([bytes, cut, at]) => {
    const got = parse(splitAt(bytes.subarray(0, cut), at.filter((c) => c < cut)), true);
    assert.deepEqual(got.completes, []);
    assert.equal(typeof got.error, 'string');
  }), 300);
});

test('garbage, and valid responses with bytes overwritten: an error or an incomplete parse, never a throw', () => {
  check(fc.property(fc.uint8Array({ maxLength: 600 }), fc.array(fc.nat(599), { maxLength: 8 }), fc.boolean(), (bytes, at, eof) => {
    const b = Buffer.from(bytes);
    const got = parse(splitAt(b, [...new Set(at.filter((c) => c > 0 && c < b.length))].sort((x, y) => x - y)), eof);
    assert.ok(got.completes.length <= 1);
    if (eof) assert.ok(got.error !== null || got.completes.length === 1);
  }), 400);
  const damaged = response.chain((r) => {
    const { bytes } = encode(r);
    return fc.tuple(fc.constant(bytes), fc.array(fc.tuple(fc.nat(bytes.length - 1), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), cuts(bytes.length, 8));
  });
  check(fc.property(damaged, ([bytes, edits, at]) => {
    const b = Buffer.from(bytes);
    for (const [i, v] of edits) b[i] = v;
    const got = parse(splitAt(b, at), true);
    assert.ok(got.completes.length <= 1);
    assert.ok(got.error !== null || got.completes.length === 1);
  }), 300);
});
