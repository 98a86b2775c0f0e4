// Readers for the two public trace formats the simulator replays, and a Workload over their records.
// Mooncake JSONL (kvcache-ai/Mooncake, FAST'25): timestamp (ms), input_length, output_length, hash_ids (one
// prefix-chained id per 512-token block); each id expands to 32 chained 16-token block hashes, so requests
// with equal ids share those blocks exactly. Azure CSV (Azure/AzurePublicDataset, Splitwise ISCA'24):
// wall-clock TIMESTAMP (with or without a UTC offset: the 2023 files have none, the 2024 ones `+00:00`),
// ContextTokens, GeneratedTokens; no content, so every prompt is distinct. Either is replayed in time order
// from its earliest record, whatever its first timestamp and however its lines are ordered.
// Thread: the run's. Setup reads the whole file once, line by line. A request's block hashes are computed the
// first time a run replays its record and kept for the thread's later runs (a race replays the same records
// dozens of times; Mooncake's ~1,000 chained hashes a prompt were a tenth of a run's CPU): up to ~35 MB for
// the whole Mooncake trace, nothing per request after that.
import { fmix32 } from '../../src/util/fmix32.ts';
import { chain53 } from './prng.ts';
import { forEachLine } from './trace-lines.ts';
import type { PoolShape, SimRequest, Workload } from './workload-types.ts';

/** Tokens per Mooncake hash id. */
export const MOONCAKE_BLOCK_TOKENS = 512;

export interface TraceRecord {
  /** Milliseconds from the trace's first record. */
  atMs: number;
  inputTokens: number;
  outputTokens: number;
  /** Mooncake hash ids; null for a trace without prefix information. */
  hashIds: number[] | null;
}

export function readMooncake(path: string): TraceRecord[] {
  const out: TraceRecord[] = [];
  forEachLine(path, (raw, lineNo) => {
    const line = raw.trim();
    if (line === '') return;
    let o: { timestamp?: unknown; input_length?: unknown; output_length?: unknown; hash_ids?: unknown };
    try {
      o = JSON.parse(line) as typeof o;
    } catch {
      throw new Error(`${path}:${lineNo}: not JSON`);
    }
    if (typeof o.timestamp !== 'number' || typeof o.input_length !== 'number' || typeof o.output_length !== 'number' || !Array.isArray(o.hash_ids)) {
      throw new Error(`${path}:${lineNo}: expected timestamp, input_length, output_length, hash_ids`);
    }
    out.push({ atMs: o.timestamp, inputTokens: o.input_length, outputTokens: o.output_length, hashIds: o.hash_ids as number[] });
  });
  return fromEarliest(out);
}

/**
 * `2023-11-16 18:17:03.9799600` or `2024-05-10 00:00:00.009930+00:00` (also `T` for the space, `Z`, `+0000`)
 * → milliseconds since the epoch, UTC. NaN when it is neither.
 */
export function azureTimeMs(s: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)\s*(Z|[+-]\d{2}:?\d{2})?$/.exec(s.trim());
  if (!m) return Number.NaN;
  const local = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5])) + Number(m[6]) * 1000;
  const tz = m[7];
  if (tz === undefined || tz === 'Z') return local;
  const sign = tz[0] === '-' ? -1 : 1;
  const digits = tz.slice(1).replace(':', '');
  return local - sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
}

/** A CSV header or field without surrounding quotes. */
const unquote = (f: string): string => f.trim().replace(/^"(.*)"$/, '$1');

export function readAzure(path: string): TraceRecord[] {
  const out: TraceRecord[] = [];
  let ti = -1;
  let ci = -1;
  let gi = -1;
  forEachLine(path, (raw, lineNo) => {
    if (lineNo === 1) {
      const header = raw.split(',').map(unquote);
      ti = header.indexOf('TIMESTAMP');
      ci = header.indexOf('ContextTokens');
      gi = header.indexOf('GeneratedTokens');
      if (ti < 0 || ci < 0 || gi < 0) throw new Error(`${path}: expected a TIMESTAMP,ContextTokens,GeneratedTokens header`);
      return;
    }
    const line = raw.trim();
    if (line === '') return;
    const f = line.split(',');
    const t = azureTimeMs(unquote(f[ti] ?? ''));
    const input = Number(unquote(f[ci] ?? ''));
    const output = Number(unquote(f[gi] ?? ''));
    if (Number.isNaN(t) || !Number.isInteger(input) || !Number.isInteger(output)) throw new Error(`${path}:${lineNo}: bad record`);
    out.push({ atMs: t, inputTokens: input, outputTokens: output, hashIds: null });
  });
  if (ti < 0) throw new Error(`${path}: expected a TIMESTAMP,ContextTokens,GeneratedTokens header`);
  return fromEarliest(out);
}

