// Slowloris: a client that trickles its request headers, or its body, one piece every 2 s forever. uWS
// closes any HTTP connection that has not finished its request after its fixed idle timeout (10 s, checked on
// a 4 s tick, so 8-12 s) whatever it trickles: both are closed with no reply, the gateway holds nothing for
// them afterwards and keeps serving. The bounds here (6-20 s) leave room for a loaded machine.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { ALPHA_KEY, startStack, waitFor } from '../../helpers/start-gateway.ts';

function trickle(port: number, head: string, piece: string): Promise<{ ms: number; reply: string }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const t0 = Date.now();
    let reply = '';
    const iv = setInterval(() => s.write(piece), 2000);
    s.on('data', (d: Buffer) => { reply += d.toString(); });
    s.on('error', () => { /* a reset is a close too */ });
    s.on('close', () => {
      clearInterval(iv);
      resolve({ ms: Date.now() - t0, reply });
    });
    s.write(head);
  });
}

test('trickled headers and trickled bodies are closed by the idle timeout, with nothing held', async (t) => {
  const stack = await startStack();
  t.after(() => stack.close());
  const port = Number(new URL(stack.url).port);
  const [headers, body] = await Promise.all([
    trickle(port, 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n', 'x-slow: 1\r\n'),
    trickle(port, `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALPHA_KEY}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"model":`, ' '),
  ]);
  t.diagnostic(`headers closed after ${headers.ms} ms, body after ${body.ms} ms`);
  for (const r of [headers, body]) {
    assert.ok(r.ms >= 6000 && r.ms <= 20_000, `closed after ${r.ms} ms`);
    assert.equal(r.reply, '', 'no reply to a request that never finished');
  }
  await waitFor(() => stack.gateway.inflightCount === 0, 2000);
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'after' }], max_tokens: 2 }),
  });
  assert.equal(res.status, 200);
});
