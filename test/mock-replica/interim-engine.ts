// INTERIM stand-in for test/mock-replica/engine/ (MockEngine), so the HTTP layer can be built and tested
// before the real engine lands; deleted once it does. Thread: main (mock process). Implements the
// engine/types.ts contract crudely: FCFS admission under max_num_seqs and a per-step token budget, a block
// count with a hash→block prefix cache (LRU over unreferenced blocks), one token per running sequence per step.
import type { Clock, EngineOptions, EngineRequestEvents, EngineRequestSpec, EngineSnapshot, RequestPhase } from './engine/types.ts';

export class RealClock implements Clock {
  now(): number {
    return performance.now();
  }
  setTimer(delayMs: number, fn: () => void): unknown {
    return setTimeout(fn, delayMs);
  }
  clearTimer(handle: unknown): void {
    clearTimeout(handle as NodeJS.Timeout);
  }
}

interface Seq {
  spec: EngineRequestSpec;
  events: EngineRequestEvents;
  computed: number;
  generated: number;
  blocks: number;
  cachedTokens: number;
  state: RequestPhase;
}

const PROFILES = {
  'llama-8b-a100': { blocks: 27_648, seqs: 256, budget: 2048, fixedMs: 11, prefillTokPerMs: 12, ctxMsPerK: 0.085 },
  'llama-70b-tp2-a100': { blocks: 1_536, seqs: 256, budget: 2048, fixedMs: 48, prefillTokPerMs: 2.3, ctxMsPerK: 0.1 },
  tiny: { blocks: 256, seqs: 16, budget: 256, fixedMs: 2, prefillTokPerMs: 100, ctxMsPerK: 0 },
} as const;

export class MockEngine {
  readonly blockSize: number;
  readonly totalBlocks: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly maxLoras: number;
  private readonly timeScale: number;
  private readonly prof: (typeof PROFILES)[keyof typeof PROFILES];
  private readonly waiting: Seq[] = [];
  private readonly running: Seq[] = [];
  private readonly byId = new Map<string, Seq>();
  /** Unreferenced cached hashes, oldest first (Map order = LRU). */
  private readonly cached = new Map<number, true>();
  private usedBlocks = 0;
  private timer: unknown = null;
  private readonly adapters = new Set<string>();
  private readonly history: EngineSnapshot['requests'] = [];
  private counts = { preemptions: 0, aborted: 0, completed: 0 };

  constructor(opts: EngineOptions, private readonly clock: Clock) {
    this.prof = PROFILES[opts.profile];
    this.blockSize = opts.blockSize ?? 16;
    this.totalBlocks = opts.numGpuBlocks ?? this.prof.blocks;
    this.maxNumSeqs = opts.maxNumSeqs ?? this.prof.seqs;
    this.maxNumBatchedTokens = opts.maxNumBatchedTokens ?? this.prof.budget;
    this.maxLoras = opts.maxLoras ?? 1;
    this.timeScale = opts.timeScale ?? 1;
    for (const a of opts.loras ?? []) this.adapters.add(a);
  }

  add(spec: EngineRequestSpec, events: EngineRequestEvents): void {
    const s: Seq = { spec, events, computed: 0, generated: 0, blocks: 0, cachedTokens: 0, state: 'waiting' };
    this.byId.set(spec.id, s);
    this.waiting.push(s);
    this.kick();
  }

  abort(id: string): boolean {
    const s = this.byId.get(id);
    if (!s) return false;
    this.remove(s, 'abort');
    return true;
  }

  loadAdapter(name: string): boolean {
    if (this.adapters.has(name)) return false;
    this.adapters.add(name);
    return true;
  }

  unloadAdapter(name: string): boolean {
    return this.adapters.delete(name);
  }

