// Prompt → (token ids, chained block hashes) with two per-thread caches, so a repeated system prompt or
// the earlier turns of a conversation are neither tokenized nor hashed again.
// Thread: any; one instance per thread (the acceptor's inline path and each tokenize worker own one; they
// are never shared). Hot path: yes, this is the per-request tokenize work.
//
// 1. Segment token cache: the chat template renders one text segment per message (chat-template.ts), and
//    tokens(prompt) == concat(tokens(segment)), so each segment's ids are cached. Key: the rendered
//    segment string itself (role + content + template markup), found by a cheap fingerprint and confirmed
//    by an exact comparison (segment-cache.ts): a collision can never return another message's tokens.
//    Each cached segment also gets a never-reused numeric id.
// 2. Prefix hash cache: block hashes chain from the start of the prompt, so the hashes of the first c
//    segments' full blocks depend only on (tokenizer, block size, adapter, those segments). Keyed by a 52-bit
//    chain hash of those and the segments' ids (confirmed against the entry's own ids on a hit), they are stored
//    after every segment of at least one block (a system prompt, a long message) and after the last message
//    segment; a request looks up every segment boundary from the longest down, so a shared system prompt, or the
//    earlier turns of a growing conversation, whatever the template's segments, are hashed once. Only the
//    blocks after the longest hit are hashed.
// Both are byte-bounded LRUs (byte-lru.ts); 7/8 of the budget for tokens, 1/8 for hashes (a hash is 8
// bytes per 16 tokens). test/unit/tokenize/cached-prompt-encoder.test.ts proves cached == uncached.
import { blockHashes, blockHashesOfParts } from './block-hash.ts';
import { ByteLru, ENTRY_OVERHEAD_BYTES } from './byte-lru.ts';
import { SegmentCache } from './segment-cache.ts';
import { fmix32 } from '../util/fmix32.ts';
import { estimateOf } from './jinja-template.ts';
import { renderPromptSegments } from './prompt-template.ts';
import { completionPromptTokens, concatTokens } from './prompt.ts';
import { getTokenizer } from './tokenizer.ts';
import type { EncodedPrompt, MeasuredPrompt, PromptWork } from './types.ts';

export class CachedPromptEncoder {
  private readonly segments: SegmentCache;
  private readonly prefixes: ByteLru<number, PrefixEntry>;
  private nextSegmentId = 1;
  private keyScratch = new Float64Array(64);
  /** Block hashes taken from the prefix cache rather than computed, since construction (tests, benchmarks). */
  reusedBlocks = 0;
  /** FNV-1a of each head (tokenizer | block size | adapter) seen: the chain keys' seed. */
  private readonly headSeeds = new Map<string, number>();

  constructor(cacheBytes: number) {
    this.segments = new SegmentCache(cacheBytes * 7 / 8);
    this.prefixes = new ByteLru(cacheBytes / 8);
  }

  /** The chat template's segments for `work` (pass them back to encode() to avoid rendering twice). */
  render(work: PromptWork): string[] {
    return renderPromptSegments(work.template, work.messages ?? [], work.tools ?? null, getTokenizer(work.tokenizer), work.chat ?? null);
  }

  /**
   * How much text this encoder would have to tokenize for `work`: UTF-16 units of the segments not in its
   * cache (a token-id prompt counts one per id). PromptTokenizer compares it with inline_max_chars.
   */
  uncachedChars(work: PromptWork, segments: readonly string[] | null): number {
    if (work.kind === 'completion') return work.prompt?.length ?? 0;
    let chars = 0;
    for (const text of segments ?? this.render(work)) {
      if (this.segments.peek(text, work.tokenizer) === undefined) chars += text.length;
    }
    return chars;
  }

