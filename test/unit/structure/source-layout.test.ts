// Source layout rules: no file under src/ over 400 lines (a file that grows past it is split by what it
// holds), and every file named in eslint.config.js's per-file exceptions exists, so an exception cannot
// outlive the file it was made for (or silently fail to apply to a renamed one); the same for the test files
// scripts/test.ts puts in its groups; the niced group reads no clock, sets no timer and opens no socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const MAX_LINES = 400;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

test(`no source file under src/ has more than ${MAX_LINES} lines`, () => {
  const sources = files(join(ROOT, 'src')).filter((f) => f.endsWith('.ts'));
  assert.ok(sources.length > 50, 'the walk found the sources');
  const long = sources
    .map((f) => ({ file: relative(ROOT, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
    .filter((x) => x.lines > MAX_LINES);
  assert.deepEqual(long, []);
});

test('every file eslint.config.js names in a per-file rule exists', () => {
  const config = readFileSync(join(ROOT, 'eslint.config.js'), 'utf8');
  const named = [...config.matchAll(/files:\s*\[([^\]]*)\]/g)]
    .flatMap((m) => [...m[1]!.matchAll(/'([^']+)'/g)].map((q) => q[1]!))
    .filter((p) => !p.includes('*'));
  assert.ok(named.includes('src/server/uws.ts'), 'the scan found the per-file exceptions');
  assert.deepEqual(named.filter((p) => !existsSync(join(ROOT, p))), []);
});

test('every test file scripts/test.ts names in a group (SERIAL, BESIDE_SERIAL, BESIDE_SERIAL_NICED, POOL_FIRST) exists', () => {
  // A renamed file would drop out of its group without a word and run in the pool: a serial file beside others
  // under load, a niced one at normal priority.
  const runner = readFileSync(join(ROOT, 'scripts', 'test.ts'), 'utf8');
  const named = [...runner.matchAll(/'(test\/[^']+\.test\.ts)'/g)].map((m) => m[1]!);
  assert.ok(named.includes('test/integration/gateway/backpressure.test.ts') && named.includes('test/unit/sim/kv-events.test.ts'), 'the scan found the groups');
  assert.deepEqual(named.filter((p) => !existsSync(join(ROOT, p))), []);
});

test('the unit files that run niced beside the serial group (BESIDE_SERIAL_NICED) read no clock and open no socket', () => {
  // At nice 19 next to a serial file that loads both cores such a file waits for CPU: a timer, a wall-clock
  // window or a socket deadline in it would measure the wait and flake. The rule in scripts/test.ts's comment,
  // checked: none of these in the file itself.
  const runner = readFileSync(join(ROOT, 'scripts', 'test.ts'), 'utf8');
  const block = /BESIDE_SERIAL_NICED = new Set\(\[([^\]]*)\]\)/.exec(runner)?.[1] ?? '';
  const niced = [...block.matchAll(/'(test\/[^']+\.test\.ts)'/g)].map((m) => m[1]!);
  assert.ok(niced.length >= 4, 'the scan found the niced group');
  const clockOrSocket = /\b(setTimeout|setInterval|setImmediate|performance\.now|Date\.now|fetch|new Date|AbortSignal\.timeout)\s*\(|\bhrtime\b|['"](node:)?(net|http|https|dgram|timers|timers\/promises)['"]|startStack|startGateway/;
  const offending = niced.filter((p) => clockOrSocket.test(readFileSync(join(ROOT, p), 'utf8')));
  assert.deepEqual(offending, []);
});
