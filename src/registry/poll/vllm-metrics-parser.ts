// Parses the few series routing needs out of a vLLM /metrics page (Prometheus text format), in one pass.
// Thread: poller (pure function, also unit-tested on the main thread). Not on the request path, but it runs
// scrape_interval x replicas times a second (640/s at 64 replicas and 100 ms), so it allocates only for the
// ~15 lines it keeps: other lines are rejected by name length and a startsWith, without a substring.
//
// Understands V1 names and the legacy gpu_* names (docs/vllm-facts.md "Metrics") and reports which one
// the replica speaks. Series with several label sets (engine="0","1" under data parallelism) are summed,
// except KV usage (averaged) and lora_requests_info (the series with the largest value wins: vLLM keeps
// every label combination it ever set, each with its last timestamp).

/** What one page said. Fixed shape: the poller keeps one per replica and reuses it. NaN = not on the page. */
export class ParsedMetrics {
  running = Number.NaN;
  waiting = Number.NaN;
  /** 0..1; V1 vllm:kv_cache_usage_perc when present, else legacy vllm:gpu_cache_usage_perc. */
  kvUsage = Number.NaN;
  /** The replica emits the V1 names (kv_cache_usage_perc or prefix_cache_*). */
  speaksV1 = false;
  /** The replica emits the legacy gpu_* names. v0.9.2-v0.10 emit both. */
  speaksLegacy = false;
  numGpuBlocks = Number.NaN;
  blockSize = Number.NaN;
  loraEnabled = false;
  maxLoras = 0;
  /** Comma-joined adapter names, exactly as the label carries them (compare as strings, split on change). */
  runningAdapters = '';
  waitingAdapters = '';
  preemptionsTotal = Number.NaN;
  prefixQueriesTotal = Number.NaN;
  prefixHitsTotal = Number.NaN;
  promptTokensTotal = Number.NaN;
  generationTokensTotal = Number.NaN;
  /** process_start_time_seconds (absent in prometheus multiprocess mode). */
  processStartSeconds = Number.NaN;
  /** Earliest vllm:*_created sample: when the process registered its metrics; a start-time fallback. */
  earliestCreatedSeconds = Number.NaN;

  // Accumulators, meaningful only during a parse.
  private kvV1Sum = 0;
  private kvV1Count = 0;
  private kvLegacySum = 0;
  private kvLegacyCount = 0;
  private prefixQueriesLegacy = Number.NaN;
  private prefixHitsLegacy = Number.NaN;
  private loraTimestamp = Number.NEGATIVE_INFINITY;

  /** Start-time signal: process_start_time_seconds, else the earliest _created; NaN when neither. */
  startSeconds(): number {
    return Number.isNaN(this.processStartSeconds) ? this.earliestCreatedSeconds : this.processStartSeconds;
  }

  /** @internal */
  reset(): void {
    this.running = Number.NaN;
    this.waiting = Number.NaN;
    this.kvUsage = Number.NaN;
    this.speaksV1 = false;
    this.speaksLegacy = false;
    this.numGpuBlocks = Number.NaN;
    this.blockSize = Number.NaN;
    this.loraEnabled = false;
    this.maxLoras = 0;
    this.runningAdapters = '';
    this.waitingAdapters = '';
    this.preemptionsTotal = Number.NaN;
    this.prefixQueriesTotal = Number.NaN;
    this.prefixHitsTotal = Number.NaN;
    this.promptTokensTotal = Number.NaN;
    this.generationTokensTotal = Number.NaN;
    this.processStartSeconds = Number.NaN;
    this.earliestCreatedSeconds = Number.NaN;
    this.kvV1Sum = 0;
    this.kvV1Count = 0;
    this.kvLegacySum = 0;
    this.kvLegacyCount = 0;
    this.prefixQueriesLegacy = Number.NaN;
    this.prefixHitsLegacy = Number.NaN;
    this.loraTimestamp = Number.NEGATIVE_INFINITY;
  }

