// The fleets the simulator runs: `seed` (the design's 64 replicas), `demo` (config/demo.yaml) or any gateway
// config file. A fleet is a parsed GatewayConfig (so routing, admission and registry settings come from the
// same schema and defaults the gateway uses) plus, per pool, the engine profile its replicas run.
// Thread: the run's. Setup only.
import { fileURLToPath } from 'node:url';
import { loadConfigFile, parseConfig } from '../../src/config/load.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import { PROFILES, resolveConfig } from '../../test/mock-replica/engine/profiles.ts';
import type { ProfileName } from '../../test/mock-replica/engine/types.ts';
import type { PoolShape } from './workload-types.ts';

export interface SimReplica {
  id: string;
  /** Configured adapters; null = every adapter of its pool. */
  adapters: readonly string[] | null;
}

export interface SimPool extends PoolShape {
  profile: ProfileName;
  maxLoras: number;
  /** KV blocks of each replica (the profile's, times --kv-scale). */
  numGpuBlocks: number;
  replicas: readonly SimReplica[];
}

export interface SimFleet {
  /** `seed`, `demo` or the config path as given. */
  name: string;
  config: GatewayConfig;
  pools: readonly SimPool[];
}

/** LoRA slots per host in the seed fleet (vLLM --max-loras): 60 adapters over 8 hosts, 8 resident at a time. */
export const SEED_MAX_LORAS = 8;
export const SEED_ADAPTERS = 60;

const DEMO_CONFIG = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));

function replicas(prefix: string, n: number): Array<{ id: string; url: string }> {
  return Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i + 1}`, url: `http://${prefix}-${i + 1}.sim:8000` }));
}

/**
 * A pool's `engine` figures (what kv-aware predicts a replica costs) from a mock profile's nominal step-time
 * model: decode base = fixed + weight read. The engines a race runs are drawn around these (--engine-error).
 */
export function engineFigures(profile: ProfileName): Record<string, number> {
  const p = PROFILES[profile];
  return {
    prefill_tokens_per_second: p.prefillTokensPerSecond,
    decode_base_ms: p.fixedMs + p.weightReadMs,
    decode_per_seq_ms: p.perSeqMs,
    decode_per_1k_kv_tokens_ms: p.kvReadMsPer1kTokens,
    adapter_load_ms: p.adapterLoadMs,
  };
}

/** The design's fleet as a gateway config: 16 × 70B TP2, 40 × 8B, 8 LoRA hosts serving 60 adapters. */
export function seedConfig(): GatewayConfig {
  const adapters = Array.from({ length: SEED_ADAPTERS }, (_, i) => `tenant${Math.floor(i / 4) + 1}-lora${(i % 4) + 1}`);
  return parseConfig({
    pools: [
      { id: '70b', model: 'llama-3.1-70b-instruct', max_context_tokens: 16384, mock_profile: 'llama-70b-tp2-a100',
        engine: engineFigures('llama-70b-tp2-a100'), replicas: replicas('70b', 16) },
      { id: '8b', model: 'llama-3.1-8b-instruct', mock_profile: 'llama-8b-a100', replicas: replicas('8b', 40) },
      { id: 'lora', model: 'llama-3.1-8b-lora', mock_profile: 'llama-8b-a100', mock_max_loras: SEED_MAX_LORAS, adapters, replicas: replicas('lora', 8) },
    ],
  });
}

export function fleetFromConfig(name: string, config: GatewayConfig): SimFleet {
  const pools: SimPool[] = config.pools.map((p) => {
    const engine = resolveConfig({ profile: p.mock_profile, blockSize: p.block_size, ...(p.mock_max_loras !== undefined ? { maxLoras: p.mock_max_loras } : {}) });
    return {
      id: p.id,
      profile: p.mock_profile,
      blockSize: p.block_size,
      maxLoras: engine.maxLoras,
      numGpuBlocks: engine.numGpuBlocks,
      maxModelLen: Math.min(engine.maxModelLen, p.max_context_tokens),
      adapters: p.adapters,
      replicas: p.replicas.map((r) => ({ id: r.id, adapters: r.adapters ?? null })),
    };
  });
  return { name, config, pools };
}

/**
 * The pool with every replica's KV blocks × `scale` (--kv-scale), and its longest request cut to what that
 * pool can hold, as the engine clamps max_model_len to its blocks.
 */
export function withKvScale(pool: SimPool, scale: number): SimPool {
  if (scale === 1) return pool;
  const blocks = Math.max(2, Math.round(pool.numGpuBlocks * scale));
  return { ...pool, numGpuBlocks: blocks, maxModelLen: Math.min(pool.maxModelLen, (blocks - 1) * pool.blockSize) };
}

/** The fleet with routing.prefix_index set to `mode` (--prefix-index; null: as its config says). */
export function withPrefixIndex(fleet: SimFleet, mode: GatewayConfig['routing']['prefix_index'] | null): SimFleet {
  if (mode === null || mode === fleet.config.routing.prefix_index) return fleet;
  return { ...fleet, config: { ...fleet.config, routing: { ...fleet.config.routing, prefix_index: mode } } };
}

/** `seed`, `demo`, or a path to a gateway config. Throws ConfigError on a bad file. */
export function loadFleet(spec: string): SimFleet {
  if (spec === 'seed') return fleetFromConfig('seed', seedConfig());
  if (spec === 'demo') return fleetFromConfig('demo', loadConfigFile(DEMO_CONFIG));
  return fleetFromConfig(spec, loadConfigFile(spec));
}
