// Open-loop HTTP load: every request is sent at its scheduled time whether or not earlier ones have finished,
// so a target that falls behind shows it as growing latency (queueing) instead of a closed loop quietly
// sending less. Latencies are measured from the scheduled time, not from when the client got round to
// sending (no coordinated omission); the client's own lateness is reported apart (`sendLagMs`).
// Per request: status, Retry-After and error code of a non-2xx, time to headers, to the first body byte, and
// for SSE the per-token timing of sse-timing.ts (TTFT, TPOT); end to end. Connections: a keep-alive pool per
// origin with no cap below `maxConnections`, so requests never wait for a free socket in the client.
// Thread: the bench process's main thread. Cost per request: one undici dispatch and handler object, and per
// SSE event one JSON.parse; the run reports the client's CPU per request.
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { setTimeout as sleep } from 'node:timers/promises';
import { CpuMeter } from './proc-cpu.ts';
import { SseTimer, tpotMs } from './sse-timing.ts';

export interface ScheduledRequest {
  /** Due time, ms from the run's start. */
  atMs: number;
  body: string;
  stream: boolean;
  /** Free-form label kept on the record (prompt size class, tenant...). */
  tag?: string;
}

export interface OpenLoopSpec {
  origins: readonly string[];
  path: string;
  headers?: Readonly<Record<string, string>>;
  /** Ascending by atMs; pulled lazily so a long run's bodies are not all built up front. */
  schedule: Iterable<ScheduledRequest>;
  maxConnections?: number;
  requestTimeoutMs?: number;
  cpuPids?: Readonly<Record<string, readonly number[]>>;
}

export interface RequestRecord {
  atMs: number;
  tag: string;
  /** How late the client dispatched it, ms (its own event loop's delay). */
  sendLagMs: number;
  status: number;
  retryAfter: string | null;
  /** `error.code` of a non-2xx JSON body, or of an SSE error event. */
  errorCode: string | null;
  /** Transport failure, timeout, or a stream without [DONE]; null when the exchange completed. */
  error: string | null;
  headersMs: number;
  ttfbMs: number;
  ttftMs: number;
  tpotMs: number;
  totalMs: number;
  promptTokens: number | null;
  completionTokens: number | null;
  cachedTokens: number | null;
}

export interface OpenLoopResult {
  records: RequestRecord[];
  elapsedMs: number;
  clientCpuMicros: number;
  cpuMicros: Record<string, number>;
}

function sendOne(pool: Pool, path: string, headers: Record<string, string>, req: ScheduledRequest, dueMs: number,
  timeoutMs: number): Promise<RequestRecord> {
  return new Promise((resolve) => {
    const rec: RequestRecord = {
      atMs: req.atMs, tag: req.tag ?? '', sendLagMs: performance.now() - dueMs, status: 0, retryAfter: null,
      errorCode: null, error: null, headersMs: NaN, ttfbMs: NaN, ttftMs: NaN, tpotMs: NaN, totalMs: NaN,
      promptTokens: null, completionTokens: null, cachedTokens: null,
    };
    const sse = req.stream ? new SseTimer() : null;
    let errBody = '';
    let settled = false;
    let controllerRef: Dispatcher.DispatchController | null = null;
    const finish = (error: string | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      rec.totalMs = performance.now() - dueMs;
      rec.error = error;
      if (rec.status >= 400 && errBody) {
        try {
          rec.errorCode = String((JSON.parse(errBody) as { error?: { code?: unknown } }).error?.code ?? '') || null;
        } catch { /* not an OpenAI envelope: the status says enough */ }
      }
      if (sse && rec.status === 200) {
        const t = sse.result();
        rec.ttftMs = t.firstTokenMs - dueMs;
        rec.tpotMs = tpotMs(t);
        rec.promptTokens = t.promptTokens;
        rec.completionTokens = t.completionTokens;
        rec.cachedTokens = t.cachedTokens;
        if (t.errorCode !== null) rec.errorCode = t.errorCode;
        if (error === null && !t.done) rec.error = t.errorCode !== null ? `error event ${t.errorCode}` : 'stream ended without data: [DONE]';
      }
      resolve(rec);
    };
    const timer = setTimeout(() => {
      controllerRef?.abort(new Error('timeout'));
      finish(`timeout after ${timeoutMs} ms`);
    }, timeoutMs);
    pool.dispatch({ method: 'POST', path, headers, body: req.body }, {
      onRequestStart(controller) { controllerRef = controller; },
      onResponseStart(_c, statusCode, resHeaders) {
        rec.status = statusCode;
        rec.headersMs = performance.now() - dueMs;
        const ra = resHeaders['retry-after'];
        if (ra !== undefined) rec.retryAfter = Array.isArray(ra) ? String(ra[0]) : String(ra);
      },
      onResponseData(_c, chunk) {
        const now = performance.now();
        if (Number.isNaN(rec.ttfbMs)) rec.ttfbMs = now - dueMs;
        if (rec.status >= 400) errBody += chunk.toString('utf8');
        else sse?.push(chunk, now);
      },
      onResponseEnd() { finish(null); },
      onResponseError(_c, err) { finish(err.message); },
    });
  });
}

/** Runs the schedule open loop; resolves when every request has ended (or timed out). */
export async function runOpenLoop(spec: OpenLoopSpec): Promise<OpenLoopResult> {
  const pools = spec.origins.map((origin) => new Pool(origin, {
    connections: spec.maxConnections ?? 10_000, pipelining: 1,
    keepAliveTimeout: 60_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0,
  }));
  const headers: Record<string, string> = { 'content-type': 'application/json', ...spec.headers };
  const timeoutMs = spec.requestTimeoutMs ?? 120_000;
  const meters = Object.entries(spec.cpuPids ?? {}).map(([name, pids]) => ({ name, meter: new CpuMeter(pids) }));
  for (const m of meters) m.meter.start();
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const pending: Array<Promise<RequestRecord>> = [];
  let n = 0;
  for (const req of spec.schedule) {
    const due = start + req.atMs;
    const wait = due - performance.now();
    // Timers fire late by up to a millisecond or so; every request already due leaves in this same turn.
    if (wait > 1) await sleep(wait);
    pending.push(sendOne(spans(pools, n++), spec.path, headers, req, due, timeoutMs));
  }
  const records = await Promise.all(pending);
  const elapsedMs = performance.now() - start;
  const c = process.cpuUsage(cpu0);
  const cpuMicros: Record<string, number> = {};
  for (const m of meters) cpuMicros[m.name] = m.meter.stop();
  await Promise.all(pools.map((p) => p.close()));
  return { records, elapsedMs, clientCpuMicros: c.user + c.system, cpuMicros };
}

/** `status 503 no_healthy_replica × 12, timeout × 3`: what the failed requests of a run were. */
export function failureKinds(records: readonly RequestRecord[]): string {
  const kinds = new Map<string, number>();
  for (const r of records) {
    if (r.error === null && r.status === 200) continue;
    const k = r.status === 0 || r.status === 200 ? (r.error ?? '?').slice(0, 40) : `status ${r.status} ${r.errorCode ?? ''}`.trim();
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
  }
  return [...kinds].map(([k, n]) => `${k} × ${n}`).join(', ');
}

function spans(pools: Pool[], i: number): Pool {
  return pools[i % pools.length] as Pool;
}
