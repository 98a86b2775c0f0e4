// Raw HTTP/1.1 over a fresh TCP connection, for requests a plain client refuses to send (broken framing,
// absolute-form targets, invalid bytes). Resolves with everything received once the response is complete
// (content-length reached, or a chunked body's last chunk), the socket closed, or timeoutMs passed.
import { connect } from 'node:net';

export interface RawReply {
  text: string;
  closed: boolean;
}

/**
 * Writes `parts` in order on one connection. `keepOpen` waits for the timeout or the server's close even after
 * a complete response (to see whether the server closes the connection).
 */
export function sendRaw(host: string, port: number, parts: ReadonlyArray<string | Buffer>, timeoutMs: number, keepOpen = false): Promise<RawReply> {
  return new Promise((resolve) => {
    const sock = connect(port, host);
    let text = '';
    let closed = false;
    const done = (): void => {
      clearTimeout(t);
      sock.destroy();
      resolve({ text, closed });
    };
    const t = setTimeout(done, timeoutMs);
    sock.on('data', (d) => {
      text += d.toString('latin1');
      if (keepOpen) return;
      const head = text.indexOf('\r\n\r\n');
      if (head === -1) return;
      const m = /content-length: (\d+)/i.exec(text.slice(0, head));
      if (m && text.length >= head + 4 + Number(m[1])) done();
      else if (!m && text.endsWith('\r\n0\r\n\r\n')) done();
    });
    sock.on('close', () => {
      closed = true;
      done();
    });
    sock.on('error', () => undefined);
    for (const p of parts) sock.write(p);
  });
}
