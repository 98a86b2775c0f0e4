// A real HTTP server that answers /metrics with a vLLM page (built from test/fixtures/vllm-metrics) and
// /health with a settable status: the replica the registry tests scrape. It can be closed and restarted on
// the same port, which is what a replica process restart looks like to the poller.
import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

const V1_PAGE = readFileSync(new URL('../../fixtures/vllm-metrics/v1-0.12-lora.txt', import.meta.url), 'utf8');

export interface PageKnobs {
  running: number;
  waiting: number;
  kvUsage: number;
  blockSize: number;
  /** process_start_time_seconds; a restart changes it. */
  startSeconds: number;
  runningAdapters: string;
  waitingAdapters: string;
}

export function renderPage(k: PageKnobs): string {
  return V1_PAGE
    .replace(/^(vllm:num_requests_running\{[^}]*\}) .*$/m, `$1 ${k.running}.0`)
    .replace(/^(vllm:num_requests_waiting\{[^}]*\}) .*$/m, `$1 ${k.waiting}.0`)
    .replace(/^(vllm:kv_cache_usage_perc\{[^}]*\}) .*$/m, `$1 ${k.kvUsage}`)
    .replace(/^process_start_time_seconds .*$/m, `process_start_time_seconds ${k.startSeconds}`)
    .replace(/block_size="16"/, `block_size="${k.blockSize}"`)
    .replace(/^vllm:lora_requests_info\{max_lora="4",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters=""\}/m,
      `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${k.runningAdapters}",waiting_lora_adapters="${k.waitingAdapters}"}`);
}

export class VllmPageServer {
  readonly knobs: PageKnobs = {
    running: 1, waiting: 0, kvUsage: 0.25, blockSize: 16, startSeconds: 1762301190.5, runningAdapters: 'sql-lora,chat-lora', waitingAdapters: '',
  };
  healthStatus = 200;
  /** Accept requests and never answer them (a wedged process). */
  hang = false;
  /** Called before each /metrics page is rendered: lets a test change the figures on every scrape. */
  beforeRender: ((k: PageKnobs) => void) | null = null;
  /** Requests answered, by path (to see that the poller keeps scraping). */
  hits = new Map<string, number>();
  private server: Server | null = null;
  private cachedKey = '';
  private cachedPage = '';
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<VllmPageServer> {
    const s = new VllmPageServer();
    await s.listen(0);
    return s;
  }

  async listen(port: number): Promise<void> {
    const server = createServer((req, res) => {
      const path = req.url ?? '/';
      this.hits.set(path, (this.hits.get(path) ?? 0) + 1);
      if (this.hang) return;
      if (path === '/metrics') {
        this.beforeRender?.(this.knobs);
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(this.page());
      } else if (path === '/health') {
        res.writeHead(this.healthStatus);
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** The page for the current knobs, rendered again only when they changed (rendering is 7 regex passes). */
  private page(): string {
    const k = this.knobs;
    const key = `${k.running}|${k.waiting}|${k.kvUsage}|${k.blockSize}|${k.startSeconds}|${k.runningAdapters}|${k.waitingAdapters}`;
    if (key !== this.cachedKey) {
      this.cachedKey = key;
      this.cachedPage = renderPage(k);
    }
    return this.cachedPage;
  }

  /** Stops listening and drops every connection, keep-alive ones included: the process is gone. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Comes back on the same port as a new process (new start time, counters from zero are not modelled). */
  async restart(): Promise<void> {
    await this.close();
    this.knobs.startSeconds += 60;
    await this.listen(this.port);
  }
}

/** Polls `cond` every 10 ms until it holds; rejects with `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}
