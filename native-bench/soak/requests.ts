// Turns the seed mix's simulated requests (native-bench/sim/seed-mix.ts) into real chat-completion bodies for
// the soak: each full block of the simulated prompt becomes 16 one-token words chosen by that block's hash, so
// two requests share prompt text (and so prefix-cache blocks at the replica) exactly where the simulator's
// prompts share blocks; the reply length is the simulated one (`max_tokens` + `ignore_eos`).
// Thread: the bench's main thread, once per request (a string of ~2,000 words: microseconds).
import type { SimRequest } from '../sim/workload-types.ts';

/** Words the Llama 3 tokenizer keeps as one token each after a space. */
const WORDS = [' the', ' of', ' and', ' to', ' in', ' a', ' is', ' that', ' for', ' it', ' on', ' with', ' as',
  ' was', ' be', ' at', ' by', ' this', ' from', ' or', ' an', ' are', ' not', ' have', ' but', ' we', ' they',
  ' you', ' he', ' she', ' which', ' one'] as const;
const BLOCK = 16;

function wordsOf(seed: number, count: number, out: string[]): void {
  let x = (seed >>> 0) || 1;
  for (let i = 0; i < count; i++) {
    // xorshift32: enough spread for word choice.
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out.push(WORDS[x & 31]!);
  }
}

export interface SoakRequest {
  atMs: number;
  stream: boolean;
  body: string;
}

/** `streamShare` of the requests stream (decided by the request's sequence number, so runs repeat). */
export function soakRequest(r: SimRequest, model: string, streamShare: number): SoakRequest {
  const words: string[] = [];
  for (let i = 0; i < r.blockHashes.length; i++) {
    const h = r.blockHashes[i]!;
    wordsOf((h % 4294967291) ^ i, BLOCK, words);
  }
  wordsOf(r.seq * 2654435761, r.promptTokens - r.blockHashes.length * BLOCK, words);
  const stream = ((r.seq * 2654435761) >>> 0) / 2 ** 32 < streamShare;
  const body: Record<string, unknown> = {
    model,
    messages: [{ role: 'user', content: words.join('').trimStart() }],
    max_tokens: r.outputTokens,
    ignore_eos: true,
    stream,
  };
  return { atMs: r.atMs, stream, body: JSON.stringify(body) };
}
