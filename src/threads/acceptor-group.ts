// The main thread's side of server.threads > 1: starts the acceptor threads on one port, answers their calls
// into the single quota store (Redis backend; the memory backend's table is shared and they decide on it
// themselves), tokenizer pool and /metrics page, writes their usage records through the one UsageRecorder,
// pushes registry membership and restarts to them, and carries reloads and shutdown to every one.
// Thread: main. Per request it writes 1 usage record and, with the Redis backend, answers 2 quota calls; the
// rest is setup and reload.
import type { Worker } from 'node:worker_threads';
import type { GatewayConfig } from '../config/schema.ts';
import type { Logger, LogLevel } from '../logging/logger.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import type { Services } from '../pipeline/services.ts';
import type { QuotaStore, TenantLimits } from '../quota/types.ts';
import type { SharedQuotaTable } from '../quota/shared-quota-table.ts';
import type { ReplicaRegistry } from '../registry/replica-registry.ts';
import type { PrefixIndex } from '../router/prefix-index.ts';
import { EventsPrefixIndex } from '../router/events-prefix-index.ts';
import type { PromptTokenizer } from '../tokenize/prompt-tokenizer.ts';
import type { PromptWork, ReplyWork } from '../tokenize/types.ts';
import type { UsageRecorder } from '../usage/usage-recorder.ts';
import { siblingModule, spawnWorker } from '../util/spawn-worker.ts';
import type { AcceptorWorkerData, ToAcceptor, ToMain } from './protocol.ts';
import { Outbox, unbatch, type Batch } from './outbox.ts';
import { FREE_PORT_ATTEMPTS, freePort } from '../util/free-port.ts';

const ACCEPTOR_URL = siblingModule('../../workers/acceptor.worker', import.meta.url);

export interface AcceptorGroupOptions {
  cfg: GatewayConfig;
  env: Record<string, string | undefined>;
  registry: ReplicaRegistry;
  prefixIndex: PrefixIndex;
  quota: QuotaStore;
  /** The memory backend's shared table (acceptors decide quota on it), or null: quota calls come here. */
  sharedQuota: SharedQuotaTable | null;
  tokenizer: PromptTokenizer;
  usage: UsageRecorder;
  metrics: GatewayMetrics;
  log: Logger;
  logLevel: LogLevel;
}

interface Acceptor {
  worker: Worker;
  /** Every message to this acceptor, coalesced per loop turn. */
  out: Outbox<ToAcceptor>;
  closed: Promise<void>;
  /** Pooled tokenize tasks in flight, by the acceptor's call id: a `cancel` aborts one. */
  tasks: Map<number, AbortController>;
}

export class AcceptorGroup {
  readonly port: number;
  private readonly acceptors: Acceptor[];
  private readonly inflightCells: Int32Array;
  private readonly o: AcceptorGroupOptions;
  private reloadSeq = 0;
  private downAfter: number;
  private readonly reloadWaiters = new Map<number, { left: number; done: () => void }>();

  private constructor(o: AcceptorGroupOptions, port: number, acceptors: Acceptor[], inflightCells: Int32Array) {
    this.o = o;
    this.port = port;
    this.acceptors = acceptors;
    this.inflightCells = inflightCells;
    this.downAfter = o.cfg.registry.down_after_failures;
  }

