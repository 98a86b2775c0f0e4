// One request's state inside the mock engine, with the vLLM V1 token accounting the scheduler runs on:
// numTokens = prompt + sampled output; a step computes up to numTokens − numComputedTokens of them; a token is
// sampled when computation catches up. Also the chained block hashes of the request's token sequence: the
// prompt's from the tokenizer, then for blocks that hold generated tokens the spec's outputBlockHashes (the
// sampled ids' hashes, shareable with a follow-up prompt), or synthetic ones salted per request without them.
// Thread: main of the mock process. Hot path: fields are read per step per scheduled request; fixed shape.
import type { EngineRequestEvents, EngineRequestSpec, RequestPhase } from './types.ts';
import { fmix32 } from '../../../src/util/fmix32.ts';

const NO_EVENTS: EngineRequestEvents = { onFirstToken() {}, onToken() {}, onFinish() {} };
const NO_HASHES: ArrayLike<number> = [];

export class EngineRequest {
  readonly id: string;
  /** Swapped for a no-op once the request is closed, so the snapshot's history does not pin sockets. */
  events: EngineRequestEvents;
  private promptHashes: ArrayLike<number>;
  private outputHashes: ArrayLike<number>;
  /** The sequence's token ids (spec.tokenIds), for KV events; null without them or once closed. */
  tokenIds: ArrayLike<number> | null;
  readonly adapter: string | null;
  readonly promptTokens: number;
  readonly outputTokens: number;
  readonly finishReason: 'stop' | 'length';
  /** Distinguishes this request's synthetic (generated-token) block hashes from every other request's. */
  private readonly salt: number;
  /** How many leading blocks take their hash from spec.blockHashes. */
  private readonly specBlocks: number;
  /** How many blocks after those take their hash from spec.outputBlockHashes. */
  private readonly outputBlocks: number;
  private readonly syntheticHashes: number[] = [];

  phase: RequestPhase = 'waiting';
  numComputedTokens = 0;
  /** Output tokens sampled so far. */
  numOutputTokens = 0;
  /**
   * KV blocks held, in token order: the first numBlocks entries. Sized once for the whole sequence (prompt +
   * output): a growing number[] reallocated ~15 times over a 1,000-block prompt, most of a run's garbage.
   */
  readonly blockIds: Int32Array;
  numBlocks = 0;
  /** Leading blocks of blockIds already offered to the prefix cache. */
  numHashedBlocks = 0;
  cachedTokens = 0;
  /** onFinish was called; nothing more is emitted. */
  closed = false;
  arrivalMs: number;
  firstScheduledMs = NaN;
  firstTokenMs = NaN;
  lastTokenMs = NaN;
  /** spec.tokenDelayMs (0 = never held). */
  readonly tokenDelayMs: number;
  /** A step starting before this leaves the request out (tokenDelayMs); -Infinity when never held. */
  readyAtMs: number;

  constructor(spec: EngineRequestSpec, events: EngineRequestEvents, blockSize: number, salt: number, arrivalMs: number) {
    this.id = spec.id;
    this.events = events;
    this.promptHashes = spec.blockHashes;
    this.tokenIds = spec.tokenIds ?? null;
    this.finishReason = spec.finishReason;
    this.adapter = spec.adapter;
    this.promptTokens = spec.promptTokens;
    this.outputTokens = spec.outputTokens;
    this.salt = salt;
    const promptBlocks = Math.floor(spec.promptTokens / blockSize);
    this.specBlocks = Math.min(promptBlocks, spec.blockHashes.length);
    // Output hashes chain from the last full prompt block: unusable if the spec's prompt hashes stop short of it.
    this.outputHashes = spec.outputBlockHashes !== undefined && this.specBlocks === promptBlocks ? spec.outputBlockHashes : NO_HASHES;
    this.outputBlocks = this.outputHashes.length;
    this.arrivalMs = arrivalMs;
    this.tokenDelayMs = spec.tokenDelayMs !== undefined && spec.tokenDelayMs > 0 ? spec.tokenDelayMs : 0;
    this.readyAtMs = this.tokenDelayMs > 0 ? arrivalMs + this.tokenDelayMs : -Infinity;
    this.blockIds = new Int32Array(Math.ceil((spec.promptTokens + spec.outputTokens) / blockSize));
  }

  /** Appends a block to the ones held. */
  holdBlock(blockId: number): void {
    this.blockIds[this.numBlocks++] = blockId;
  }

  get numTokens(): number {
    return this.promptTokens + this.numOutputTokens;
  }

  get firstTokenSampled(): boolean {
    return this.numOutputTokens > 0;
  }

  /** Marks the request closed (onFinish was called) and drops what it no longer needs. */
  close(): void {
    this.closed = true;
    this.events = NO_EVENTS;
    this.promptHashes = NO_HASHES;
    this.outputHashes = NO_HASHES;
    this.tokenIds = null;
    this.syntheticHashes.length = 0;
  }

  /** Cache key of block `index` of this request's token sequence (only asked for full blocks). */
  blockHash(index: number): number {
    if (index < this.specBlocks) return this.promptHashes[index]!;
    const first = this.specBlocks + this.outputBlocks;
    if (index < first) return this.outputHashes[index - this.specBlocks]!;
    const k = index - first;
    while (this.syntheticHashes.length <= k) {
      const i = first + this.syntheticHashes.length;
      const parent = i === 0 ? 0 : this.blockHash(i - 1);
      this.syntheticHashes.push(chainHash(parent, this.salt, i));
    }
    return this.syntheticHashes[k]!;
  }
}

/**
 * A 53-bit integer hash of (parent hash, request salt, block index). Stands in for vLLM hashing a block of
 * generated tokens; the values never collide with a tokenizer hash in practice and are never sent anywhere.
 */
function chainHash(parent: number, salt: number, index: number): number {
  const lo = parent >>> 0;
  const hi = Math.floor(parent / 4294967296) >>> 0;
  const a = fmix32(lo ^ Math.imul(salt, 0x9e3779b1) ^ index);
  const b = fmix32(hi ^ a ^ Math.imul(index + 1, 0x27d4eb2f) ^ salt);
  return (b & 0x1fffff) * 4294967296 + fmix32(a ^ b);
}
