// overload: when one tenant bursts far past its limits, does it get 429s with an honest Retry-After, and
// nothing else fails? Phase 1 sends `--rate` requests per second open loop for `--seconds` from one tenant
// (token bucket `--tokens-per-second` / `--burst-tokens`, `--max-inflight`) and counts answers by status and
// code: 429s with and without Retry-After, any 5xx or transport failure. Phase 2 checks Retry-After's honesty
// on a quiet gateway, `--probes` times: requests back to back until a 429 says "retry after R s"; a probe at
// R − 1 s must still be refused (the header did not overstate the wait; only when R ≥ 2) and one at R s must
// be accepted (it did not understate it). R − 1 s is timed from when the client got the 429, later than the
// gateway computed R, so on a busy machine an early probe can pass within the header's 1 s rounding.
// Flags: --rate 200, --seconds 5, --max-tokens 64, --stream, --tokens-per-second 100, --burst-tokens 2000,
// --max-inflight 4, --probes 3, --replicas 2, --time-scale 0.01, --keep-logs; or --url URL --api-key KEY
// --model ID against a running gateway (the key's tenant must be small: the demo's sk-demo-tiny).
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchScenario } from '../../types.ts';
import { chatBody } from '../openai-bodies.ts';
import { arrivalOffsetsMs } from '../arrivals.ts';
import { runOpenLoop } from '../open-loop.ts';
import type { RequestRecord, ScheduledRequest } from '../open-loop.ts';
import { wordsText } from '../seed-mix-requests.ts';
import { API_KEY, MODEL, startStack } from '../stack.ts';

/** One request, now, through the open-loop client (so it is timed and parsed the same way). */
async function one(url: string, apiKey: string, body: string, stream: boolean): Promise<RequestRecord> {
  const res = await runOpenLoop({ origins: [url], path: '/v1/chat/completions', headers: { authorization: `Bearer ${apiKey}` }, schedule: [{ atMs: 0, body, stream }] });
  return res.records[0]!;
}

