// /metrics agrees with /_mock/state under load that forces preemptions, exposes vLLM's names, labels and
// float format, and adds the legacy names only behind legacyMetrics.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startMockReplica } from '../../helpers/mock-replicas.ts';
import { PROMTOOL_SKIP, promtoolCheck } from '../../helpers/promtool.ts';
import { mockState, openStream, type MockState } from './http-client.ts';

function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const L = '{engine="0",model_name="m"}';

function assertAgrees(m: Map<string, number>, s: MockState): void {
  assert.equal(m.get(`vllm:num_requests_running${L}`), s.running);
  assert.equal(m.get(`vllm:num_requests_waiting${L}`), s.waiting);
  assert.equal(m.get(`vllm:num_preemptions_total${L}`), s.preemptions);
  const usage = 1 - s.free_blocks / (s.total_blocks - 1);
  assert.ok(Math.abs(m.get(`vllm:kv_cache_usage_perc${L}`)! - usage) < 1e-9, `kv usage ${m.get(`vllm:kv_cache_usage_perc${L}`)} vs ${usage}`);
}

void test('under preempting load /metrics reports the same running, waiting, KV usage and preemptions as /_mock/state', async () => {
  // 40 blocks (39 usable = 624 tokens) for 6 requests that each grow to ~12 blocks: the pool runs out.
  const replica = await startMockReplica({ profile: 'llama-8b-a100', numGpuBlocks: 40, model: 'm' });
  try {
    const streams = Array.from({ length: 6 }, (_, i) =>
      openStream(replica.url, '/v1/completions', { prompt: `request ${i} `.repeat(12), max_tokens: 150, ignore_eos: true, stream: true }));
    let agreedUnderLoad = 0;
    for (let i = 0; i < 60 && agreedUnderLoad < 3; i++) {
      const s1 = await mockState(replica.url);
      const m = parseMetrics(await (await fetch(`${replica.url}/metrics`)).text());
      const s2 = await mockState(replica.url);
      const same = s1.running === s2.running && s1.waiting === s2.waiting && s1.free_blocks === s2.free_blocks && s1.preemptions === s2.preemptions;
      if (!same || s1.running + s1.waiting === 0) continue; // an engine step fell between the two reads
      assertAgrees(m, s1);
      agreedUnderLoad++;
    }
    assert.ok(agreedUnderLoad > 0, 'no quiet moment to compare under load');
    const results = await Promise.all(streams.map((st) => st.done));
    for (const r of results) assert.ok(r.text.endsWith('data: [DONE]\n\n'), 'every sequence finishes despite preemption');
    const s = await mockState(replica.url);
    const m = parseMetrics(await (await fetch(`${replica.url}/metrics`)).text());
    assert.ok(s.preemptions > 0, 'the pool was exhausted');
    assertAgrees(m, s);
    assert.equal(m.get(`vllm:request_success_total{engine="0",finished_reason="length",model_name="m"}`), 6);
    assert.equal(m.get(`vllm:generation_tokens_total${L}`), 6 * 150);
    assert.equal(m.get(`vllm:time_to_first_token_seconds_count${L}`), 6);
    assert.equal(m.get(`vllm:e2e_request_latency_seconds_count${L}`), 6);
    assert.equal(m.get(`vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="40",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4"}`), 1);
  } finally {
    await replica.close();
  }
});

