// A sweep worker thread: takes RunSpecs one at a time from the main thread and answers each with its
// RunOutput (or the error's message). Started by sweep.ts through src/util/spawn-worker.ts.
// Thread: worker.
import { parentPort } from 'node:worker_threads';
import type { RunSpec } from './run-types.ts';
import { executeRun } from './run-output.ts';

const port = parentPort;
if (!port) throw new Error('sweep-worker.ts runs as a worker thread');
port.on('message', (spec: RunSpec) => {
  try {
    port.postMessage({ ok: true, out: executeRun(spec) });
  } catch (err) {
    port.postMessage({ ok: false, index: spec.index, error: err instanceof Error ? err.stack ?? err.message : String(err) });
  }
});
