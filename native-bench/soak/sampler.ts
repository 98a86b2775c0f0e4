// What the soak watches in the gateway process, every sample: resident memory (/proc/PID/status VmRSS, the
// whole process with its worker threads), V8 heap in use and the event-loop delay since the previous sample
// (both from the gateway's own /metrics: prom-client's default heap gauges and the gateway's
// monitorEventLoopDelay window, which this scrape resets), requests in flight and the tokenizer caches' bytes.
// Thread: the bench's main thread, once per sample (one /proc read and one /metrics scrape).
import { readFileSync } from 'node:fs';

export interface GatewaySample {
  rssBytes: number;
  heapUsedBytes: number;
  loopP99Ms: number;
  loopMaxMs: number;
  inflight: number;
  /** gateway_tokenizer_cache_bytes: the tokenizer caches filling towards tokenizer.cache_bytes is growth by design. */
  tokenizerCacheBytes: number;
}

export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

export async function sampleGateway(pid: number, url: string): Promise<GatewaySample> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  return {
    rssBytes: rssBytes(pid),
    heapUsedBytes: metric(text, 'gateway_nodejs_heap_size_used_bytes'),
    loopP99Ms: metric(text, 'gateway_event_loop_delay_p99_seconds') * 1000,
    loopMaxMs: metric(text, 'gateway_event_loop_delay_max_seconds') * 1000,
    inflight: metric(text, 'gateway_inflight_requests'),
    tokenizerCacheBytes: metric(text, 'gateway_tokenizer_cache_bytes'),
  };
}
