// ListenGuard's decisions against a real descriptor table: a child process under `ulimit -n 64` fills its
// descriptors with /dev/null, then steps the guard probe by probe and reports what it did.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { resumeMargin } from '../../../src/server/listen-guard.ts';

const GUARD = new URL('../../../src/server/listen-guard.ts', import.meta.url).href;

const CHILD = `
import { closeSync, openSync } from 'node:fs';
const { ListenGuard, openFileLimit } = await import(${JSON.stringify(GUARD)});
const events = [];
let listenOk = false;
const guard = new ListenGuard({
  close: () => events.push('close'),
  listen: () => { events.push('listen'); return listenOk; },
  paused: (margin) => events.push('paused ' + margin),
  resumed: (free) => events.push('resumed ' + (free >= 8)),
  relistenFailed: (attempt) => events.push('relisten failed ' + attempt),
  unavailable: (reason) => events.push('unavailable ' + reason),
}, 8);
const step = (label) => { guard.probe(); events.push(label + ': ' + (guard.paused ? 'paused' : 'listening')); };
step('free');
const held = [];
try { for (;;) held.push(openSync('/dev/null', 'r')); } catch (e) { events.push('filled ' + e.code); }
step('full');
step('still full');
for (const fd of held.splice(0, 4)) closeSync(fd);
step('4 free');
for (const fd of held.splice(0, 8)) closeSync(fd);
step('port taken');
listenOk = true;
step('port free');
events.push('limit ' + openFileLimit());
console.log(JSON.stringify(events));
`;

test('pauses at EMFILE, waits for the margin, retries a failed listen, resumes', () => {
  const out = execFileSync('sh', ['-c', 'ulimit -n 64 && exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, CHILD], {
    cwd: new URL('../../../', import.meta.url).pathname, encoding: 'utf8',
  });
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()!), [
    'free: listening',
    'filled EMFILE',
    'close', 'paused 8', 'full: paused',
    'still full: paused',
    '4 free: paused',
    'listen', 'relisten failed 1', 'port taken: paused',
    'listen', 'resumed true', 'port free: listening',
    'limit 64',
  ]);
});

test('resume margin: 1/16 of the open-file limit, 32 to 256', () => {
  assert.equal(resumeMargin(256), 32);
  assert.equal(resumeMargin(1024), 64);
  assert.equal(resumeMargin(20_000), 256);
});

const CHILD_TWO = `
import { closeSync, openSync } from 'node:fs';
const { ListenGuard } = await import(${JSON.stringify(GUARD)});
const events = [];
const hooks = (name) => ({
  close: () => events.push(name + ' close'),
  listen: () => true,
  paused: () => events.push(name + ' paused'),
  resumed: () => events.push(name + ' resumed'),
  relistenFailed: () => undefined,
  unavailable: (reason) => events.push('unavailable ' + reason),
});
// Two acceptor threads' guards (pauseBelow 2). Thread A's listen socket stands for one descriptor it frees
// when it pauses: after the table is full, A pauses and closes it; B probes next and finds that one free.
const a = new ListenGuard(hooks('a'), 8, 200, 2);
const b = new ListenGuard(hooks('b'), 8, 200, 2);
const held = [];
try { for (;;) held.push(openSync('/dev/null', 'r')); } catch (e) { events.push('filled ' + e.code); }
const listenA = held.pop();
a.probe();
closeSync(listenA);
events.push('a freed one');
b.probe();
events.push('b ' + (b.paused ? 'paused' : 'listening'));
console.log(JSON.stringify(events));
`;

test('with two acceptor threads, the second pauses though the first one\'s closed listen socket left a descriptor free', () => {
  const out = execFileSync('sh', ['-c', 'ulimit -n 64 && exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, CHILD_TWO], {
    cwd: new URL('../../../', import.meta.url).pathname, encoding: 'utf8',
  });
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()!), [
    'filled EMFILE', 'a close', 'a paused', 'a freed one', 'b close', 'b paused', 'b paused',
  ]);
});