  snapshot(): EngineSnapshot {
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      free_blocks: this.totalBlocks - 1 - this.usedBlocks,
      total_blocks: this.totalBlocks,
      cached_blocks: this.cached.size,
      preemptions: this.counts.preemptions,
      aborted: this.counts.aborted,
      completed: this.counts.completed,
      loaded_adapters: [...this.adapters],
      requests: this.history.concat([...this.byId.values()].map((s) => this.row(s))).slice(-1000),
    };
  }

  private row(s: Seq): EngineSnapshot['requests'][number] {
    return { id: s.spec.id, state: s.state, adapter: s.spec.adapter, prompt_tokens: s.spec.promptTokens, cached_tokens: s.cachedTokens, output_tokens: s.generated };
  }

  private remove(s: Seq, reason: 'stop' | 'length' | 'abort'): void {
    this.byId.delete(s.spec.id);
    const wi = this.waiting.indexOf(s);
    if (wi >= 0) this.waiting.splice(wi, 1);
    const ri = this.running.indexOf(s);
    if (ri >= 0) this.running.splice(ri, 1);
    this.usedBlocks -= s.blocks;
    const full = s.spec.blockHashes.length;
    for (let i = full - 1; i >= 0; i--) this.cached.set(s.spec.blockHashes[i]!, true);
    s.blocks = 0;
    s.state = reason === 'abort' ? 'aborted' : 'finished';
    if (reason === 'abort') this.counts.aborted++;
    else this.counts.completed++;
    this.history.push(this.row(s));
    if (this.history.length > 1000) this.history.shift();
    s.events.onFinish(reason);
  }

  private kick(): void {
    if (this.timer === null && (this.running.length > 0 || this.waiting.length > 0)) {
      this.timer = this.clock.setTimer(0, () => this.step());
    }
  }

  private step(): void {
    this.timer = null;
    let budget = this.maxNumBatchedTokens;
    let prefillTokens = 0;
    let ctxTokens = 0;
    const freeBlocks = (): number => this.totalBlocks - 1 - this.usedBlocks;
    for (const s of this.running) {
      if (s.computed >= s.spec.promptTokens) { budget--; ctxTokens += s.computed + s.generated; }
    }
    while (this.waiting.length > 0 && this.running.length < this.maxNumSeqs && budget > 0) {
      const s = this.waiting[0]!;
      let hit = 0;
      for (let i = 0; i < s.spec.blockHashes.length && (i + 1) * this.blockSize <= s.spec.promptTokens - 1; i++) {
        if (!this.cached.has(s.spec.blockHashes[i]!)) break;
        hit++;
      }
      const need = Math.ceil((s.spec.promptTokens + s.spec.outputTokens) / this.blockSize) - hit;
      if (need > freeBlocks() - this.cached.size + hit) break;
      for (let i = 0; i < hit; i++) this.cached.delete(s.spec.blockHashes[i]!);
      while (this.cached.size > 0 && freeBlocks() - this.cached.size < need) this.cached.delete(this.cached.keys().next().value!);
      this.waiting.shift();
      s.blocks = need + hit;
      this.usedBlocks += need + hit;
      s.cachedTokens = hit * this.blockSize;
      s.computed = s.cachedTokens;
      s.state = 'running';
      this.running.push(s);
    }
    const emits: Array<() => void> = [];
    for (const s of [...this.running]) {
      if (s.computed < s.spec.promptTokens) {
        const chunk = Math.min(budget, s.spec.promptTokens - s.computed);
        if (chunk <= 0) continue;
        budget -= chunk;
        prefillTokens += chunk;
        s.computed += chunk;
        if (s.computed < s.spec.promptTokens) continue;
        emits.push(() => s.events.onFirstToken({ cachedTokens: s.cachedTokens }));
      }
      emits.push(() => this.emitToken(s));
    }
    const p = this.prof;
    const stepMs = (p.fixedMs + prefillTokens / p.prefillTokPerMs + (ctxTokens / 1000) * p.ctxMsPerK) * this.timeScale;
    this.timer = this.clock.setTimer(stepMs, () => {
      this.timer = null;
      for (const e of emits) e();
      this.kick();
    });
  }

  private emitToken(s: Seq): void {
    if (s.state !== 'running') return;
    const index = s.generated++;
    s.events.onToken(index);
    if (s.generated >= s.spec.outputTokens && s.state === 'running') this.remove(s, s.spec.finishReason);
  }
}
