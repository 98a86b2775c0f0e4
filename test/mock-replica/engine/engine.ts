// MockEngine: an I/O-free model of vLLM V1's EngineCore (docs/vllm-facts.md "Scheduler"), driven by an
// injectable Clock so the same code serves the HTTP mock in real time and a fleet simulator in virtual time.
// Each step: schedule RUNNING requests (one decode token, or the rest of a prefill chunk), preempting the
// newest running request by recompute when KV blocks run out; then, if nothing was preempted, admit WAITING
// requests FCFS under max_num_seqs, the max_num_batched_tokens budget, the KV pool (prefix-cache hits are
// free) and max_loras; the step lasts what profiles.ts says; at its end tokens are sampled and events fire.
// Steps run only while there is work. Thread: main of the mock process. Hot path: yes, per step and per token;
// no allocation per token beyond the callbacks' own.
import { BlockPool, type BlockPoolListener } from './block-pool.ts';
import { auditEngine } from './engine-audit.ts';
import { EngineRequest } from './engine-request.ts';
import { perturbedProfile, PROFILES, resolveConfig, stepDurationMs, type BatchShape, type EngineProfile } from './profiles.ts';
import { SeededRandom } from '../../../src/router/seeded-random.ts';
import type { EngineCounters, EngineStats } from './stats.ts';
import { StatsRecorder } from './stats-recorder.ts';
import type { Clock, EngineBlockEvents, EngineConfig, EngineOptions, EngineRequestEvents, EngineRequestSpec, EngineSnapshot } from './types.ts';

/** A real clock that fires late may start the next step at the previous step's planned end, up to this far back. */
const CATCH_UP_LIMIT_MS = 20;
const RECENT_REQUESTS = 1000;
/** addToBatch loads the prefix-cache buckets of this many blocks at once before caching them. */
const WARM_AHEAD = 8;

export class MockEngine {
  readonly config: EngineConfig;
  readonly profile: EngineProfile;
  /** The figures steps are timed with: the profile's, or this engine's own draw around them (stepTimeNoise). */
  private readonly stepProfile: EngineProfile;
  /** Per-step noise: ±jitter (a fraction) from `jitterRng`; 0 = none. */
  private readonly jitter: number;
  private readonly jitterRng: SeededRandom | null;
  /** Decode-only steps cost their CUDA-graph batch (EngineOptions.cudaGraphPadding). */
  private readonly padding: boolean;
  private readonly clock: Clock;
  private readonly pool: BlockPool;
  private readonly rec: StatsRecorder;
  private readonly running: EngineRequest[] = [];
  private waiting: EngineRequest[] = [];
  private readonly live = new Map<string, EngineRequest>();
  private readonly recent = new Map<string, EngineRequest>();
  private readonly adapters = new Set<string>();
  /** Adapters resident in a GPU LoRA slot → step of last admission (LRU). Moving one in costs adapterLoadMs. */
  private readonly gpuAdapters = new Map<string, number>();

  /** Told of every block cached and evicted (the KV-event publisher); null = nobody listens. */
  private blockEvents: EngineBlockEvents | null = null;
  private kvListener: BlockPoolListener | null = null;

  private stepTimer: unknown = null;
  /** stepTimer only waits for a held request (tokenDelayMs) to become ready: an add or abort may kick earlier. */
  private stepTimerHeld = false;
  private inStepEnd = false;
  private closed = false;
  /** See version. */
  private changes = 0;
  private stepSeq = 0;
  private stepStartMs = 0;
  private stepEndMs = 0;
  private saltSeq = 0;
  /** Keeps the warming loads (addToBatch's, finishStep's) observable, so the compiler cannot drop them. */
  warmSink = 0;
  /**
   * This step's batch: the first schedCount entries of schedReqs/schedTokens (at most max_num_seqs). Kept by
   * count, never truncated: `length = 0` drops an array's backing store in V8, so every step regrew it.
   * Entries past the count are stale and unread.
   */
  private readonly schedReqs: EngineRequest[] = [];
  private readonly schedTokens: Int32Array;
  private schedCount = 0;
  /**
   * Scratch for one waiting request's prefix-cache hits, sized once for the longest sequence. A number[]
   * reset with `length = 0` drops its backing store in V8, so a 1,000-block prompt regrew it block by block
   * on every step it waited at the queue's head.
   */
  private readonly hitIds: Int32Array;
  private readonly shape: BatchShape = { scheduledSeqs: 0, contextTokens: 0, prefillTokens: 0, attentionSquares: 0, adaptersLoaded: 0 };