const overload: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      rate: { type: 'string', default: '200' }, seconds: { type: 'string', default: '5' },
      'max-tokens': { type: 'string', default: '64' }, stream: { type: 'boolean', default: false },
      'tokens-per-second': { type: 'string', default: '100' }, 'burst-tokens': { type: 'string', default: '2000' },
      'max-inflight': { type: 'string', default: '4' }, probes: { type: 'string', default: '3' },
      replicas: { type: 'string', default: '2' }, 'time-scale': { type: 'string', default: '0.01' },
      'keep-logs': { type: 'boolean', default: false },
      url: { type: 'string' }, 'api-key': { type: 'string' }, model: { type: 'string' },
    },
  });
  const apiKey = values['api-key'] ?? API_KEY;
  const model = values.model ?? MODEL;
  const stack = await startStack({
    url: values.url, replicas: Number(values.replicas), profile: 'tiny', timeScale: Number(values['time-scale']),
    mockArgs: ['--max-num-seqs', '256', '--num-gpu-blocks', '8192'], keepLogs: values['keep-logs'],
    gatewayConfig: {
      tenants: [{
        name: 'burst', api_keys: [{ sha256: createHash('sha256').update(apiKey).digest('hex') }],
        tokens_per_second: Number(values['tokens-per-second']), burst_tokens: Number(values['burst-tokens']),
        max_inflight: Number(values['max-inflight']), sla_tier: 'standard',
      }],
    },
  });
  const stream = values.stream;
  // A ~100-token question: small next to the bucket, so the bucket admits a few per second.
  const body = chatBody({ model, maxTokens: Number(values['max-tokens']), stream, prompt: wordsText(42, 100) });
  const rows: Array<Array<string | number>> = [];
  const probes: Array<{ retryAfterS: number; early: number | null; onTime: number | null }> = [];
  let burst: RequestRecord[] = [];
  try {
    const offsets = arrivalOffsetsMs('constant', Number(values.rate), Number(values.seconds) * 1000);
    const schedule = function* (): Generator<ScheduledRequest> { for (const atMs of offsets) yield { atMs, body, stream }; };
    burst = (await runOpenLoop({ origins: [stack.gatewayUrl], path: '/v1/chat/completions', headers: { authorization: `Bearer ${apiKey}` }, schedule: schedule() })).records;
    for (let p = 0; p < Number(values.probes); p++) {
      let first: RequestRecord | null = null;
      for (let i = 0; i < 200 && first === null; i++) {
        const r = await one(stack.gatewayUrl, apiKey, body, stream);
        if (r.status === 429 && r.retryAfter !== null) first = r;
      }
      if (first === null) throw new Error('no 429 with Retry-After after 200 back-to-back requests: is the tenant limited?');
      const gotAt = performance.now();
      const retryAfterS = Number(first.retryAfter);
      let early: number | null = null;
      if (retryAfterS >= 2) {
        await sleep(Math.max(0, gotAt + (retryAfterS - 1) * 1000 - performance.now()));
        early = (await one(stack.gatewayUrl, apiKey, body, stream)).status;
      }
      // An early probe that was accepted spent the tokens the on-time one was promised: nothing left to check.
      let onTime: number | null = null;
      if (early !== 200) {
        await sleep(Math.max(0, gotAt + retryAfterS * 1000 + 20 - performance.now()));
        onTime = (await one(stack.gatewayUrl, apiKey, body, stream)).status;
      }
      probes.push({ retryAfterS, early, onTime });
      console.error(`probe ${p + 1}: Retry-After ${retryAfterS} s, at R−1 s: ${early ?? '-'}, at R s: ${onTime ?? '-'}`);
    }
  } finally {
    await stack.stop();
  }
  const count = (pred: (r: RequestRecord) => boolean): number => burst.filter(pred).length;
  const codes: Record<string, number> = {};
  for (const r of burst) if (r.status === 429) codes[r.errorCode ?? 'none'] = (codes[r.errorCode ?? 'none'] ?? 0) + 1;
  const ra = burst.filter((r) => r.status === 429 && r.retryAfter !== null).map((r) => Number(r.retryAfter));
  rows.push(['burst', burst.length, count((r) => r.status === 200 && r.error === null), count((r) => r.status === 429),
    count((r) => r.status === 429 && r.retryAfter !== null && /^\d+$/.test(r.retryAfter) && Number(r.retryAfter) >= 1),
    ra.length ? `${Math.min(...ra)}-${Math.max(...ra)}` : '-', Object.entries(codes).map(([c, n]) => `${c} ${n}`).join(', '),
    count((r) => r.status >= 500), count((r) => r.status === 0 || (r.error !== null && r.status === 200)),
    count((r) => r.status !== 200 && r.status !== 429 && r.status !== 0 && r.status < 500)]);
  const earlyProbes = probes.filter((p) => p.early !== null);
  return {
    title: `load overload: ${values.rate} req/s for ${values.seconds} s from one tenant`,
    columns: ['phase', 'requests', '200', '429', '429 with Retry-After ≥ 1 s', 'Retry-After range s', '429 codes', '5xx', 'transport/stream errors', 'other 4xx'],
    rows,
    notes: [
      `Retry-After honesty (quiet gateway, ${probes.length} probes): accepted at R s ${probes.filter((p) => p.onTime === 200).length}/${probes.filter((p) => p.onTime !== null).length}; `
      + `still refused at R − 1 s ${earlyProbes.filter((p) => p.early === 429).length}/${earlyProbes.length} (R ≥ 2 only); R = ${probes.map((p) => p.retryAfterS).join(', ')} s`,
      values.url ? `target ${values.url}` : `tenant: ${values['tokens-per-second']} tokens/s, burst ${values['burst-tokens']}, ${values['max-inflight']} in flight; ${values.replicas} tiny mocks`,
    ],
    extra: { probes },
  };
};

export default overload;
