// Turns a parsed completion request into prompt token ids and chained block hashes for the engine. By default
// with the gateway's own tokenizer, chat template and block hasher (src/tokenize/), so the mock's prefix cache
// and the gateway's routing hints key blocks identically. By default the model is Llama 3.1 (the built-in
// llama3 tokenizer and llama3.1 template); `--tokenizer DIR` makes it any model: that Hugging Face tokenizer
// directory and the chat template it ships, as vLLM would count, cache and hash that model's prompts.
// `--tokenizer-impl reference` counts with code the gateway does not share: the prompt rendered by the
// gateway's template code, then encoded by @lenml/tokenizers (the test suite's reference, through
// test/helpers/model-tokenizers.ts) and hashed over those ids. Where the two tokenizers disagree (U+0085 and
// U+FEFF, which @lenml splits as JavaScript's \s does and Hugging Face's tokenizers as Unicode White_Space does),
// the replica's prompt_tokens and cached_tokens then differ from the gateway's prediction, as a real engine's
// would when the gateway's tokenizer is wrong.
// Thread: main (mock process). Per request, once; the cost is tokenization of the message segments not in the
// per-process segment cache (a repeated system prompt is free) plus one xxhash64 per 16-token block not in the
// prefix-hash cache; the reference path encodes the whole prompt every time. Setup: the tokenizer is built and
// its prompt path warmed (50-70 ms of CPU for Llama 3.1).
import { blockHashes, initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../src/tokenize/cached-prompt-encoder.ts';
import { checkPoolTokenizer, promptRefs, type PromptRefs } from '../../src/tokenize/pool-refs.ts';
import { renderPromptSegments } from '../../src/tokenize/prompt-template.ts';
import type { EncodedPrompt } from '../../src/tokenize/types.ts';
import { getTokenizer } from '../../src/tokenize/tokenizer.ts';
import { warmPromptPath } from '../../src/tokenize/warm-code.ts';
import { MODEL_NAMES, loadReferenceTokenizers, modelDir, referenceTokenizer, type ModelName, type ReferenceTokenizer } from '../helpers/model-tokenizers.ts';
import type { CompletionRequest } from './completion-request.ts';

export type PromptTokens = EncodedPrompt;
export type TokenizerImpl = 'gateway' | 'reference';

/** 32 MiB of segment tokens and prefix hashes per mock process. */
const CACHE_BYTES = 32 * 1024 * 1024;
let encoder: CachedPromptEncoder | null = null;
let refs: PromptRefs = { tokenizer: 'llama3', template: 'llama3.1' };
let reference: ReferenceTokenizer | null = null;

/** The @lenml package holding the directory (the reference has no other tokenizers); Llama 3.1's for the built-in. */
function referenceModel(tokenizerDir: string | undefined): ModelName {
  if (tokenizerDir === undefined) return 'llama3_1';
  const name = MODEL_NAMES.find((n) => modelDir(n) === tokenizerDir);
  if (name === undefined) throw new Error(`--tokenizer-impl reference needs one of the @lenml tokenizer directories (${MODEL_NAMES.map(modelDir).join(', ')}), got ${tokenizerDir}`);
  return name;
}

/**
 * Builds the tokenizer (Llama 3 unless `tokenizerDir` names a Hugging Face tokenizer directory: 1-10 s for the
 * large vocabularies) and the WASM hasher, once per process; await before promptTokens(). Rejects with a
 * message naming the problem when the directory or its chat template does not load.
 */
export async function initPromptTokens(tokenizerDir?: string, impl: TokenizerImpl = 'gateway'): Promise<void> {
  await initBlockHasher();
  if (encoder !== null && (impl === 'reference') !== (reference !== null)) throw new Error('this process\'s mock replicas already count with another --tokenizer-impl: start this one in its own process');
  if (tokenizerDir !== undefined) {
    const pool = { tokenizer: { path: tokenizerDir }, chat_template: 'auto' };
    checkPoolTokenizer(pool);
    const next = promptRefs(pool);
    // The encoder is per process: two in-process replicas must not count with different models.
    if (encoder !== null && next.tokenizer !== refs.tokenizer) throw new Error(`this process's mock replicas already use ${refs.tokenizer}: start a ${tokenizerDir} replica in its own process (npm run mock -- --tokenizer DIR)`);
    refs = next;
  } else if (encoder !== null && refs.tokenizer !== 'llama3') {
    throw new Error(`this process's mock replicas already use ${refs.tokenizer}: start a Llama replica in its own process`);
  }
  getTokenizer(refs.tokenizer);
  if (impl === 'reference' && reference === null) {
    const name = referenceModel(tokenizerDir);
    await loadReferenceTokenizers(name);
    reference = referenceTokenizer(name);
  }
  if (encoder === null) {
    encoder = new CachedPromptEncoder(CACHE_BYTES);
    // The prompt path optimised by V8 before the first request (src/tokenize/warm-code.ts): a cold mock spends
    // 20-30 ms of CPU on each of its first distinct ~1,500-token prompts, and on a machine that also runs the
    // gateway that CPU is taken from it (the overload demo's burst: the fleet used 270-340 ms of CPU while
    // the gateway answered its 429s, 80-140 ms once warm). A GPU server would not share the gateway's cores.
    warmPromptPath([refs]);
  }
}

/** The reference's ids: the rendered chat prompt without added specials, a completion prompt with them. */
function referenceTokens(ref: ReferenceTokenizer, req: CompletionRequest): Uint32Array {
  if (req.kind === 'chat') {
    const text = renderPromptSegments(refs.template, req.messages, req.tools, getTokenizer(refs.tokenizer), req.chat ?? null).join('');
    return Uint32Array.from(ref.encode(text, { add_special_tokens: false }));
  }
  const prompt = req.prompt ?? '';
  return typeof prompt === 'string' ? Uint32Array.from(ref.encode(prompt, { add_special_tokens: true })) : Uint32Array.from(prompt);
}

/** Throws ChatTemplateError (src/tokenize/chat-template.ts) for messages the template rejects: a 400. */
export function promptTokens(req: CompletionRequest, blockSize: number, adapter: string | null): PromptTokens {
  if (encoder === null) throw new Error('initPromptTokens() must be awaited first');
  if (reference !== null) {
    const tokens = referenceTokens(reference, req);
    return { tokens, blockHashes: blockHashes(tokens, blockSize, adapter) };
  }
  return encoder.encode({
    tokenizer: refs.tokenizer, template: refs.template, blockSize, kind: req.kind,
    messages: req.messages, tools: req.tools, chat: req.chat ?? null, prompt: req.prompt, adapter,
  });
}
