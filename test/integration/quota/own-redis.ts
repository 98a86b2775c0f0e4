// A private redis-server for tests that stop, pause or restart Redis (never the shared one at 6379).
// Listens on a free loopback port, appends every write to an AOF in a temp dir (fsync always) so a
// restart keeps the data, like a real Redis with persistence.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class OwnRedis {
  readonly port: number;
  readonly url: string;
  private readonly dir: string;
  private proc: ChildProcess | null = null;

  private constructor(port: number) {
    this.port = port;
    this.url = `redis://127.0.0.1:${port}`;
    this.dir = mkdtempSync(join(tmpdir(), 'quota-redis-'));
  }

  static async start(): Promise<OwnRedis> {
    const r = new OwnRedis(await freePort());
    await r.restart();
    return r;
  }

  /** Starts (again) on the same port and data dir; resolves when it answers PING. */
  async restart(): Promise<void> {
    if (this.proc !== null) throw new Error('redis-server already running');
    const proc = spawn('redis-server', [
      '--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes',
      '--appendfsync', 'always', '--dir', this.dir, '--daemonize', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
    this.proc = proc;
    let spawnError: Error | null = null;
    proc.once('error', (err) => {
      spawnError = err;
    });
    const deadline = Date.now() + 5000;
    while (!(await ping(this.port))) {
      if (spawnError !== null) throw new Error(`cannot run redis-server (the Debian package redis-server, as .ci/run installs): ${String(spawnError)}`);
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`redis-server on ${this.port} did not start`);
      await sleep(20);
    }
  }

  /** SIGKILL: connections drop, nothing answers until restart(). */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    }
  }

  /** SIGSTOP: connections stay open and every command hangs, like an overloaded or partitioned Redis. */
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  resume(): void {
    this.proc?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let buf = '';
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
    sock.once('connect', () => sock.write('PING\r\n'));
  });
}
