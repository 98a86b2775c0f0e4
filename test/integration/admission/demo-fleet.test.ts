// The shipped config/demo.yaml as a user meets it: its mock replicas (each pool's profile, real time, in this
// process) and a gateway on that file, only the ports changed to free ones. On an idle fleet every pool
// serves (gpt-smart, gpt-fast, a LoRA adapter); tenant tiny's two concurrent streams to gpt-smart are both
// served, and alpha's four (two per 70B replica: the TPOT margin scaled to the pool); replicas that sit idle
// after long prompts take the next request though the prefill they just did still weighs in the model
// (work conservation), even before a scrape shows them idle; those long prompts, out of the 400 ms TTFT's reach on an idle 70B replica, are counted
// as infeasible; the startup warning names the 70B pool's unreachable targets; and a burst that the 70B pool
// cannot serve at once is still partly shed at arrival.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../../../src/config/load.ts';
import { startGateway, type Gateway } from '../../../src/gateway.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { fleetReplicaArgs } from '../../mock-replica/fleet.ts';
import { parseMockArgs } from '../../mock-replica/cli.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { waitFor } from '../../helpers/start-gateway.ts';
import { LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';
import { ReplicaRow } from '../../../src/registry/replica-table.ts';

const DEMO = fileURLToPath(new URL('../../../config/demo.yaml', import.meta.url));
const ALPHA = 'sk-demo-alpha';
const TINY = 'sk-demo-tiny';

let gateway: Gateway;
let dir: string;
const replicas: MockReplica[] = [];
const warnings: Array<{ pool?: string; tier?: string; msg: string }> = [];

before(async () => {
  let text = readFileSync(DEMO, 'utf8');
  for (const r of fleetReplicaArgs(loadConfigFile(DEMO, {}))) {
    const args = [...r.args];
    args[args.indexOf('--port') + 1] = '0';
    const mock = await startMockReplica(parseMockArgs(args));
    replicas.push(mock);
    text = text.replaceAll(`"${r.url}"`, `"${mock.url}"`);
  }
  text = text.replace(/^(\s+port:) 8080$/m, '$1 0');
  dir = mkdtempSync(join(tmpdir(), 'demo-fleet-'));
  const path = join(dir, 'demo.yaml');
  writeFileSync(path, text);
  const logger = createLogger('warn', {
    destination: { write: (line: string) => { warnings.push(JSON.parse(line) as { pool?: string; tier?: string; msg: string }); } },
  });
  gateway = await startGateway(loadConfigFile(path, {}), { logger, metricsChannel: `demo-fleet-${process.pid}` });
  await waitFor(async () => (await fetch(`${gateway.url}/readyz`)).status === 200, 15_000, 25);
});

after(async () => {
  await gateway?.close(1000);
  await Promise.all(replicas.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
});

interface Reply { status: number; retryAfter: string | null; body: string }

async function chat(key: string, model: string, content: string, maxTokens = 4, ignoreEos = false): Promise<Reply> {
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: maxTokens, stream: true, ...(ignoreEos ? { ignore_eos: true } : {}) }),
  });
  const body = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
}

const served = (r: Reply): boolean => r.status === 200 && r.body.includes('data: [DONE]');

async function metric(line: RegExp): Promise<number> {
  const m = line.exec(await (await fetch(`${gateway.url}/metrics`)).text());
  return m === null ? 0 : Number(m[1]);
}

/** Every replica idle again by the gateway's table and ledger: nothing in flight, a scrape showing nothing running or waiting. */
async function fleetIdle(): Promise<void> {
  const reg = gateway.registry;
  const row = new ReplicaRow();
  await waitFor(async () => {
    for (const pool of ['70b', '8b', 'lora']) {
      for (const slot of reg.candidates(pool)) {
        if (reg.ledger.get(slot, LEDGER_INFLIGHT) > 0 || !reg.readRow(slot, row) || row.running > 0 || row.waiting > 0) return null;
      }
    }
    return true;
  }, 10_000, 20);
}

void test('the startup warning names the 70B pool\'s targets an idle replica cannot meet, and what it reaches', () => {
  const reach = warnings.filter((w) => w.msg.includes('gateway_admission_infeasible_total'));
  assert.deepEqual(reach.map((w) => `${w.pool}/${w.tier}`).sort(), ['70b/batch', '70b/premium', '70b/standard']);
  const premium = reach.find((w) => w.tier === 'premium')!.msg;
  assert.match(premium, /TTFT target 400 ms is reached on an idle replica by prompts up to 836 tokens/);
  assert.match(premium, /TPOT target 50 ms is reached on an idle replica up to 14,399 tokens of context/);
});

