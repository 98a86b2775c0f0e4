// The types the tokenize folder's modules share (tokenizer names, the text-tokenizer interface, chat
// messages, the work a prompt encoder does) and the error an aborted tokenize rejects with. Every file here
// imports them from this one module, which imports nothing, so the folder's modules form no cycle.
// Thread: any. Types only, plus one small error class.

/** The built-in tokenizers. */
export type TokenizerName = 'llama3' | 'cl100k_base' | 'o200k_base';

/**
 * What a pool's prompts are tokenized with: a built-in name, or the absolute path of a Hugging Face tokenizer
 * directory (it starts with "/"). A plain string, so it crosses to workers as is.
 */
export type TokenizerRef = string;

/**
 * A pool's chat template: a built-in name ('llama3.1', 'chatml'), or the absolute path of the file holding a
 * Jinja template (a .jinja file, or a .json file whose "chat_template" field holds it).
 */
export type ChatTemplateRef = string;

/**
 * The special tokens a chat template sees by name: transformers passes its whole special_tokens_map to render()
 * (bos/eos/unk/sep/pad/cls/mask tokens that are set, additional_special_tokens, and the model's named
 * extra_special_tokens such as Gemma 3's boi_token and image_token).
 */
export interface SpecialTokensMap {
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  sep_token?: string;
  pad_token?: string;
  cls_token?: string;
  mask_token?: string;
  additional_special_tokens?: string[];
  [extra: string]: string | string[] | undefined;
}

export interface TextTokenizer {
  readonly name: TokenizerRef;
  /** Special-token text (e.g. "<|eot_id|>") is encoded as plain text. */
  encodeOrdinary(text: string): Uint32Array;
  /**
   * Every special token's text becomes its special id, as HF tokenizers do for added special tokens.
   * `shouldStop` is polled during long inputs; when it returns true the call throws an AbortError.
   */
  encodeWithSpecials(text: string, shouldStop?: (() => boolean) | null): Uint32Array;
  decode(ids: ArrayLike<number>): string;
  /** Id of the begin-of-sequence token a completions prompt starts with, or null when the model adds none. */
  readonly bosId: number | null;
  /** Special token text → id, for the chat templates. */
  specialId(text: string): number;
  /** bos_token / eos_token / … as a Jinja chat template sees them. */
  readonly specialTokens: SpecialTokensMap;
  /**
   * Finds the added tokens before which a rendered prompt can be cut into independently tokenized segments:
   * tokens(text) == concat(tokens(piece)) at those cuts. Null: never cut.
   */
  readonly segmentCut: TokenScanner | null;
}

/** Finds the next of a set of tokens in a text, leftmost then longest (added-tokens.ts implements it). */
export interface TokenScanner {
  next(text: string, from: number): { start: number; end: number; token: string } | null;
}

export interface ChatContentPart {
  type: string;
  text?: string;
}

export interface ChatToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments?: string | Record<string, unknown> | null };
}

export interface ChatMessage {
  role: string;
  content?: string | ChatContentPart[] | null;
  tool_calls?: ChatToolCall[] | null;
  name?: string;
  tool_call_id?: string;
}

export type ChatTemplateName = 'llama3.1' | 'chatml';

/** A chat request's template options, as vLLM takes them from the request body. */
export interface ChatOptions {
  /** `add_generation_prompt` (vLLM's default: true). */
  addGenerationPrompt?: boolean;
  /** `continue_final_message` (default false): the prompt ends inside the last message. */
  continueFinalMessage?: boolean;
  /** `chat_template_kwargs`: extra template variables (e.g. Qwen3's enable_thinking). */
  templateKwargs?: Record<string, unknown> | null;
}

/**
 * Why a prompt's count is an estimate rather than vLLM's exact prompt (the gateway_template_fallback_total
 * `reason`): our renderer lacks a feature the template uses (`unsupported`), the template raises an error
 * Python would raise too (`python_error`; vLLM then answers 400 itself), another render failure
 * (`render_error`), or media whose placeholder expansion is not modelled for the model (`media_estimate`).
 */
export type FallbackReason = 'unsupported' | 'python_error' | 'render_error' | 'media_estimate';

export interface PromptWork {
  tokenizer: TokenizerRef;
  template: ChatTemplateRef;
  blockSize: number;
  kind: 'chat' | 'completion';
  messages?: readonly ChatMessage[];
  /** The request's `tools` (chat only); null or absent when it sent none. */
  tools?: readonly unknown[] | null;
  /** Template options (chat on a Jinja template only); null or absent: vLLM's defaults. */
  chat?: ChatOptions | null;
  prompt?: string | readonly number[];
  /** LoRA adapter name: the block hashes' extra key. */
  adapter: string | null;
}

export interface EncodedPrompt {
  tokens: Uint32Array;
  blockHashes: Float64Array;
}

/**
 * What routing and quotas need: the count and the hashes, without the token ids themselves; and the ids after
 * the last full block, so the reply's blocks can be hashed later, continuing the chain (reply-hashes.ts).
 */
export interface MeasuredPrompt {
  promptTokens: number;
  blockHashes: Float64Array;
  /** The prompt's last promptTokens mod blockSize ids (fewer than blockSize; a copy, not a view). */
  tailTokens: Uint32Array;
  /**
   * Set when the count is an estimate (the template could not be rendered as vLLM renders it): no block hashes
   * and no tail then, so routing takes no prefix affinity from it.
   */
  estimated?: FallbackReason | null;
}

/** A finished reply, to hash its blocks after its prompt's (reply-hashes.ts). */
export interface ReplyWork {
  tokenizer: TokenizerRef;
  template: ChatTemplateRef;
  blockSize: number;
  kind: 'chat' | 'completion';
  /** LoRA adapter name: the block hashes' extra key, as for the prompt. */
  adapter: string | null;
  /** Hash of the prompt's last full block; null when the prompt has none. */
  parentHash: number | null;
  /** The prompt's ids after its last full block (MeasuredPrompt.tailTokens). */
  tailTokens: ArrayLike<number>;
  /** The reply's text as the client received it. */
  replyText: string;
  finishReason: 'stop' | 'length';
}

/** What an aborted tokenize rejects with: `err.name === 'AbortError'`, as fetch and undici use. */
export class AbortError extends Error {
  constructor(message = 'tokenize task aborted') {
    super(message);
    this.name = 'AbortError';
  }
}