  static async start(o: AcceptorGroupOptions): Promise<AcceptorGroup> {
    const { cfg, registry } = o;
    const inflightBuffer = new SharedArrayBuffer(cfg.server.threads * 4);
    for (let attempt = 1; ; attempt++) {
      const port = cfg.server.port !== 0 ? cfg.server.port : await freePort(cfg.server.host);
      const group = new AcceptorGroup(o, port, [], new Int32Array(inflightBuffer));
      const base: Omit<AcceptorWorkerData, 'index'> = {
        cfg, env: o.env, port, tableBuffer: registry.table.buffer, ledgerBuffer: registry.ledger.buffer, prefixBuffer: o.prefixIndex.buffer,
        ...(o.prefixIndex instanceof EventsPrefixIndex ? { eventsBuffer: o.prefixIndex.events.buffer } : {}),
        inflightBuffer, membership: registry.membership(), metricsChannel: o.metrics.workerChannel, logLevel: o.logLevel,
        remotePool: o.tokenizer.runner !== null,
        sharedQuota: o.sharedQuota !== null ? { desc: o.sharedQuota.descriptor, slots: o.sharedQuota.slotMap() } : null,
      };
      const results = await Promise.allSettled(Array.from({ length: cfg.server.threads }, (_, index) => group.spawn({ ...base, index })));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed === undefined) {
        group.listenToRegistry();
        return group;
      }
      await group.close(0);
      if (cfg.server.port !== 0 || attempt >= FREE_PORT_ATTEMPTS) throw (failed as PromiseRejectedResult).reason;
    }
  }

  get inflightCount(): number {
    let n = 0;
    for (let i = 0; i < this.inflightCells.length; i++) n += Atomics.load(this.inflightCells, i);
    return n;
  }

  /** Resolves when every acceptor runs on the new config (the registry has already applied it here). */
  reload(services: Services, leftSlots: number[]): Promise<void> {
    const seq = ++this.reloadSeq;
    this.downAfter = services.cfg.registry.down_after_failures;
    const live = this.acceptors.filter((a) => a.worker.threadId >= 0);
    return new Promise<void>((resolve) => {
      if (live.length === 0) {
        resolve();
        return;
      }
      this.reloadWaiters.set(seq, { left: live.length, done: resolve });
      const msg: ToAcceptor = {
        t: 'reload', seq, cfg: services.cfg, m: this.o.registry.membership(), left: leftSlots, quotaSlots: this.o.sharedQuota?.slotMap() ?? null,
      };
      for (const a of live) a.out.postMessage(msg);
    });
  }

  /** Every acceptor stops accepting and drains up to graceMs; resolves once all have ended. */
  async close(graceMs: number): Promise<void> {
    const msg: ToAcceptor = { t: 'shutdown', graceMs };
    for (const a of this.acceptors) a.out.postMessage(msg);
    // An acceptor that cannot finish (stuck in a long task) is stopped a little after the deadline.
    const hardStop = setTimeout(() => { for (const a of this.acceptors) void a.worker.terminate(); }, graceMs + 10_000);
    await Promise.all(this.acceptors.map((a) => a.closed));
    clearTimeout(hardStop);
  }

  private spawn(data: AcceptorWorkerData): Promise<void> {
    const worker = spawnWorker(ACCEPTOR_URL, { workerData: data, name: `acceptor-${data.index}` });
    let ended!: () => void;
    const closed = new Promise<void>((resolve) => (ended = resolve));
    const a: Acceptor = { worker, out: new Outbox<ToAcceptor>(worker), closed, tasks: new Map() };
    this.acceptors.push(a);
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (data: ToMain | Batch<ToMain>) => unbatch(data, (msg) => {
        switch (msg.t) {
          case 'listening': resolve(); break;
          case 'listen-failed': reject(new Error(msg.message)); break;
          case 'call': this.answer(a, msg.id, msg.m, msg.a); break;
          case 'cancel': a.tasks.get(msg.id)?.abort(); break;
          case 'usage': this.o.usage.record(msg.r); break;
          case 'reloaded': this.reloaded(msg.seq); break;
          case 'closed': void worker.terminate(); break;
        }
      }));
      worker.on('error', (err) => {
        this.o.log.error({ err, acceptor: data.index }, 'acceptor thread failed');
        reject(err);
      });
      worker.on('exit', (code) => {
        Atomics.store(this.inflightCells, data.index, 0);
        if (code !== 0 && code !== 1) this.o.log.error({ acceptor: data.index, code }, 'acceptor thread exited');
        for (const [seq] of this.reloadWaiters) this.reloaded(seq);
        reject(new Error(`acceptor ${data.index} exited (${code}) before listening`));
        ended();
      });
    });
  }

  private answer(a: Acceptor, id: number, method: string, args: unknown[]): void {
    const o = this.o;
    let work: Promise<unknown>;
    switch (method) {
      case 'acquire': work = o.quota.acquire(args[0] as TenantLimits, args[1] as string, args[2] as number); break;
      case 'settle': work = o.quota.settle(args[0] as TenantLimits, args[1] as string, args[2] as number, args[3] as number); break;
      case 'tokenize': {
        const ac = new AbortController();
        a.tasks.set(id, ac);
        work = o.tokenizer.runner!.run(args[0] as PromptWork, ac.signal).finally(() => a.tasks.delete(id));
        break;
      }
      case 'replyHashes': work = o.tokenizer.runner!.replyHashes(args[0] as ReplyWork); break;
      case 'metrics': work = o.metrics.render().then((body) => ({ contentType: o.metrics.contentType, body })); break;
      default: work = Promise.reject(new Error(`unknown call ${method}`));
    }
    work.then((v) => {
      if (a.worker.threadId < 0) return;
      a.out.postMessage({ t: 'ret', id, v } satisfies ToAcceptor);
    }, (err: unknown) => {
      if (a.worker.threadId < 0) return;
      const e = err instanceof Error ? err : new Error(String(err));
      a.out.postMessage({ t: 'ret', id, err: { name: e.name, message: e.message } } satisfies ToAcceptor);
    });
  }

  private reloaded(seq: number): void {
    const w = this.reloadWaiters.get(seq);
    if (w === undefined || --w.left > 0) return;
    this.reloadWaiters.delete(seq);
    w.done();
  }

  private listenToRegistry(): void {
    const { registry } = this.o;
    registry.onMembershipChange(() => this.broadcast({ t: 'membership', m: registry.membership(), downAfter: this.downAfter }));
    registry.onRestart((slot) => this.broadcast({ t: 'restart', slot }));
  }

  private broadcast(msg: ToAcceptor): void {
    for (const a of this.acceptors) if (a.worker.threadId >= 0) a.out.postMessage(msg);
  }
}