  /** Requests that sampled a token this step (the first sampledCount entries), as schedReqs is kept. */
  private readonly sampled: EngineRequest[] = [];
  private readonly sampledIndex: Int32Array;

  constructor(opts: EngineOptions, clock: Clock) {
    this.config = resolveConfig(opts);
    this.profile = PROFILES[this.config.profile];
    const noise = opts.stepTimeNoise;
    // The fleet's shared bias first (the same draw for every engine of one biasSeed), then two streams from
    // the engine's own seed: its parameters, then its per-step noise.
    const biased = noise && (noise.biasPct ?? 0) > 0 ? perturbedProfile(this.profile, noise.biasPct!, new SeededRandom(Math.imul(noise.biasSeed ?? 0, 0x27d4eb2f) ^ 0x1b873593)) : this.profile;
    this.stepProfile = noise && noise.errorPct > 0 ? perturbedProfile(biased, noise.errorPct, new SeededRandom(Math.imul(noise.seed, 0x9e3779b1) ^ 0x51ed27)) : biased;
    this.padding = opts.cudaGraphPadding === true;
    this.jitter = noise ? noise.jitterPct / 100 : 0;
    this.jitterRng = this.jitter > 0 ? new SeededRandom(Math.imul(noise!.seed, 0x85ebca6b) ^ 0x2545f491) : null;
    this.clock = clock;
    this.pool = new BlockPool(this.config.numGpuBlocks);
    this.schedTokens = new Int32Array(this.config.maxNumSeqs);
    this.sampledIndex = new Int32Array(this.config.maxNumSeqs);
    this.hitIds = new Int32Array(Math.ceil(this.config.maxModelLen / this.config.blockSize) + 1);
    this.rec = new StatsRecorder(this.config.maxModelLen, opts.histograms !== false);
    for (const name of opts.loras ?? []) this.adapters.add(name);
  }

  /**
   * Who hears the prefix cache's stores and evictions as bare hashes (the simulator's event feed); null =
   * nobody. A listener costs one call per cached or evicted block.
   */
  setKvListener(listener: BlockPoolListener | null): void {
    this.kvListener = listener;
    this.wirePool();
  }

  /**
   * Reports every block the prefix cache stores (with its parent hash, tokens and adapter) and evicts, as
   * vLLM's BlockStored / BlockRemoved do (the mock's KV-event publisher). null stops the reports.
   */
  setBlockEvents(listener: EngineBlockEvents | null): void {
    this.blockEvents = listener;
    this.wirePool();
  }

  /** The pool's one listener serves both hearers: stores reach blockEvents from the engine, with context. */
  private wirePool(): void {
    const kv = this.kvListener;
    const be = this.blockEvents;
    if (be === null) {
      this.pool.listener = kv;
      return;
    }
    this.pool.listener = kv === null
      ? { stored() {}, removed: (hash) => be.removed(hash) }
      : { stored: (hash, block) => kv.stored(hash, block), removed: (hash, block) => { kv.removed(hash, block); be.removed(hash); } };
  }

  /** Engine steps run so far. */
  get steps(): number {
    return this.rec.steps;
  }

  /**
   * Bumped by everything stats() can show differently (add, abort, an adapter loaded or unloaded, a step's
   * start and end): equal versions, equal stats. Lets the /metrics page be rendered once per change rather than
   * once per scrape (test/mock-replica/replica-metrics.ts).
   */
  get version(): number {
    return this.changes;
  }

  /** Queues a request. Throws on a caller bug: duplicate live id, lengths out of range, engine closed. */
  add(spec: EngineRequestSpec, events: EngineRequestEvents): void {
    if (this.closed) throw new Error('MockEngine is closed');
    if (this.live.has(spec.id)) throw new Error(`request id ${spec.id} is already in the engine`);
    if (!Number.isInteger(spec.promptTokens) || spec.promptTokens < 1) throw new RangeError(`promptTokens must be >= 1, got ${spec.promptTokens}`);
    if (!Number.isInteger(spec.outputTokens) || spec.outputTokens < 1) throw new RangeError(`outputTokens must be >= 1, got ${spec.outputTokens}`);
    if (spec.promptTokens + spec.outputTokens > this.config.maxModelLen) {
      throw new RangeError(`promptTokens + outputTokens = ${spec.promptTokens + spec.outputTokens} exceeds maxModelLen ${this.config.maxModelLen}`);
    }
    this.changes++;
    const req = new EngineRequest(spec, events, this.config.blockSize, ++this.saltSeq, this.clock.now());
    this.waiting.push(req);
    this.live.set(req.id, req);
    this.recent.delete(req.id);
    this.recent.set(req.id, req);
    if (this.recent.size > RECENT_REQUESTS) this.recent.delete(this.recent.keys().next().value!);
    this.maybeStartStep();
  }

