// Options of one mock replica (the flags of `npm run mock`) and their defaults. Thread: main (mock
// process). Setup only.
import type { EngineOptions, ProfileName } from './engine/types.ts';

export const PROFILE_NAMES: readonly ProfileName[] = ['llama-8b-a100', 'llama-70b-tp2-a100', 'tiny'];

export interface MockOptions extends EngineOptions {
  /** Listen port; 0 = any free port (default 0). */
  port?: number;
  /** Listen host (default 127.0.0.1). */
  host?: string;
  /** Served model name (default meta-llama/Llama-3.1-8B-Instruct). */
  model?: string;
  /** Context length (default: the profile's, 131072 for 8B, 16384 for 70B TP2, 2048 for tiny). */
  maxModelLen?: number;
  /** Seed mixed into every output (default 0). */
  seed?: number;
  /** Also emit the pre-V1-rename metric names (gpu_*, time_per_output_token). */
  legacyMetrics?: boolean;
  /**
   * A Hugging Face tokenizer directory: prompts are counted, cached and hashed with it and its chat template, as
   * vLLM would for that model (default: Llama 3.1's tokenizer and template).
   */
  tokenizer?: string;
  /**
   * Whose code counts the prompt's tokens: 'gateway' (default: the gateway's own tokenizers, so the counts agree
   * by construction) or 'reference' (@lenml/tokenizers, code the gateway does not share: a tokenization
   * divergence then shows up as a gap between the gateway's predicted and the replica's reported cached tokens).
   */
  tokenizerImpl?: 'gateway' | 'reference';
  /** Expose vllm:lora_requests_info even with no adapter (true when maxLoras or loras are given). */
  enableLora?: boolean;
  /** Publish vLLM's KV events: PUB bound at this tcp://HOST:PORT, replay ROUTER at the next port. */
  kvEvents?: string;
}

export const DEFAULT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