  /** The prompt's token ids and block hashes (the mock engine needs the ids). */
  encode(work: PromptWork, shouldStop: (() => boolean) | null = null, segments: readonly string[] | null = null): EncodedPrompt {
    if (work.kind === 'completion') {
      const tokens = completionPromptTokens(getTokenizer(work.tokenizer), work.prompt ?? '', shouldStop);
      return { tokens, blockHashes: blockHashes(tokens, work.blockSize, work.adapter) };
    }
    const { parts, blockHashes: hashes } = this.encodeChat(work, shouldStop, segments ?? this.render(work));
    return { tokens: concatTokens(parts), blockHashes: hashes };
  }

  /**
   * The gateway's per-request call: the count and block hashes of encode(), without concatenating the
   * segments' cached ids into one array (for a 1,800-token prompt, a 7 KB copy per request it never reads),
   * and the ids after the last full block (a copy of fewer than blockSize ids: ≤ 64 bytes per request).
   */
  measure(work: PromptWork, shouldStop: (() => boolean) | null = null, segments: readonly string[] | null = null): MeasuredPrompt {
    if (work.kind === 'completion') {
      const tokens = completionPromptTokens(getTokenizer(work.tokenizer), work.prompt ?? '', shouldStop);
      const tailStart = tokens.length - (tokens.length % work.blockSize);
      return { promptTokens: tokens.length, blockHashes: blockHashes(tokens, work.blockSize, work.adapter), tailTokens: tokens.slice(tailStart), estimated: null };
    }
    const texts = segments ?? this.render(work);
    const estimate = estimateOf(texts);
    if (estimate !== undefined) {
      // Not vLLM's prompt: a count to route, reserve quota and check the context on, but no block hashes.
      let n = estimate.extraTokens;
      const tokenizer = getTokenizer(work.tokenizer);
      for (const text of texts) n += tokenizer.encodeWithSpecials(text, shouldStop).length;
      return { promptTokens: n, blockHashes: new Float64Array(0), tailTokens: new Uint32Array(0), estimated: estimate.reason };
    }
    const { parts, blockHashes: hashes } = this.encodeChat(work, shouldStop, texts);
    let n = 0;
    for (let i = 0; i < parts.length; i++) n += parts[i]!.length;
    return { promptTokens: n, blockHashes: hashes, tailTokens: lastTokens(parts, n % work.blockSize), estimated: null };
  }

  /** Bytes held by the token and hash caches (estimates, see byte-lru.ts). */
  cacheBytes(): { segments: number; prefixes: number; capacity: number } {
    return { segments: this.segments.bytes, prefixes: this.prefixes.bytes, capacity: this.segments.capacityBytes + this.prefixes.capacityBytes };
  }

  /** cacheBytes() summed: what the tokenizer cache gauge reads at scrape time. */
  cacheBytesUsed(): number {
    return this.segments.bytes + this.prefixes.bytes;
  }

  /** Each segment's ids (cached or encoded now; the arrays are the cache's own, never to be modified) and the hashes. */
  private encodeChat(work: PromptWork, shouldStop: (() => boolean) | null, texts: readonly string[]): { parts: Uint32Array[]; blockHashes: Float64Array } {
    const tokenizer = getTokenizer(work.tokenizer);
    const parts: Uint32Array[] = new Array<Uint32Array>(texts.length);
    const ids: number[] = new Array<number>(texts.length);
    for (let i = 0; i < texts.length; i++) {
      const text = texts[i] as string;
      let hit = this.segments.get(text, work.tokenizer);
      if (hit === undefined) {
        const tokens = tokenizer.encodeWithSpecials(text, shouldStop);
        hit = { text, tokenizer: work.tokenizer, tokens, id: this.nextSegmentId++, bytes: 2 * text.length + tokens.byteLength + ENTRY_OVERHEAD_BYTES };
        this.segments.add(hit);
      }
      parts[i] = hit.tokens;
      ids[i] = hit.id;
    }
    return { parts, blockHashes: this.chatBlockHashes(work, parts, ids) };
  }

