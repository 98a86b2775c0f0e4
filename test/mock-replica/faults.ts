// Fault injection state behind POST /_mock/faults (contract "Mock vLLM replica"). Thread: main (mock
// process). Read once per /v1/* request and once per /health; never applied to /_mock/*, /metrics.
//
// `count` = how many completion requests the fault applies to; absent = until reset with mode "none".
// `refuse_connections` and `unhealthy` also hit the other /v1/* routes (and /health for unhealthy) while
// active, but only completion requests consume `count`.

export const FAULT_MODES = [
  'none',
  'error_before_first_token',
  'die_mid_stream',
  'hang',
  'slow',
  'refuse_connections',
  'unhealthy',
] as const;
export type FaultMode = (typeof FAULT_MODES)[number];

export interface FaultSpec {
  mode: FaultMode;
  /** error_before_first_token: HTTP status of the error (default 500). */
  status: number;
  /** die_mid_stream: tokens sent before the socket is destroyed (default 5). */
  after_tokens: number;
  /** slow: extra delay per token (default 200). */
  delay_ms: number;
  /** Completion requests left; null = unlimited. */
  count: number | null;
}

const NONE: FaultSpec = { mode: 'none', status: 500, after_tokens: 5, delay_ms: 200, count: null };

export class FaultState {
  private spec: FaultSpec = NONE;

  current(): FaultSpec {
    return this.spec;
  }

  /** Validates a POST body; returns an error message or null after applying it. */
  set(raw: unknown): string | null {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return 'body must be a JSON object';
    const b = raw as Record<string, unknown>;
    if (typeof b.mode !== 'string' || !(FAULT_MODES as readonly string[]).includes(b.mode)) {
      return `mode must be one of ${FAULT_MODES.join(', ')}`;
    }
    const intField = (name: string, dflt: number, min: number): number | string => {
      const v = b[name];
      if (v === undefined || v === null) return dflt;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min) return `${name} must be an integer >= ${min}`;
      return v;
    };
    const status = intField('status', 500, 100);
    const afterTokens = intField('after_tokens', 5, 0);
    const delayMs = intField('delay_ms', 200, 0);
    const count = b.count === undefined || b.count === null ? null : intField('count', 0, 1);
    for (const v of [status, afterTokens, delayMs, count]) if (typeof v === 'string') return v;
    if (typeof status === 'number' && status > 599) return 'status must be an integer <= 599';
    this.spec = {
      mode: b.mode as FaultMode,
      status: status as number,
      after_tokens: afterTokens as number,
      delay_ms: delayMs as number,
      count: b.mode === 'none' ? null : (count as number | null),
    };
    return null;
  }

  /** Whether the active fault (if any) is `mode`, without consuming it. */
  is(mode: FaultMode): boolean {
    return this.spec.mode === mode;
  }

  /**
   * Called once per completion request: returns the fault that applies to it (mode 'none' if none) and
   * consumes one unit of `count`.
   */
  takeForCompletion(): FaultSpec {
    const s = this.spec;
    if (s.mode === 'none') return s;
    if (s.count !== null) {
      const left = s.count - 1;
      this.spec = left <= 0 ? NONE : { ...s, count: left };
    }
    return s;
  }
}
