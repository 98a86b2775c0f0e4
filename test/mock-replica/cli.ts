// `npm run mock -- FLAGS`: one mock vLLM replica in this process. Prints one line with its URL once it
// listens (spawnMockReplica parses it); SIGTERM/SIGINT close it. Thread: main (mock process). Setup only.
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { ProfileName } from './engine/types.ts';
import { DEFAULT_MODEL, PROFILE_NAMES, type MockOptions } from './options.ts';

const USAGE = `usage: npm run mock -- [--port N] [--host H] [--model NAME] [--profile ${PROFILE_NAMES.join('|')}]
  [--num-gpu-blocks N] [--block-size 16] [--max-num-seqs N] [--max-num-batched-tokens N] [--max-loras N]
  [--lora NAME]... [--time-scale (0,1]] [--seed N] [--max-model-len N] [--legacy-metrics]
  [--kv-events tcp://HOST:PORT] [--tokenizer DIR] [--tokenizer-impl gateway|reference]`;

function fail(message: string): never {
  console.error(`mock: ${message}\n${USAGE}`);
  process.exit(2);
}

function intFlag(values: Record<string, unknown>, name: string, min: number): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) fail(`--${name} must be an integer >= ${min}, got ${String(v)}`);
  return n;
}

export function parseMockArgs(argv: string[]): MockOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        model: { type: 'string' },
        profile: { type: 'string' },
        'num-gpu-blocks': { type: 'string' },
        'block-size': { type: 'string' },
        'max-num-seqs': { type: 'string' },
        'max-num-batched-tokens': { type: 'string' },
        'max-loras': { type: 'string' },
        lora: { type: 'string', multiple: true },
        'time-scale': { type: 'string' },
        seed: { type: 'string' },
        'max-model-len': { type: 'string' },
        'legacy-metrics': { type: 'boolean' },
        'kv-events': { type: 'string' },
        tokenizer: { type: 'string' },
        'tokenizer-impl': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    fail((err as Error).message);
  }
  const v = parsed.values;
  if (v.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const profile = (v.profile ?? 'llama-8b-a100') as ProfileName;
  if (!PROFILE_NAMES.includes(profile)) fail(`--profile must be one of ${PROFILE_NAMES.join(', ')}`);
  let timeScale: number | undefined;
  if (v['time-scale'] !== undefined) {
    timeScale = Number(v['time-scale']);
    if (!(timeScale > 0 && timeScale <= 1)) fail(`--time-scale must be in (0, 1], got ${v['time-scale']}`);
  }
  const opts: MockOptions = {
    profile,
    port: intFlag(v, 'port', 0) ?? 0,
    host: v.host ?? '127.0.0.1',
    numGpuBlocks: intFlag(v, 'num-gpu-blocks', 2),
    blockSize: intFlag(v, 'block-size', 1),
    maxNumSeqs: intFlag(v, 'max-num-seqs', 1),
    maxNumBatchedTokens: intFlag(v, 'max-num-batched-tokens', 1),
    maxLoras: intFlag(v, 'max-loras', 1),
    loras: v.lora ?? [],
    timeScale,
    seed: intFlag(v, 'seed', 0),
    maxModelLen: intFlag(v, 'max-model-len', 2),
    legacyMetrics: v['legacy-metrics'] ?? false,
  };
  if (v.model !== undefined) opts.model = v.model;
  if (v['kv-events'] !== undefined) {
    if (!/^tcp:\/\/[^/\s]+:\d+$/.test(v['kv-events'])) fail(`--kv-events must be tcp://HOST:PORT, got ${v['kv-events']}`);
    opts.kvEvents = v['kv-events'];
  }
  if (v.tokenizer !== undefined) opts.tokenizer = resolve(v.tokenizer);
  const impl = v['tokenizer-impl'];
  if (impl !== undefined) {
    if (impl !== 'gateway' && impl !== 'reference') fail(`--tokenizer-impl must be gateway or reference, got ${impl}`);
    opts.tokenizerImpl = impl;
  }
  // exactOptionalPropertyTypes is off, but keep undefined keys out so engine defaults apply cleanly.
  for (const k of Object.keys(opts) as Array<keyof MockOptions>) if (opts[k] === undefined) delete opts[k];
  return opts;
}

async function main(): Promise<void> {
  const opts = parseMockArgs(process.argv.slice(2));
  // Imported after the flags are checked: the tokenizer and engine take a few seconds to load.
  const { startMockReplica } = await import('./server.ts');
  const replica = await startMockReplica(opts).catch((err: unknown) => {
    console.error(`mock: cannot start: ${(err as Error).message}`);
    process.exit(1);
  });
  console.log(`mock vLLM replica listening on ${replica.url} (model ${opts.model ?? DEFAULT_MODEL}, profile ${opts.profile}, pid ${process.pid})`);
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    replica.close().then(() => process.exit(0), () => process.exit(1));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Spawned by spawn-replica.ts: the parent holds our stdin; when it dies the pipe ends and so do we.
  if (process.env.MOCK_REPLICA_EXIT_WITH_PARENT === '1') {
    process.stdin.on('end', stop);
    process.stdin.on('error', stop);
    process.stdin.resume();
  }
}

// realpath: started through a symlink (npm test's compiled tree links every source), the module's URL is its real path.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) await main();
