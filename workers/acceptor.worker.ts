// worker_threads entry for one acceptor thread (server.threads > 1): wires src/threads/acceptor.ts to the
// parent port. Thread: acceptor. All logic lives in src/threads/.
import { parentPort, workerData } from 'node:worker_threads';
import { runAcceptor } from '../src/threads/acceptor.ts';
import type { AcceptorWorkerData } from '../src/threads/protocol.ts';

if (parentPort === null) throw new Error('acceptor.worker.ts must run as a worker thread');
await runAcceptor(parentPort, workerData as AcceptorWorkerData);
