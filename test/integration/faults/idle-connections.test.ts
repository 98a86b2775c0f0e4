// Many idle connections against a real gateway process started with a low open-file limit (`ulimit -n 256`).
// This uWS build shows JavaScript no connection that sends no request, so the bound is the process's: uWS
// accepts until no descriptor is left. Then the gateway closes its listen socket(s) (src/server/listen-guard.ts)
// instead of letting uSockets spin on a readable listen socket whose accept() fails: handshakes queued on it are
// reset, new ones refused, the process idles. uWS's idle timeout (10 s) closes the idle connections; once
// descriptors are free the gateway listens on the same port again and serves. Run with one acceptor thread and
// with `server.threads: 2` (one reuse-port listen socket per thread, each paused on its own).
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { TEST_INDEX_SIZES, waitFor } from '../../helpers/start-gateway.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

const KEY = 'sk-idle-conns';
const MODEL = 'llama-3.1-8b-instruct';
const MAIN = nodeEntry('../../../src/main', import.meta.url);
const NOFILE = 256;
/** Connections beyond the free descriptors: they reach the accept queue (512 deep) before the pause. */
const EXTRA = 100;
const PAUSED = 'open-file limit reached: stopped accepting connections';
const RESUMED = 'descriptors free again: accepting connections';

const dir = mkdtempSync(join(tmpdir(), 'expediter-idle-conns-'));
/** One mock replica for the three gateways (started once: the tests start concurrently). */
let replica: Promise<MockReplica> | null = null;
const procs: ChildProcess[] = [];
const socks: Socket[] = [];

after(async () => {
  for (const s of socks) s.destroy();
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  await (await replica)?.close();
  rmSync(dir, { recursive: true, force: true });
});

const TICK = 100; // clock ticks per second (USER_HZ) on Linux
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / TICK;
}

interface Idle {
  sock: Socket;
  ms: number;
  err?: string;
  /** Set when the connection ended: how (error code, or 'closed' for a clean close) and when. */
  ended?: { how: string; ms: number };
}

function openIdle(port: number, t0 = performance.now()): Promise<Idle> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    socks.push(sock);
    const o: Idle = { sock, ms: 0 };
    let how = 'closed';
    sock.once('connect', () => { o.ms = performance.now() - t0; resolve(o); });
    sock.on('error', (e: NodeJS.ErrnoException) => { how = e.code ?? 'error'; o.err ??= how; resolve(o); });
    sock.once('close', () => { o.ended = { how, ms: performance.now() - t0 }; resolve(o); });
  });
}

async function metricsOver(sock: Socket): Promise<string> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      const head = buf.indexOf('\r\n\r\n');
      if (head < 0) return;
      const len = Number(/content-length: (\d+)/i.exec(buf.subarray(0, head).toString())?.[1] ?? 0);
      if (buf.length >= head + 4 + len) {
        sock.off('data', onData);
        resolve(buf.subarray(head + 4, head + 4 + len).toString());
      }
    };
    sock.on('data', onData);
    sock.write('GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n');
  });
}

function metric(page: string, series: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
}

async function startLimited(threads: number): Promise<{ child: ChildProcess; port: number; lines: () => Array<{ msg: string }> }> {
  replica ??= startMockReplica({ profile: 'tiny', model: MODEL });
  const upstream = await replica;
  const configPath = join(dir, `gateway-${threads}.yaml`);
  writeFileSync(configPath, JSON.stringify({
    server: { host: '127.0.0.1', port: 0, threads, shutdown_grace_ms: 2000 },
    tokenizer: { threads: 0 },
    routing: TEST_INDEX_SIZES,
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], max_context_tokens: 2048, default_max_tokens: 16,
      replicas: [{ id: '8b-1', url: upstream.url }] }],
    tenants: [{ name: 'alpha', api_keys: [{ sha256: createHash('sha256').update(KEY).digest('hex') }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 }],
  }));
  // ulimit in the shell, then exec: the gateway itself runs with at most NOFILE descriptors.
  const child = spawn('sh', ['-c', `ulimit -n ${NOFILE} && exec "$0" "$@"`, process.execPath, ...MAIN, '--config', configPath], {
    cwd: new URL('../../../', import.meta.url).pathname,
    env: { ...process.env, LOG_LEVEL: 'info', PORT: '', GATEWAY_CONFIG: '', USAGE_JSONL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const lines = (): Array<{ msg: string }> => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string });
  const port = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`gateway exited early: ${stderr}`);
    return (lines().find((l) => l.msg === 'gateway listening') as { port?: number } | undefined)?.port ?? 0;
  }, 60_000, 50);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 15_000, 50);
  return { child, port, lines };
}

