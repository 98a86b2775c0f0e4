// The three counts of a non-streaming reply's `usage` object, read straight from its bytes: a JSON.parse of the
// object and the string decode before it cost about 1 µs of the ~60 µs a JSON request costs the gateway at
// saturation (perf, `npm run bench -- relay --saturate --perf --modes json`). Only the shape vLLM writes is
// read here: top-level keys without escapes, integer counts of at most 15 digits, null, strings, booleans,
// and a `prompt_tokens_details` object of integer or null members. Anything else (a fraction, an exponent,
// a negative, an escape, another nested value) returns FALLBACK and the caller parses the object, so the
// answer is always the one usageNumbers(JSON.parse(object)) gives (test/unit/relay/usage-scan.test.ts
// checks the two agree on generated objects). Duplicate keys: the last wins, as in JSON.parse.
// Thread: main. Hot path: once per non-streaming reply; no allocation but the result.
import type { UsageNumbers } from './usage-numbers.ts';

/** The object is not of the shape this reader takes: parse it. */
export const FALLBACK = -1 as const;

const PROMPT = keyBytes('prompt_tokens');
const COMPLETION = keyBytes('completion_tokens');
const DETAILS = keyBytes('prompt_tokens_details');
const CACHED = keyBytes('cached_tokens');

/** What a value read as: a count, or NOT_A_COUNT (null, a string, a boolean, an object). */
const NOT_A_COUNT = -2;

// The reader's position and the counts it found: module state, since the reader runs to completion on one
// thread, so no object or closure is made per call.
let pos = 0;
let prompt = NOT_A_COUNT;
let completion = NOT_A_COUNT;
let cached = NOT_A_COUNT;
let detailsCached = NOT_A_COUNT;

/**
 * usageNumbers() of the object in body[start..end] (body[start] is its `{`, body[end] its `}`), or FALLBACK.
 */
export function scanUsage(body: Uint8Array, start: number, end: number): UsageNumbers | null | typeof FALLBACK {
  prompt = completion = cached = NOT_A_COUNT;
  pos = start;
  if (!object(body, end, true) || pos !== end + 1) return FALLBACK;
  if (completion < 0) return null;
  return { promptTokens: prompt < 0 ? 0 : prompt, completionTokens: completion, cachedTokens: cached < 0 ? 0 : cached };
}

/**
 * The object at pos (the usage object when `top`, else its prompt_tokens_details), its counts into the module
 * state, pos left past its `}`; false to fall back.
 */
function object(body: Uint8Array, end: number, top: boolean): boolean {
  if (!top) detailsCached = NOT_A_COUNT;
  pos++;
  skipWs(body, end);
  if (body[pos] === 0x7d) {
    pos++;
    return true;
  }
  for (;;) {
    if (body[pos] !== 0x22) return false;
    const keyStart = pos + 1;
    const keyEnd = body.indexOf(0x22, keyStart);
    if (keyEnd === -1 || keyEnd >= end || !plainString(body, keyStart, keyEnd)) return false;
    pos = keyEnd + 1;
    skipWs(body, end);
    if (body[pos] !== 0x3a) return false;
    pos++;
    skipWs(body, end);
    if (top && body[pos] === 0x7b && isKey(body, keyStart, keyEnd, DETAILS)) {
      if (!object(body, end, false)) return false;
      cached = detailsCached;
    } else {
      const v = scalar(body, end);
      if (v === FALLBACK) return false;
      if (!top) {
        if (isKey(body, keyStart, keyEnd, CACHED)) detailsCached = v;
      } else if (isKey(body, keyStart, keyEnd, COMPLETION)) completion = v;
      else if (isKey(body, keyStart, keyEnd, PROMPT)) prompt = v;
      else if (isKey(body, keyStart, keyEnd, DETAILS)) cached = NOT_A_COUNT;
    }
    skipWs(body, end);
    const c = body[pos];
    if (c === 0x2c) {
      pos++;
      skipWs(body, end);
      continue;
    }
    // The usage object's `}` is body[end]; a nested one's comes before it.
    if (c === 0x7d && (top ? pos === end : pos < end)) {
      pos++;
      return true;
    }
    return false;
  }
}

/** An integer count, or NOT_A_COUNT for null, true, false or an escape-free string; FALLBACK otherwise. */
function scalar(body: Uint8Array, end: number): number {
  const c = body[pos]!;
  if (c >= 0x30 && c <= 0x39) {
    // JSON forbids leading zeros ("01"): leave those to the parser, which refuses them.
    if (c === 0x30 && pos + 1 < end && body[pos + 1]! >= 0x30 && body[pos + 1]! <= 0x39) return FALLBACK;
    let n = 0;
    let digits = 0;
    while (pos < end) {
      const d = body[pos]!;
      if (d < 0x30 || d > 0x39) break;
      n = n * 10 + (d - 0x30);
      digits++;
      pos++;
    }
    // 15 digits stay exact in a double. A fraction or an exponent stops the digits at a byte that is not
    // `,` or `}`, so the caller falls back to the parser.
    return digits > 15 ? FALLBACK : n;
  }
  if (c === 0x22) {
    const close = body.indexOf(0x22, pos + 1);
    if (close === -1 || close >= end || !plainString(body, pos + 1, close)) return FALLBACK;
    pos = close + 1;
    return NOT_A_COUNT;
  }
  if (word(body, end, 0x6e, 'null') || word(body, end, 0x74, 'true') || word(body, end, 0x66, 'false')) return NOT_A_COUNT;
  return FALLBACK;
}

function word(body: Uint8Array, end: number, first: number, w: string): boolean {
  if (body[pos] !== first || pos + w.length > end) return false;
  for (let i = 1; i < w.length; i++) if (body[pos + i] !== w.charCodeAt(i)) return false;
  pos += w.length;
  return true;
}

/** No escape and no control character (which JSON forbids raw in a string): the bytes are the string. */
function plainString(body: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const b = body[i]!;
    if (b === 0x5c || b < 0x20) return false;
  }
  return true;
}

function skipWs(body: Uint8Array, end: number): void {
  while (pos < end) {
    const c = body[pos];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
    pos++;
  }
}

function isKey(body: Uint8Array, from: number, to: number, key: Uint8Array): boolean {
  if (to - from !== key.length) return false;
  for (let i = 0; i < key.length; i++) if (body[from + i] !== key[i]) return false;
  return true;
}

function keyBytes(k: string): Uint8Array {
  return Uint8Array.from(k, (ch) => ch.charCodeAt(0));
}
