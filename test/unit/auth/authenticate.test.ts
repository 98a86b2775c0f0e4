import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { Authenticator, hashApiKey } from '../../../src/auth/authenticate.ts';
import { tenantSchema, type TenantConfig } from '../../../src/config/schema.ts';

const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const tenant = (raw: Record<string, unknown>): TenantConfig =>
  tenantSchema.parse({ tokens_per_second: 100, burst_tokens: 1000, max_inflight: 2, ...raw });

const tenants = [
  tenant({ name: 'alpha', api_keys: [{ sha256: sha('sk-demo-alpha') }, { sha256: sha('sk-alpha-rotated') }], sla_tier: 'premium' }),
  tenant({ name: 'beta', api_keys: [{ env: 'BETA_KEY' }], allowed_models: ['gpt-fast'], tokens_per_second: 5, burst_tokens: 50, max_inflight: 1 }),
];
const env = { BETA_KEY: 'sk-beta-from-env' };

void test('resolves a bearer key stored as a sha-256 digest to its tenant', () => {
  const auth = new Authenticator(tenants, env);
  const t = auth.authenticate('Bearer sk-demo-alpha');
  assert.ok(t);
  assert.equal(t.name, 'alpha');
  assert.equal(t.slaTier, 'premium');
  assert.deepEqual(t.allowedModels, []);
  assert.deepEqual(t.limits, { name: 'alpha', tokensPerSecond: 100, burstTokens: 1000, maxInflight: 2 });
  assert.equal(auth.authenticate('Bearer sk-alpha-rotated'), t, 'every key of a tenant gives the same object');
});

void test('resolves a key read from the environment, hashed at setup', () => {
  const auth = new Authenticator(tenants, env);
  const t = auth.authenticate('Bearer sk-beta-from-env');
  assert.equal(t?.name, 'beta');
  assert.deepEqual(t?.allowedModels, ['gpt-fast']);
  assert.deepEqual(t?.limits, { name: 'beta', tokensPerSecond: 5, burstTokens: 50, maxInflight: 1 });
  assert.equal(auth.authenticate('Bearer BETA_KEY'), null, 'the env var name is not a key');
});

void test('accepts the scheme in any case and surrounding blanks', () => {
  const auth = new Authenticator(tenants, env);
  for (const h of ['bearer sk-demo-alpha', 'BEARER sk-demo-alpha', '  Bearer   sk-demo-alpha  ']) {
    assert.equal(auth.authenticate(h)?.name, 'alpha', h);
  }
});

void test('refuses missing, malformed, unknown and near-miss keys', () => {
  const auth = new Authenticator(tenants, env);
  const bad = [
    undefined, '', 'Bearer', 'Bearer ', 'sk-demo-alpha', 'Basic sk-demo-alpha', 'Bearer sk-demo-alph', 'Bearer sk-demo-alphA',
    'Bearer sk-demo-alpha x', 'Bearer ' + sha('sk-demo-alpha'), `Bearer ${'a'.repeat(5000)}`,
  ];
  for (const h of bad) assert.equal(auth.authenticate(h), null, String(h).slice(0, 40));
});

void test('refuses to start with a missing env key or a key shared by two tenants', () => {
  assert.throws(() => new Authenticator(tenants, {}), /tenant beta: api_keys\[0\]: environment variable BETA_KEY is not set/);
  const dup = [...tenants, tenant({ name: 'gamma', api_keys: [{ sha256: sha('sk-beta-from-env') }] })];
  assert.throws(() => new Authenticator(dup, env), /tenant gamma: api_keys\[0\] is also a key of tenant beta/);
});

void test('never puts a raw key in an error message', () => {
  const dup = [tenant({ name: 'x', api_keys: [{ env: 'K1' }] }), tenant({ name: 'y', api_keys: [{ env: 'K2' }] })];
  assert.throws(() => new Authenticator(dup, { K1: 'sk-secret-same', K2: 'sk-secret-same' }), (err: Error) => {
    assert.match(err.message, /tenant y: api_keys\[0\] is also a key of tenant x/);
    assert.doesNotMatch(err.message, /sk-secret/);
    return true;
  });
});

void test('hashApiKey gives the digest the config stores (demo key of the contract)', () => {
  assert.equal(hashApiKey('sk-demo-alpha'), 'd65dbed0e4fe9a841da92d82a1b8a547f77050f26679ec1e3b664c30fa346b0c');
});
