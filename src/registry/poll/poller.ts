// The poll loop: every scrape interval, GET /metrics and /health from each assigned replica over keep-alive
// connections, parse, and write the replica's row into the shared table (the table's only writer).
// Thread: poller worker (workers/replica-poller.worker.ts); also runnable on the main thread in tests and
// benchmarks. Not on the request path. Cost at 64 replicas x 10 scrapes/s: native-bench/scenarios/registry.ts.
//
// One timer drives everything: each tick starts a scrape for every replica that has none in flight and
// aborts scrapes older than scrape_timeout_ms (a coarse deadline, accurate to one interval, instead of a
// timer per request). A replica whose scrape is still running when the next tick comes is skipped that tick.
import { Agent, request, type ClientRequest, type IncomingMessage } from 'node:http';
import { ReplicaTableWriter } from '../replica-table.ts';
import { ROW_STATE } from '../replica-table-layout.ts';
import { FAILURE_KIND, type FailureKind, type FromPoller, type PollerSettings, type ToPoller } from './protocol.ts';
import { EVENT, ReplicaTracker } from './replica-tracker.ts';
import { ParsedMetrics, parseVllmMetrics } from './vllm-metrics-parser.ts';

/** A /metrics page larger than this is not vLLM's (a real one is ~40 KB); the scrape fails. */
const MAX_METRICS_BYTES = 8 * 1024 * 1024;

/** One in-flight scrape of one replica: /metrics and /health in parallel. */
class Scrape {
  readonly tracker: ReplicaTracker;
  readonly startedAtMs: number;
  pending = 2;
  metricsStatus = 0;
  metricsBody = '';
  healthStatus = 0;
  failure: FailureKind | null = null;
  failureDetail = '';
  metricsReq: ClientRequest | null = null;
  healthReq: ClientRequest | null = null;
  /** Aborted because the slot was unassigned or reassigned: report nothing. */
  cancelled = false;
  /** The outcome has been applied; late socket events change nothing. */
  reported = false;

  constructor(tracker: ReplicaTracker, startedAtMs: number) {
    this.tracker = tracker;
    this.startedAtMs = startedAtMs;
  }

  fail(kind: FailureKind, detail: string): void {
    if (this.failure === null) {
      this.failure = kind;
      this.failureDetail = detail;
    }
  }
}

interface Target {
  tracker: ReplicaTracker;
  host: string;
  port: number;
  scrape: Scrape | null;
  scrapesStarted: number;
  lastHealthStatus: number;
}

export class ReplicaPoller {
  private readonly writer: ReplicaTableWriter;
  private readonly post: (msg: FromPoller) => void;
  private settings: PollerSettings;
  private readonly targets: Array<Target | undefined>;
  private readonly agent: Agent;
  private readonly parsed = new ParsedMetrics();
  private timer: NodeJS.Timeout | null = null;
  /** Scrapes completed since start (diagnostics, benchmarks). */
  scrapesCompleted = 0;
  /** Each finished scrape's duration and result, for the gateway's metrics (null: not recorded). */
  private readonly onScrape: ((seconds: number, result: 'ok' | 'error' | 'timeout') => void) | null;

