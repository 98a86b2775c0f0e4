// Composition root for `npm start -- --config FILE`: load config (GATEWAY_CONFIG or --config), start the
// gateway, reload on SIGHUP and on file change (an invalid file keeps the running config), drain on
// SIGTERM/SIGINT. No request logic here. Thread: main.
import { watch } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfigFile } from './config/load.ts';
import { startGateway } from './gateway.ts';
import type { LogLevel } from './logging/logger.ts';

const { values } = parseArgs({ options: { config: { type: 'string', short: 'c' } }, allowPositionals: false });
const env = process.env;
const path = values.config ?? env.GATEWAY_CONFIG;
if (!path) {
  console.error('usage: npm start -- --config FILE   (or GATEWAY_CONFIG=FILE)');
  process.exit(2);
}

let cfg;
try {
  cfg = loadConfigFile(path, env);
} catch (err) {
  console.error(err instanceof ConfigError ? err.message : String(err));
  process.exit(1);
}

const gateway = await startGateway(cfg, { env, logLevel: (env.LOG_LEVEL as LogLevel | undefined) ?? 'info' });
const log = gateway.log;

let reloading = false;
async function reload(reason: string): Promise<void> {
  if (reloading) return;
  reloading = true;
  try {
    const next = loadConfigFile(path!, env);
    await gateway.reload(next);
    log.info({ reason }, 'configuration applied');
    gateway.metrics.configReload('applied');
  } catch (err) {
    gateway.metrics.configReload('rejected');
    log.error({ reason, error: err instanceof Error ? err.message : String(err) }, 'configuration rejected; keeping the running one');
  } finally {
    reloading = false;
  }
}

// A rejected promise nobody awaited is a bug; log it with its stack rather than let Node 20 kill the process
// (and every stream on it).
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

process.on('SIGHUP', () => void reload('SIGHUP'));
let debounce: NodeJS.Timeout | null = null;
watch(path, () => {
  // Editors write files in several steps; apply the change once it settles.
  if (debounce) clearTimeout(debounce);
  debounce = setTimeout(() => void reload('file changed'), 200);
}).unref();

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal, inflight: gateway.inflightCount, grace_ms: gateway.services.cfg.server.shutdown_grace_ms }, 'draining');
  await gateway.close();
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