  /** @internal one sample of a known series. */
  take(id: number, text: string, braceAt: number, value: number): void {
    switch (id) {
      case M_RUNNING: this.running = addTo(this.running, value); break;
      case M_WAITING: this.waiting = addTo(this.waiting, value); break;
      case M_KV_V1: this.kvV1Sum += value; this.kvV1Count++; this.speaksV1 = true; break;
      case M_KV_LEGACY: this.kvLegacySum += value; this.kvLegacyCount++; this.speaksLegacy = true; break;
      case M_PREEMPTIONS: this.preemptionsTotal = addTo(this.preemptionsTotal, value); break;
      case M_PREFIX_QUERIES_V1: this.prefixQueriesTotal = addTo(this.prefixQueriesTotal, value); this.speaksV1 = true; break;
      case M_PREFIX_HITS_V1: this.prefixHitsTotal = addTo(this.prefixHitsTotal, value); this.speaksV1 = true; break;
      case M_PREFIX_QUERIES_LEGACY: this.prefixQueriesLegacy = addTo(this.prefixQueriesLegacy, value); this.speaksLegacy = true; break;
      case M_PREFIX_HITS_LEGACY: this.prefixHitsLegacy = addTo(this.prefixHitsLegacy, value); this.speaksLegacy = true; break;
      case M_PROMPT_TOKENS: this.promptTokensTotal = addTo(this.promptTokensTotal, value); break;
      case M_GENERATION_TOKENS: this.generationTokensTotal = addTo(this.generationTokensTotal, value); break;
      case M_PROCESS_START: this.processStartSeconds = value; break;
      case M_CACHE_CONFIG: {
        if (braceAt < 0) break;
        const blocks = Number(labelValue(text, braceAt, 'num_gpu_blocks'));
        const blockSize = Number(labelValue(text, braceAt, 'block_size'));
        // "None" before the engine has profiled memory: leave NaN rather than 0.
        if (Number.isFinite(blocks)) this.numGpuBlocks = addTo(this.numGpuBlocks, blocks);
        if (Number.isFinite(blockSize) && Number.isNaN(this.blockSize)) this.blockSize = blockSize;
        break;
      }
      case M_LORA: {
        this.loraEnabled = true;
        if (braceAt < 0 || !(value > this.loraTimestamp)) break;
        this.loraTimestamp = value;
        const maxLora = Number(labelValue(text, braceAt, 'max_lora'));
        this.maxLoras = Number.isFinite(maxLora) ? maxLora : 0;
        this.runningAdapters = labelValue(text, braceAt, 'running_lora_adapters') ?? '';
        this.waitingAdapters = labelValue(text, braceAt, 'waiting_lora_adapters') ?? '';
        break;
      }
      default: break;
    }
  }

  /** @internal */
  finish(): void {
    if (this.kvV1Count > 0) this.kvUsage = this.kvV1Sum / this.kvV1Count;
    else if (this.kvLegacyCount > 0) this.kvUsage = this.kvLegacySum / this.kvLegacyCount;
    // Mixed pages (v0.9.2-v0.10) carry identical values under both names; prefer V1 per series family.
    if (Number.isNaN(this.prefixQueriesTotal)) this.prefixQueriesTotal = this.prefixQueriesLegacy;
    if (Number.isNaN(this.prefixHitsTotal)) this.prefixHitsTotal = this.prefixHitsLegacy;
  }
}

function addTo(acc: number, value: number): number {
  return Number.isNaN(acc) ? value : acc + value;
}

const M_RUNNING = 1;
const M_WAITING = 2;
const M_KV_V1 = 3;
const M_KV_LEGACY = 4;
const M_CACHE_CONFIG = 5;
const M_LORA = 6;
const M_PREEMPTIONS = 7;
const M_PREFIX_QUERIES_V1 = 8;
const M_PREFIX_HITS_V1 = 9;
const M_PREFIX_QUERIES_LEGACY = 10;
const M_PREFIX_HITS_LEGACY = 11;
const M_PROMPT_TOKENS = 12;
const M_GENERATION_TOKENS = 13;
const M_PROCESS_START = 14;

const KNOWN: ReadonlyArray<readonly [string, number]> = [
  ['vllm:num_requests_running', M_RUNNING],
  ['vllm:num_requests_waiting', M_WAITING],
  ['vllm:kv_cache_usage_perc', M_KV_V1],
  ['vllm:gpu_cache_usage_perc', M_KV_LEGACY],
  ['vllm:cache_config_info', M_CACHE_CONFIG],
  ['vllm:lora_requests_info', M_LORA],
  ['vllm:num_preemptions_total', M_PREEMPTIONS],
  ['vllm:prefix_cache_queries_total', M_PREFIX_QUERIES_V1],
  ['vllm:prefix_cache_hits_total', M_PREFIX_HITS_V1],
  ['vllm:gpu_prefix_cache_queries_total', M_PREFIX_QUERIES_LEGACY],
  ['vllm:gpu_prefix_cache_hits_total', M_PREFIX_HITS_LEGACY],
  ['vllm:prompt_tokens_total', M_PROMPT_TOKENS],
  ['vllm:generation_tokens_total', M_GENERATION_TOKENS],
  ['process_start_time_seconds', M_PROCESS_START],
];

/** Known names bucketed by length: a line whose name length has no bucket costs no string comparison. */
const BY_LENGTH: Array<Array<readonly [string, number]> | undefined> = [];
for (const entry of KNOWN) (BY_LENGTH[entry[0].length] ??= []).push(entry);

const CH_NL = 10;
const CH_CR = 13;
const CH_SPACE = 32;
const CH_TAB = 9;
const CH_HASH = 35;
const CH_QUOTE = 34;
const CH_BACKSLASH = 92;
const CH_RBRACE = 125;
const CREATED = '_created';

/**
 * Parses `text` into `out` (reset first). Returns true when the page looks like vLLM's: it carries
 * num_requests_running or num_requests_waiting. A page that does not is a failed scrape.
 */
