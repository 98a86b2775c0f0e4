// Starts and stops the baseline nginx (Debian package `nginx`) on a free loopback port with a throwaway prefix
// directory, from nginx.conf.template. Thread: bench main thread. Not on a hot path.
// Run alone to poke at it: `node --import tsx native-bench/nginx/nginx-proxy.ts --upstream 127.0.0.1:9001
// [--upstream ...] [--workers 1|auto] [--port N]`; it prints the URL and stops nginx on Ctrl-C.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, spawnLogged, waitForHttp } from '../harness/processes.ts';
import type { Proc } from '../harness/processes.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const NGINX_CANDIDATES = ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'];

export interface NginxOptions {
  /** `host:port` of each upstream replica. */
  upstreams: readonly string[];
  /** `1`, `2`, ... or `auto`. */
  workerProcesses: number | 'auto';
  /** nginx's upstream balancing: round-robin (its default) or `least_conn` (fewest active connections). */
  balance?: 'round-robin' | 'least_conn';
  port?: number;
  cpus?: string;
}

export interface NginxProxy {
  url: string;
  /** The master; workers are its children, so measure CPU with descendants included. */
  proc: Proc;
  stop(): Promise<void>;
}

export function nginxBinary(): string {
  const found = NGINX_CANDIDATES.find((p) => existsSync(p));
  if (!found) throw new Error('nginx not found: apt-get install -y nginx');
  return found;
}

export function renderConfig(template: string, o: { prefix: string; port: number; upstreams: readonly string[];
  workerProcesses: number | 'auto'; balance?: 'round-robin' | 'least_conn' }): string {
  // Running as root, nginx would drop its workers to `nobody`, which cannot write the temp prefix.
  const user = userInfo().uid === 0 ? 'user root;' : '';
  const vars: Record<string, string> = {
    USER: user,
    WORKER_PROCESSES: String(o.workerProcesses),
    PREFIX: o.prefix,
    PORT: String(o.port),
    UPSTREAM_SERVERS: (o.balance === 'least_conn' ? '    least_conn;\n' : '') + o.upstreams.map((u) => `    server ${u} max_fails=0;`).join('\n'),
  };
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (_m, key: string) => {
    const v = vars[key];
    if (v === undefined) throw new Error(`nginx.conf.template: unknown placeholder ${key}`);
    return v;
  });
}

export async function startNginx(o: NginxOptions): Promise<NginxProxy> {
  const template = readFileSync(join(here, 'nginx.conf.template'), 'utf8');
  const binary = nginxBinary();
  const port = o.port ?? await freePort();
  const prefix = mkdtempSync(join(tmpdir(), 'expediter-nginx-'));
  const conf = join(prefix, 'nginx.conf');
  let proc: Proc | null = null;
  const url = `http://127.0.0.1:${port}`;
  try {
    for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(prefix, d));
    writeFileSync(conf, renderConfig(template, { prefix, port, upstreams: o.upstreams, workerProcesses: o.workerProcesses, balance: o.balance }));
    // -e: the startup error log, before the config's error_log applies (else it tries /var/log/nginx).
    proc = spawnLogged({
      name: `nginx(${o.workerProcesses})`, command: binary, args: ['-p', prefix, '-c', conf, '-e', join(prefix, 'error.log')],
      cwd: prefix, logPath: join(prefix, 'stdout.log'), cpus: o.cpus,
    });
    // Any HTTP answer means nginx listens; the upstream itself may not have a route at `/`.
    await waitForHttp(proc, `${url}/health`, 10_000, true);
  } catch (err) {
    await proc?.stop();
    rmSync(prefix, { recursive: true, force: true });
    throw err;
  }
  const started = proc;
  return {
    url,
    proc: started,
    async stop() {
      await started.stop();
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      upstream: { type: 'string', multiple: true, default: [] },
      workers: { type: 'string', default: '1' },
      port: { type: 'string' },
    },
  });
  if (values.upstream.length === 0) {
    console.error('usage: nginx-proxy.ts --upstream HOST:PORT [--upstream ...] [--workers 1|auto] [--port N]');
    process.exit(2);
  }
  const proxy = await startNginx({
    upstreams: values.upstream,
    workerProcesses: values.workers === 'auto' ? 'auto' : Number(values.workers),
    port: values.port === undefined ? undefined : Number(values.port),
  });
  console.log(`nginx listening on ${proxy.url} (pid ${proxy.proc.pid}); Ctrl-C stops it`);
  const stop = (): void => { void proxy.stop().then(() => process.exit(0)); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
