// One-off generator (not imported at run time): writes src/tokenize/data/llama3.tiktoken.gz, the Llama 3
// BPE ranks in tiktoken's "base64(token bytes) rank" format, from the reference package llama3-tokenizer-js
// (a devDependency). Run: `node --import tsx src/tokenize/data/build-llama3-ranks.ts`.
// Llama 3's vocabulary is a tiktoken vocabulary: token id == merge rank, so the ranks file is the id-ordered
// list of token byte strings. test/unit/tokenize/llama3-ranks.test.ts checks the committed file against it.
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import reference from 'llama3-tokenizer-js';
import { LLAMA3_ORDINARY_VOCAB_SIZE } from '../tokenizer.ts';
import { tiktokenRanksText } from './byte-level.ts';

const out = fileURLToPath(new URL('./llama3.tiktoken.gz', import.meta.url));
writeFileSync(out, gzipSync(tiktokenRanksText(reference.vocabById, LLAMA3_ORDINARY_VOCAB_SIZE), { level: 9 }));
console.log(`wrote ${out}`);
