// The mock's KV-event publisher binds its endpoint again right after closing it (a mock restarted on its port,
// the publisher stopped and started), as a restarted vLLM does. ZeroMQ frees a closed socket's port on its I/O
// thread a moment later, so a bare rebind fails with EADDRINUSE about two times in three on this machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { KvEventPublisher } from '../../mock-replica/kv-events/publisher.ts';

/** A free loopback port whose next one is free too (the replay ROUTER binds port + 1). */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const nextFree = await new Promise<boolean>((resolve) => {
      const s = createServer().once('error', () => resolve(false)).listen(port + 1, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (nextFree) return port;
  }
}

void test('closed and bound again at once, twenty times: every bind succeeds and the publisher publishes', async () => {
  const endpoint = `tcp://127.0.0.1:${await freePortPair()}`;
  const p = await KvEventPublisher.start(endpoint, 16);
  try {
    for (let i = 0; i < 20; i++) {
      await p.close();
      assert.equal(p.publishing, false);
      await p.open();
      assert.equal(p.publishing, true, `rebind ${i}`);
    }
  } finally {
    await p.close();
  }
});

void test('a port another socket holds is still refused, after the retry window', async () => {
  const port = await freePortPair();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
  try {
    const t0 = performance.now();
    await assert.rejects(KvEventPublisher.start(`tcp://127.0.0.1:${port}`, 16), /address already in use/i);
    assert.ok(performance.now() - t0 >= 1900, 'it waited for the port before giving up');
  } finally {
    holder.close();
  }
});
