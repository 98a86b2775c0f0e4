// The ZeroMQ sockets of vLLM's KV-event transport, and the one module that imports `zeromq`
// (eslint.config.js): the engine side binds a PUB (events) and a ROUTER (replay); the gateway side connects a
// SUB and a DEALER. Framing is ZeroMQ's own multipart messages; nothing here builds ZMTP by hand.
// Thread: the kv-events worker (subscriber) and the mock replica's main thread (publisher). Setup only.
import { Dealer, Publisher, Router, Subscriber } from 'zeromq';

export type { Dealer, Publisher, Router, Subscriber };

/** vLLM's default high-water mark for the PUB socket (KVEventsConfig.hwm). */
export const DEFAULT_HWM = 100_000;

/** A PUB socket bound to `endpoint` (tcp://host:port), as vLLM's ZmqEventPublisher binds it. */
export async function bindPublisher(endpoint: string, hwm = DEFAULT_HWM): Promise<Publisher> {
  const pub = new Publisher({ sendHighWaterMark: hwm, linger: 0 });
  try {
    await pub.bind(endpoint);
  } catch (err) {
    pub.close(); // a socket that failed to bind is not handed out, so nothing else would close it
    throw err;
  }
  return pub;
}

/** The replay ROUTER bound to `endpoint`. */
export async function bindReplayRouter(endpoint: string): Promise<Router> {
  const router = new Router({ linger: 0 });
  try {
    await router.bind(endpoint);
  } catch (err) {
    router.close();
    throw err;
  }
  return router;
}

export interface SubscriberOptions {
  /** Topic prefix to subscribe to ('' = every topic, vLLM's default topic). */
  topic: string;
  /** ZMTP heartbeats: a PING every this many ms; a peer silent for heartbeatTimeoutMs is disconnected. */
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  /** Reconnect attempts after a lost connection, this far apart (ZeroMQ reconnects by itself). */
  reconnectIntervalMs: number;
  /** A connection to the publisher was established (first time or again). */
  onConnect?: () => void;
  /** The connection was lost (publisher gone, or heartbeats unanswered). */
  onDisconnect?: () => void;
}

/** A SUB socket connected to a replica's publisher. */
export function connectSubscriber(endpoint: string, o: SubscriberOptions): Subscriber {
  const sub = new Subscriber({
    linger: 0, receiveHighWaterMark: DEFAULT_HWM, reconnectInterval: o.reconnectIntervalMs,
    heartbeatInterval: o.heartbeatIntervalMs, heartbeatTimeout: o.heartbeatTimeoutMs, heartbeatTimeToLive: o.heartbeatTimeoutMs,
  });
  // The monitor must exist before connect(), or the first connection's event is missed.
  if (o.onConnect !== undefined) sub.events.on('connect', o.onConnect);
  if (o.onDisconnect !== undefined) sub.events.on('disconnect', o.onDisconnect);
  sub.subscribe(o.topic);
  sub.connect(endpoint);
  return sub;
}

/** A DEALER connected to a replica's replay ROUTER: requests are [empty, seq]; replies [empty, seq, payload]. */
export function connectReplayDealer(endpoint: string, reconnectIntervalMs: number): Dealer {
  const dealer = new Dealer({ linger: 0, reconnectInterval: reconnectIntervalMs });
  dealer.connect(endpoint);
  return dealer;
}

/** tcp://host:port → tcp://host:(port + 1): vLLM's replay endpoint is configured beside the publisher's. */
export function replayEndpointOf(endpoint: string): string {
  const m = /^(tcp:\/\/.+):(\d+)$/.exec(endpoint);
  if (m === null) throw new Error(`kv_events endpoint must be tcp://host:port, got ${endpoint}`);
  return `${m[1]}:${Number(m[2]) + 1}`;
}
