// Closed-loop HTTP load generator for OpenAI-style requests: `concurrency` workers, each with its own
// keep-alive connection, send the next request as soon as the previous one ends, for N requests or T seconds.
// Thread: the bench process's main thread. It is the client, not the system under test, but its cost bounds
// what any target can show, so it uses undici's low-level dispatch() (no stream objects, one handler object
// per request) and reports its own CPU per request next to the target's.
// Measures per request: time to response headers, time to the first body byte (for SSE, the first `data:`
// frame), total time, bytes, SSE frames, status; a stream that does not end with `data: [DONE]` is an error.
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { CpuMeter } from './proc-cpu.ts';
import { summarize } from './percentiles.ts';
import type { Percentiles } from './percentiles.ts';

export interface LoadSpec {
  /** Origins to spread requests over, round-robin per request (`http://127.0.0.1:9001`). */
  origins: readonly string[];
  path: string;
  /** Serialised request body; sent as-is with content-length. */
  body: string;
  headers?: Readonly<Record<string, string>>;
  /** Expect an SSE body: count frames and require the `data: [DONE]` terminator. */
  stream: boolean;
  concurrency: number;
  /** Stop after this many measured requests... */
  requests: number;
  /** ...or after this long, whichever comes first (in-flight requests are let finish). */
  maxDurationMs: number;
  /** Unmeasured requests first, to open connections and warm the JIT of client and target. */
  warmupRequests?: number;
  /** A request taking longer than this is aborted and counted as an error. */
  requestTimeoutMs?: number;
  /** Process trees whose CPU is measured over the measured window only (proxy, mock replicas...). */
  cpuPids?: Readonly<Record<string, readonly number[]>>;
}

export interface LoadResult {
  completed: number;
  errors: number;
  statusCounts: Record<string, number>;
  firstError: string | null;
  elapsedMs: number;
  requestsPerSecond: number;
  headersMs: Percentiles;
  ttfbMs: Percentiles;
  totalMs: Percentiles;
  bytesPerRequest: number;
  /** SSE frames (`\n\n`-terminated) per streamed request; 0 for JSON. */
  framesPerRequest: number;
  /** CPU of this (client) process per completed request, µs. */
  clientCpuMicrosPerRequest: number;
  /** CPU per completed request of each named process tree in `cpuPids`, µs. */
  cpuMicrosPerRequest: Record<string, number>;
}

interface Sample {
  status: number;
  headersMs: number;
  ttfbMs: number;
  totalMs: number;
  bytes: number;
  frames: number;
  error: string | null;
}

const DONE_TAIL = Buffer.from('data: [DONE]\n\n');
const LF = 0x0a;

/** Sends one request and resolves with its sample; never rejects. */
function sendOne(pool: Pool, path: string, body: string, headers: Record<string, string>, stream: boolean,
  timeoutMs: number): Promise<Sample> {
  return new Promise((resolve) => {
    const startMs = performance.now();
    const sample: Sample = { status: 0, headersMs: NaN, ttfbMs: NaN, totalMs: NaN, bytes: 0, frames: 0, error: null };
    // The last bytes seen, to check the [DONE] terminator across chunk boundaries without keeping the body.
    let tail: Buffer = Buffer.alloc(0);
    let prevLf = false;
    let settled = false;
    const finish = (error: string | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sample.totalMs = performance.now() - startMs;
      sample.error = error;
      resolve(sample);
    };
    let controllerRef: Dispatcher.DispatchController | null = null;
    const timer = setTimeout(() => {
      controllerRef?.abort(new Error(`timeout after ${timeoutMs} ms`));
      finish(`timeout after ${timeoutMs} ms`);
    }, timeoutMs);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        controllerRef = controller;
      },
      onResponseStart(_controller, statusCode) {
        sample.status = statusCode;
        sample.headersMs = performance.now() - startMs;
      },
      onResponseData(_controller, chunk) {
        if (sample.bytes === 0) sample.ttfbMs = performance.now() - startMs;
        sample.bytes += chunk.length;
        if (!stream) return;
        // Count blank-line frame ends; a `\n` that straddles chunks is carried in prevLf.
        for (let i = chunk.indexOf(LF); i !== -1; i = chunk.indexOf(LF, i + 1)) {
          if (i === 0 ? prevLf : chunk[i - 1] === LF) sample.frames++;
        }
        prevLf = chunk[chunk.length - 1] === LF;
        tail = chunk.length >= DONE_TAIL.length ? chunk.subarray(chunk.length - DONE_TAIL.length)
          : Buffer.concat([tail, chunk]).subarray(-DONE_TAIL.length);
      },
      onResponseEnd() {
        if (sample.status >= 400) finish(`status ${sample.status}`);
        else if (stream && !tail.equals(DONE_TAIL)) finish('stream ended without data: [DONE]');
        else finish(null);
      },
      onResponseError(_controller, err) {
        finish(err.message);
      },
    };
    pool.dispatch({ method: 'POST', path, headers, body }, handler);
  });
}