const count = (lines: Array<{ msg: string }>, msg: string): number => lines.filter((l) => l.msg === msg).length;

// The three gateways run side by side (each idles while paused), so the file takes one idle timeout, not three.
describe('idle connections at the open-file limit', { concurrency: true }, () => {
for (const threads of [1, 2]) {
  test(`at the open-file limit the gateway stops accepting and idles, then listens again (server.threads: ${threads})`, { timeout: 180_000 }, async (t) => {
    const { child, port, lines } = await startLimited(threads);
    const url = `http://127.0.0.1:${port}`;
    const pid = child.pid!;
    // Opened before the flood: at the limit no new connection is accepted, this kept-alive one still answers.
    const scrape = await openIdle(port);
    const before = await metricsOver(scrape.sock);
    assert.equal(metric(before, 'gateway_listen_pauses_total'), 0);
    const baseFds = readdirSync(`/proc/${pid}/fd`).length;

    // Enough idle connections to use every free descriptor, plus EXTRA more.
    const t0 = performance.now();
    const n = NOFILE - baseFds + EXTRA;
    const opened = await Promise.all(Array.from({ length: n }, () => openIdle(port, t0)));
    // A handshake still in flight when the listen socket closes is reset (connect fails ECONNRESET): no attempt hangs.
    const failed = opened.filter((o) => o.err !== undefined);
    assert.deepEqual(failed.filter((o) => o.err !== 'ECONNRESET' && o.err !== 'ECONNREFUSED').map((o) => o.err), []);
    // Every thread closes its listen socket within a probe or two of the process running out.
    await waitFor(() => count(lines(), PAUSED) >= threads, 10_000, 20);
    const pausedAt = performance.now() - t0;
    const atLimit = await metricsOver(scrape.sock);
    const accepted = metric(atLimit, 'gateway_client_connections{state="accepted"}');
    t.diagnostic(`${n} idle connections: all listen sockets closed ${pausedAt.toFixed(0)} ms after the flood began; accepted ${accepted}, descriptors ${readdirSync(`/proc/${pid}/fd`).length} of ${NOFILE}`);
    assert.ok(accepted >= NOFILE - baseFds - 40, `accepted ${accepted} (the process's free descriptors)`);
    assert.equal(metric(atLimit, 'gateway_client_connections{state="queued"}'), 0, 'no listen socket left to queue on');
    assert.equal(metric(atLimit, 'gateway_listen_pauses_total'), threads);

    // What the connections that did not get a descriptor saw: the kernel resets what its accept queue held
    // when the listen socket closes (net.ipv4.tcp_migrate_req is 0 by default: not moved to another thread's socket).
    await new Promise((r) => setTimeout(r, 300));
    const reset = opened.filter((o) => o.ended !== undefined);
    const how = [...new Set(reset.map((o) => o.ended!.how))].join(',');
    t.diagnostic(`queued connections ended at the pause: ${reset.length} of ${n} (${how}), the rest stay open`);
    assert.ok(reset.length >= EXTRA - 40 && reset.length <= EXTRA + 40, `${reset.length} queued connections reset`);
    // Reset from the accept queue, or refused when the handshake's SYN came after the socket closed: either is
    // an answer at once, none hangs.
    assert.ok(reset.every((o) => o.ended!.how === 'ECONNRESET' || o.ended!.how === 'ECONNREFUSED'), how);

    // Paused: the loop idles (it spun at 0.6-0.8 s of CPU per second per thread before the guard).
    const cpu0 = cpuSeconds(pid);
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, 2000));
    const cpu = cpuSeconds(pid) - cpu0;
    t.diagnostic(`gateway CPU at the open-file limit: ${cpu.toFixed(2)} s over ${((performance.now() - w0) / 1000).toFixed(2)} s`);
    assert.ok(cpu < 0.4, `CPU ${cpu} s over 2 s while paused`);

    // A client over the limit while paused is refused at once (nothing listens on the port).
    const late = await openIdle(port);
    t.diagnostic(`new connection while paused: ${late.err ?? 'connected'} after ${late.ms.toFixed(1)} ms`);
    assert.equal(late.err, 'ECONNREFUSED');

    // uWS's idle timeout (10 s on a 4 s tick: 8-12 s after accept) closes the accepted idle connections,
    // freeing descriptors; every thread then listens on the same port again.
    await waitFor(() => count(lines(), RESUMED) >= threads, 30_000, 50);
    const resumedAt = performance.now() - t0;
    const idleClosed = opened.filter((o) => o.ended !== undefined && o.ended.how === 'closed').map((o) => o.ended!.ms).sort((a, b) => a - b);
    t.diagnostic(`accepted idle connections closed by the idle timeout: ${idleClosed.length}, first at ${idleClosed[0]?.toFixed(0)} ms; listening again at ${resumedAt.toFixed(0)} ms`);
    assert.ok(resumedAt >= 6000 && resumedAt <= 25_000, `listening again after ${resumedAt} ms`);
    assert.ok(idleClosed.length > 0 && idleClosed[0]! >= 6000, 'idle connections close at the idle timeout, not at the pause');

    assert.equal(child.exitCode, null, 'the gateway is still running');
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'after' }], max_tokens: 2 }),
    });
    assert.equal(res.status, 200, await res.text());
    const page = await (await fetch(`${url}/metrics`)).text();
    assert.equal(metric(page, 'gateway_listen_pauses_total'), threads);
    // With descriptors free and listening, the loop is idle.
    for (const o of opened) o.sock.destroy();
    const cpu1 = cpuSeconds(pid);
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(cpuSeconds(pid) - cpu1 < 0.6, `idle CPU ${cpuSeconds(pid) - cpu1} s over 1.5 s`);

    // SIGTERM drains and exits.
    scrape.sock.destroy();
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
}

