// `npm run fleet -- --config FILE [--time-scale X] [--legacy-metrics] [--tokenizer-impl gateway|reference]`: one mock replica process per replica
// a gateway config names, each on the port of its URL, so one can be killed alone. startFleet() is the same
// thing as a function, for scripts/demo.ts. The time scale comes from --time-scale, else MOCK_TIME_SCALE (as
// for `npm run demo`), else 1. Thread: main (fleet process). Setup only.
//
// Per replica: --model pool.model, --profile pool.mock_profile, --max-model-len pool.max_context_tokens,
// --block-size pool.block_size, --max-loras pool.mock_max_loras (when set), --lora for each of
// replica.adapters ?? pool.adapters (LoRA enabled when the pool has adapters or mock_max_loras), --kv-events
// replica.kv_events (when set).
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfigFile } from '../../src/config/load.ts';
import { promptRefs } from '../../src/tokenize/pool-refs.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import { spawnMockReplica, type SpawnedReplica } from './spawn-replica.ts';

export interface FleetOptions {
  /** Forwarded as --time-scale (in (0, 1]). */
  timeScale?: number;
  legacyMetrics?: boolean;
  /** Extra flags appended to every replica's command line. */
  extraArgs?: string[];
  /** Called when a replica process exits before stop() (default: a line on stderr). */
  onExit?: (id: string, pid: number) => void;
}

export interface Fleet {
  replicas: Array<{ id: string; url: string; pid: number }>;
  stop(): Promise<void>;
}

/**
 * The mock GPUs' time scale for `npm run fleet` and `npm run demo`: the --time-scale flag when given, else the
 * MOCK_TIME_SCALE environment variable, else undefined (real time). Throws on a value outside (0, 1].
 */
export function fleetTimeScale(flag: string | undefined, env: Record<string, string | undefined>): number | undefined {
  const text = flag ?? (env.MOCK_TIME_SCALE !== undefined && env.MOCK_TIME_SCALE !== '' ? env.MOCK_TIME_SCALE : undefined);
  if (text === undefined) return undefined;
  const x = Number(text);
  if (!(x > 0 && x <= 1)) throw new Error(`${flag !== undefined ? '--time-scale' : 'MOCK_TIME_SCALE'} must be in (0, 1], got ${text}`);
  return x;
}

/** The command-line flags of each replica of `cfg`, keyed by replica id. */
export function fleetReplicaArgs(cfg: GatewayConfig, opts: FleetOptions = {}): Array<{ id: string; url: string; args: string[] }> {
  const out: Array<{ id: string; url: string; args: string[] }> = [];
  for (const pool of cfg.pools) {
    for (const replica of pool.replicas) {
      const u = new URL(replica.url);
      const port = u.port !== '' ? u.port : u.protocol === 'https:' ? '443' : '80';
      const args = [
        '--host', u.hostname.replace(/^\[|\]$/g, ''), '--port', port,
        '--model', pool.model, '--profile', pool.mock_profile,
        '--max-model-len', String(pool.max_context_tokens), '--block-size', String(pool.block_size),
      ];
      const adapters = replica.adapters ?? pool.adapters;
      if (pool.mock_max_loras !== undefined) args.push('--max-loras', String(pool.mock_max_loras));
      else if (adapters.length > 0) args.push('--max-loras', '1');
      for (const a of adapters) args.push('--lora', a);
      if (replica.kv_events !== undefined) args.push('--kv-events', replica.kv_events);
      if (opts.timeScale !== undefined) args.push('--time-scale', String(opts.timeScale));
      if (opts.legacyMetrics) args.push('--legacy-metrics');
      // A pool of another model: its replicas count with that model's tokenizer directory, as the gateway does.
      if (typeof pool.tokenizer !== 'string') args.push('--tokenizer', promptRefs(pool).tokenizer);
      args.push(...(opts.extraArgs ?? []));
      out.push({ id: replica.id, url: replica.url, args });
    }
  }
  return out;
}

/** Starts every replica of `cfg` (in parallel); if one fails to start, stops the others and rejects. */
export async function startFleet(cfg: GatewayConfig, opts: FleetOptions = {}): Promise<Fleet> {
  const plan = fleetReplicaArgs(cfg, opts);
  let stopping = false;
  const results = await Promise.allSettled(plan.map((p) => spawnMockReplica(p.args, { onStderr: (t) => process.stderr.write(`[${p.id}] ${t}`) })));
  const started: Array<{ id: string; child: SpawnedReplica }> = [];
  const errors: string[] = [];
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') started.push({ id: plan[i]!.id, child: r.value });
    else errors.push(`${plan[i]!.id}: ${(r.reason as Error).message}`);
  });
  const stop = async (): Promise<void> => {
    stopping = true;
    await Promise.all(started.map((s) => s.child.kill('SIGTERM')));
  };
  if (errors.length > 0) {
    await stop();
    throw new Error(`fleet: ${errors.join('; ')}`);
  }
  for (const s of started) {
    void s.child.exited.then(() => {
      if (stopping) return;
      if (opts.onExit) opts.onExit(s.id, s.child.pid);
      else process.stderr.write(`fleet: replica ${s.id} (pid ${s.child.pid}) exited\n`);
    });
  }
  return { replicas: started.map((s) => ({ id: s.id, url: s.child.url, pid: s.child.pid })), stop };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { config: { type: 'string' }, 'time-scale': { type: 'string' }, 'legacy-metrics': { type: 'boolean' }, 'tokenizer-impl': { type: 'string' } },
  });
  const impl = values['tokenizer-impl'];
  if (!values.config || (impl !== undefined && impl !== 'gateway' && impl !== 'reference')) {
    console.error('usage: npm run fleet -- --config FILE [--time-scale (0,1]] [--legacy-metrics] [--tokenizer-impl gateway|reference]');
    process.exit(2);
  }
  let cfg: GatewayConfig;
  let timeScale: number | undefined;
  try {
    cfg = loadConfigFile(values.config, process.env); // as the gateway reads it (env-held API keys must resolve)
    timeScale = fleetTimeScale(values['time-scale'], process.env);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  const opts: FleetOptions = { legacyMetrics: values['legacy-metrics'] ?? false };
  if (timeScale !== undefined) opts.timeScale = timeScale;
  // Every replica counts with the reference tokenizer (test/mock-replica/prompt-tokens.ts): the gateway's
  // predictions are then checked against code it does not share.
  if (impl !== undefined) opts.extraArgs = ['--tokenizer-impl', impl];
  const fleet = await startFleet(cfg, opts).catch((err: unknown) => {
    console.error((err as Error).message);
    process.exit(1);
  });
  for (const r of fleet.replicas) console.log(`${r.id} ${r.url} pid ${r.pid}`);
  console.log(`fleet: ${fleet.replicas.length} mock replicas running (time scale ${timeScale ?? 1}); Ctrl-C stops them`);
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    fleet.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

// realpath: started through a symlink (npm test's compiled tree links every source), the module's URL is its real path.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) await main();