/** Runs the closed loop described by `spec`; resolves when the last in-flight request ends. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const pools = spec.origins.map((origin) => new Pool(origin, {
    connections: spec.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  }));
  const headers: Record<string, string> = { 'content-type': 'application/json', ...spec.headers };
  const timeoutMs = spec.requestTimeoutMs ?? 30_000;
  let next = 0;
  const pick = (): Pool => pools[next++ % pools.length] as Pool;

  // Warm-up: same loop, results dropped.
  const warmup = spec.warmupRequests ?? spec.concurrency * 4;
  let warmIssued = 0;
  await Promise.all(Array.from({ length: spec.concurrency }, async () => {
    while (warmIssued < warmup) {
      warmIssued++;
      await sendOne(pick(), spec.path, spec.body, headers, spec.stream, timeoutMs);
    }
  }));

  const samples: Sample[] = [];
  const meters = Object.entries(spec.cpuPids ?? {}).map(([name, pids]) => ({ name, meter: new CpuMeter(pids) }));
  for (const m of meters) m.meter.start();
  const clientCpuStart = process.cpuUsage();
  const startMs = performance.now();
  const deadlineMs = startMs + spec.maxDurationMs;
  let issued = 0;
  await Promise.all(Array.from({ length: spec.concurrency }, async () => {
    while (issued < spec.requests && performance.now() < deadlineMs) {
      issued++;
      samples.push(await sendOne(pick(), spec.path, spec.body, headers, spec.stream, timeoutMs));
    }
  }));
  const elapsedMs = performance.now() - startMs;
  const clientCpu = process.cpuUsage(clientCpuStart);
  const cpuUsed = meters.map((m) => ({ name: m.name, micros: m.meter.stop() }));
  await Promise.all(pools.map((p) => p.close()));

  const ok = samples.filter((s) => s.error === null);
  const statusCounts: Record<string, number> = {};
  for (const s of samples) statusCounts[String(s.status)] = (statusCounts[String(s.status)] ?? 0) + 1;
  const n = Math.max(1, samples.length);
  const cpuMicrosPerRequest: Record<string, number> = {};
  for (const c of cpuUsed) cpuMicrosPerRequest[c.name] = c.micros / n;
  return {
    completed: samples.length,
    errors: samples.length - ok.length,
    statusCounts,
    firstError: samples.find((s) => s.error !== null)?.error ?? null,
    elapsedMs,
    requestsPerSecond: ok.length / (elapsedMs / 1000),
    headersMs: summarize(ok.map((s) => s.headersMs)),
    ttfbMs: summarize(ok.map((s) => s.ttfbMs)),
    totalMs: summarize(ok.map((s) => s.totalMs)),
    bytesPerRequest: ok.reduce((a, s) => a + s.bytes, 0) / Math.max(1, ok.length),
    framesPerRequest: ok.reduce((a, s) => a + s.frames, 0) / Math.max(1, ok.length),
    clientCpuMicrosPerRequest: (clientCpu.user + clientCpu.system) / n,
    cpuMicrosPerRequest,
  };
}