test('paused: a port taken meanwhile is retried and logged; SIGTERM drains and exits without listening again', { timeout: 180_000 }, async (t) => {
  const { child, port, lines } = await startLimited(1);
  const pid = child.pid!;
  const n = NOFILE - readdirSync(`/proc/${pid}/fd`).length + 10;
  await Promise.all(Array.from({ length: n }, () => openIdle(port)));
  await waitFor(() => count(lines(), PAUSED) >= 1, 10_000, 20);
  // Another process binds the port while the gateway is paused (no reuse-port: the gateway cannot share it).
  const squatter = createServer((s) => s.destroy());
  await new Promise<void>((resolve, reject) => { squatter.once('error', reject); squatter.listen(port, '127.0.0.1', resolve); });
  try {
    // Idle connections close at the idle timeout; the re-listen then fails and is logged, and retried.
    const failed = await waitFor(() => lines().find((l) => l.msg === 'cannot listen again on the port; retrying'), 30_000, 50);
    t.diagnostic(`re-listen with the port taken: ${JSON.stringify(failed)}`);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const t0 = performance.now();
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    t.diagnostic(`SIGTERM while paused: exited 0 after ${(performance.now() - t0).toFixed(0)} ms`);
    assert.equal(count(lines(), RESUMED), 0, 'never listened again');
  } finally {
    await new Promise((r) => squatter.close(r));
  }
});
});