// worker_threads entry for the replica poller: wires src/registry/poll/poller.ts to the parent port.
// Thread: poller (one per gateway process). Not on the request path. All logic lives in src/registry/poll/.
import { parentPort, workerData } from 'node:worker_threads';
import { ReplicaPoller } from '../src/registry/poll/poller.ts';
import { WorkerMetrics } from '../src/metrics/worker-metrics.ts';
import type { FromPoller, PollerWorkerData, ToPoller } from '../src/registry/poll/protocol.ts';

const port = parentPort;
if (port === null) throw new Error('replica-poller.worker.ts must run as a worker thread');
const data = workerData as PollerWorkerData;
const metrics = data.metricsChannel ? new WorkerMetrics({ workerId: 'replica-poller', channelName: data.metricsChannel }) : null;
const poller = new ReplicaPoller(data.tableBuffer, data.settings, (msg: FromPoller) => port.postMessage(msg),
  metrics === null ? null : (seconds, result) => metrics.scraped(seconds, result), data.ledgerBuffer);
port.on('message', (msg: ToPoller) => {
  poller.handle(msg);
  if (msg.type === 'stop') {
    metrics?.close();
    port.close();
  }
});
poller.start();
port.postMessage({ type: 'ready' } satisfies FromPoller);