void test('exposition: sorted labels, float values, _created series, +Inf buckets; legacy names only with legacyMetrics', async () => {
  const plain = await startMockReplica({ profile: 'tiny', model: 'm' });
  const legacy = await startMockReplica({ profile: 'tiny', model: 'm', legacyMetrics: true, loras: ['a'], maxLoras: 2 });
  try {
    const text = await (await fetch(`${plain.url}/metrics`)).text();
    assert.match(text, /^vllm:num_requests_running\{engine="0",model_name="m"\} 0\.0$/m);
    assert.match(text, /^# TYPE vllm:prefix_cache_hits_created gauge$/m);
    assert.match(text, /^vllm:prefix_cache_hits_created\{engine="0",model_name="m"\} \d\.\d+e\+09$/m);
    assert.match(text, /^vllm:time_to_first_token_seconds_bucket\{engine="0",le="\+Inf",model_name="m"\} 0\.0$/m);
    assert.match(text, /^vllm:time_to_first_token_seconds_bucket\{engine="0",le="1\.0",model_name="m"\} 0\.0$/m);
    assert.match(text, /^vllm:request_success_total\{engine="0",finished_reason="abort",model_name="m"\} 0\.0$/m);
    assert.doesNotMatch(text, /gpu_cache_usage_perc|vllm:time_per_output_token_seconds|lora_requests_info/);
    const old = await (await fetch(`${legacy.url}/metrics`)).text();
    for (const name of ['vllm:gpu_cache_usage_perc{', 'vllm:gpu_prefix_cache_queries_total{', 'vllm:gpu_prefix_cache_hits_total{', 'vllm:time_per_output_token_seconds_bucket{', 'vllm:kv_cache_usage_perc{']) {
      assert.ok(old.includes(name), `${name} missing`);
    }
    assert.match(old, /^vllm:lora_requests_info\{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""\} \d\.\d+e\+09$/m);
  } finally {
    await plain.close();
    await legacy.close();
  }
});

void test('promtool parses the exposition; its only findings are the lint rules vLLM itself breaks', { skip: PROMTOOL_SKIP }, async () => {
  const replica = await startMockReplica({ profile: 'tiny', loras: ['a'], maxLoras: 2, legacyMetrics: true });
  try {
    await (await fetch(`${replica.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'hi', max_tokens: 3 }) })).text();
    const text = await (await fetch(`${replica.url}/metrics`)).text();
    const findings = promtoolCheck(text).output.split('\n').filter((l) => l.trim() !== '');
    const unexpected = findings.filter((l) => !/metric names should not contain ':'|vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix/.test(l));
    assert.deepEqual(unexpected, []);
  } finally {
    await replica.close();
  }
});

void test('an idle replica scraped again serves the same page; a finished request and an aborted one each show on the next scrape', async () => {
  const replica = await startMockReplica({ profile: 'tiny', model: 'm' });
  const page = async (): Promise<string> => await (await fetch(`${replica.url}/metrics`)).text();
  try {
    const idle = await page();
    assert.equal(await page(), idle, 'nothing ran: the same page');
    const done = await (await fetch(`${replica.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: 'count with me', max_tokens: 7, ignore_eos: true }),
    })).json() as { usage: { completion_tokens: number } };
    assert.equal(done.usage.completion_tokens, 7);
    const after = parseMetrics(await page());
    assert.equal(after.get(`vllm:generation_tokens_total${L}`), 7);
    assert.equal(after.get(`vllm:request_params_max_tokens_count${L}`), 1);
    assert.equal(after.get(`vllm:request_success_total{engine="0",finished_reason="length",model_name="m"}`), 1);
    assert.equal(after.get(`vllm:num_requests_running${L}`), 0);

    // A stream whose client hangs up: the engine aborts it, and the next page says so.
    const stream = openStream(replica.url, '/v1/completions', { model: 'm', prompt: 'a long one', max_tokens: 1500, ignore_eos: true, stream: true });
    await stream.waitFrames(2);
    assert.equal(parseMetrics(await page()).get(`vllm:num_requests_running${L}`), 1);
    stream.destroy();
    const deadline = Date.now() + 10_000;
    let m = parseMetrics(await page());
    while (m.get(`vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"}`) !== 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      m = parseMetrics(await page());
    }
    assert.equal(m.get(`vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"}`), 1);
    assert.equal(m.get(`vllm:num_requests_running${L}`), 0);
    assert.equal(m.get(`vllm:request_params_max_tokens_count${L}`), 2);
  } finally {
    await replica.close();
  }
});