export function parseVllmMetrics(text: string, out: ParsedMetrics): boolean {
  out.reset();
  const len = text.length;
  let pos = 0;
  while (pos < len) {
    let eol = text.indexOf('\n', pos);
    if (eol < 0) eol = len;
    const first = text.charCodeAt(pos);
    if (first !== CH_HASH && first !== CH_NL && first !== CH_CR) parseLine(text, pos, eol, out);
    pos = eol + 1;
  }
  out.finish();
  return !Number.isNaN(out.running) || !Number.isNaN(out.waiting);
}

function parseLine(text: string, start: number, eol: number, out: ParsedMetrics): void {
  // Names hold neither '{' nor ' ': the name ends at the first of them. indexOf is native (about 4x the
  // speed of a charCodeAt loop over the ~250 histogram lines of a page, measured in native-bench registry).
  let nameEnd = text.indexOf('{', start);
  let hasLabels = true;
  if (nameEnd < 0 || nameEnd > eol) {
    hasLabels = false;
    nameEnd = text.indexOf(' ', start);
    if (nameEnd < 0 || nameEnd > eol) {
      nameEnd = start;
      while (nameEnd < eol && text.charCodeAt(nameEnd) !== CH_TAB) nameEnd++;
    }
  }
  const nameLength = nameEnd - start;
  let id = 0;
  const bucket = BY_LENGTH[nameLength];
  if (bucket !== undefined) {
    for (let i = 0; i < bucket.length; i++) {
      const entry = bucket[i]!;
      if (text.startsWith(entry[0], start)) { id = entry[1]; break; }
    }
  }
  const isCreated = id === 0 && nameLength > CREATED.length + 5 &&
    text.startsWith(CREATED, nameEnd - CREATED.length) && text.startsWith('vllm:', start);
  if (id === 0 && !isCreated) return;
  let braceAt = -1;
  let valueStart = nameEnd;
  if (hasLabels) {
    braceAt = nameEnd;
    valueStart = labelsEnd(text, nameEnd + 1, eol) + 1;
  }
  const value = readValue(text, valueStart, eol);
  if (Number.isNaN(value)) return;
  if (isCreated) {
    if (!(value >= out.earliestCreatedSeconds)) out.earliestCreatedSeconds = value;
    return;
  }
  out.take(id, text, braceAt, value);
}

/** Index of the `}` closing a label set that starts at `pos` (just after `{`), skipping quoted values. */
function labelsEnd(text: string, pos: number, eol: number): number {
  let inQuotes = false;
  for (let i = pos; i < eol; i++) {
    const c = text.charCodeAt(i);
    if (inQuotes) {
      if (c === CH_BACKSLASH) i++;
      else if (c === CH_QUOTE) inQuotes = false;
    } else if (c === CH_QUOTE) {
      inQuotes = true;
    } else if (c === CH_RBRACE) {
      return i;
    }
  }
  return eol;
}

function readValue(text: string, pos: number, eol: number): number {
  let a = pos;
  while (a < eol && (text.charCodeAt(a) === CH_SPACE || text.charCodeAt(a) === CH_TAB)) a++;
  let b = a;
  while (b < eol) {
    const c = text.charCodeAt(b);
    if (c === CH_SPACE || c === CH_TAB || c === CH_CR) break;
    b++;
  }
  if (b === a) return Number.NaN;
  const token = text.slice(a, b);
  const n = Number(token);
  if (!Number.isNaN(n)) return n;
  if (token === '+Inf' || token === 'Inf') return Number.POSITIVE_INFINITY;
  if (token === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number.NaN;
}

/**
 * The value of label `name` in the label set opening at `braceAt`, unescaped; null when absent. Only called
 * for the two info series, so it may allocate.
 */
export function labelValue(text: string, braceAt: number, name: string): string | null {
  const eol = labelsEnd(text, braceAt + 1, text.length);
  let i = braceAt + 1;
  while (i < eol) {
    while (i < eol && (text.charCodeAt(i) === CH_SPACE || text.charCodeAt(i) === 44 /* , */)) i++;
    const eq = text.indexOf('=', i);
    if (eq < 0 || eq >= eol) return null;
    const keyMatches = eq - i === name.length && text.startsWith(name, i);
    let j = eq + 1;
    if (text.charCodeAt(j) !== CH_QUOTE) return null;
    j++;
    const valueStart = j;
    let escaped = false;
    while (j < eol) {
      const c = text.charCodeAt(j);
      if (c === CH_BACKSLASH) { escaped = true; j += 2; continue; }
      if (c === CH_QUOTE) break;
      j++;
    }
    if (keyMatches) {
      const raw = text.slice(valueStart, j);
      return escaped ? raw.replace(/\\(.)/g, (_m, ch: string) => (ch === 'n' ? '\n' : ch)) : raw;
    }
    i = j + 1;
  }
  return null;
}

/** Splits a comma-joined adapter label ("a,b") into names; "" gives []. */
export function splitAdapters(joined: string): string[] {
  if (joined === '') return [];
  const out: string[] = [];
  for (const part of joined.split(',')) {
    const name = part.trim();
    if (name !== '') out.push(name);
  }
  return out;
}
