// The socket-table count behind gateway_client_connections: rows of a captured /proc/net/tcp(6) layout, and
// a real listening socket on loopback whose accepted connections the kernel's tables must show.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { ClientConnectionCounter, countTable, type ClientConnectionCounts } from '../../../src/metrics/client-connections.ts';

const HEAD = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
const row = (sl: number, local: string, rem: string, st: string, queues: string, inode: string): string =>
  `${String(sl).padStart(4)}: ${local} ${rem} ${st} ${queues} 00:00000000 00000000  1000        0 ${inode} 1 0000000000000000 100 0 0 10 0\n`;

void test('counts accepted sockets (inode set) and the listen rows\' accept queues on the port only', () => {
  const tcp = HEAD
    + row(0, '0100007F:1F90', '00000000:0000', '0A', '00000200:00000005', '4001') // listen, 5 queued
    + row(1, '0100007F:1F90', '0100007F:C001', '01', '00000000:00000000', '4002') // accepted
    + row(2, '0100007F:1F90', '0100007F:C002', '08', '00000000:00000000', '4003') // accepted, peer closed
    + row(3, '0100007F:1F90', '0100007F:C003', '01', '00000000:00000000', '0') // still in the accept queue
    + row(4, '0100007F:1F90', '0100007F:C004', '06', '00000000:00000000', '0') // TIME_WAIT after close
    + row(5, '0100007F:C001', '0100007F:1F90', '01', '00000000:00000000', '4004') // the client's end
    + row(6, '0100007F:1F9A', '0100007F:1F90', '01', '00000000:00000000', '4005') // another port
    + row(7, '0100007F:01F9', '0100007F:9999', '01', '00000000:00000000', '4006'); // :01F9 is not :1F90
  const tcp6 = HEAD
    + row(0, '00000000000000000000000000000000:1F90', '00000000000000000000000000000000:0000', '0A', '00000200:00000002', '5001')
    + row(1, '0000000000000000FFFF00000100007F:1F90', '0000000000000000FFFF00000100007F:D001', '01', '00000000:00000000', '5002');
  const out: ClientConnectionCounts = { accepted: 0, queued: 0 };
  countTable(tcp, ':1F90 ', out);
  assert.deepEqual(out, { accepted: 2, queued: 5 });
  countTable(tcp6, ':1F90 ', out);
  assert.deepEqual(out, { accepted: 3, queued: 7 });
  countTable(HEAD, ':1F90 ', out);
  countTable('', ':1F90 ', out);
  assert.deepEqual(out, { accepted: 3, queued: 7 }, 'an empty table adds nothing');
});

void test('ClientConnectionCounter follows a real listening socket as connections open and close', async (t) => {
  const held: Socket[] = [];
  const server = createServer((s) => held.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const counter = await ClientConnectionCounter.open(port);
  const clients: Socket[] = [];
  t.after(async () => {
    for (const s of [...clients, ...held]) s.destroy();
    await counter.close();
    await new Promise((resolve) => server.close(resolve));
  });
  assert.deepEqual(await counter.count(), { accepted: 0, queued: 0 });
  for (let i = 0; i < 5; i++) clients.push(connect(port, '127.0.0.1'));
  await waitUntil(() => held.length === 5);
  assert.deepEqual(await counter.count(), { accepted: 5, queued: 0 });
  for (const s of held.splice(0, 2)) s.destroy(); // the server closes two: no descriptor, gone from the count
  await waitUntil(async () => (await counter.count()).accepted === 3);
  assert.deepEqual(await counter.count(), { accepted: 3, queued: 0 });
});

async function waitUntil(f: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + 5000;
  while (!(await f())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
