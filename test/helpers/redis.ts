// The real Redis the tests share (REDIS_URL, default 127.0.0.1:6379): one client per test file, key prefixes
// unique per test, and every key under them deleted when the file ends, so runs never see each other's state.
import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import { createRedisClient, type RedisClient } from '../../src/quota/redis-client.ts';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface TestRedis {
  readonly client: RedisClient;
  /** A new `test:<uuid>` key prefix, cleaned up by close(). */
  freshPrefix(): string;
  /** Deletes every key under the prefixes handed out, then quits the client. */
  close(): Promise<void>;
}

/** Connects (fails after 3 s when no Redis answers, naming the URL). */
export async function connectTestRedis(commandTimeoutMs = 2000): Promise<TestRedis> {
  const client = createRedisClient(REDIS_URL, { connectTimeoutMs: 2000, commandTimeoutMs });
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    setTimeout(() => reject(new Error(`no Redis at ${REDIS_URL}`)), 3000).unref();
  });
  const prefixes: string[] = [];
  return {
    client,
    freshPrefix: () => {
      const p = `test:${randomUUID()}`;
      prefixes.push(p);
      return p;
    },
    close: async () => {
      for (const p of prefixes) {
        const keys = await client.keys(`${p}:*`);
        if (keys.length > 0) await client.del(...keys);
      }
      await client.quit();
    },
  };
}

/**
 * For a test file: connects in node:test's before(), cleans up in after(). Read `client` inside tests only
 * (it exists once before() ran).
 */
export function useTestRedis(): { readonly client: RedisClient; freshPrefix(): string } {
  let redis: TestRedis | null = null;
  before(async () => {
    redis = await connectTestRedis();
  });
  after(async () => {
    await redis?.close();
  });
  const need = (): TestRedis => {
    if (redis === null) throw new Error('useTestRedis: used before the before() hook ran');
    return redis;
  };
  return {
    get client(): RedisClient {
      return need().client;
    },
    freshPrefix: () => need().freshPrefix(),
  };
}
