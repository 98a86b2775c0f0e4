// The types the tokenize folder's modules share (tokenizer names, the text-tokenizer interface, chat
// messages, the work a prompt encoder does) and the error an aborted tokenize rejects with. Every file here
// imports them from this one module, which imports nothing, so the folder's modules form no cycle.
// Thread: any. Types only, plus one small error class.

export type TokenizerName = 'llama3' | 'cl100k_base' | 'o200k_base';

export interface TextTokenizer {
  readonly name: TokenizerName;
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

export interface PromptWork {
  tokenizer: TokenizerName;
  template: ChatTemplateName;
  blockSize: number;
  kind: 'chat' | 'completion';
  messages?: readonly ChatMessage[];
  /** The request's `tools` (chat only); null or absent when it sent none. */
  tools?: readonly unknown[] | null;
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
}

/** A finished reply, to hash its blocks after its prompt's (reply-hashes.ts). */
export interface ReplyWork {
  tokenizer: TokenizerName;
  template: ChatTemplateName;
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
