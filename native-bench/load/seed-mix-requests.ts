// The design's request mix as real chat requests: the fleet simulator's seed-mix workload (sim/seed-mix.ts:
// 1,800 prompt / 300 output tokens on average, prompts up to 32k, outputs up to 4k, Zipf tenants each with a
// long system prompt, multi-turn chats) decides who sends what and when; this turns each of its requests into
// a streaming chat body whose text has the planned token counts. The tenant's system prompt is the same text
// on every request of that tenant; a chat's next turn carries the earlier turns (its previous user messages
// and replies) as messages, so consecutive turns share their prefix as they do in production.
// Text: words drawn from a list of common English words, each one Llama 3 token with its leading space, so
// N words ≈ N tokens (the chat template adds ≈ 30 per request); the run reports the usage chunk's measured
// prompt tokens next to the plan. Thread: the load generator's main thread, before each send. Cost: string
// building of the user turn (≈ 100 words) per request; system prompts and chat histories are built once.
import { SeedMixWorkload } from '../sim/seed-mix.ts';
import { Prng } from '../sim/prng.ts';

const WORDS = ('the of and to in is was for on that with as by at from his it an were are which this be or '
  + 'has had not but first one their its new after who they have her she two been other when there all during '
  + 'into school time may years more most only over city some world would where later up such used many can '
  + 'state about national out known university united then made').split(' ');

/** `n` words (≈ n tokens) from a generator seeded by `key`; the same key and n give the same text. */
export function wordsText(key: number, n: number): string {
  const rng = new Prng(key, 11);
  const parts = new Array<string>(Math.max(0, n));
  for (let i = 0; i < parts.length; i++) parts[i] = WORDS[rng.int(WORDS.length)]!;
  return parts.join(' ');
}

export interface ChatMessage { role: 'system' | 'user' | 'assistant'; content: string }

export interface MixRequest {
  /** When it is due, ms from the run's start. */
  atMs: number;
  body: string;
  promptTokens: number;
  outputTokens: number;
  tenant: number;
  /** Earlier turns carried (0 for a conversation's first request). */
  carriedTurns: number;
}

export interface SeedMixRequestOptions {
  model: string;
  rps: number;
  durationMs: number;
  seed: number;
  /** The pool's longest prompt + output (131,072 for Llama 3.1 8B). */
  maxModelLen: number;
}

interface Conversation { messages: ChatMessage[]; tokens: number }

/** Most conversations in flight at once; older ones are forgotten (a later turn then rebuilds its history). */
const MAX_CONVERSATIONS = 20_000;

export class SeedMixRequests {
  private readonly workload: SeedMixWorkload;
  private readonly model: string;
  private readonly systemTexts = new Map<number, string>();
  private readonly conversations = new Map<number, Conversation>();

  constructor(o: SeedMixRequestOptions) {
    this.model = o.model;
    this.workload = new SeedMixWorkload({
      pool: { id: 'load', maxModelLen: o.maxModelLen, blockSize: 16, adapters: [] },
      rps: o.rps, durationMs: o.durationMs, seed: o.seed,
    });
  }

  next(): MixRequest | null {
    const r = this.workload.next();
    if (r === null) return null;
    const o = r.origin;
    if (!o) throw new Error('seed-mix requests carry their origin');
    let system = this.systemTexts.get(o.tenant);
    if (system === undefined) {
      system = `You are tenant ${o.tenant}'s assistant. ${wordsText(o.tenant + 1, o.systemTokens - 5)}`;
      this.systemTexts.set(o.tenant, system);
    }
    const carried = this.history(o.conversation, o.historyTokens - o.systemTokens);
    const userTokens = Math.max(1, r.promptTokens - o.historyTokens);
    const user: ChatMessage = { role: 'user', content: wordsText((o.conversation ^ (o.historyTokens * 2654435761)) >>> 0, userTokens) };
    const messages: ChatMessage[] = [{ role: 'system', content: system }, ...carried, user];
    // This turn and its reply become the next turn's history (the reply as text of its planned length: the
    // mock's own reply text differs, but a client carries whatever it got, and only the length matters here).
    const reply: ChatMessage = { role: 'assistant', content: wordsText((o.conversation + r.promptTokens) >>> 0, r.outputTokens) };
    this.remember(o.conversation, { messages: [...carried, user, reply], tokens: r.promptTokens + r.outputTokens - o.systemTokens });
    return {
      atMs: r.atMs,
      body: JSON.stringify({
        model: this.model, messages, max_tokens: r.outputTokens, ignore_eos: true, stream: true,
        stream_options: { include_usage: true },
      }),
      promptTokens: r.promptTokens,
      outputTokens: r.outputTokens,
      tenant: o.tenant,
      carriedTurns: carried.length / 2,
    };
  }

  /** The earlier turns of a conversation worth `tokens` tokens; made up as one exchange when not remembered. */
  private history(conversation: number, tokens: number): ChatMessage[] {
    if (tokens <= 0) return [];
    const known = this.conversations.get(conversation);
    if (known && known.tokens === tokens) return known.messages;
    // Started before the run (the workload opens in steady state): one user turn and a reply twice as long.
    const userPart = Math.max(1, Math.round(tokens / 3));
    return [
      { role: 'user', content: wordsText(conversation, userPart) },
      { role: 'assistant', content: wordsText(conversation + 1, Math.max(1, tokens - userPart)) },
    ];
  }

  private remember(conversation: number, c: Conversation): void {
    this.conversations.delete(conversation);
    this.conversations.set(conversation, c);
    if (this.conversations.size > MAX_CONVERSATIONS) {
      const oldest = this.conversations.keys().next().value as number;
      this.conversations.delete(oldest);
    }
  }
}
