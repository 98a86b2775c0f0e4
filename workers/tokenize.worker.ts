// Piscina entry for tokenize tasks: renders the chat template, tokenizes, and hashes the blocks.
// Thread: a Piscina worker thread (started by src/tokenize/pool.ts at setup). Hot path: yes, for prompts
// above tokenizer.inline_max_chars. All logic lives in src/tokenize/worker-task.ts; this file only
// awaits its setup (WASM hasher) before Piscina hands it the first task.
import { createTokenizeHandler } from '../src/tokenize/worker-task.ts';

export default await createTokenizeHandler();
