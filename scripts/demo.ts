// `npm run demo`: the contract's demo fleet (config/demo.yaml: 70B x2, 8B x4, LoRA x2 mock replicas, each its
// own process) plus a gateway on http://127.0.0.1:8080, quota in memory unless REDIS_URL is set. Prints the
// demo keys and a curl line. Ctrl-C stops everything it started.
import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../src/config/load.ts';
import { startGateway } from '../src/gateway.ts';
import type { LogLevel } from '../src/logging/logger.ts';
import { fleetTimeScale, startFleet } from '../test/mock-replica/fleet.ts';

const env = process.env;
const path = env.GATEWAY_CONFIG ?? fileURLToPath(new URL('../config/demo.yaml', import.meta.url));
const cfg = loadConfigFile(path, env);
const timeScale = fleetTimeScale(undefined, env) ?? 1;

console.log(`starting ${cfg.pools.reduce((n, p) => n + p.replicas.length, 0)} mock vLLM replicas (time scale ${timeScale})…`);
const fleet = await startFleet(cfg, { timeScale });
let gateway;
try {
  gateway = await startGateway(cfg, { env, logLevel: (env.LOG_LEVEL as LogLevel | undefined) ?? 'warn' });
} catch (err) {
  await fleet.stop();
  throw err;
}

console.log(`
Expediter demo gateway: ${gateway.url}
  pools: ${cfg.pools.map((p) => `${p.model}${p.aliases.length ? ` (${p.aliases.join(', ')})` : ''} x${p.replicas.length}`).join('; ')}
  quota store: ${cfg.quota.backend}${cfg.quota.backend === 'redis' ? ` (${cfg.quota.redis_url})` : ''}

Demo API keys:
  sk-demo-alpha   tenant alpha: burst 2,000,000 tokens, 200,000 tokens/s, 256 in flight
  sk-demo-tiny    tenant tiny:  burst 4,000 tokens, 100 tokens/s, 2 in flight (429: three requests at once, or two with max_tokens 2000)

Try:
  curl -N ${gateway.url}/v1/chat/completions -H 'authorization: Bearer sk-demo-alpha' -H 'content-type: application/json' \\
    -d '{"model":"gpt-fast","stream":true,"messages":[{"role":"user","content":"Hello!"}],"max_tokens":32}'

Ctrl-C stops the gateway and every replica.`);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping…');
  await gateway!.close(5000);
  await fleet.stop();
  process.exit(0);
}
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
