// Reads a tokenizer.json's normalizer and pre-tokenizer and decides whether the fast byte-level BPE path can run
// them exactly: a sequence of regex Splits with the "Isolated" behaviour ending in ByteLevel (Llama 3, Qwen 2/3,
// DeepSeek V3, gpt-oss), or ByteLevel with its own GPT-2 regex; an NFC or empty normalizer. Anything else
// (Metaspace, byte fallback, Unigram, other split behaviours) is served by @huggingface/tokenizers instead
// (hf-library.ts), and `fastPathPlan` says why.
// The regexes are Oniguruma's (HF tokenizers' engine), translated to JS irregexp with the u flag:
// - \s is Unicode White_Space (Oniguruma), which JS's \s is not (JS adds U+FEFF, lacks U+0085): spelled out;
//   \S likewise; \d is \p{Nd}; \w is letters, marks, decimal digits and connector punctuation;
// - (?i:…) groups (Node 20's irregexp has no modifiers) are spelled out letter by letter with each letter's
//   simple case folds (s also matches ſ U+017F, k the Kelvin sign U+212A), as Oniguruma folds them.
// A pattern this translator does not understand is refused (the library path serves the model).
// Thread: any; setup only.

/** Unicode White_Space, the set Oniguruma's and Rust regex's \s match. */
export const WS = '\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const WORD = '\\p{L}\\p{M}\\p{Nd}\\p{Pc}';

/** GPT-2's pattern, which ByteLevel applies when its use_regex is true. */
const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export class UnsupportedPattern extends Error {}

const FOLDS: Record<string, string> = { s: 'sSſ', k: 'kKK' };

function caseClass(ch: string): string {
  const lower = ch.toLowerCase();
  if (lower === ch.toUpperCase()) return ch;
  return `[${FOLDS[lower] ?? lower + lower.toUpperCase()}]`;
}

/** Translates one Oniguruma pattern to a JS source for `new RegExp(source, 'gu')`; throws UnsupportedPattern. */
export function translatePattern(pattern: string): string {
  let out = '';
  let inClass = false;
  let fold = 0; // depth of (?i: groups still open
  let depth = 0;
  const foldDepths: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '\\') {
      const next = pattern[i + 1];
      if (next === undefined) throw new UnsupportedPattern('trailing backslash');
      i++;
      if (next === 's') out += inClass ? WS : `[${WS}]`;
      else if (next === 'S') {
        if (inClass) throw new UnsupportedPattern('\\S inside a character class');
        out += `[^${WS}]`;
      } else if (next === 'd') out += '\\p{Nd}';
      else if (next === 'D') {
        if (inClass) throw new UnsupportedPattern('\\D inside a character class');
        out += '\\P{Nd}';
      } else if (next === 'w') out += inClass ? WORD : `[${WORD}]`;
      else if (next === 'W') {
        if (inClass) throw new UnsupportedPattern('\\W inside a character class');
        out += `[^${WORD}]`;
      } else if (next === 'p' || next === 'P') {
        const close = pattern.indexOf('}', i);
        if (pattern[i + 1] !== '{' || close < 0) throw new UnsupportedPattern('\\p without {…}');
        out += pattern.slice(i - 1, close + 1);
        i = close;
      } else if ('rntfv\\^$.*+?()[]{}|/-'.includes(next)) out += `\\${next}`;
      else if (next === 'x' || next === 'u') {
        out += `\\${next}`;
      } else throw new UnsupportedPattern(`escape \\${next}`);
      continue;
    }
    if (inClass) {
      if (ch === ']') inClass = false;
      if (ch === '[') throw new UnsupportedPattern('nested character class');
      if (fold > 0 && /[A-Za-z]/.test(ch)) throw new UnsupportedPattern('letters in a class inside (?i:)');
      out += ch;
      continue;
    }
    if (ch === '[') {
      inClass = true;
      out += ch;
      if (pattern[i + 1] === '^') {
        out += '^';
        i++;
      }
      if (pattern[i + 1] === ']') throw new UnsupportedPattern('class starting with ]');
      continue;
    }
    if (ch === '(') {
      depth++;
      if (pattern.startsWith('(?i:', i)) {
        fold++;
        foldDepths.push(depth);
        out += '(?:';
        i += 3;
      } else if (pattern.startsWith('(?', i) && !pattern.startsWith('(?:', i) && !pattern.startsWith('(?=', i) && !pattern.startsWith('(?!', i)) {
        throw new UnsupportedPattern('group flags or lookbehind');
      } else out += ch;
      continue;
    }
    if (ch === ')') {
      if (foldDepths[foldDepths.length - 1] === depth) {
        foldDepths.pop();
        fold--;
      }
      depth--;
      out += ch;
      continue;
    }
    out += fold > 0 ? caseClass(ch) : ch;
  }
  if (inClass || depth !== 0) throw new UnsupportedPattern('unbalanced pattern');
  // The translation must compile (a mistake here is a setup error, never a request-time one).
  try {
    new RegExp(out, 'gu');
  } catch (err) {
    throw new UnsupportedPattern(`translated pattern does not compile: ${(err as Error).message}`);
  }
  return out;
}