/**
 * The records in time order (stable: equal times keep the file's order, as a multi-turn chat's turns must),
 * times counted from the earliest. A trace cut from a longer one starts at its own first request, not after
 * the span it was cut from.
 */
function fromEarliest(records: TraceRecord[]): TraceRecord[] {
  let sorted = true;
  for (let i = 1; i < records.length; i++) {
    if (records[i]!.atMs < records[i - 1]!.atMs) {
      sorted = false;
      break;
    }
  }
  if (!sorted) records.sort((a, b) => a.atMs - b.atMs);
  const t0 = records.length > 0 ? records[0]!.atMs : 0;
  if (t0 !== 0) for (const r of records) r.atMs -= t0;
  return records;
}

/** Full 16-token block hashes of a Mooncake prompt: id k covers blocks 32k .. 32k+31, chained through them all. */
export function expandHashIds(hashIds: readonly number[], promptTokens: number, blockSize: number): Float64Array {
  const perId = MOONCAKE_BLOCK_TOKENS / blockSize;
  const blocks = Math.min(Math.floor(promptTokens / blockSize), hashIds.length * perId);
  const out = new Float64Array(blocks);
  let parent = 0;
  for (let b = 0; b < blocks; b++) {
    parent = chain53(parent, hashIds[Math.floor(b / perId)]!, b);
    out[b] = parent;
  }
  return out;
}

/** Distinct content per request: a chain keyed by the record's index. */
function distinctHashes(index: number, promptTokens: number, blockSize: number): Float64Array {
  const blocks = Math.floor(promptTokens / blockSize);
  const out = new Float64Array(blocks);
  let parent = 0;
  const key = 0x5eed0000 + index * 7919;
  for (let b = 0; b < blocks; b++) {
    parent = chain53(parent, key, b);
    out[b] = parent;
  }
  return out;
}

/**
 * Hashes of the full blocks the reply adds after the prompt, continuing its chain under a key of this request
 * alone (a trace does not say what later prompts carry). Null when the prompt's hashes stop short of its last
 * full block (a Mooncake record whose ids cover less than its length): the engine then salts its own.
 */
function replyChain(prompt: Float64Array, promptTokens: number, outputTokens: number, blockSize: number, index: number): Float64Array | null {
  const blocks = Math.floor(promptTokens / blockSize);
  if (prompt.length !== blocks) return null;
  const out = new Float64Array(Math.floor((promptTokens + outputTokens) / blockSize) - blocks);
  let parent = blocks > 0 ? prompt[blocks - 1]! : 0;
  const key = 0x7e910000 + index * 7919;
  for (let i = 0; i < out.length; i++) {
    parent = chain53(parent, key, blocks + i);
    out[i] = parent;
  }
  return out;
}

/** A record's hashes as last computed, with the key, lengths and block size they were computed for. */
interface Expanded {
  key: number;
  prompt: number;
  output: number;
  blockSize: number;
  blockHashes: Float64Array;
  replyHashes: Float64Array | null;
}

/** Per record; nobody writes into the arrays. */
const expandedOf = new WeakMap<TraceRecord, Expanded>();

/** Span of a trace in ms (last arrival). */
export function traceSpanMs(records: readonly TraceRecord[]): number {
  return records.length === 0 ? 0 : records[records.length - 1]!.atMs;
}

/**
 * One lap of a trace for a replay that wraps: its span plus one mean gap, so the first record of the next lap
 * does not land on the last of this one.
 */
export function traceLapMs(records: readonly TraceRecord[]): number {
  const span = traceSpanMs(records);
  return records.length > 1 ? span + span / (records.length - 1) : span + 1000;
}

/** `caps`: what clients send (below); `recorded`: max_tokens = the recorded output (hindsight, for comparison only). */
export type MaxTokensMode = 'caps' | 'recorded';
export const MAX_TOKENS_MODES: readonly MaxTokensMode[] = ['caps', 'recorded'];
/** The caps a capping client picks from (uniformly, among those ≥ the reply it will get; the largest when none is). */
export const CLIENT_CAPS = [256, 512, 1024, 2048, 4096, 8192] as const;
/** Share of clients that send no max_tokens (the engine then allows the context left after the prompt). */
export const NO_CAP_SHARE = 0.5;

/**
 * The max_tokens a client sends for a reply of `output` tokens after `prompt` on a pool of `maxModelLen`, from
 * two uniform draws: none (the context left) with probability NO_CAP_SHARE, else a cap of CLIENT_CAPS at least
 * `output` (8192 when none is: that reply is cut there). Never more than the context left.
 */
export function clientMaxTokens(u: number, v: number, prompt: number, output: number, maxModelLen: number): number {
  const left = maxModelLen - prompt;
  if (u < NO_CAP_SHARE) return left;
  let from = 0;
  while (from < CLIENT_CAPS.length - 1 && CLIENT_CAPS[from]! < output) from++;
  const cap = CLIENT_CAPS[from + Math.floor(v * (CLIENT_CAPS.length - from))]!;
  return cap < left ? cap : left;
}

