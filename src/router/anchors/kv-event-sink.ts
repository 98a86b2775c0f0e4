// What a KV-event-fed index hears, per replica slot, as vLLM's KV events report it: a block hash entered the
// replica's prefix cache (BlockStored), left it (BlockRemoved), or everything did (AllBlocksCleared, or the
// replica's process is gone). The simulator's feed calls these straight from each engine's block pool; a live
// subscriber decodes them from the engines' ZMQ publishers. A policy that reads events exposes its sink.
// Thread: the acceptor (or the simulator's run). One call per stored or evicted block.
import type { RoutingPolicy } from '../types.ts';

export interface KvEventSink {
  stored(slot: number, hash: number): void;
  removed(slot: number, hash: number): void;
  cleared(slot: number): void;
}

/** The sink of a policy fed by KV events; null for a policy that does not read them. */
export function kvEventSinkOf(policy: RoutingPolicy): KvEventSink | null {
  const sink = (policy as { kvEvents?: KvEventSink | null }).kvEvents;
  return sink ?? null;
}
