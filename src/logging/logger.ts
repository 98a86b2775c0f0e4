// The gateway's logger (pino, JSON lines) and the one-line-per-request record written at completion
// (finish-request.ts calls requestLogLine once per request).
// Thread: main (workers log through their own createLogger if ever needed). On the hot path once per request:
// requestLogLine builds one fixed-shape object from typed fields, so a prompt, completion or API key can
// only reach the log if someone adds a field for it here. As a second fence, the logger censors
// Authorization / API-key / prompt-shaped keys in anything else logged by mistake (redactSecrets, ~1 µs a
// line). Disabled levels cost one property read: pino swaps them for no-ops.
import { pino, type DestinationStream, type Level, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;
export type LogLevel = Level | 'silent';

/** Keys (compared lower-cased) whose values are never written, at any depth up to REDACT_MAX_DEPTH. */
const SECRET_KEYS = new Set([
  'authorization', 'proxy-authorization', 'x-api-key', 'api-key', 'api_key', 'apikey', 'cookie', 'set-cookie',
  'password', 'secret', 'token', 'prompt', 'messages', 'input', 'completion', 'choices', 'content', 'body',
]);
const REDACT_MAX_DEPTH = 4;
const CENSOR = '[redacted]';

/**
 * Returns `value` itself when it holds no secret key, else a copy with those values censored (the caller's
 * object is never mutated). Why not pino's `redact` option: its wildcard paths (`*.authorization`, needed
 * to catch a header bag logged under any name) cost 30-90 µs per line here; this scan costs ~1 µs.
 */
export function redactSecrets(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > REDACT_MAX_DEPTH || value instanceof Error) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const r = redactSecrets(value[i], depth + 1);
      if (r !== value[i]) (copy ??= value.slice())[i] = r;
    }
    return copy ?? value;
  }
  const obj = value as Record<string, unknown>;
  let copy: Record<string, unknown> | null = null;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    const r = SECRET_KEYS.has(key.toLowerCase()) ? CENSOR : redactSecrets(v, depth + 1);
    if (r !== v) (copy ??= { ...obj })[key] = r;
  }
  return copy ?? obj;
}

export interface LoggerOptions {
  /** Where lines go; default stdout through an asynchronous sonic-boom (logger.flush() before exit). */
  destination?: DestinationStream;
}

export function createLogger(level: LogLevel, opts: LoggerOptions = {}): Logger {
  // Async stdout: a synchronous write per request would block the acceptor on a slow log collector.
  // minLength 0: lines go out as soon as the previous write completes (bursts coalesce while one is in
  // flight); a larger minLength would hold quiet-period lines such as "gateway listening" indefinitely.
  const destination = opts.destination ?? pino.destination({ dest: 1, sync: false, minLength: 0 });
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      log: (obj) => redactSecrets(obj) as Record<string, unknown>,
    },
  }, destination);
}

/** What the pipeline knows when a request completes. No free-text request or response content. */
export interface RequestLogFields {
  requestId: string;
  route: 'chat' | 'completions' | 'responses';
  tenant: string | null;
  /** Model name as requested (truncated to 128 chars: it is client input). */
  model: string | null;
  pool: string | null;
  replica: string | null;
  status: number;
  /** Error code on the wire, or null for success. */
  code: string | null;
  stream: boolean;
  durationMs: number;
  ttftMs: number | null;
  queueMs: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  retries: number;
  cancelled: boolean;
  finishReason: string | null;
}

/** The exact object written for one request; exported so tests (and a future sink) can see the shape. */
export function requestLogRecord(f: RequestLogFields): Record<string, string | number | boolean | null> {
  return {
    msg: 'request',
    request_id: clip(f.requestId, 128),
    route: f.route,
    tenant: f.tenant,
    model: f.model === null ? null : clip(f.model, 128),
    pool: f.pool,
    replica: f.replica,
    status: f.status,
    code: f.code,
    stream: f.stream,
    duration_ms: round3(f.durationMs),
    ttft_ms: f.ttftMs === null ? null : round3(f.ttftMs),
    queue_ms: round3(f.queueMs),
    input_tokens: f.inputTokens,
    output_tokens: f.outputTokens,
    cached_tokens: f.cachedTokens,
    retries: f.retries,
    cancelled: f.cancelled,
    finish_reason: f.finishReason === null ? null : clip(f.finishReason, 32),
  };
}

/** What a request line is written to: the gateway's Logger, or anything with pino's level methods. */
export interface RequestLogTarget {
  /** pino's; when present and false for the line's level, nothing is built. */
  isLevelEnabled?(level: 'info' | 'warn' | 'error'): boolean;
  info(obj: object): void;
  warn(obj: object): void;
  error(obj: object): void;
}

/**
 * The level of a request's line: `error` for the gateway's own bugs (internal_error), `warn` for any other
 * 5xx (the fleet or a replica failed the client: worth a look), `info` for the rest: successes, the client's
 * own 4xx (a rate-limited client would otherwise flood a warn-level log) and 499 (the client hung up). So
 * LOG_LEVEL=warn shows exactly the requests the gateway failed.
 */
export function requestLogLevel(status: number, code: string | null): 'info' | 'warn' | 'error' {
  if (code === 'internal_error') return 'error';
  return status >= 500 ? 'warn' : 'info';
}

/** Writes the one completion line at requestLogLevel's level; a disabled level builds nothing. */
export function requestLogLine(target: RequestLogTarget, f: RequestLogFields): void {
  const level = requestLogLevel(f.status, f.code);
  if (target.isLevelEnabled?.(level) === false) return;
  target[level](requestLogRecord(f));
}

function clip(s: string, maxChars: number): string {
  return s.length <= maxChars ? s : s.slice(0, maxChars);
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
