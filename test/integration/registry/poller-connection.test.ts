// The poller's scrape connection against a raw node:net replica whose framing and connection handling each
// test chooses: keep-alive reuse, a chunked page, a replica closing between scrapes, a hung replica, a non-200
// /metrics, an oversized page. What a user sees is checked: the scrape result the gateway counts
// (gateway_replica_scrapes_total{result}), the row's state and figures, and the TCP connections the replica saw.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { InflightLedger, LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';
import { ReplicaPoller } from '../../../src/registry/poll/poller.ts';
import type { FromPoller } from '../../../src/registry/poll/protocol.ts';
import { ReplicaRow, ReplicaTable, ReplicaTableWriter } from '../../../src/registry/replica-table.ts';
import { ROW_STATE } from '../../../src/registry/replica-table-layout.ts';
import { renderPage, VllmPageServer, waitFor } from './vllm-page-server.ts';

const PAGE = renderPage(new VllmPageServer().knobs);
const TIMEOUT_MS = 300;

type Answer = (sock: Socket, path: string) => void;

/** A replica speaking HTTP/1.1 by hand: counts connections and closes, records request heads. */
class RawReplica {
  connections = 0;
  closed = 0;
  heads: string[] = [];
  private readonly sockets = new Set<Socket>();
  private constructor(private readonly server: Server, readonly port: number) {}

