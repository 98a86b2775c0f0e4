// The poll loop: every scrape interval, GET /metrics and then /health from each assigned replica over its one
// keep-alive connection (scrape-connection.ts), parse, and write the replica's row into the shared table (the
// table's only writer).
// Thread: poller worker (workers/replica-poller.worker.ts); also runnable on the main thread in tests and
// benchmarks. Not on the request path. Cost at 64 replicas x 10 scrapes/s: native-bench/scenarios/registry.ts.
//
// One timer drives everything: each tick starts a scrape for every replica that has none in flight and
// aborts scrapes older than scrape_timeout_ms (a coarse deadline, accurate to one interval, instead of a
// timer per request). A replica whose scrape is still running when the next tick comes is skipped that tick.
// The two GETs go one after the other on one connection rather than in parallel on two: one socket per
// replica, and /health costs one more loopback or cluster round trip of latency, well inside an interval.
import { InflightLedger, LEDGER_INFLIGHT } from '../inflight-ledger.ts';
import { ReplicaTableWriter } from '../replica-table.ts';
import { ROW_STATE } from '../replica-table-layout.ts';
import { FAILURE_KIND, type FailureKind, type FromPoller, type PollerSettings, type ToPoller } from './protocol.ts';
import { EVENT, ReplicaTracker } from './replica-tracker.ts';
import { ScrapeConnection, type ScrapeSink } from './scrape-connection.ts';
import { ParsedMetrics, parseVllmMetrics } from './vllm-metrics-parser.ts';

const PHASE_IDLE = 0;
const PHASE_METRICS = 1;
const PHASE_HEALTH = 2;

/** One assigned replica: its connection, its request heads (built once) and the scrape in flight. */
class Target implements ScrapeSink {
  readonly tracker: ReplicaTracker;
  readonly conn: ScrapeConnection;
  readonly metricsRequest: string;
  readonly healthRequest: string;
  private readonly finished: (t: Target) => void;
  phase = PHASE_IDLE;
  startedAtMs = 0;
  /** This gateway's requests in flight on the replica as the scrape was sent (the row's inflightAtScrape). */
  inflightAtBegin = 0;
  scrapesStarted = 0;
  /** This scrape asks /health (else the last answer stands: healthEveryScrapes). */
  askHealth = true;
  metricsStatus = 0;
  metricsBody = '';
  healthStatus = 0;
  lastHealthStatus = 0;
  failure: FailureKind | null = null;
  failureDetail = '';

  constructor(tracker: ReplicaTracker, url: URL, finished: (t: Target) => void) {
    this.tracker = tracker;
    this.finished = finished;
    // Port as node:http picked it: the URL's, else 80, or 443 for https:// (spoken to in clear, see
    // scrape-connection.ts). Host: the URL's host[:port], as a browser or curl would send it.
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    this.conn = new ScrapeConnection(url.hostname, port, this);
    const head = ` HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/plain\r\n\r\n`;
    this.metricsRequest = `GET /metrics${head}`;
    this.healthRequest = `GET /health${head}`;
  }

  get inFlight(): boolean {
    return this.phase !== PHASE_IDLE;
  }

  begin(nowMs: number, healthEvery: number, inflight: number): void {
    this.phase = PHASE_METRICS;
    this.startedAtMs = nowMs;
    // Read before the request goes out: a request ending before vLLM renders the page only makes the page
    // show less than this, and one dispatched after it more (the row then reads as not only ours).
    this.inflightAtBegin = inflight;
    this.metricsStatus = 0;
    this.metricsBody = '';
    this.failure = null;
    this.failureDetail = '';
    this.askHealth = healthEvery <= 1 || this.scrapesStarted++ % healthEvery === 0;
    this.healthStatus = this.askHealth ? 0 : this.lastHealthStatus;
    this.conn.send(this.metricsRequest, true);
  }

  /** Ends the scrape in flight as `kind` (the timeout) and closes the connection: a late answer is dropped. */
  abandon(kind: FailureKind, detail: string): void {
    this.conn.destroy();
    this.onFailure(kind, detail);
  }

  onResponse(status: number, body: string): void {
    if (this.phase === PHASE_METRICS) {
      this.metricsStatus = status;
      this.metricsBody = body;
      if (this.askHealth) {
        this.phase = PHASE_HEALTH;
        this.conn.send(this.healthRequest, false);
        return;
      }
    } else {
      this.healthStatus = status;
    }
    this.end();
  }

  onFailure(kind: FailureKind, detail: string): void {
    if (this.failure === null) {
      this.failure = kind;
      this.failureDetail = detail;
    }
    this.end();
  }

  private end(): void {
    if (this.phase === PHASE_IDLE) return;
    this.phase = PHASE_IDLE;
    if (this.askHealth) this.lastHealthStatus = this.healthStatus;
    this.finished(this);
  }
}

