// The GPU-time model's tuned parameters, each with why it has its value (src/gpu-time/README.md, "Parameters",
// has the measurements). Read by gpu-time-model.ts; the public ones are re-exported there.

/** Time constant of the arriving-prefill sum: about one stream's life (300 tokens at 20-40 ms). */
export const ARRIVAL_WINDOW_MS = 8000;
/** ρ is capped below 1 so a predicted TPOT stays finite (and large) on an oversubscribed replica. */
export const RHO_CAP = 0.95;
/** A request's own prefill counts in ρ up to this share of the window's prefill capacity (a 100k-token
 * prompt stalls the batch once; it does not raise the rate for the whole window). */
export const OWN_RHO_CAP = 0.25;
/** Prompts up to this many tokens are held to the tier's TTFT; longer ones to 1.25 × their idle TTFT. */
export const SHORT_PROMPT_TOKENS = 4000;
export const LONG_PROMPT_FACTOR = 1.25;
/** First tokens after less prefill work than this say more about fixed costs than about the rate. */
export const MIN_RATE_SAMPLE_WORK = 256;
/** Streams shorter than this give no decode-step sample (too few gaps to average the step noise). */
export const MIN_DECODE_SAMPLE_TOKENS = 8;
/**
 * A stream whose span was mostly prefill (by the fluid's account) gives no decode-step sample: the step is what
 * is left after subtracting the prefill estimate, so its error is that estimate's error × share / (1 − share),
 * and the estimate itself drains at the learned step (a sample that mostly echoes the step it was computed
 * with). At a share of 0.5 a 10 % error in the prefill estimate is a 10 % error in the step.
 */
export const MAX_SAMPLE_PREFILL_SHARE = 0.5;
/** Per-pool means of what this gateway dispatches (prefill work per request, and per uncached token): EWMA weight per dispatch. */
export const MEAN_PROMPT_ALPHA = 0.05;
/**
 * Each stream is held to this share of the TPOT target in the per-stream slack (the step's jitter, the model's
 * error). Tuned on the Azure code trace at speed 12.5, seed 1 (README, "Parameters"), with max_tokens the
 * recorded length; not re-swept with forecast lengths. Seed 1 is not among the race's default seeds.
 */
export const STREAM_TPOT_MARGIN = 0.9;
/**
 * The decode-step floor under the residual (step-phase.ts) holds only where the replica's requests are mostly
 * this thread's: at most this share of what the scrape shows may be others' (a scrape is up to an interval old,
 * so ours that ended since count here too). Another gateway's prefill inflates the step this one learns.
 */
// Tuned on the seed mix, half a simulated minute at 672 and 5,000 requests/s, seed 1, one and four gateways (README).
export const FOREIGN_SHARE_MAX = 0.25;
