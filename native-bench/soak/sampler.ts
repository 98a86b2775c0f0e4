// What the soak watches in the gateway process, every sample: resident memory (/proc/PID/status VmRSS and
// RssAnon, the whole process with its worker threads); from the gateway's own /metrics, the V8 heap in use
// (the main thread's, and every thread's summed), the event-loop delay since the previous sample (the
// monitorEventLoopDelay window, which this scrape resets), requests in flight and the tokenizer caches' bytes.
// Thread: the bench's main thread, once per sample (one /proc read and one /metrics scrape).
import { readFileSync } from 'node:fs';

export interface GatewaySample {
  rssBytes: number;
  /** RssAnon: the process's anonymous memory (heaps, malloc); RSS minus it is mapped files and shared memory. */
  rssAnonBytes: number;
  /** gateway_threads_heap_used_bytes: the V8 heaps of every thread, summed. */
  threadsHeapBytes: number;
  /** gateway_threads_memory_bytes: heap pages every thread holds (used or not), and V8's external memory. */
  threadsHeapCommittedBytes: number;
  threadsExternalBytes: number;
  heapUsedBytes: number;
  loopP99Ms: number;
  loopMaxMs: number;
  inflight: number;
  /** gateway_tokenizer_cache_bytes: the tokenizer caches filling towards tokenizer.cache_bytes is growth by design. */
  tokenizerCacheBytes: number;
}

function statusKb(status: string, field: string, pid: number): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!m) throw new Error(`no ${field} for pid ${pid}`);
  return Number(m[1]) * 1024;
}

export function rssBytes(pid: number): number {
  return statusKb(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS', pid);
}

function metric(text: string, name: string, labels = '(?:\\{[^}]*\\})?'): number {
  const m = new RegExp(`^${name}${labels} ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

export async function sampleGateway(pid: number, url: string): Promise<GatewaySample> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    rssBytes: statusKb(status, 'VmRSS', pid),
    rssAnonBytes: statusKb(status, 'RssAnon', pid),
    threadsHeapBytes: metric(text, 'gateway_threads_heap_used_bytes'),
    threadsHeapCommittedBytes: metric(text, 'gateway_threads_memory_bytes', '\\{kind="heap_committed"\\}'),
    threadsExternalBytes: metric(text, 'gateway_threads_memory_bytes', '\\{kind="external"\\}'),
    heapUsedBytes: metric(text, 'gateway_nodejs_heap_size_used_bytes'),
    loopP99Ms: metric(text, 'gateway_event_loop_delay_p99_seconds') * 1000,
    loopMaxMs: metric(text, 'gateway_event_loop_delay_max_seconds') * 1000,
    inflight: metric(text, 'gateway_inflight_requests'),
    tokenizerCacheBytes: metric(text, 'gateway_tokenizer_cache_bytes'),
  };
}
