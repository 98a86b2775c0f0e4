// Worker threads reject process-wide V8 heap flags (ERR_WORKER_INVALID_EXEC_ARGV): started with
// `node --max-semi-space-size=32 src/main.ts`, the gateway must still start its poller and tokenize workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { siblingModule, workerExecArgv } from '../../../src/util/spawn-worker.ts';

const FLAGS = ['--max-semi-space-size=32', '--perf-basic-prof', '--max-old-space-size', '4096', '--trace-gc', '--enable-source-maps', '--import', 'tsx'];

test('heap-sizing flags (with = or a separate value) are dropped, everything else is kept in order', () => {
  assert.deepEqual(workerExecArgv(FLAGS), ['--enable-source-maps', '--import', 'tsx']);
});

test('a worker started with the filtered flags runs, and one started with the raw flags is refused', async () => {
  const ok = new Worker('require("node:worker_threads").parentPort.postMessage("up")', { eval: true, execArgv: workerExecArgv(['--max-semi-space-size=32', '--enable-source-maps']) });
  const msg = await new Promise((resolve, reject) => { ok.once('message', resolve); ok.once('error', reject); });
  assert.equal(msg, 'up');
  await ok.terminate();
  assert.throws(() => new Worker('0', { eval: true, execArgv: ['--max-semi-space-size=32'] }), { code: 'ERR_WORKER_INVALID_EXEC_ARGV' });
});

test('a worker entry takes its caller\'s extension: sources start .ts workers through tsx, a compiled build .js ones', () => {
  assert.equal(siblingModule('../../workers/tokenize.worker', 'file:///app/src/tokenize/pool.ts').href, 'file:///app/workers/tokenize.worker.ts');
  assert.equal(siblingModule('../../workers/tokenize.worker', 'file:///tmp/build/src/tokenize/pool.js').href, 'file:///tmp/build/workers/tokenize.worker.js');
});
