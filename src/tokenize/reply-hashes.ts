// Block hashes of a finished reply, continuing its prompt's chain: what the replica's prefix cache holds after
// the request, since vLLM caches every full block whose KV it computed, and it computes the prompt and every
// sampled token but the last (docs/vllm-facts.md "Prefix-cache block hashing"). The router extends its
// prefix index with them, so the conversation's next turn, whose prompt carries this reply, is routed to the
// replica that holds it.
// The reply's ids: its text tokenized as the next request's prompt will carry it: in a chat turn the Llama 3.1
// template trims the content (ChatML keeps it whole) and follows it with its end token; a completions prompt
// is extended by the text. Those are the ids the replica sampled whenever the model's output was canonical
// BPE (always for the mock; a real model's rarely differs, and then the index over-states that replica's
// blocks until its reported cached_tokens corrects them).
// The end token needs no tokenizing: a natural stop's last sampled token is EOS (<|eot_id|>, which the next
// turn's template also writes), a 'length' finish's is the reply's last token; as the last sampled token's
// KV is never computed, no cached block holds the EOS, and a 'length' reply's last token is left out too.
// Thread: any (the acceptor inline; a tokenize worker for replies above tokenizer.inline_max_chars). Cost:
// tokenizing the reply (repeated words hit the tokenizer's piece cache) plus one xxhash64 per full block.
import { blockHashesOfParts } from './block-hash.ts';
import { pythonStrip } from './chat-template.ts';
import { getTokenizer } from './tokenizer.ts';
import type { ReplyWork } from './types.ts';

/** The text of the reply as the next request's prompt carries it. */
export function replyTextInPrompt(work: Pick<ReplyWork, 'kind' | 'template' | 'replyText'>): string {
  return work.kind === 'chat' && work.template === 'llama3.1' ? pythonStrip(work.replyText) : work.replyText;
}

/**
 * Hashes of the full blocks after the prompt's full blocks that the replica computed: over tailTokens and the
 * reply's ids, the last id left out for a 'length' finish. Block i of the result is block
 * floor(promptTokens / blockSize) + i of the next turn's prompt.
 */
export function replyBlockHashes(work: ReplyWork, shouldStop: (() => boolean) | null = null): Float64Array {
  const ids = getTokenizer(work.tokenizer).encodeWithSpecials(replyTextInPrompt(work), shouldStop);
  const computed = work.finishReason === 'length' && ids.length > 0 ? ids.subarray(0, ids.length - 1) : ids;
  return blockHashesOfParts([work.tailTokens, computed], 0, work.blockSize, work.adapter, work.parentHash);
}
