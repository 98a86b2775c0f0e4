// Thread entry for prefix-index.test.ts: attaches to the index's SharedArrayBuffer and, until told to stop,
// stores and drops chains of block hashes, each chain only ever for its own slot (chain s for slot s).
import { parentPort, workerData } from 'node:worker_threads';
import { PrefixIndex } from '../../../src/router/prefix-index.ts';

export interface WriterData { indexBuffer: SharedArrayBuffer; control: SharedArrayBuffer; chains: Float64Array[] }

/** Chain s: `blocks` 53-bit hashes unique to slot s. */
export function chainFor(slot: number, blocks: number): Float64Array {
  const out = new Float64Array(blocks);
  for (let b = 0; b < blocks; b++) out[b] = (slot + 1) * 2 ** 40 + b * 7919 + 13;
  return out;
}

if (parentPort !== null && workerData !== null && (workerData as WriterData).indexBuffer !== undefined) {
  const d = workerData as WriterData;
  const index = new PrefixIndex(d.indexBuffer);
  const stop = new Int32Array(d.control);
  let ops = 0;
  parentPort.postMessage('ready');
  while (Atomics.load(stop, 0) === 0) {
    const s = ops % d.chains.length;
    index.insert(d.chains[s]!, 0, s);
    if ((ops & 3) === 3) index.truncate(s, d.chains[s]!, (ops >> 2) % d.chains[s]!.length);
    if ((ops & 255) === 255) index.purgeSlot(s);
    ops++;
  }
  parentPort.postMessage(ops);
}