  constructor(
    tableBuffer: SharedArrayBuffer, settings: PollerSettings, post: (msg: FromPoller) => void,
    onScrape: ((seconds: number, result: 'ok' | 'error' | 'timeout') => void) | null = null,
  ) {
    this.writer = new ReplicaTableWriter(tableBuffer);
    this.settings = settings;
    this.post = post;
    this.onScrape = onScrape;
    this.targets = new Array<Target | undefined>(this.writer.slots);
    // Two sockets per replica (metrics and health run in parallel); LIFO keeps the warm one in use.
    this.agent = new Agent({ keepAlive: true, maxSockets: 2, maxFreeSockets: 2, scheduling: 'lifo' });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.settings.scrapeIntervalMs);
  }

  handle(msg: ToPoller): void {
    switch (msg.type) {
      case 'assign': this.assign(msg.slot, msg.assignId, msg.replicaId, msg.url, msg.poolBlockSize); break;
      case 'unassign': this.unassign(msg.slot, msg.assignId); break;
      case 'settings': {
        const intervalChanged = msg.settings.scrapeIntervalMs !== this.settings.scrapeIntervalMs;
        this.settings = msg.settings;
        if (intervalChanged && this.timer) {
          clearInterval(this.timer);
          this.timer = null;
          this.start();
        }
        break;
      }
      case 'stop': this.stop(); break;
      default: break;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const t of this.targets) if (t?.scrape) this.abort(t.scrape);
    this.agent.destroy();
  }

  /** Starts a scrape of every idle target now (the timer calls this; tests and benchmarks may too). */
  tick(): void {
    const nowMs = Date.now();
    const timeoutMs = this.settings.scrapeTimeoutMs;
    for (let slot = 0; slot < this.targets.length; slot++) {
      const t = this.targets[slot];
      if (t === undefined) continue;
      if (t.scrape !== null) {
        if (nowMs - t.scrape.startedAtMs >= timeoutMs) {
          const s = t.scrape;
          s.fail(FAILURE_KIND.TIMEOUT, `no answer within ${timeoutMs} ms`);
          this.finish(t, s);
          s.metricsReq?.destroy();
          s.healthReq?.destroy();
        }
        continue;
      }
      this.startScrape(t, nowMs);
    }
  }

  private assign(slot: number, assignId: number, replicaId: string, url: string, poolBlockSize: number): void {
    const old = this.targets[slot];
    if (old?.scrape) this.abort(old.scrape);
    const parsedUrl = new URL(url);
    const tracker = new ReplicaTracker(slot, assignId, replicaId, url, poolBlockSize);
    const row = tracker.row;
    // Adopt the row when a restarted poller is handed the assignment it already holds (same token): keep
    // generation and state so the router sees no change. Otherwise this is a new occupant: new generation.
    if (this.writer.read(slot, row) && row.assignId === assignId) {
      tracker.firstReported = true;
    } else {
      const generation = this.writer.generation(slot);
      row.clearData();
      row.generation = (generation + 1) | 0;
      row.assignId = assignId;
      row.state = ROW_STATE.UNKNOWN;
      this.writer.resetDataPlaneFailures(slot);
      this.writer.write(slot, row);
    }
    this.targets[slot] = {
      tracker,
      host: parsedUrl.hostname,
      port: Number(parsedUrl.port || (parsedUrl.protocol === 'https:' ? 443 : 80)),
      scrape: null,
      scrapesStarted: 0,
      lastHealthStatus: 0,
    };
    // Scrape a new replica at once rather than up to one interval later: it enters rotation sooner.
    this.startScrape(this.targets[slot]!, Date.now());
  }

  private unassign(slot: number, assignId: number): void {
    const t = this.targets[slot];
    if (t === undefined || t.tracker.assignId !== assignId) return;
    if (t.scrape) this.abort(t.scrape);
    this.targets[slot] = undefined;
    const row = t.tracker.row;
    row.clearData();
    row.generation = (row.generation + 1) | 0;
    row.assignId = 0;
    row.state = ROW_STATE.EMPTY;
    this.writer.resetDataPlaneFailures(slot);
    this.writer.write(slot, row);
  }

  private startScrape(t: Target, nowMs: number): void {
    const s = new Scrape(t.tracker, nowMs);
    t.scrape = s;
    const healthEvery = this.settings.healthEveryScrapes ?? 1;
    if (healthEvery > 1 && t.scrapesStarted++ % healthEvery !== 0) {
      s.pending = 1;
      s.healthStatus = t.lastHealthStatus; // not asked this time: the last answer stands
    } else {
      s.healthReq = this.get(t, '/health', s, false);
    }
    s.metricsReq = this.get(t, '/metrics', s, true);
  }

  private get(t: Target, path: string, s: Scrape, keepBody: boolean): ClientRequest {
    const req = request({ agent: this.agent, host: t.host, port: t.port, path, method: 'GET', headers: { accept: 'text/plain' } });
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      if (--s.pending === 0) this.finish(t, s);
    };
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      if (keepBody) s.metricsStatus = status;
      else s.healthStatus = status;
      if (!keepBody || status !== 200) {
        res.resume();
        res.on('end', settle);
        res.on('error', settle);
        return;
      }
      // latin1: every byte one char, no UTF-8 decoding. What we read (numbers, adapter names, which config
      // restricts to [A-Za-z0-9._:-]) is ASCII, so nothing we use can be garbled.
      res.setEncoding('latin1');
      let body = '';
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_METRICS_BYTES) {
          s.fail(FAILURE_KIND.NOT_VLLM, `/metrics larger than ${MAX_METRICS_BYTES} bytes`);
          req.destroy();
        }
      });
      res.on('end', () => {
        s.metricsBody = body;
        settle();
      });
      res.on('error', (err: NodeJS.ErrnoException) => {
        s.fail(FAILURE_KIND.UNREACHABLE, err.code ?? err.message);
        settle();
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      s.fail(FAILURE_KIND.UNREACHABLE, err.code ?? err.message);
      settle();
    });
    req.end();
    return req;
  }

  private abort(s: Scrape): void {
    s.cancelled = true;
    s.metricsReq?.destroy();
    s.healthReq?.destroy();
  }

  private finish(t: Target, s: Scrape): void {
    if (s.reported || s.cancelled) return;
    s.reported = true;
    if (t.scrape === s) t.scrape = null;
    if (s.healthReq !== null) t.lastHealthStatus = s.healthStatus;
    const tracker = s.tracker;
    // The slot may have been reassigned while this scrape was in flight: its result belongs to nobody.
    if (this.targets[tracker.slot]?.tracker !== tracker) return;
    const nowMs = Date.now();
    let events: number;
    let ok = false;
    if (s.failure === null && s.metricsStatus === 200 && s.healthStatus >= 200 && s.healthStatus < 300) {
      if (parseVllmMetrics(s.metricsBody, this.parsed)) {
        events = tracker.onGood(this.parsed, nowMs, nowMs - s.startedAtMs);
        ok = true;
        // Half-open: a good scrape gives a replica that data-plane failures took out another chance.
        const dp = this.writer.dataPlaneFailures(tracker.slot);
        if (dp !== 0) this.writer.clearDataPlaneFailuresIf(tracker.slot, dp);
      } else {
        events = tracker.onFailure(FAILURE_KIND.NOT_VLLM, 'no vllm:num_requests_* series', nowMs, this.settings.downAfterFailures);
      }
    } else if (s.failure !== null) {
      events = tracker.onFailure(s.failure, s.failureDetail, nowMs, this.settings.downAfterFailures);
    } else {
      events = tracker.onFailure(FAILURE_KIND.STATUS, `/metrics ${s.metricsStatus}, /health ${s.healthStatus}`, nowMs, this.settings.downAfterFailures);
    }
    s.metricsBody = '';
    this.scrapesCompleted++;
    if (this.onScrape !== null) this.onScrape((nowMs - s.startedAtMs) / 1000, ok ? 'ok' : s.failure === FAILURE_KIND.TIMEOUT ? 'timeout' : 'error');
    this.writer.write(tracker.slot, tracker.row);
    this.emit(tracker, events, ok);
  }

  private emit(tracker: ReplicaTracker, events: number, ok: boolean): void {
    const { slot, assignId } = tracker;
    if (events & EVENT.BLOCK_SIZE_MISMATCH) {
      const message = `replica ${tracker.replicaId} (${tracker.url}) reports block_size ${tracker.row.blockSize} but its pool uses ` +
        `${tracker.poolBlockSize}: prefix-cache affinity is OFF for this replica until they agree`;
      console.warn(`[registry] ${message}`);
      this.post({ type: 'warn', slot, assignId, message });
    }
    if (events & EVENT.RESTART) {
      this.post({ type: 'restart', slot, assignId, generation: tracker.row.generation, reason: tracker.reason });
    }
    if (events & EVENT.ADAPTERS) {
      this.post({ type: 'adapters', slot, assignId, running: tracker.runningAdapters, waiting: tracker.waitingAdapters });
    }
    if (events & EVENT.STATE) {
      this.post({ type: 'state', slot, assignId, state: tracker.row.state, reason: tracker.reason });
    }
    if (!tracker.firstReported) {
      tracker.firstReported = true;
      this.post({ type: 'first-scrape', slot, assignId, ok });
    }
  }
}
