import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ParsedMetrics, labelValue, parseVllmMetrics, splitAdapters } from '../../../src/registry/poll/vllm-metrics-parser.ts';

const fixture = (name: string): string =>
  readFileSync(new URL(`../../fixtures/vllm-metrics/${name}`, import.meta.url), 'utf8');

void test('reads the routing figures from a V1 (v0.12) page with LoRA enabled', () => {
  const m = new ParsedMetrics();
  assert.equal(parseVllmMetrics(fixture('v1-0.12-lora.txt'), m), true);
  assert.equal(m.running, 48);
  assert.equal(m.waiting, 3);
  assert.equal(m.kvUsage, 0.2731);
  assert.equal(m.speaksV1, true);
  assert.equal(m.speaksLegacy, false);
  assert.equal(m.numGpuBlocks, 27648);
  assert.equal(m.blockSize, 16);
  assert.equal(m.preemptionsTotal, 0);
  assert.equal(m.prefixQueriesTotal, 1843212);
  assert.equal(m.prefixHitsTotal, 1126384);
  assert.equal(m.promptTokensTotal, 1843212);
  assert.equal(m.generationTokensTotal, 402117);
  assert.equal(m.processStartSeconds, 1762301190.12);
  assert.equal(m.startSeconds(), 1762301190.12);
  assert.equal(m.earliestCreatedSeconds, 1762301201.37);
  // Two lora_requests_info series: the newer one (larger timestamp) is the current state.
  assert.equal(m.loraEnabled, true);
  assert.equal(m.maxLoras, 4);
  assert.equal(m.runningAdapters, 'sql-lora,chat-lora');
  assert.equal(m.waitingAdapters, '');
});

void test('understands a legacy (v0.8) page that speaks only the gpu_ names and has no LoRA', () => {
  const m = new ParsedMetrics();
  assert.equal(parseVllmMetrics(fixture('legacy-0.8.txt'), m), true);
  assert.equal(m.speaksV1, false);
  assert.equal(m.speaksLegacy, true);
  assert.equal(m.running, 12);
  assert.equal(m.waiting, 0);
  assert.equal(m.kvUsage, 0.0815);
  assert.equal(m.prefixQueriesTotal, 220410);
  assert.equal(m.prefixHitsTotal, 96512);
  assert.equal(m.preemptionsTotal, 7);
  assert.equal(m.numGpuBlocks, 27730);
  assert.equal(m.loraEnabled, false);
  assert.equal(m.maxLoras, 0);
  assert.equal(m.runningAdapters, '');
});

void test('a mixed (v0.10) page is read once, and the newest of several stale lora series wins wherever it sits', () => {
  const m = new ParsedMetrics();
  assert.equal(parseVllmMetrics(fixture('mixed-0.10-stale-lora.txt'), m), true);
  assert.equal(m.speaksV1, true);
  assert.equal(m.speaksLegacy, true);
  assert.equal(m.kvUsage, 0.9112); // not 2 x 0.9112: the two names are one figure
  assert.equal(m.prefixQueriesTotal, 5120044);
  assert.equal(m.prefixHitsTotal, 3004811);
  assert.equal(m.preemptionsTotal, 42);
  assert.equal(m.running, 31);
  assert.equal(m.waiting, 9);
  assert.equal(m.maxLoras, 2);
  assert.equal(m.runningAdapters, 'chat-lora,fin-lora');
  assert.equal(m.waitingAdapters, 'sql-lora');
});

void test('sums data-parallel engines, averages their KV usage, and falls back when process_ and _created are absent', () => {
  const m = new ParsedMetrics();
  assert.equal(parseVllmMetrics(fixture('v1-dp2-multiprocess-block32.txt'), m), true);
  assert.equal(m.running, 42);
  assert.equal(m.waiting, 4);
  assert.equal(m.kvUsage, 0.4);
  assert.equal(m.numGpuBlocks, 27648);
  assert.equal(m.blockSize, 32);
  assert.equal(m.prefixQueriesTotal, 4000);
  assert.equal(m.prefixHitsTotal, 1000);
  assert.equal(m.preemptionsTotal, 3);
  assert.ok(Number.isNaN(m.processStartSeconds));
  assert.ok(Number.isNaN(m.startSeconds()));
});

void test('reusing one ParsedMetrics keeps nothing from the previous page', () => {
  const m = new ParsedMetrics();
  parseVllmMetrics(fixture('v1-0.12-lora.txt'), m);
  parseVllmMetrics(fixture('legacy-0.8.txt'), m);
  assert.equal(m.loraEnabled, false);
  assert.equal(m.speaksV1, false);
  assert.equal(m.running, 12);
});

void test('a page that is not vLLM\'s is rejected', () => {
  const m = new ParsedMetrics();
  assert.equal(parseVllmMetrics('# HELP up x\n# TYPE up gauge\nup 1\n', m), false);
  assert.equal(parseVllmMetrics('<html>502 Bad Gateway</html>', m), false);
  assert.equal(parseVllmMetrics('', m), false);
});

void test('tolerates CRLF line ends, tabs, timestamps after the value, Inf and NaN values, and no trailing newline', () => {
  const m = new ParsedMetrics();
  const page = [
    'vllm:num_requests_running{engine="0"} 5.0 1762301190000',
    'vllm:num_requests_waiting\t2',
    'vllm:kv_cache_usage_perc{engine="0"} NaN',
    'vllm:num_preemptions_total{engine="0"} +Inf',
    'vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0',
  ].join('\r\n');
  assert.equal(parseVllmMetrics(page, m), true);
  assert.equal(m.running, 5);
  assert.equal(m.waiting, 2);
  assert.ok(Number.isNaN(m.kvUsage)); // a NaN sample is no sample
  assert.equal(m.preemptionsTotal, Number.POSITIVE_INFINITY);
  assert.equal(m.blockSize, 16);
  assert.ok(Number.isNaN(m.numGpuBlocks)); // "None" before profiling is unknown, not zero
});

void test('label values with escaped quotes, commas and braces do not derail label parsing', () => {
  const line = 'x{a="say \\"hi\\", {ok}",running_lora_adapters="a,b",z="\\\\"} 1';
  assert.equal(labelValue(line, 1, 'a'), 'say "hi", {ok}');
  assert.equal(labelValue(line, 1, 'running_lora_adapters'), 'a,b');
  assert.equal(labelValue(line, 1, 'z'), '\\');
  assert.equal(labelValue(line, 1, 'missing'), null);
  const m = new ParsedMetrics();
  parseVllmMetrics(`vllm:num_requests_running 1\nvllm:lora_requests_info{max_lora="3",running_lora_adapters="a\\"b",waiting_lora_adapters="c"} 5\n`, m);
  assert.equal(m.runningAdapters, 'a"b');
  assert.equal(m.waitingAdapters, 'c');
  assert.deepEqual(splitAdapters('sql-lora, chat-lora,'), ['sql-lora', 'chat-lora']);
  assert.deepEqual(splitAdapters(''), []);
});

void test('lines that merely start like a known name are not mistaken for it', () => {
  const m = new ParsedMetrics();
  parseVllmMetrics([
    'vllm:num_requests_running 1',
    'vllm:num_requests_running_by_engine 99', // longer name
    'vllm:num_requests_waiting_by_reason{reason="capacity"} 7',
    'vllm:num_requests_waiting 2',
    'xvllm:num_requests_waitin 50', // same length, different name
  ].join('\n'), m);
  assert.equal(m.running, 1);
  assert.equal(m.waiting, 2);
});
