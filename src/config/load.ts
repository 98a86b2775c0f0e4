// Loads the YAML config, applies environment overrides, validates, and freezes it.
// Thread: main, setup and reload only. An invalid file yields one ConfigError line naming the field.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { configSchema, type GatewayConfig } from './schema.ts';
import { redisEndpoint, RedisEndpointError } from '../quota/redis-endpoint.ts';
import { checkPoolTokenizer, PoolTokenizerError } from '../tokenize/pool-refs.ts';
import { tracingSettings, TracingSettingsError } from '../tracing/settings.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Environment overrides from the contract: PORT, HOST, REDIS_URL, USAGE_JSONL. */
export interface EnvOverrides {
  PORT?: string | undefined;
  HOST?: string | undefined;
  REDIS_URL?: string | undefined;
  USAGE_JSONL?: string | undefined;
  [key: string]: string | undefined;
}

function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : (out ? '.' : '') + String(p);
  return out || '(root)';
}

/** Parses and validates a config object. Throws ConfigError with a one-line message naming the field. */
export function parseConfig(raw: unknown, env: EnvOverrides = {}): GatewayConfig {
  const obj = (raw && typeof raw === 'object' ? structuredClone(raw) : raw) as Record<string, unknown>;
  if (obj && typeof obj === 'object') applyEnv(obj, env);
  const res = configSchema.safeParse(obj);
  if (!res.success) {
    const issue = res.error.issues[0]!;
    const extra = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    throw new ConfigError(`config: ${fieldPath(issue.path)}: ${issue.message}${extra}`);
  }
  const cfg = res.data;
  checkCrossFields(cfg, env);
  return deepFreeze(cfg);
}

export function loadConfigFile(path: string, env: EnvOverrides = {}): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`config: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`config: ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  return parseConfig(raw, env);
}

function applyEnv(obj: Record<string, unknown>, env: EnvOverrides): void {
  const server = (obj.server ??= {}) as Record<string, unknown>;
  if (env.PORT !== undefined && env.PORT !== '') server.port = Number(env.PORT);
  if (env.HOST) server.host = env.HOST;
  if (env.REDIS_URL) {
    const quota = (obj.quota ??= {}) as Record<string, unknown>;
    quota.backend = 'redis';
    quota.redis_url = env.REDIS_URL;
    // the environment names the whole endpoint: a config file's cluster seeds give way to it
    delete quota.redis_cluster;
  }
  // In a pod the Kubernetes API is at the service the kubelet names; a file's api_server wins.
  const k8s = (obj.epp as { kubernetes?: Record<string, unknown> } | undefined)?.kubernetes;
  if (k8s && typeof k8s === 'object' && k8s.api_server === undefined && env.KUBERNETES_SERVICE_HOST) {
    const host = env.KUBERNETES_SERVICE_HOST;
    k8s.api_server = `https://${host.includes(':') ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`;
  }
  if (env.USAGE_JSONL) {
    const usage = (obj.usage ??= {}) as Record<string, unknown>;
    const sinks = Array.isArray(usage.sinks) ? usage.sinks : [];
    usage.sinks = [...sinks, `jsonl:${env.USAGE_JSONL}`];
  }
}

function checkCrossFields(cfg: GatewayConfig, env: EnvOverrides): void {
  const modelNames = new Map<string, string>();
  const claim = (nameValue: string, where: string): void => {
    const prev = modelNames.get(nameValue);
    if (prev) throw new ConfigError(`config: ${where}: "${nameValue}" is already used by ${prev}`);
    modelNames.set(nameValue, where);
  };
  const poolIds = new Set<string>();
  const replicaIds = new Set<string>();
  const urls = new Set<string>();
  cfg.pools.forEach((pool, i) => {
    if (poolIds.has(pool.id)) throw new ConfigError(`config: pools[${i}].id: duplicate pool id "${pool.id}"`);
    poolIds.add(pool.id);
    claim(pool.model, `pools[${i}].model`);
    pool.aliases.forEach((a, j) => claim(a, `pools[${i}].aliases[${j}]`));
    pool.adapters.forEach((a, j) => claim(a, `pools[${i}].adapters[${j}]`));
    try {
      checkPoolTokenizer(pool);
    } catch (err) {
      if (!(err instanceof PoolTokenizerError)) throw err;
      throw new ConfigError(`config: pools[${i}].${err.field}: ${err.message}`);
    }
    const discovered = cfg.epp?.kubernetes !== undefined && cfg.epp.pool === pool.id;
    if (pool.replicas.length === 0 && !discovered) throw new ConfigError(`config: pools[${i}].replicas: at least one replica (or epp.kubernetes discovering this pool)`);
    pool.replicas.forEach((r, j) => {
      const where = `pools[${i}].replicas[${j}]`;
      if (replicaIds.has(r.id)) throw new ConfigError(`config: ${where}.id: duplicate replica id "${r.id}"`);
      replicaIds.add(r.id);
      if (urls.has(r.url)) throw new ConfigError(`config: ${where}.url: duplicate replica url "${r.url}"`);
      urls.add(r.url);
      r.adapters?.forEach((a, k) => {
        if (!pool.adapters.includes(a)) throw new ConfigError(`config: ${where}.adapters[${k}]: "${a}" is not in pools[${i}].adapters`);
      });
    });
  });
  const stallMs = cfg.upstream.stall_timeout_ms;
  if (stallMs > 0 && stallMs < 2 * cfg.registry.scrape_interval_ms) {
    throw new ConfigError(`config: upstream.stall_timeout_ms: must be 0 (off) or at least 2 × registry.scrape_interval_ms (${2 * cfg.registry.scrape_interval_ms})`);
  }
  if (cfg.epp !== undefined && !poolIds.has(cfg.epp.pool)) throw new ConfigError(`config: epp.pool: "${cfg.epp.pool}" is not a pool id`);
  if (replicaIds.size > cfg.registry.max_replicas) {
    throw new ConfigError(`config: registry.max_replicas: ${cfg.registry.max_replicas} is fewer than the ${replicaIds.size} replicas configured`);
  }
  const tenantNames = new Set<string>();
  cfg.tenants.forEach((t, i) => {
    if (tenantNames.has(t.name)) throw new ConfigError(`config: tenants[${i}].name: duplicate tenant "${t.name}"`);
    tenantNames.add(t.name);
    if (t.burst_tokens < 1) throw new ConfigError(`config: tenants[${i}].burst_tokens: must be at least 1`);
    t.api_keys.forEach((k, j) => {
      if ('env' in k && !env[k.env]) throw new ConfigError(`config: tenants[${i}].api_keys[${j}].env: environment variable ${k.env} is not set`);
    });
  });
  try {
    // The OTEL_ environment as the section leaves it: a bad value stops the start, not the first export.
    tracingSettings(cfg.tracing, env);
  } catch (err) {
    if (!(err instanceof TracingSettingsError)) throw err;
    throw new ConfigError(`config: tracing: ${err.message}`);
  }
  if (cfg.quota.backend === 'redis' || cfg.quota.redis_url !== undefined || cfg.quota.redis_cluster !== undefined) {
    try {
      redisEndpoint(cfg.quota.redis_url, cfg.quota.redis_cluster);
    } catch (err) {
      if (!(err instanceof RedisEndpointError)) throw err;
      throw new ConfigError(`config: ${err.message}`);
    }
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
