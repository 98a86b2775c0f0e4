import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfigFile, parseConfig } from '../../../src/config/load.ts';

const demo = fileURLToPath(new URL('../../../config/demo.yaml', import.meta.url));
const minimal = () => ({ pools: [{ id: 'p', model: 'm', replicas: [{ id: 'r1', url: 'http://127.0.0.1:1' }] }] });

test('the demo config loads with the contract pools and frozen sections', () => {
  const cfg = loadConfigFile(demo, {});
  assert.deepEqual(cfg.pools.map((p) => [p.id, p.model, p.replicas.length]), [
    ['70b', 'llama-3.1-70b-instruct', 2], ['8b', 'llama-3.1-8b-instruct', 4], ['lora', 'llama-3.1-8b-lora', 2],
  ]);
  assert.equal(cfg.pools[0]!.max_context_tokens, 16384);
  assert.ok(Object.isFrozen(cfg.pools[0]!.replicas));
});

test('an invalid field stops with one line naming it', () => {
  const bad = minimal();
  (bad.pools[0]!.replicas[0] as { url: string }).url = 'ftp://x';
  assert.throws(() => parseConfig(bad), (e: Error) => e instanceof ConfigError && /^config: pools\[0\]\.replicas\[0\]\.url: /.test(e.message) && !e.message.includes('\n'));
  assert.throws(() => parseConfig({ ...minimal(), bogus: 1 }), /config: \(root\): .*bogus/);
  assert.throws(() => parseConfig({ ...minimal(), tenants: [{ name: 't', api_keys: [{ sha256: 'xyz' }], tokens_per_second: 1, burst_tokens: 1, max_inflight: 1 }] }), /tenants\[0\]\.api_keys\[0\]\.sha256/);
});

test('names must be unique across models, aliases and adapters', () => {
  const c = minimal();
  const twin = { id: 'q', model: 'm', replicas: [{ id: 'r2', url: 'http://127.0.0.1:2' }] };
  assert.throws(() => parseConfig({ pools: [...c.pools, twin] }), /pools\[1\]\.model: "m" is already used by pools\[0\]\.model/);
});

test('environment overrides set port, redis and a jsonl usage sink', () => {
  const cfg = parseConfig(minimal(), { PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379', USAGE_JSONL: '/tmp/u.jsonl' });
  assert.equal(cfg.server.port, 0);
  assert.equal(cfg.quota.backend, 'redis');
  assert.deepEqual(cfg.usage.sinks, ['jsonl:/tmp/u.jsonl']);
});

test('an api key read from a missing environment variable is a config error', () => {
  const c = { ...minimal(), tenants: [{ name: 't', api_keys: [{ env: 'NOPE_KEY' }], tokens_per_second: 1, burst_tokens: 1, max_inflight: 1 }] };
  assert.throws(() => parseConfig(c, {}), /tenants\[0\]\.api_keys\[0\]\.env: environment variable NOPE_KEY is not set/);
  assert.equal(parseConfig(c, { NOPE_KEY: 'sk-x' }).tenants.length, 1);
});

test('cors: no origin by default; "*" or scheme://host[:port] entries; a path or a bare host is a config error', () => {
  assert.deepEqual(parseConfig(minimal()).cors, { allowed_origins: [], max_age_seconds: 600 });
  const ok = parseConfig({ ...minimal(), cors: { allowed_origins: ['*', 'https://app.example.com', 'http://localhost:5173'], max_age_seconds: 60 } });
  assert.deepEqual(ok.cors.allowed_origins, ['*', 'https://app.example.com', 'http://localhost:5173']);
  for (const bad of ['https://app.example.com/', 'https://app.example.com/x', 'app.example.com', '']) {
    assert.throws(() => parseConfig({ ...minimal(), cors: { allowed_origins: [bad] } }), /^ConfigError: config: cors\.allowed_origins\[0\]: /, bad);
  }
  assert.throws(() => parseConfig({ ...minimal(), cors: { allowed_origin: ['*'] } }), /cors.*allowed_origin/);
});

test('pools[].lora_ids maps vLLM LoRA int ids to the pool\'s adapter names, and nothing else', () => {
  const pool = (lora_ids: unknown) => ({ pools: [{ ...minimal().pools[0]!, adapters: ['sql-adapter'], lora_ids }] });
  assert.deepEqual(parseConfig(minimal()).pools[0]!.lora_ids, {});
  assert.deepEqual(parseConfig(pool({ 1: 'sql-adapter' })).pools[0]!.lora_ids, { 1: 'sql-adapter' });
  assert.throws(() => parseConfig(pool({ 2: 'chat-adapter' })), /config: pools\[0\]\.lora_ids\.2: "chat-adapter" is not in adapters$/);
  assert.throws(() => parseConfig(pool({ 0: 'sql-adapter' })), /config: pools\[0\]\.lora_ids\.0: /, 'ids count from 1');
  assert.throws(() => parseConfig(pool({ x: 'sql-adapter' })), /config: pools\[0\]\.lora_ids\.x: /);
});