export type NormalizerKind = 'none' | 'nfc';

export interface FastPathPlan {
  /** The regexes each piece goes through in turn ("Isolated": matches and the gaps between them are pieces). */
  splits: RegExp[];
  normalizer: NormalizerKind;
}

type Json = Record<string, unknown>;

function normalizerKind(n: unknown): NormalizerKind {
  if (n === null || n === undefined) return 'none';
  const node = n as Json;
  if (node.type === 'NFC') return 'nfc';
  if (node.type === 'Sequence' && Array.isArray(node.normalizers)) {
    const inner = (node.normalizers as unknown[]).map(normalizerKind);
    if (inner.length === 0) return 'none';
    if (inner.length === 1) return inner[0]!;
  }
  throw new UnsupportedPattern(`normalizer ${String(node.type)}`);
}

function splitRegex(node: Json): RegExp {
  if (node.behavior !== 'Isolated' || node.invert === true) throw new UnsupportedPattern(`Split behavior ${String(node.behavior)}${node.invert === true ? ' inverted' : ''}`);
  const p = node.pattern as Json | undefined;
  if (p !== undefined && typeof p.Regex === 'string') return new RegExp(translatePattern(p.Regex), 'gu');
  if (p !== undefined && typeof p.String === 'string') return new RegExp(p.String.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gu');
  throw new UnsupportedPattern('Split without a pattern');
}

/**
 * The fast path's plan for a tokenizer.json, or the reason it cannot take the model (thrown as
 * UnsupportedPattern): a byte-level BPE without byte fallback, word prefixes or suffixes, or dropout.
 */
export function fastPathPlan(tokenizer: Json): FastPathPlan {
  const model = tokenizer.model as Json;
  if (model.type !== undefined && model.type !== 'BPE') throw new UnsupportedPattern(`model type ${String(model.type)}`);
  if (model.byte_fallback === true) throw new UnsupportedPattern('BPE with byte fallback');
  if (model.continuing_subword_prefix || model.end_of_word_suffix) throw new UnsupportedPattern('subword prefix or suffix');
  if (model.dropout !== null && model.dropout !== undefined && model.dropout !== 0) throw new UnsupportedPattern('BPE dropout');
  const normalizer = normalizerKind(tokenizer.normalizer);
  const pre = tokenizer.pre_tokenizer as Json | null | undefined;
  if (pre === null || pre === undefined) throw new UnsupportedPattern('no pre-tokenizer');
  const steps = pre.type === 'Sequence' ? (pre.pretokenizers as Json[]) : [pre];
  const last = steps[steps.length - 1];
  if (last === undefined || last.type !== 'ByteLevel') throw new UnsupportedPattern('pre-tokenizer does not end with ByteLevel');
  if (last.add_prefix_space === true) throw new UnsupportedPattern('ByteLevel add_prefix_space');
  const splits: RegExp[] = [];
  for (const step of steps.slice(0, -1)) {
    if (step.type !== 'Split') throw new UnsupportedPattern(`pre-tokenizer ${String(step.type)}`);
    splits.push(splitRegex(step));
  }
  if (last.use_regex !== false) splits.push(new RegExp(translatePattern(GPT2_PATTERN), 'gu'));
  return { splits, normalizer };
}
