// Whether a request's attempts learn its reply (UpstreamJob.replies) is fixed by setup and the request: a
// policy with a `finished` hook and a tokenizer that hashes replies, for a single-choice request; never for
// round-robin, and never when n > 1 interleaves several replies in one stream. The job then hashes the reply
// on the request's own pool, adapter and prompt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load.ts';
import { UpstreamJob } from '../../../src/pipeline/dispatch.ts';
import { parseBody, type ParsedBody } from '../../../src/pipeline/parse-body.ts';
import { RequestContext } from '../../../src/pipeline/request-context.ts';
import type { Services } from '../../../src/pipeline/services.ts';
import type { ClientSink } from '../../../src/relay/client-sink.ts';
import type { ReplyHashRequest } from '../../../src/tokenize/prompt-tokenizer.ts';

const cfg = parseConfig({
  pools: [{ id: 'p', model: 'm', replicas: [{ id: 'r1', url: 'http://127.0.0.1:9' }] }],
  tenants: [{ name: 't', api_keys: [{ sha256: 'a'.repeat(64) }], tokens_per_second: 1, burst_tokens: 10, max_inflight: 1 }],
});
const pool = cfg.pools[0]!;
const asked: ReplyHashRequest[] = [];
const tokenizer = {
  measure: () => ({ promptTokens: 20, blockHashes: new Float64Array([5]), tailTokens: new Uint32Array([1, 2, 3, 4]) }),
  replyHashes: (req: ReplyHashRequest) => {
    asked.push(req);
    return Promise.resolve(new Float64Array([9]));
  },
};
const learning = { policy: { name: 'learning', pick: () => 0, describe: () => '', finished() {} } };
const roundRobin = { policy: { name: 'round-robin', pick: () => 0, describe: () => '' } };

function job(router: unknown, body: Record<string, unknown>): UpstreamJob {
  const svc = { cfg, tokenizer, router, registry: { ledger: null }, upstream: null } as unknown as Services;
  const ctx = new RequestContext('rid', 'chat', {} as ClientSink, 0);
  const parsed = parseBody('chat', Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...body }))) as ParsedBody;
  return new UpstreamJob(svc, ctx, parsed, { pool, adapter: 'acme' }, { promptTokens: 20, blockHashes: new Float64Array([5]), tailTokens: new Uint32Array([1, 2, 3, 4]) }, 16, []);
}

test('a learning policy and one choice: the job hashes the reply after its own prompt, pool and adapter', async () => {
  const j = job(learning, {});
  assert.equal(j.replies, j);
  assert.deepEqual(Array.from(await j.hash('Sure.', 'stop')), [9]);
  const req = asked.at(-1)!;
  assert.equal(req.pool, pool);
  assert.equal(req.kind, 'chat');
  assert.equal(req.adapter, 'acme');
  assert.deepEqual(Array.from(req.prompt.blockHashes), [5]);
  assert.deepEqual(Array.from(req.prompt.tailTokens), [1, 2, 3, 4]);
  assert.deepEqual([req.replyText, req.finishReason], ['Sure.', 'stop']);
});

test('no reply learning for a policy without a finished hook, or for n > 1', () => {
  assert.equal(job(roundRobin, {}).replies, null);
  assert.equal(job(learning, { n: 2 }).replies, null);
});