  static async start(answer: Answer): Promise<RawReplica> {
    let self: RawReplica | null = null;
    const server = createServer((sock) => {
      const r = self!;
      r.connections++;
      r.sockets.add(sock);
      sock.on('close', () => { r.closed++; r.sockets.delete(sock); });
      sock.on('error', () => {});
      let pending = '';
      sock.setEncoding('latin1');
      sock.on('data', (d: string) => {
        pending += d;
        for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
          const head = pending.slice(0, end);
          pending = pending.slice(end + 4);
          r.heads.push(head);
          answer(sock, head.split(' ')[1]!);
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new RawReplica(server, (server.address() as AddressInfo).port);
    return self;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function lengthAnswer(sock: Socket, path: string, status = 200, body = path === '/metrics' ? PAGE : ''): void {
  sock.write(`HTTP/1.1 ${status} X\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n${body}`, 'latin1');
}

/** A poller on this thread, driven by hand (tick()), with one replica in slot 0; its assignment starts a scrape. */
function pollerFor(t: { after: (fn: () => void) => void }, port: number): {
  poller: ReplicaPoller; results: string[]; events: FromPoller[]; row: () => ReplicaRow;
} {
  const writer = new ReplicaTableWriter(2);
  const table = new ReplicaTable(writer.buffer);
  const results: string[] = [];
  const events: FromPoller[] = [];
  const poller = new ReplicaPoller(writer.buffer, { scrapeIntervalMs: 100, scrapeTimeoutMs: TIMEOUT_MS, downAfterFailures: 1 },
    (m) => events.push(m), (_s, result) => results.push(result));
  t.after(() => poller.stop());
  poller.handle({ type: 'assign', slot: 0, assignId: 7, replicaId: 'r0', url: `http://127.0.0.1:${port}`, poolBlockSize: 16 });
  return {
    poller, results, events,
    row: () => {
      const r = new ReplicaRow();
      assert.ok(table.read(0, r));
      return r;
    },
  };
}

/** Waits for the scrape in flight, if any, then runs `n` more one after the other; returns every result so far. */
async function scrapes(p: ReturnType<typeof pollerFor>, n: number): Promise<string[]> {
  await waitFor(() => p.results.length >= 1, 5000, 'the first scrape');
  for (let i = 0; i < n; i++) {
    const before = p.results.length;
    p.poller.tick();
    await waitFor(() => p.results.length > before, 5000, 'a scrape');
  }
  return p.results;
}

function lastState(events: FromPoller[]): string {
  const e = events.filter((m) => m.type === 'state').at(-1);
  return e?.type === 'state' ? `${e.state} ${e.reason}` : 'none';
}

void test('keep-alive: 20 scrapes (40 GETs) go over one TCP connection, with Host and Accept: text/plain', async (t) => {
  const rep = await RawReplica.start((sock, path) => lengthAnswer(sock, path));
  t.after(() => rep.close());
  const p = pollerFor(t, rep.port);
  const results = await scrapes(p, 19);
  assert.deepEqual(results, new Array<string>(20).fill('ok'));
  assert.equal(rep.connections, 1);
  assert.equal(p.poller.connectsOf(0), 1);
  assert.equal(rep.heads.length, 40);
  assert.equal(rep.heads[0], `GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:${rep.port}\r\nAccept: text/plain`);
  assert.equal(rep.heads[1], `GET /health HTTP/1.1\r\nHost: 127.0.0.1:${rep.port}\r\nAccept: text/plain`);
  const row = p.row();
  assert.equal(row.state, ROW_STATE.UP);
  assert.equal(row.running, 1);
  assert.equal(row.numGpuBlocks, 27648);
  // Stopping the poller closes the connection.
  p.poller.stop();
  await waitFor(() => rep.closed === 1, 5000, 'the replica to see the connection close');
});

void test('a chunked /metrics page, split across writes and chunk boundaries, parses as the same page', async (t) => {
  const rep = await RawReplica.start((sock, path) => {
    if (path !== '/metrics') return lengthAnswer(sock, path);
    const bytes = Buffer.from(PAGE, 'latin1');
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
    // Uneven chunks, each in its own write and one split mid-size-line: the client sees many reads.
    let at = 0;
    for (const size of [1, 7000, 13, 20000]) {
      const piece = bytes.subarray(at, Math.min(at + size, bytes.length));
      at += piece.length;
      sock.write(`${piece.length.toString(16)}\r\n`);
      sock.write(piece);
      sock.write('\r\n');
    }
    const rest = bytes.subarray(at);
    const sizeLine = `${rest.length.toString(16)};ext=1\r\n`;
    sock.write(sizeLine.slice(0, 2));
    setTimeout(() => sock.write(Buffer.concat([Buffer.from(sizeLine.slice(2)), rest, Buffer.from('\r\n0\r\n\r\n')])), 5);
  });
  t.after(() => rep.close());
  const p = pollerFor(t, rep.port);
  const results = await scrapes(p, 2);
  assert.deepEqual(results, ['ok', 'ok', 'ok']);
  assert.equal(rep.connections, 1);
  const row = p.row();
  assert.equal(row.state, ROW_STATE.UP);
  assert.equal(row.kvUsage, 0.25);
  assert.equal(row.processStartSeconds, 1762301190.5);
  assert.deepEqual(p.events.find((e) => e.type === 'adapters'), { type: 'adapters', slot: 0, assignId: 7, running: ['sql-lora', 'chat-lora'], waiting: [] });
});

void test('a replica that closes the connection after every scrape: each next scrape reconnects and succeeds', async (t) => {
  const rep = await RawReplica.start((sock, path) => {
    lengthAnswer(sock, path);
    // Closed once the scrape is over (after /health), while the connection sits idle in the poller.
    if (path === '/health') setTimeout(() => sock.destroy(), 20);
  });
  t.after(() => rep.close());
  const p = pollerFor(t, rep.port);
  await scrapes(p, 0);
  for (let i = 1; i < 5; i++) {
    await waitFor(() => rep.closed === i, 5000, `close ${i}`);
    await scrapes(p, 1);
  }
  assert.deepEqual(p.results, ['ok', 'ok', 'ok', 'ok', 'ok']);
  assert.equal(rep.connections, 5);
  assert.equal(p.poller.connectsOf(0), 5);
  assert.equal(p.row().state, ROW_STATE.UP);
});

void test('a hung replica: the scrape is a timeout, its connection is closed, the next scrape uses a new one', async (t) => {
  let hang = true;
  const rep = await RawReplica.start((sock, path) => { if (!hang) lengthAnswer(sock, path); });
  t.after(() => rep.close());
  const p = pollerFor(t, rep.port);
  await waitFor(() => rep.heads.length === 1, 5000, 'the /metrics request');
  p.poller.tick(); // not yet due: nothing happens
  assert.deepEqual(p.results, []);
  await new Promise((r) => setTimeout(r, TIMEOUT_MS + 20));
  p.poller.tick();
  assert.deepEqual(p.results, ['timeout']);
  assert.equal(p.row().state, ROW_STATE.DOWN);
  assert.match(lastState(p.events), new RegExp(`^${ROW_STATE.DOWN} .*timeout \\(no answer within ${TIMEOUT_MS} ms\\)`));
  await waitFor(() => rep.closed === 1, 5000, 'the poller to close the hung connection');
  hang = false;
  await scrapes(p, 1);
  assert.deepEqual(p.results, ['timeout', 'ok']);
  assert.equal(rep.connections, 2);
  assert.equal(p.row().state, ROW_STATE.UP);
});

void test('a page over 8 MiB is an error and closes the connection; /metrics 500 with a body is an error and keeps it', async (t) => {
  let mode: 'status' | 'huge' | 'ok' = 'huge';
  const rep = await RawReplica.start((sock, path) => {
    if (path === '/metrics' && mode === 'status') return lengthAnswer(sock, path, 500, 'Internal Server Error');
    if (path === '/metrics' && mode === 'huge') {
      const mib = Buffer.alloc(1024 * 1024, 0x23);
      sock.write(`HTTP/1.1 200 OK\r\ncontent-length: ${9 * mib.length}\r\n\r\n`);
      for (let i = 0; i < 9; i++) sock.write(mib);
      return;
    }
    lengthAnswer(sock, path);
  });
  t.after(() => rep.close());
  const p = pollerFor(t, rep.port);
  await scrapes(p, 0);
  assert.deepEqual(p.results, ['error']);
  assert.match(lastState(p.events), new RegExp(`^${ROW_STATE.DOWN} .*not_vllm \\(/metrics larger than 8388608 bytes\\)`));
  await waitFor(() => rep.closed === 1, 5000, 'the oversized response to close the connection');
  mode = 'ok';
  await scrapes(p, 1);
  assert.equal(p.row().state, ROW_STATE.UP);
  mode = 'status';
  await scrapes(p, 2);
  assert.deepEqual(p.results, ['error', 'ok', 'error', 'error']);
  assert.match(lastState(p.events), new RegExp(`^${ROW_STATE.DOWN} .*status \\(/metrics 500, /health 200\\)`));
  assert.equal(rep.connections, 2, 'the 500 left the connection open');
  assert.equal(rep.heads.filter((h) => h.startsWith('GET /health')).length, 3, '/health is still asked after a 500');
});

void test('each good scrape records how many of the gateway\'s requests were in flight on the replica as it was sent', async (t) => {
  const ledger = new InflightLedger(2);
  const entries = [0, 1, 2].map(() => ledger.dispatch(0, 100, 10, 16));
  // The replica answers each /metrics after one of those requests has ended: the row keeps the count at send.
  const rep = await RawReplica.start((sock, path) => {
    if (path === '/metrics' && entries.length > 0) ledger.end(entries.pop()!);
    lengthAnswer(sock, path);
  });
  t.after(() => rep.close());
  const writer = new ReplicaTableWriter(2);
  const table = new ReplicaTable(writer.buffer);
  const results: string[] = [];
  const poller = new ReplicaPoller(writer.buffer, { scrapeIntervalMs: 100, scrapeTimeoutMs: TIMEOUT_MS, downAfterFailures: 1 },
    () => {}, (_s, result) => results.push(result), ledger.buffer);
  t.after(() => poller.stop());
  poller.handle({ type: 'assign', slot: 0, assignId: 7, replicaId: 'r0', url: `http://127.0.0.1:${rep.port}`, poolBlockSize: 16 });
  const row = new ReplicaRow();
  const seen: number[] = [];
  for (let i = 0; i < 4; i++) {
    if (i > 0) poller.tick();
    await waitFor(() => results.length > i, 5000, 'a scrape');
    assert.ok(table.read(0, row));
    seen.push(row.inflightAtScrape);
  }
  assert.deepEqual(seen, [3, 2, 1, 0]);
  assert.equal(ledger.get(0, LEDGER_INFLIGHT), 0);
});