  /** Removes a waiting or running request and frees its blocks now; calls its onFinish('abort') synchronously. */
  abort(id: string): boolean {
    const req = this.live.get(id);
    if (!req) return false;
    this.changes++;
    const list = req.phase === 'running' ? this.running : this.waiting;
    const at = list.indexOf(req);
    if (at >= 0) list.splice(at, 1);
    this.live.delete(id);
    this.release(req);
    req.phase = 'aborted';
    this.rec.finished(req, 'abort', this.clock.now());
    const events = req.events;
    req.close();
    events.onFinish('abort');
    this.maybeStartStep();
    return true;
  }

  loadAdapter(name: string): 'ok' | 'exists' {
    if (this.adapters.has(name)) return 'exists';
    this.changes++;
    this.adapters.add(name);
    return 'ok';
  }

  /** Unregisters the adapter; requests already queued or running with it carry on, as in vLLM. */
  unloadAdapter(name: string): 'ok' | 'missing' {
    if (!this.adapters.delete(name)) return 'missing';
    this.changes++;
    if (!this.running.some((r) => r.adapter === name)) this.gpuAdapters.delete(name);
    return 'ok';
  }

  /**
   * The /_mock/state view. total_blocks = num_gpu_blocks (null block included); free_blocks = blocks with no
   * reference (cached ones included), so kv_cache_usage_perc = 1 − free_blocks / (total_blocks − 1);
   * cached_blocks = blocks whose hash is in the prefix cache, referenced or not.
   */
  snapshot(): EngineSnapshot {
    const requests: EngineSnapshot['requests'] = [];
    for (const r of this.recent.values()) {
      requests.push({
        id: r.id, state: r.phase, adapter: r.adapter, prompt_tokens: r.promptTokens,
        cached_tokens: r.cachedTokens, output_tokens: r.numOutputTokens,
      });
    }
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      free_blocks: this.pool.freeBlocks,
      total_blocks: this.config.numGpuBlocks,
      cached_blocks: this.pool.cachedBlocks,
      preemptions: this.rec.preemptions,
      aborted: this.rec.aborted,
      completed: this.rec.completed,
      loaded_adapters: [...this.adapters],
      requests,
    };
  }

  stats(): EngineStats {
    return this.rec.stats(this.running.length, this.waiting.length, this.pool.usage(), this.loraInfo());
  }

  /** stats() without the histograms: a fleet simulator's scrape runs per replica every scrape interval. */
  counters(): EngineCounters {
    return this.rec.counters(this.running.length, this.waiting.length, this.pool.usage(), this.loraInfo());
  }

  private loraInfo(): EngineStats['lora'] {
    const runningLoras = new Set<string>();
    for (const r of this.running) if (r.adapter !== null) runningLoras.add(r.adapter);
    const waitingLoras = new Set<string>();
    for (const r of this.waiting) if (r.adapter !== null) waitingLoras.add(r.adapter);
    return { max_lora: this.config.maxLoras, running_lora_adapters: [...runningLoras], waiting_lora_adapters: [...waitingLoras] };
  }

  /**
   * The engine's internal invariants that do not hold (empty when sound); see engine-audit.ts. O(blocks +
   * requests): for tests and simulators, not for the request path.
   */
  audit(): string[] {
    return auditEngine(this.config, this.running, this.waiting, this.live.size, this.pool);
  }

  /** Stops stepping and aborts every request still in the engine (each gets onFinish('abort')). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.stepTimer !== null) this.clock.clearTimer(this.stepTimer);
    this.stepTimer = null;
    for (const id of [...this.live.keys()]) this.abort(id);
  }

  private hasWork(): boolean {
    return this.running.length > 0 || this.waiting.length > 0;
  }

  /**
   * From idle, the first step starts on a zero-delay timer rather than inside add(), so every request that
   * arrives in the same tick (or the same virtual instant) joins it, as vLLM drains its input queue before
   * each step.
   */
  private maybeStartStep(): void {
    if (this.stepTimer !== null && this.stepTimerHeld && !this.inStepEnd) {
      this.clock.clearTimer(this.stepTimer);
      this.stepTimer = null;
      this.stepTimerHeld = false;
    }
    if (this.stepTimer !== null || this.inStepEnd || this.closed || !this.hasWork()) return;
    this.stepTimer = this.clock.setTimer(0, this.onKick);
  }

  private readonly onKick = (): void => {
    this.stepTimer = null;
    this.stepTimerHeld = false;
    if (!this.closed && this.hasWork()) this.startStep(this.clock.now());
  };

  private startStep(startMs: number): void {
    this.changes++;
    this.stepStartMs = startMs;
    // A step that only preempted (its last candidate preempted itself) schedules again at once, as vLLM's
    // next step would; a second empty pass means nothing can run until an add or abort changes that.
    if (this.schedule() && this.schedCount === 0) this.schedule();
    if (this.schedCount === 0) {
      this.waitForHeld(startMs);
      return;
    }
    let durationMs = stepDurationMs(this.stepProfile, this.shape, this.padding) * this.config.timeScale;
    if (this.jitterRng !== null) durationMs *= 1 + this.jitter * (2 * this.jitterRng.next() - 1);
    this.stepEndMs = startMs + durationMs;
    this.stepTimer = this.clock.setTimer(this.stepEndMs - this.clock.now(), this.onStepEnd);
  }

  private readonly onStepEnd = (): void => {
    this.stepTimer = null;
    if (this.closed) return;
    const endMs = this.stepEndMs;
    this.inStepEnd = true;
    let handlerError: unknown = null;
    try {
      handlerError = this.finishStep(endMs);
    } finally {
      this.inStepEnd = false;
    }
    if (this.stepTimer === null && !this.closed && this.hasWork()) {
      const nowMs = this.clock.now();
      this.startStep(nowMs - endMs <= CATCH_UP_LIMIT_MS ? endMs : nowMs);
    }
    // A throwing handler is a bug in the caller: surface it, but only once every other request got its
    // events and the next step is armed, so one bad handler does not stall the engine.
    if (handlerError !== null) throw handlerError;
  };

  /**
   * Nothing could be scheduled: if that is because requests are held (tokenDelayMs), the next step starts
   * when the first of them is ready; otherwise only an add or abort can change anything. O(requests), only
   * on an empty step.
   */
  private waitForHeld(startMs: number): void {
    let readyAt = Infinity;
    for (const r of this.running) if (r.readyAtMs > startMs && r.readyAtMs < readyAt) readyAt = r.readyAtMs;
    for (const r of this.waiting) if (r.readyAtMs > startMs && r.readyAtMs < readyAt) readyAt = r.readyAtMs;
    if (readyAt === Infinity) return;
    this.stepTimer = this.clock.setTimer(readyAt - this.clock.now(), this.onKick);
    this.stepTimerHeld = true;
  }

  /** Builds this step's batch into schedReqs/schedTokens/shape (vLLM Scheduler.schedule); true if it preempted. */
  private schedule(): boolean {
    const { blockSize, maxNumSeqs, maxLoras } = this.config;
    this.schedCount = 0;
    const s = this.shape;
    s.scheduledSeqs = s.contextTokens = s.prefillTokens = s.attentionSquares = s.adaptersLoaded = 0;
    this.stepSeq++;
    let budget = this.config.maxNumBatchedTokens;
    let preempted = false;

    const running = this.running;
    for (let i = 0; i < running.length && budget > 0; i++) {
      const req = running[i]!;
      if (req.readyAtMs > this.stepStartMs) continue; // held (tokenDelayMs): keeps its blocks, computes nothing
      const numNew = Math.min(req.numTokens - req.numComputedTokens, budget);
      let fits = this.grow(req, numNew);
      while (!fits) {
        const victim = running.pop()!;
        this.preempt(victim);
        preempted = true;
        if (victim === req) break;
        fits = this.grow(req, numNew);
      }
      if (!fits) break;
      this.addToBatch(req, numNew);
      budget -= numNew;
    }
    if (preempted) return true; // vLLM admits nothing in a step that had to preempt

    const runningLoras = new Set<string>();
    for (const r of running) if (r.adapter !== null) runningLoras.add(r.adapter);
    let admitted = 0;
    let skipped = false;
    const waiting = this.waiting;
    const pool = this.pool;
    for (let w = 0; w < waiting.length && budget > 0 && running.length < maxNumSeqs; w++) {
      const req = waiting[w]!;
      if (req.readyAtMs > this.stepStartMs) {
        skipped = true; // held (tokenDelayMs): stays queued in place, like a LoRA skip
        continue;
      }
      const adapter = req.adapter;
      // Head-of-line per adapter: skipped, stays queued in place, later requests may still go
      // (docs/vllm-facts.md "LoRA adapters").
      if (adapter !== null && !runningLoras.has(adapter) && runningLoras.size >= maxLoras) {
        skipped = true;
        continue;
      }

      const hitIds = this.hitIds;
      const maxHitBlocks = Math.floor((req.numTokens - 1) / blockSize);
      let hits = 0;
      let hitsToTouchFree = 0;
      while (hits < maxHitBlocks) {
        const id = pool.lookup(req.blockHash(hits));
        if (id < 0) break;
        hitIds[hits++] = id;
        if (pool.refs(id) === 0) hitsToTouchFree++;
      }
      const hitTokens = hits * blockSize;
      const numNew = Math.min(req.numTokens - hitTokens, budget);
      const newBlocks = Math.ceil((hitTokens + numNew) / blockSize) - hits;
      if (newBlocks + hitsToTouchFree > pool.freeBlocks) break; // FCFS: nobody overtakes a request that does not fit

      for (let h = 0; h < hits; h++) {
        const id = hitIds[h]!;
        pool.touch(id);
        req.holdBlock(id);
      }
      req.numHashedBlocks = hits;
      req.numComputedTokens = hitTokens;
      this.allocate(req, newBlocks);
      this.rec.admitted(req.numTokens, hitTokens);
      if (!req.firstTokenSampled) req.cachedTokens = hitTokens;
      if (Number.isNaN(req.firstScheduledMs)) req.firstScheduledMs = Math.max(this.stepStartMs, req.arrivalMs);
      if (adapter !== null) {
        runningLoras.add(adapter);
        if (!this.gpuAdapters.has(adapter)) this.freeGpuSlot(runningLoras);
        this.gpuAdapters.set(adapter, this.stepSeq);
      }
      req.phase = 'running';
      running.push(req);
      admitted++;
      this.addToBatch(req, numNew);
      budget -= numNew;
    }
    if (admitted > 0) {
      // Without LoRA skips the admitted requests are exactly the queue's head.
      if (skipped) this.waiting = waiting.filter((r) => r.phase === 'waiting' || r.phase === 'preempted');
      else waiting.splice(0, admitted);
    }
    return false;
  }

  /** Makes room for `numNew` more computed tokens; false when the pool cannot (the caller preempts). */
  private grow(req: EngineRequest, numNew: number): boolean {
    const need = Math.ceil((req.numComputedTokens + numNew) / this.config.blockSize) - req.numBlocks;
    if (need > this.pool.freeBlocks) return false;
    this.allocate(req, need);
    return true;
  }

  /** Appends `count` fresh blocks (evicting LRU cached ones); addToBatch offers the filled ones to the cache. */
  private allocate(req: EngineRequest, count: number): void {
    for (let i = 0; i < count; i++) req.holdBlock(this.pool.allocate());
  }

  private addToBatch(req: EngineRequest, numNew: number): void {
    this.schedReqs[this.schedCount] = req;
    this.schedTokens[this.schedCount++] = numNew;
    const s = this.shape;
    const a = req.numComputedTokens;
    const b = a + numNew;
    s.scheduledSeqs++;
    s.contextTokens += a;
    if (!(numNew === 1 && a >= req.promptTokens && req.firstTokenSampled)) { // prefill (decode costs its weight and KV reads, perSeqMs)
      s.prefillTokens += numNew;
      s.attentionSquares += b * b - a * a;
    }
    // vLLM caches full blocks at allocation time, as soon as the tokens that fill them are scheduled.
    const fullBlocks = Math.floor(b / this.config.blockSize);
    const events = this.blockEvents;
    const pool = this.pool;
    const from = req.numHashedBlocks;
    let warm = 0;
    for (let i = from; i < fullBlocks; i++) {
      if ((i - from) % WARM_AHEAD === 0) {
        const end = i + WARM_AHEAD < fullBlocks ? i + WARM_AHEAD : fullBlocks;
        for (let j = i; j < end; j++) warm += pool.warm(req.blockHash(j));
      }
      const hash = req.blockHash(i);
      if (pool.cacheBlock(req.blockIds[i]!, hash) && events !== null) events.stored(hash, i > 0 ? req.blockHash(i - 1) : null, req.tokenIds, i, req.adapter);
    }
    if (fullBlocks > req.numHashedBlocks) req.numHashedBlocks = fullBlocks;
    this.warmSink = warm;
  }

  /** Makes room in the GPU LoRA slots (evicting the LRU adapter no running request uses) and charges the load. */
  private freeGpuSlot(inUse: ReadonlySet<string>): void {
    if (this.gpuAdapters.size >= this.config.maxLoras) {
      let lru: string | null = null;
      let lruStep = Infinity;
      for (const [name, step] of this.gpuAdapters) {
        if (!inUse.has(name) && step < lruStep) {
          lru = name;
          lruStep = step;
        }
      }
      if (lru !== null) this.gpuAdapters.delete(lru);
    }
    this.shape.adaptersLoaded++;
  }

  private preempt(req: EngineRequest): void {
    this.release(req);
    req.phase = 'preempted';
    this.waiting.unshift(req);
    this.rec.preemptions++;
  }

  /** Frees the request's blocks (hashes kept: they stay prefix-cache hits until evicted) and resets progress. */
  private release(req: EngineRequest): void {
    this.pool.free(req.blockIds, req.numBlocks);
    req.numBlocks = 0;
    req.numHashedBlocks = 0;
    req.numComputedTokens = 0;
  }

  /** Applies the step that ends at `endMs`: computed tokens, sampling, finishes; then fires the events. */
  private finishStep(endMs: number): unknown {
    this.changes++;
    const reqs = this.schedReqs;
    const tokens = this.schedTokens;
    const sampled = this.sampled;
    const sampledIndex = this.sampledIndex;
    let sampledCount = 0;
    let iterationTokens = 0;
    let finishedAny = false;
    // Pass 1: state. Event handlers may call add/abort, so none runs until the engine is consistent.
    const count = this.schedCount;
    for (let i = 0; i < count; i++) {
      const req = reqs[i]!;
      const n = tokens[i]!;
      iterationTokens += n;
      if (req.phase !== 'running') continue; // aborted during the step
      req.numComputedTokens += n;
      if (req.numComputedTokens < req.numTokens) continue; // a prefill chunk that is not the last
      const index = req.numOutputTokens++;
      if (index === 0) req.firstTokenMs = endMs;
      this.rec.tokenSampled(req, endMs);
      req.lastTokenMs = endMs;
      if (req.tokenDelayMs > 0) req.readyAtMs = endMs + req.tokenDelayMs;
      if (req.numOutputTokens === req.outputTokens) {
        req.phase = 'finished';
        this.live.delete(req.id);
        this.release(req);
        this.rec.finished(req, req.finishReason, endMs);
        finishedAny = true;
      }
      sampled[sampledCount] = req;
      sampledIndex[sampledCount++] = index;
      // Loads its events object here, where the misses of a batch overlap; pass 2 calls into them one at a time.
      this.warmSink += req.events.onToken === undefined ? 1 : 0;
    }
    this.rec.stepEnded(iterationTokens);
    if (finishedAny) {
      let k = 0;
      for (const r of this.running) if (r.phase === 'running') this.running[k++] = r;
      this.running.length = k;
    }
    // Pass 2: events, in batch order; a request aborted by an earlier handler gets nothing more.
    let firstError: unknown = null;
    for (let i = 0; i < sampledCount; i++) {
      const req = sampled[i]!;
      const index = sampledIndex[i]!;
      try {
        if (index === 0 && !req.closed) req.events.onFirstToken({ cachedTokens: req.cachedTokens });
        if (!req.closed) req.events.onToken(index);
      } catch (err) {
        firstError ??= err;
      }
      if (req.phase === 'finished' && !req.closed) {
        const events = req.events;
        req.close();
        try {
          events.onFinish(req.finishReason);
        } catch (err) {
          firstError ??= err;
        }
      }
    }
    return firstError;
  }
}
