// worker_threads entry for the KV-event subscriber: wires src/registry/kv-events/subscriber.ts to the parent
// port. Thread: kv-events (one per gateway process with routing.prefix_index: events). Not on the request
// path. All logic lives in src/registry/kv-events/.
import { parentPort, workerData } from 'node:worker_threads';
import { EventsIndex } from '../src/registry/kv-events/events-index.ts';
import type { FromKvEvents, KvEventsWorkerData, ToKvEvents } from '../src/registry/kv-events/protocol.ts';
import { KvEventSubscriber } from '../src/registry/kv-events/subscriber.ts';
import { ReplicaTable } from '../src/registry/replica-table.ts';
import { initBlockHasher } from '../src/tokenize/block-hash.ts';

const port = parentPort;
if (port === null) throw new Error('kv-events.worker.ts must run as a worker thread');
const data = workerData as KvEventsWorkerData;
await initBlockHasher();
const subscriber = new KvEventSubscriber(new EventsIndex(data.indexBuffer), new ReplicaTable(data.tableBuffer), data.settings);
port.on('message', (msg: ToKvEvents) => {
  switch (msg.type) {
    case 'assign': subscriber.assign(msg); break;
    case 'unassign': subscriber.unassign(msg.slot); break;
    case 'restarted': subscriber.restarted(msg.slot); break;
    case 'stop':
      subscriber.close();
      port.close();
      break;
  }
});
port.postMessage({ type: 'ready' } satisfies FromKvEvents);
