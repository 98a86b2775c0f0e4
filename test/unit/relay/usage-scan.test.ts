import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FALLBACK, scanUsage } from '../../../src/relay/usage-scan.ts';
import { usageNumbers } from '../../../src/relay/usage-numbers.ts';

/** scanUsage over the whole of `text` (the object alone, as jsonFigures hands it over). */
function scan(text: string): ReturnType<typeof scanUsage> {
  const b = Buffer.from(text);
  return scanUsage(b, 0, b.length - 1);
}

/** What the parser path gives: usageNumbers(JSON.parse(text)), or 'invalid' when the text is not JSON. */
function parsed(text: string): ReturnType<typeof usageNumbers> | 'invalid' {
  try {
    return usageNumbers(JSON.parse(text));
  } catch {
    return 'invalid';
  }
}

test('reads the objects vLLM writes without falling back to a parse', () => {
  assert.deepEqual(scan('{"prompt_tokens":37,"total_tokens":42,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32}}'),
    { promptTokens: 37, completionTokens: 5, cachedTokens: 32 });
  assert.deepEqual(scan('{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1,"prompt_tokens_details":null}'),
    { promptTokens: 3, completionTokens: 1, cachedTokens: 0 });
  assert.deepEqual(scan('{ "prompt_tokens": 0, "completion_tokens": 16 }'), { promptTokens: 0, completionTokens: 16, cachedTokens: 0 });
  assert.equal(scan('{}'), null);
  assert.equal(scan('{"prompt_tokens":3}'), null);
});

test('shapes it does not read fall back, and the parser decides', () => {
  for (const text of [
    '{"prompt_tokens":3,"completion_tokens":1.5}',
    '{"prompt_tokens":3,"completion_tokens":1e2}',
    '{"prompt_tokens":3,"completion_tokens":-1}',
    '{"prompt_tokens":3,"completion_tokens":01}',
    '{"prompt_\\u0074okens":3,"completion_tokens":1}',
    '{"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":[1]}}',
    '{"completion_tokens":1,"x":[1,2]}',
    '{"completion_tokens":1,}',
    '{"completion_tokens":1 2}',
    '{"completion_tokens":1234567890123456}',
    '{"completion_tokens":1,"note":"a\nb"}',
  ]) assert.equal(scan(text), FALLBACK, text);
});

test('agrees with usageNumbers(JSON.parse(...)) on every generated object it reads', () => {
  let seed = 12345;
  const rnd = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  const keys = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_tokens_details', 'cached_tokens', 'x'];
  const scalar = (): string => ['7', '0', '123456', 'null', 'true', 'false', '"9"', '""', '-3', '2.5', '1e3', '00', '999999999999999'][rnd(13)]!;
  const details = (): string => {
    const n = rnd(3);
    const members: string[] = [];
    for (let i = 0; i < n; i++) members.push(`"${keys[rnd(keys.length)]}":${scalar()}`);
    return `{${members.join(',')}}`;
  };
  let read = 0;
  for (let round = 0; round < 5000; round++) {
    const n = rnd(6);
    const members: string[] = [];
    for (let i = 0; i < n; i++) {
      const k = keys[rnd(keys.length)]!;
      const v = rnd(4) === 0 ? details() : scalar();
      const ws = rnd(5) === 0 ? ' ' : '';
      members.push(`${ws}"${k}"${ws}:${ws}${v}${ws}`);
    }
    const text = `{${members.join(',')}}`;
    const got = scan(text);
    if (got === FALLBACK) continue;
    read++;
    assert.deepEqual(got, parsed(text), text);
  }
  // The generator mostly makes readable objects: the comparison is not vacuous.
  assert.ok(read > 2000, `read ${read} of 5000`);
});