  private chatBlockHashes(work: PromptWork, parts: Uint32Array[], ids: number[]): Float64Array {
    const bs = work.blockSize;
    const messageSegments = parts.length - 1; // the last segment is the generation prompt
    const head = `${work.tokenizer}|${bs}|${work.adapter ?? ''}`;
    // Chain keys: key[i] stands for (head, ids[0..i]); two independent 32-bit mixes make a 52-bit number key, and a
    // hit is confirmed against the entry's own head and ids, so a collision is a miss, never a wrong answer.
    const keys = this.chainKeys(head, ids, messageSegments);
    let cached: Float64Array | undefined;
    let hitAt = -1;
    for (let i = messageSegments - 1; i >= 0 && cached === undefined; i--) {
      const e = this.prefixes.get(keys[i]!);
      if (e !== undefined && e.head === head && sameIds(e.ids, ids)) {
        cached = e.hashes;
        hitAt = i;
      }
    }
    let hashes: Float64Array;
    if (cached === undefined || cached.length === 0) hashes = blockHashesOfParts(parts, 0, bs, work.adapter);
    else {
      const rest = blockHashesOfParts(parts, cached.length * bs, bs, work.adapter, cached[cached.length - 1] as number);
      this.reusedBlocks += cached.length;
      hashes = new Float64Array(cached.length + rest.length);
      hashes.set(cached, 0);
      hashes.set(rest, cached.length);
    }
    // Stored after every segment of at least one block (a system prompt, a long message: where the next request is
    // likely to diverge) and after the last message segment (the next turn of the conversation starts with it).
    let tokens = 0;
    for (let i = 0; i < messageSegments; i++) {
      const len = parts[i]!.length;
      tokens += len;
      if (i <= hitAt || (len < bs && i !== messageSegments - 1)) continue;
      this.storePrefix(keys[i]!, head, ids, i + 1, hashes, Math.floor(tokens / bs));
    }
    return hashes;
  }

  private chainKeys(head: string, ids: readonly number[], n: number): Float64Array {
    if (this.keyScratch.length < n) this.keyScratch = new Float64Array(Math.max(n, 2 * this.keyScratch.length));
    let h1 = this.headSeeds.get(head);
    if (h1 === undefined) {
      h1 = 0x811c9dc5;
      for (let i = 0; i < head.length; i++) h1 = Math.imul(h1 ^ head.charCodeAt(i), 0x01000193);
      if (this.headSeeds.size > 64) this.headSeeds.clear();
      this.headSeeds.set(head, h1);
    }
    let h2 = fmix32(h1 ^ 0x5bd1e995);
    for (let i = 0; i < n; i++) {
      const id = ids[i]!;
      h1 = fmix32(Math.imul(h1 ^ id, 0x9e3779b1));
      h2 = fmix32(Math.imul(h2 + id, 0x85ebca77) ^ i);
      this.keyScratch[i] = (h1 >>> 0) * 0x100000 + (h2 & 0xfffff);
    }
    return this.keyScratch;
  }

  private storePrefix(key: number, head: string, ids: readonly number[], count: number, hashes: Float64Array, blocks: number): void {
    if (blocks === 0 || this.prefixes.get(key) !== undefined) return;
    const entry: PrefixEntry = { head, ids: ids.slice(0, count), hashes: hashes.slice(0, blocks) };
    this.prefixes.set(key, entry, 2 * head.length + 8 * count + 8 * blocks + ENTRY_OVERHEAD_BYTES);
  }
}

interface PrefixEntry {
  head: string;
  /** The segment ids of the prefix (segment ids are never reused, so equal ids mean equal text). */
  ids: number[];
  hashes: Float64Array;
}

/** True when `prefix` is a prefix of `ids`. */
function sameIds(prefix: readonly number[], ids: readonly number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== ids[i]) return false;
  return true;
}

/** The last `count` ids of the concatenation of `parts`, copied (the parts are the cache's own arrays). */
function lastTokens(parts: readonly Uint32Array[], count: number): Uint32Array {
  const out = new Uint32Array(count);
  let need = count;
  for (let p = parts.length - 1; p >= 0 && need > 0; p--) {
    const part = parts[p]!;
    const take = Math.min(need, part.length);
    out.set(part.subarray(part.length - take), need - take);
    need -= take;
  }
  return out;
}
