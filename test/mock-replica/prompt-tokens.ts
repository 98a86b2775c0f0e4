// Turns a parsed completion request into prompt token ids and chained block hashes for the engine.
// Thread: main (mock process). Per request, once; the cost is tokenization of the prompt.
//
// INTERIM: until src/tokenize/ lands this uses llama3-tokenizer-js directly with the Llama 3.1 template of the
// contract, and an FNV-1a chain as block hash. It will be replaced by src/tokenize/prompt.ts and
// src/tokenize/block-hash.ts so the mock and the gateway agree on token counts and hashes.
import llama3Tokenizer from 'llama3-tokenizer-js';
import type { CompletionRequest } from './completion-request.ts';

const BOS = 128000;
const START_HEADER = 128006;
const END_HEADER = 128007;
const EOT = 128009;
const DATE_PREAMBLE = 'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n';

export interface PromptTokens {
  tokens: number[];
  blockHashes: Uint32Array;
}

function enc(text: string): number[] {
  return llama3Tokenizer.encode(text, { bos: false, eos: false });
}

function header(out: number[], role: string): void {
  out.push(START_HEADER, ...enc(role), END_HEADER, ...enc('\n\n'));
}

function chatTokens(req: CompletionRequest): number[] {
  const out = [BOS];
  let i = 0;
  let system = '';
  if (req.messages[0]?.role === 'system') {
    system = req.messages[0].content.trim();
    i = 1;
  }
  header(out, 'system');
  out.push(...enc(DATE_PREAMBLE + system), EOT);
  for (; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    header(out, m.role);
    out.push(...enc(m.content.trim()), EOT);
  }
  if (req.addGenerationPrompt) header(out, 'assistant');
  return out;
}

export async function initPromptTokens(): Promise<void> {
  // The real tokenizer needs async init (wasm); the interim one does not.
}

export function promptTokens(req: CompletionRequest, blockSize: number, adapter: string | null): PromptTokens {
  const tokens = req.kind === 'chat' ? chatTokens(req) : typeof req.prompt === 'string' ? [BOS, ...enc(req.prompt)] : req.prompt;
  const full = Math.floor(tokens.length / blockSize);
  const hashes = new Uint32Array(full);
  let parent = 0x811c9dc5;
  if (adapter !== null) for (let c = 0; c < adapter.length; c++) parent = Math.imul(parent ^ adapter.charCodeAt(c), 0x01000193);
  for (let b = 0; b < full; b++) {
    let h = parent;
    for (let t = b * blockSize; t < (b + 1) * blockSize; t++) h = Math.imul(h ^ tokens[t]!, 0x01000193);
    hashes[b] = h >>> 0;
    parent = h >>> 0;
  }
  return { tokens, blockHashes: hashes };
}