export class ReplicaPoller {
  private readonly writer: ReplicaTableWriter;
  private readonly post: (msg: FromPoller) => void;
  private settings: PollerSettings;
  private readonly targets: Array<Target | undefined>;
  private readonly parsed = new ParsedMetrics();
  private readonly finished = (t: Target): void => this.finish(t);
  private timer: NodeJS.Timeout | null = null;
  /** The gateway's in-flight ledger (shared buffer): each scrape records its count for the replica. */
  private readonly ledger: InflightLedger | null;
  /** Scrapes completed since start (diagnostics, benchmarks). */
  scrapesCompleted = 0;
  /** Each finished scrape's duration and result, for the gateway's metrics (null: not recorded). */
  private readonly onScrape: ((seconds: number, result: 'ok' | 'error' | 'timeout') => void) | null;

  constructor(
    tableBuffer: SharedArrayBuffer, settings: PollerSettings, post: (msg: FromPoller) => void,
    onScrape: ((seconds: number, result: 'ok' | 'error' | 'timeout') => void) | null = null,
    ledgerBuffer: SharedArrayBuffer | null = null,
  ) {
    this.writer = new ReplicaTableWriter(tableBuffer);
    this.ledger = ledgerBuffer === null ? null : new InflightLedger(ledgerBuffer);
    this.settings = settings;
    this.post = post;
    this.onScrape = onScrape;
    this.targets = new Array<Target | undefined>(this.writer.slots);
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

  /** Stops the timer and closes every replica's connection; scrapes in flight are abandoned unreported. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const t of this.targets) t?.conn.destroy();
  }

  /** TCP connections the slot's current replica has opened (tests: keep-alive reuse). -1: no replica. */
  connectsOf(slot: number): number {
    return this.targets[slot]?.conn.connects ?? -1;
  }

  /** Starts a scrape of every idle target now (the timer calls this; tests and benchmarks may too). */
  tick(): void {
    const nowMs = Date.now();
    const timeoutMs = this.settings.scrapeTimeoutMs;
    for (let slot = 0; slot < this.targets.length; slot++) {
      const t = this.targets[slot];
      if (t === undefined) continue;
      if (t.inFlight) {
        if (nowMs - t.startedAtMs >= timeoutMs) t.abandon(FAILURE_KIND.TIMEOUT, `no answer within ${timeoutMs} ms`);
        continue;
      }
      t.begin(nowMs, this.settings.healthEveryScrapes ?? 1, this.inflight(slot));
    }
  }

  private inflight(slot: number): number {
    return this.ledger === null ? 0 : this.ledger.get(slot, LEDGER_INFLIGHT);
  }

  private assign(slot: number, assignId: number, replicaId: string, url: string, poolBlockSize: number): void {
    // The slot's previous occupant (if the unassign never came): its connection and any scrape go with it.
    this.targets[slot]?.conn.destroy();
    this.targets[slot] = undefined;
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
    const t = new Target(tracker, new URL(url), this.finished);
    this.targets[slot] = t;
    // Scrape a new replica at once rather than up to one interval later: it enters rotation sooner.
    t.begin(Date.now(), this.settings.healthEveryScrapes ?? 1, this.inflight(slot));
  }

  private unassign(slot: number, assignId: number): void {
    const t = this.targets[slot];
    if (t === undefined || t.tracker.assignId !== assignId) return;
    t.conn.destroy();
    this.targets[slot] = undefined;
    const row = t.tracker.row;
    row.clearData();
    row.generation = (row.generation + 1) | 0;
    row.assignId = 0;
    row.state = ROW_STATE.EMPTY;
    this.writer.resetDataPlaneFailures(slot);
    this.writer.write(slot, row);
  }

  private finish(t: Target): void {
    const tracker = t.tracker;
    // A target replaced or removed while its scrape ran has no say (its connection is destroyed, so this is
    // only a guard).
    if (this.targets[tracker.slot] !== t) return;
    const nowMs = Date.now();
    let events: number;
    let ok = false;
    if (t.failure === null && t.metricsStatus === 200 && t.healthStatus >= 200 && t.healthStatus < 300) {
      if (parseVllmMetrics(t.metricsBody, this.parsed)) {
        events = tracker.onGood(this.parsed, nowMs, nowMs - t.startedAtMs, t.inflightAtBegin);
        ok = true;
        // Half-open: a good scrape gives a replica that data-plane failures took out another chance.
        const dp = this.writer.dataPlaneFailures(tracker.slot);
        if (dp !== 0) this.writer.clearDataPlaneFailuresIf(tracker.slot, dp);
      } else {
        events = tracker.onFailure(FAILURE_KIND.NOT_VLLM, 'no vllm:num_requests_* series', nowMs, this.settings.downAfterFailures);
      }
    } else if (t.failure !== null) {
      events = tracker.onFailure(t.failure, t.failureDetail, nowMs, this.settings.downAfterFailures);
    } else {
      events = tracker.onFailure(FAILURE_KIND.STATUS, `/metrics ${t.metricsStatus}, /health ${t.healthStatus}`, nowMs, this.settings.downAfterFailures);
    }
    t.metricsBody = '';
    this.scrapesCompleted++;
    if (this.onScrape !== null) this.onScrape((nowMs - t.startedAtMs) / 1000, ok ? 'ok' : t.failure === FAILURE_KIND.TIMEOUT ? 'timeout' : 'error');
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