void test('on an idle fleet every pool of the demo serves: gpt-smart, gpt-fast and a LoRA adapter', async () => {
  for (const model of ['gpt-smart', 'gpt-fast', 'acme-sql']) {
    const r = await chat(ALPHA, model, 'Count slowly to one hundred.');
    assert.ok(served(r), `${model}: ${r.status} ${r.body.slice(0, 300)}`);
  }
});

void test('two concurrent streams of tenant tiny (its limit is 2) to gpt-smart are both served', async () => {
  await fleetIdle();
  const rs = await Promise.all([0, 1].map((i) => chat(TINY, 'gpt-smart', `Stream ${i}: count slowly to ten.`)));
  for (const r of rs) assert.ok(served(r), `${r.status} ${r.body.slice(0, 300)}`);
});

void test('four concurrent short streams to gpt-smart are all served: two per 70B replica fit its TPOT limit', async () => {
  await fleetIdle();
  // 16 tokens each, said with ignore_eos (else the gateway forecasts the reply from the short ones it has seen
  // finish): a stream's slack, 15 gaps of the ~1.2 ms its target leaves above the 70B step, absorbs another
  // short prompt's prefill (a 4-token stream's 3 gaps would not: the per-stream rule holds it back).
  const rs = await Promise.all([0, 1, 2, 3].map((i) => chat(ALPHA, 'gpt-smart', `Stream ${i}: name a colour.`, 16, true)));
  for (const r of rs) assert.ok(served(r), `${r.status} ${r.body.slice(0, 300)}`);
});

void test('replicas idle after long prompts take the next request at once; the long prompts count as infeasible', async () => {
  await fleetIdle();
  const infeasible = /^gateway_admission_infeasible_total\{pool="70b",tier="premium",reason="prompt_length"\} (\d+)$/m;
  const before0 = await metric(infeasible);
  // ~1,000 tokens each: ~470 ms of prefill on an idle 70B replica, past premium's 400 ms TTFT wherever it runs.
  const long = (i: number): string => `Request ${i}. ${'The quick brown fox jumps over the lazy dog near the river bank. '.repeat(75)}`;
  const rs = await Promise.all([0, 1].map((i) => chat(ALPHA, 'gpt-smart', long(i), 2)));
  for (const r of rs) assert.ok(served(r), `long: ${r.status} ${r.body.slice(0, 300)}`);
  assert.equal(await metric(infeasible) - before0, 2, 'both counted as out of reach even idle');
  // Both replicas idle again, though the model still counts the prefill they just did (decaying over ~8 s).
  await fleetIdle();
  const next = await chat(ALPHA, 'gpt-smart', 'And now a short one.');
  assert.ok(served(next), `an idle replica refused: ${next.status} ${next.body.slice(0, 300)}`);
});

void test('a request sent the moment long prompts end is served: the replicas\' rows still show them, but only them', async () => {
  await fleetIdle();
  const long = (i: number): string => `Long ${i}. ${'A slow river winds past the old mill under a grey autumn sky. '.repeat(75)}`;
  const rs = await Promise.all([0, 1].map((i) => chat(ALPHA, 'gpt-smart', long(i), 2)));
  for (const r of rs) assert.ok(served(r), `long: ${r.status} ${r.body.slice(0, 300)}`);
  // No wait for a scrape: within 100 ms of the streams' end the rows still count them running, and the model
  // still weighs their prefill; everything the rows show was this gateway's and has ended, so both are idle.
  const next = await chat(ALPHA, 'gpt-smart', 'And now a short one, straight away.');
  assert.ok(served(next), `an idle replica refused: ${next.status} ${next.body.slice(0, 300)}`);
});

void test('a burst of 40 to gpt-smart: some served, the rest shed at arrival with a Retry-After', async () => {
  await fleetIdle();
  const arrival = /^gateway_admission_sheds_total\{pool="70b",when="arrival"\} (\d+)$/m;
  const before0 = await metric(arrival);
  const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => chat(ALPHA, 'gpt-smart', `Burst ${i}: say hello.`)));
  const ok = rs.filter(served);
  const shed = rs.filter((r) => r.status === 429);
  assert.equal(ok.length + shed.length, 40, `statuses ${rs.map((r) => r.status).join(',')}`);
  assert.ok(ok.length >= 2 && shed.length >= 1, `served ${ok.length}, shed ${shed.length}`);
  for (const r of shed) {
    assert.match(r.retryAfter ?? '', /^[1-9][0-9]*$/);
    assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, 'server_overloaded');
  }
  assert.ok(await metric(arrival) - before0 >= 1, 'shed at arrival');
  console.log(`# burst of 40: served ${ok.length}, shed ${shed.length}, Retry-After ${[...new Set(shed.map((r) => r.retryAfter))].join(',')}`);
});
