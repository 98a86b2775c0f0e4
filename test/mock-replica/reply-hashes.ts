// The token ids a planned output samples, and the block hashes that continue the prompt's chain over them, so
// the engine caches a finished (or aborted) reply under the keys a follow-up prompt looks up, as vLLM keys
// the blocks of generated tokens by their sampled ids. The follow-up is the next chat turn (the reply comes
// back trimmed, then <|eot_id|>) or a completions prompt extended by the reply text; output-text.ts makes
// that text re-tokenize to exactly these ids, so gateway, mock and a real replica agree block for block.
// Thread: main (mock process). Per request, once, at admission: one id per output token and one xxhash64 per
// block the engine can fill (≈0.6 µs each; a 300-token reply is ≈19 blocks).
import { blockHashesOfParts } from '../../src/tokenize/block-hash.ts';
import type { EncodedPrompt } from '../../src/tokenize/types.ts';
import { getTokenizer } from '../../src/tokenize/tokenizer.ts';
import { OUTPUT_WORDS, tokenKind, tokenText, type OutputPlan } from './output-text.ts';

let wordIds: Map<string, number> | null = null;
let eosId = 0;

/** Word → its single Llama 3 id, built on first use (the tokenizer is already built by initPromptTokens). */
function ids(): Map<string, number> {
  if (wordIds !== null) return wordIds;
  const tokenizer = getTokenizer('llama3');
  const table = new Map<string, number>();
  for (const word of OUTPUT_WORDS) {
    const encoded = tokenizer.encodeOrdinary(word);
    if (encoded.length !== 1) throw new Error(`mock output word ${JSON.stringify(word)} is ${encoded.length} Llama 3 tokens, not one`);
    table.set(word, encoded[0]!);
  }
  eosId = tokenizer.specialId('<|eot_id|>');
  wordIds = table;
  return table;
}

/** The ids of the first `count` tokens of the plan (EOS = <|eot_id|> for a natural stop). */
export function outputTokenIds(plan: OutputPlan, count = plan.outputTokens): Uint32Array {
  const table = ids();
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) out[i] = tokenKind(plan, i) === 'eos' ? eosId : table.get(tokenText(plan, i))!;
  return out;
}

/**
 * Hashes of the full blocks after the prompt's full blocks, over the prompt's tail and the output's ids,
 * chained from the prompt's last full block: EngineRequestSpec.outputBlockHashes. Only blocks the engine can
 * fill: the last sampled token's KV is never computed, so the blocks cover prompt + outputTokens − 1 tokens.
 */
export function outputBlockHashes(prompt: EncodedPrompt, plan: OutputPlan, blockSize: number, adapter: string | null): Float64Array {
  const fullBlocks = Math.floor(prompt.tokens.length / blockSize);
  const tail = prompt.tokens.subarray(fullBlocks * blockSize);
  const parent = fullBlocks > 0 ? prompt.blockHashes[fullBlocks - 1]! : null;
  return blockHashesOfParts([tail, outputTokenIds(plan, plan.outputTokens - 1)], 0, blockSize, adapter, parent);
}

/** The prompt's ids then the output's: EngineRequestSpec.tokenIds, for the blocks a KV event reports. */
export function sequenceTokenIds(prompt: EncodedPrompt, plan: OutputPlan): Uint32Array {
  const out = new Uint32Array(prompt.tokens.length + plan.outputTokens);
  out.set(prompt.tokens);
  out.set(outputTokenIds(plan), prompt.tokens.length);
  return out;
}
