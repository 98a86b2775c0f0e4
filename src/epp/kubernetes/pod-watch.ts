// Pods by label selector through the Kubernetes API's own HTTP protocol: a list (GET
// /api/v1/namespaces/NS/pods?labelSelector=…) for the state and its resourceVersion, then a watch from that
// version (…&watch=1&resourceVersion=RV&allowWatchBookmarks=true), one JSON event per line: ADDED, MODIFIED,
// DELETED, BOOKMARK (a newer version, nothing changed), ERROR (410 Gone: the version is too old, list again).
// A watch the server ends (its timeoutSeconds) is resumed from the last version seen; a failure lists again
// after a back-off. In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the service
// account's token (read at each connect: the kubelet rotates it) and CA; src/config/load.ts fills api_server
// from the environment the kubelet sets.
// Thread: main. Off the request path: runs only when pods change.
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';

export interface PodWatchConfig {
  namespace: string;
  label_selector: string;
  api_server?: string | undefined;
  token_file: string;
  ca_file: string;
}

/** The fields of a Pod the picker reads. */
export interface Pod {
  metadata: { name: string; resourceVersion?: string; deletionTimestamp?: string };
  status?: { phase?: string; podIP?: string; conditions?: Array<{ type: string; status: string }> };
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Pod & { code?: number; message?: string };
}

/** After a failed list or watch; doubles to the cap while failures continue. */
const BACKOFF_MS = 500;
const BACKOFF_CAP_MS = 10_000;
/** Asked of the server per watch: it ends the watch then, and we resume from the last version. */
const WATCH_SECONDS = 300;

export class PodWatch {
  private readonly cfg: PodWatchConfig;
  private readonly onChange: (pods: ReadonlyMap<string, Pod>) => void;
  private readonly onError: (message: string) => void;
  private readonly pods = new Map<string, Pod>();
  private version = '';
  private stopped = false;
  private req: http.ClientRequest | null = null;
  private timer: NodeJS.Timeout | null = null;
  private backoff = BACKOFF_MS;

  constructor(cfg: PodWatchConfig, onChange: (pods: ReadonlyMap<string, Pod>) => void, onError: (message: string) => void) {
    this.cfg = cfg;
    this.onChange = onChange;
    this.onError = onError;
  }

  start(): void {
    this.list();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.req?.destroy();
  }

  private base(): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.cfg.namespace)}/pods?labelSelector=${encodeURIComponent(this.cfg.label_selector)}`;
  }

  private list(): void {
    if (this.stopped) return;
    this.get(this.base(), (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: { metadata?: { resourceVersion?: string }; items?: Pod[] };
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          return this.failed(`pod list: not JSON (status ${res.statusCode})`);
        }
        if (res.statusCode !== 200) return this.failed(`pod list: status ${res.statusCode}: ${text.slice(0, 200)}`);
        this.pods.clear();
        for (const p of body.items ?? []) this.pods.set(p.metadata.name, p);
        this.version = body.metadata?.resourceVersion ?? '';
        this.backoff = BACKOFF_MS;
        this.onChange(this.pods);
        this.watch();
      });
    });
  }

  private watch(): void {
    if (this.stopped) return;
    const path = `${this.base()}&watch=1&allowWatchBookmarks=true&timeoutSeconds=${WATCH_SECONDS}&resourceVersion=${encodeURIComponent(this.version)}`;
    this.get(path, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return this.failed(`pod watch: status ${res.statusCode}`);
      }
      let pending = '';
      let relist = false;
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        pending += c;
        let nl: number;
        while (!relist && (nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line.length > 0) relist = this.event(line);
        }
        if (relist) res.destroy();
      });
      const mine = this.req;
      res.on('close', () => {
        // Only the current request decides what comes next (a failure may also have been reported for it).
        if (this.stopped || this.req !== mine) return;
        this.req = null;
        // 410 Gone (or an unreadable event): the state is unknown from here, list again. A watch the server
        // ended resumes from the last version; one cut mid-way backs off first.
        if (relist) this.list();
        else if (res.complete) this.watch();
        else this.failed('pod watch: connection lost');
      });
    });
  }

  /** Applies one watch event; true when the state must be listed again. */
  private event(line: string): boolean {
    let e: WatchEvent;
    try {
      e = JSON.parse(line) as WatchEvent;
    } catch {
      this.onError('pod watch: an event that is not JSON; listing again');
      return true;
    }
    if (e.type === 'ERROR') {
      if (e.object.code !== 410) this.onError(`pod watch: ${e.object.code ?? ''} ${e.object.message ?? ''}; listing again`);
      return true;
    }
    const rv = e.object.metadata?.resourceVersion;
    if (rv !== undefined) this.version = rv;
    if (e.type === 'BOOKMARK') return false;
    if (e.type === 'DELETED') this.pods.delete(e.object.metadata.name);
    else this.pods.set(e.object.metadata.name, e.object);
    this.onChange(this.pods);
    return false;
  }

  private failed(message: string): void {
    this.req = null;
    this.onError(message);
    if (this.stopped) return;
    this.timer = setTimeout(() => this.list(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, BACKOFF_CAP_MS);
  }

  private get(path: string, onResponse: (res: http.IncomingMessage) => void): void {
    const server = this.cfg.api_server;
    if (server === undefined) return this.failed('no Kubernetes API: set epp.kubernetes.api_server or run in a pod (KUBERNETES_SERVICE_HOST)');
    const url = new URL(path, server);
    const headers: Record<string, string> = { accept: 'application/json' };
    const token = readOptional(this.cfg.token_file);
    if (token !== null) headers.authorization = `Bearer ${token.trim()}`;
    const opts: https.RequestOptions = { method: 'GET', headers };
    let req: http.ClientRequest;
    if (url.protocol === 'https:') {
      const ca = readOptional(this.cfg.ca_file);
      req = https.request(url, ca !== null ? { ...opts, ca } : opts, onResponse);
    } else {
      req = http.request(url, opts, onResponse);
    }
    this.req = req;
    req.on('error', (err) => {
      if (!this.stopped && this.req === req) this.failed(`Kubernetes API ${url.host}: ${err.message}`);
    });
    req.end();
  }
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
