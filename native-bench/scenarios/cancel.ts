// Cancellation scenario: how long after a client hangs up does the replica's engine abort the request? Measured
// for a stream that is generating and for a request still queued on the replica, against the real gateway
// (in this process, uWS on loopback) and an in-process mock replica that runs one sequence at a time, so the
// queued case exists. The engine state is read directly (no HTTP hop), polled every 1 ms.
// Pass rule: the median of each case under --limit-ms (default 100).
// Thread: bench main thread (gateway acceptor, mock replica and client share it; the poller and the tokenizer
// pool are their own threads, as in production).
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { ALPHA_KEY, startStack, waitFor } from '../../test/helpers/start-gateway.ts';
import { openStream } from '../../test/integration/mock-replica/http-client.ts';

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

const cancel: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      trials: { type: 'string', default: '30' },
      'limit-ms': { type: 'string', default: '100' },
    },
  });
  const trials = Number(values.trials);
  const limitMs = Number(values['limit-ms']);
  const stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny', maxNumSeqs: 1 }] }],
  });
  const replica = stack.replicas.get('8b-1')!;
  const phaseOf = (id: string): string | undefined => replica.engine.snapshot().requests.find((r) => r.id === id)?.state;
  const auth = { authorization: `Bearer ${ALPHA_KEY}` };
  const body = (content: string, maxTokens: number): Record<string, unknown> =>
    ({ model: 'gpt-fast', messages: [{ role: 'user', content }], max_tokens: maxTokens, stream: true, ignore_eos: true });
  const streaming: number[] = [];
  const queued: number[] = [];
  try {
    await fetch(`${replica.url}/_mock/faults`, { method: 'POST', body: JSON.stringify({ mode: 'slow', delay_ms: 20 }) });
    for (let i = 0; i < trials; i++) {
      // a generating stream, hung up after a few frames
      const id = `bench-stream-${i}`;
      const s = openStream(stack.url, '/v1/chat/completions', body('long story', 500), { ...auth, 'x-request-id': id });
      await s.waitFrames(4);
      let t0 = performance.now();
      s.destroy();
      await waitFor(() => phaseOf(id) === 'aborted', 10_000, 1);
      streaming.push(performance.now() - t0);

      // a request queued behind it, hung up while waiting
      const busy = openStream(stack.url, '/v1/chat/completions', body('occupy', 300), { ...auth, 'x-request-id': `bench-busy-${i}` });
      await busy.waitFrames(2);
      const qid = `bench-queued-${i}`;
      const q = openStream(stack.url, '/v1/chat/completions', body('wait', 5), { ...auth, 'x-request-id': qid });
      await waitFor(() => phaseOf(qid) === 'waiting', 10_000, 1);
      t0 = performance.now();
      q.destroy();
      await waitFor(() => phaseOf(qid) === 'aborted', 10_000, 1);
      queued.push(performance.now() - t0);
      busy.destroy();
      await waitFor(() => replica.engine.snapshot().requests.every((r) => r.state !== 'running' && r.state !== 'waiting'), 10_000, 5);
    }
  } finally {
    await stack.close();
  }
  const rows: Array<Array<string | number>> = [];
  const failures: string[] = [];
  for (const [name, xs] of [['streaming', streaming], ['queued on the replica', queued]] as const) {
    const s = [...xs].sort((a, b) => a - b);
    rows.push([name, s.length, pct(s, 0).toFixed(1), pct(s, 0.5).toFixed(1), pct(s, 0.95).toFixed(1), pct(s, 1).toFixed(1)]);
    if (pct(s, 0.5) >= limitMs) failures.push(`${name}: median ${pct(s, 0.5).toFixed(1)} ms >= ${limitMs} ms`);
  }
  return {
    title: 'Client hang-up to replica abort (ms)',
    columns: ['case', 'trials', 'min', 'p50', 'p95', 'max'],
    rows,
    notes: [`pass rule: median under ${limitMs} ms in each case; the mock replica emits a token every 20 ms`],
    extra: { streaming, queued },
    ...(failures.length > 0 ? { failed: failures.join('; ') } : {}),
  };
};

export default cancel;
