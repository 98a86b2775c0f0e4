// One request's reply length as the gateway predicts it (reply-lengths.ts makes it from the pool's finished
// streams), and as it revises it while the stream runs: a stream that has produced k tokens is read from
// the same cell given L > k, so a reply already past its prediction gets a new one instead of counting as
// ended. Every figure is per sequence (n sequences: × n), at least 1 and at most max_tokens.
//   kvTokens    KV_QUANTILE of the cell: the KV the request is budgeted (admission's need, the ledger's
//               reservation, KV after it in the prediction);
//   slackTokens SLACK_QUANTILE: the N of the per-stream TPOT rule (gpu-time/stream-slack.ts);
//   meanTokens  the mean: the ledger's outstanding tokens (expected work);
//   medianTokens the median: what the error figures judge (a median minimises the absolute error).
// A request without a forecast (exactForecast) has its max_tokens as its length: a client that sends
// ignore_eos, or a test that says what the reply will be.
// Thread: the acceptor. One object of plain fields per request (like its Decision); revisions are a pass or
// two over a cell's row, no allocation.

/** What a forecast reads its revisions from (reply-table.ts's ReplyTable). */
export interface ReplyReader {
  readonly kvQuantile: number;
  readonly slackQuantile: number;
  quantileAfter(f: ReplyForecast, q: number, produced: number): number;
  meanAfter(f: ReplyForecast, produced: number): number;
}

export class ReplyForecast {
  /** max_tokens per sequence: every figure is at most this. */
  cap = 1;
  /** The pool's table (null: no forecast, the cap is the length). */
  table: ReplyReader | null = null;
  /** The cells the request's context falls in at levels 1-3 (level 0, the pool, is cell 0). */
  cell1 = 0;
  cell2 = 0;
  cell3 = 0;
  /** The level of the cell read (the finest with enough weight). */
  level = 0;
  kvTokens = 1;
  slackTokens = 1;
  meanTokens = 1;
  medianTokens = 1;

  /** The cell at `level` (0 the pool, 3 the finest). */
  cellAt(level: number): number {
    return level === 0 ? 0 : level === 1 ? this.cell1 : level === 2 ? this.cell2 : this.cell3;
  }

  /** The KV figure given the stream has produced `produced` tokens (≥ produced + 1 until the cap). */
  kvAfter(produced: number): number {
    return this.table === null ? this.cap : this.table.quantileAfter(this, this.table.kvQuantile, produced);
  }

  /** The per-stream rule's N given the stream has produced `produced` tokens. */
  slackAfter(produced: number): number {
    return this.table === null ? this.cap : this.table.quantileAfter(this, this.table.slackQuantile, produced);
  }

  /** The expected length given the stream has produced `produced` tokens. */
  meanAfter(produced: number): number {
    return this.table === null ? this.cap : this.table.meanAfter(this, produced);
  }
}

/** A forecast that is max_tokens itself (no table): the reply's length is known. */
export function exactForecast(maxTokens: number): ReplyForecast {
  const f = new ReplyForecast();
  f.cap = f.kvTokens = f.slackTokens = f.meanTokens = f.medianTokens = maxTokens;
  return f;
}

/** What a route request carries: its cap, and the forecast when the caller made one. */
export interface ForecastCarrier {
  maxTokens: number;
  reply?: ReplyForecast | undefined;
}

/** The KV figure of a request (its max_tokens when it carries no forecast). */
export function kvReplyTokens(r: ForecastCarrier): number {
  return r.reply === undefined ? r.maxTokens : r.reply.kvTokens;
}

/** The expected reply (its max_tokens when it carries no forecast). */
export function meanReplyTokens(r: ForecastCarrier): number {
  return r.reply === undefined ? r.maxTokens : r.reply.meanTokens;
}
