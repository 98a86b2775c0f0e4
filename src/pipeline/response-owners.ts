// Which replica holds each stored Responses API response this gateway relayed. vLLM keeps stored responses
// in the replica's own process, so a request naming `previous_response_id`, and GET /v1/responses/{id} or
// POST /v1/responses/{id}/cancel, must reach that replica; a replica that restarted has forgotten them.
// Beside the owner, each entry keeps the turn's conversation (its messages and output texts), so that a
// follow-up's prompt is rendered, counted and hashed as vLLM will render it.
// Bounds: at most MAX_OWNERS entries (≈ 150 B each without text), each for TTL_MS after its response; the
// conversations' text at most MAX_TEXT_CHARS in all (a conversation counts every turn's full history, so a
// long one counts more than it holds). The oldest go first; a follow-up whose text was dropped still reaches
// its replica, counted from its instructions and input alone (the quota then under-reserves that request).
// Entries live in this gateway process only: several gateways do not share them. With acceptor threads
// (server.threads > 1) each thread holds a copy: share() replicates every remember() to the others over a
// BroadcastChannel (one structured-clone message per stored response, the turn's text included; so the text
// bound holds per thread), posted when the response's end is relayed, well before the client can open a
// connection that lands on another thread and send the follow-up.
// Thread: the acceptor. remember() and lookup() are O(1) amortised (Map insertion order is the eviction order).
import { BroadcastChannel } from 'node:worker_threads';
import type { ResponsesTurn } from '../tokenize/responses-messages.ts';

export const MAX_OWNERS = 100_000;
export const TTL_MS = 60 * 60 * 1000;
/**
 * With threads sharing, how long a lookup that misses waits for the other threads' broadcasts: a client can
 * read a response's end and send its follow-up on a new connection, accepted by another thread, before that
 * thread has taken the BroadcastChannel message that names the id (they usually arrive within a millisecond).
 * Only an id no thread knows pays the whole wait before its 404.
 */
const SHARE_WAIT_MS = 250;
export const MAX_TEXT_CHARS = 32 * 1024 * 1024;

export interface ResponseOwner {
  readonly tenant: string;
  readonly poolId: string;
  readonly replicaId: string;
  /** The replica's restart generation when the response was stored. */
  readonly generation: number;
  readonly expiresAt: number;
}

export type OwnerLookup =
  | { ok: true; owner: ResponseOwner; turn: ResponsesTurn | null }
  | { ok: false; why: 'unknown' | 'restarted' };

function turnChars(t: ResponsesTurn): number {
  let n = 0;
  for (const m of t.messages) {
    const c = m.content;
    if (typeof c === 'string') n += c.length;
    else if (Array.isArray(c)) for (const p of c) n += p.text?.length ?? 0;
  }
  for (const o of t.outputTexts) n += o.length;
  return n;
}

interface SharedEntry {
  id: string;
  tenant: string;
  poolId: string;
  replicaId: string;
  turn: ResponsesTurn;
}

export class ResponseOwners {
  private readonly owners = new Map<string, ResponseOwner>();
  private readonly turns = new Map<string, { turn: ResponsesTurn; chars: number }>();
  private readonly generations = new Map<string, number>();
  private textChars = 0;
  private channel: BroadcastChannel | null = null;
  /** Lookups waiting for an id to arrive from another thread (only while sharing). */
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(private readonly now: () => number = Date.now, private readonly maxOwners = MAX_OWNERS, private readonly maxTextChars = MAX_TEXT_CHARS) {}

  get size(): number {
    return this.owners.size;
  }

  /** The conversation text held, in characters. */
  get chars(): number {
    return this.textChars;
  }

  /** Replicates this thread's entries to every other ResponseOwners sharing `channelName`, and theirs here. */
  share(channelName: string): void {
    const ch = new BroadcastChannel(channelName);
    ch.unref();
    ch.onmessage = (ev: unknown) => {
      const m = (ev as { data?: SharedEntry }).data;
      if (m !== undefined) this.insert(m.id, m.tenant, m.poolId, m.replicaId, m.turn);
    };
    this.channel = ch;
  }

  close(): void {
    this.channel?.close();
    this.channel = null;
  }

  /** Records that `replicaId` produced and stored response `id` for `tenant`. */
  remember(id: string, tenant: string, poolId: string, replicaId: string, turn: ResponsesTurn): void {
    this.insert(id, tenant, poolId, replicaId, turn);
    if (this.channel !== null) {
      const m: SharedEntry = { id, tenant, poolId, replicaId, turn };
      this.channel.postMessage(m);
    }
  }

  private insert(id: string, tenant: string, poolId: string, replicaId: string, turn: ResponsesTurn): void {
    this.forget(id);
    this.owners.set(id, { tenant, poolId, replicaId, generation: this.generations.get(replicaId) ?? 0, expiresAt: this.now() + TTL_MS });
    const chars = turnChars(turn);
    if (chars <= this.maxTextChars) {
      this.turns.set(id, { turn, chars });
      this.textChars += chars;
    }
    this.evict();
    const waiters = this.waiting.get(id);
    if (waiters !== undefined) {
      this.waiting.delete(id);
      for (const w of waiters) w();
    }
  }

  /**
   * Null when lookup(id) can be answered now (the id is here, or no other thread could be about to send it);
   * else a promise that resolves once it has arrived from another thread or SHARE_WAIT_MS have passed.
   */
  whenKnown(id: string, tenant: string): Promise<void> | null {
    if (this.channel === null || this.owners.get(id)?.tenant === tenant) return null;
    return new Promise<void>((resolve) => {
      let list = this.waiting.get(id);
      if (list === undefined) this.waiting.set(id, list = []);
      list.push(resolve);
      setTimeout(() => {
        const l = this.waiting.get(id);
        if (l === undefined) return;
        const i = l.indexOf(resolve);
        if (i >= 0) l.splice(i, 1);
        if (l.length === 0) this.waiting.delete(id);
        resolve();
      }, SHARE_WAIT_MS);
    });
  }

  /** Who holds `id` for this tenant; another tenant's id reads as unknown. */
  lookup(id: string, tenant: string): OwnerLookup {
    const o = this.owners.get(id);
    if (o === undefined || o.tenant !== tenant) return { ok: false, why: 'unknown' };
    if (o.expiresAt <= this.now()) {
      this.forget(id);
      return { ok: false, why: 'unknown' };
    }
    if ((this.generations.get(o.replicaId) ?? 0) !== o.generation) return { ok: false, why: 'restarted' };
    return { ok: true, owner: o, turn: this.turns.get(id)?.turn ?? null };
  }

  /** The replica's process restarted: what it stored is gone. */
  replicaRestarted(replicaId: string): void {
    this.generations.set(replicaId, (this.generations.get(replicaId) ?? 0) + 1);
  }

  private forget(id: string): void {
    this.owners.delete(id);
    const t = this.turns.get(id);
    if (t !== undefined) {
      this.turns.delete(id);
      this.textChars -= t.chars;
    }
  }

  private evict(): void {
    const now = this.now();
    for (const [id, o] of this.owners) {
      if (this.owners.size <= this.maxOwners && o.expiresAt > now) break;
      this.forget(id);
    }
    for (const [id, t] of this.turns) {
      if (this.textChars <= this.maxTextChars) break;
      this.turns.delete(id);
      this.textChars -= t.chars;
    }
  }
}
