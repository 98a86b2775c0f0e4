// The Redis endpoint syntax: one URL, a comma-separated cluster URL, or quota.redis_cluster seeds; errors name
// the config key and never echo a password. Config loading applies the same rules.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { describeEndpoint, redisEndpoint } from '../../../src/quota/redis-endpoint.ts';

test('one host:port is a single Redis, passed to ioredis as written', () => {
  assert.deepEqual(redisEndpoint('redis://:pw@10.0.0.1:6380/2', undefined), { kind: 'single', url: 'redis://:pw@10.0.0.1:6380/2' });
  assert.equal(describeEndpoint(redisEndpoint('redis://u:secret@h:1', undefined)), 'redis://u:***@h:1');
});

test('several comma-separated nodes make a cluster URL, with credentials and TLS for every node', () => {
  assert.deepEqual(redisEndpoint('rediss://app:s%40cret@10.0.0.1:7000,[::1]:7001,redis-2.svc:7002', undefined), {
    kind: 'cluster', tls: true, username: 'app', password: 's@cret',
    nodes: [{ host: '10.0.0.1', port: 7000 }, { host: '::1', port: 7001 }, { host: 'redis-2.svc', port: 7002 }],
  });
  assert.deepEqual(redisEndpoint('redis://:pw@a:1,b:2/0', undefined), { kind: 'cluster', tls: false, password: 'pw', nodes: [{ host: 'a', port: 1 }, { host: 'b', port: 2 }] });
  assert.equal(describeEndpoint(redisEndpoint('redis://:pw@a:1,b:2', undefined)), 'cluster a:1,b:2');
  assert.throws(() => redisEndpoint('redis://a:1,b:2/3', undefined), /only database 0/);
  assert.throws(() => redisEndpoint('redis://a:1,b', undefined), /quota\.redis_url: "b" is not host:port/);
  assert.throws(() => redisEndpoint('redis://a:1,b:70000', undefined), /"b:70000" is not host:port/);
  assert.throws(() => redisEndpoint('http://u:secret@a:1', undefined), (e: Error) => /quota\.redis_url/.test(e.message) && !e.message.includes('secret'));
});

test('quota.redis_cluster lists seeds; it excludes redis_url; one of them is required', () => {
  assert.deepEqual(redisEndpoint(undefined, ['127.0.0.1:7000']), { kind: 'cluster', tls: false, nodes: [{ host: '127.0.0.1', port: 7000 }] });
  assert.throws(() => redisEndpoint(undefined, ['127.0.0.1']), /quota\.redis_cluster: "127\.0\.0\.1" is not host:port/);
  assert.throws(() => redisEndpoint('redis://a:1', ['b:2']), /set one, not both/);
  assert.throws(() => redisEndpoint(undefined, undefined), /required when quota\.backend is redis/);
});

test('config loading checks the endpoint; REDIS_URL replaces configured cluster seeds', () => {
  const minimal = { pools: [{ id: 'p', model: 'm', replicas: [{ id: 'r1', url: 'http://127.0.0.1:1' }] }] };
  const cfg = parseConfig({ ...minimal, quota: { backend: 'redis', redis_cluster: ['127.0.0.1:7000', '127.0.0.1:7001'] } });
  assert.deepEqual(cfg.quota.redis_cluster, ['127.0.0.1:7000', '127.0.0.1:7001']);
  assert.throws(() => parseConfig({ ...minimal, quota: { backend: 'redis' } }), /config: quota\.redis_url or quota\.redis_cluster: required/);
  assert.throws(() => parseConfig({ ...minimal, quota: { backend: 'redis', redis_cluster: ['nope'] } }), /config: quota\.redis_cluster: "nope"/);
  const env = parseConfig({ ...minimal, quota: { redis_cluster: ['127.0.0.1:7000'] } }, { REDIS_URL: 'redis://127.0.0.1:6379' });
  assert.equal(env.quota.redis_cluster, undefined);
  assert.equal(env.quota.redis_url, 'redis://127.0.0.1:6379');
});
