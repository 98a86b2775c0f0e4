// Worker entry for worker-aggregation.test.ts: a real worker thread recording through WorkerMetrics,
// driven by messages from the test (record N tokenize tasks and scrapes, then acknowledge).
import { parentPort, workerData } from 'node:worker_threads';
import { WorkerMetrics } from '../../../src/metrics/worker-metrics.ts';

const data = workerData as { id: string; channelName?: string };
const metrics = new WorkerMetrics({ workerId: data.id, pushIntervalMs: 0, ...(data.channelName ? { channelName: data.channelName } : {}) });
parentPort!.on('message', (msg: { tokenized: number; scraped: number }) => {
  for (let i = 0; i < msg.tokenized; i++) metrics.tokenized(0.002);
  for (let i = 0; i < msg.scraped; i++) metrics.scraped(0.004, 'ok');
  parentPort!.postMessage('recorded');
});