/** Uniform in [0, 1) from (seed, key, stream): the same for every run at one seed, whatever the rate. */
function unit(seed: number, key: number, stream: number): number {
  return fmix32((Math.imul(seed, 0x9e3779b1) ^ Math.imul(key + 1, 0x85ebca6b) ^ Math.imul(stream, 0xc2b2ae35)) >>> 0) / 4294967296;
}

/**
 * Where seed `seed`'s window of a trace starts, in trace ms: uniform over one lap, so each seed replays its
 * own stretch of the trace and every contender at that seed the same one.
 */
export function traceWindowStartMs(records: readonly TraceRecord[], seed: number): number {
  const lap = traceLapMs(records);
  return Math.round(unit(seed, 0x3a11, 7) * lap * 10) / 10;
}

export interface ReplayOptions {
  /** Seeds the clients' max_tokens draws. */
  seed: number;
  maxTokens: MaxTokensMode;
  /** Trace time the replay starts at (records before it come after the trace's end, on the next lap). */
  windowStartMs: number;
}

/**
 * Replays records in timestamp order from `windowStartMs` (wrapping to the trace's start past its end), times
 * relative to the window's start divided by `speed`, up to `durationMs`. Lengths are clipped to what the
 * pool accepts (prompt + output ≤ max model length). max_tokens is what a client sends (clientMaxTokens);
 * the engine still ends the reply at its recorded length, as at an end-of-sequence token.
 */
export class TraceWorkload implements Workload {
  readonly name: string;
  private readonly records: readonly TraceRecord[];
  private readonly pool: PoolShape;
  private readonly speed: number;
  private readonly durationMs: number;
  private readonly replay: ReplayOptions;
  private readonly lapMs: number;
  /** Index of the next record and how many times the replay has wrapped. */
  private i: number;
  /** The window's first record: the replay ends when it comes round to it again. */
  private readonly first: number;
  private lap = 0;
  private seq = 0;
  /** Records whose lengths were clipped to fit the pool. */
  clipped = 0;

  constructor(name: string, records: readonly TraceRecord[], pool: PoolShape, speed: number, durationMs: number, replay: ReplayOptions = { seed: 1, maxTokens: 'caps', windowStartMs: 0 }) {
    this.name = name;
    this.records = records;
    this.pool = pool;
    this.speed = speed;
    this.durationMs = durationMs;
    this.replay = replay;
    this.lapMs = traceLapMs(records);
    let i = 0;
    while (i < records.length && records[i]!.atMs < replay.windowStartMs) i++;
    this.i = i;
    this.first = i;
  }

  next(): SimRequest | null {
    const n = this.records.length;
    if (n === 0) return null;
    if (this.i >= n) {
      this.i = 0;
      this.lap++;
    }
    const index = this.i;
    const r = this.records[index]!;
    const atMs = (r.atMs + this.lap * this.lapMs - this.replay.windowStartMs) / this.speed;
    if (atMs >= this.durationMs || this.lap > 1 || (this.lap > 0 && index >= this.first)) return null;
    this.i++;
    const seq = this.seq++;
    const max = this.pool.maxModelLen;
    let output = Math.max(1, Math.min(r.outputTokens, max - 1));
    let prompt = Math.max(1, r.inputTokens);
    if (prompt + output > max) {
      prompt = max - output;
      this.clipped++;
    }
    if (output !== r.outputTokens) this.clipped++;
    output = Math.max(1, output);
    const key0 = index + this.lap * n;
    const maxTokens = this.replay.maxTokens === 'recorded'
      ? output
      : clientMaxTokens(unit(this.replay.seed, key0, 1), unit(this.replay.seed, key0, 2), prompt, output, max);
    // A reply longer than the client's cap ends at the cap (finish reason length), as the engine would end it.
    if (output > maxTokens) output = maxTokens;
    const bs = this.pool.blockSize;
    // A record's content is its own: keyed by its place in the trace (and the lap, a wrapped replay's second
    // sight of it being another request), not by its place in this window, so every seed hashes it alike.
    const key = key0;
    let e = expandedOf.get(r);
    if (e === undefined || e.key !== key || e.prompt !== prompt || e.output !== output || e.blockSize !== bs) {
      const blockHashes = r.hashIds ? expandHashIds(r.hashIds, prompt, bs) : distinctHashes(key, prompt, bs);
      e = { key, prompt, output, blockSize: bs, blockHashes, replyHashes: replyChain(blockHashes, prompt, output, bs, key) };
      expandedOf.set(r, e);
    }
    const { blockHashes, replyHashes } = e;
    return { seq, atMs, adapter: null, promptTokens: prompt, outputTokens: output, maxTokens, blockHashes, replyHashes };
  }
}
