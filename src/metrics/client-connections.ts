// Client connections on the gateway's listen port, counted from the kernel's socket tables (/proc/net/tcp and
// /proc/net/tcp6) at scrape time. This uWS build gives JavaScript no per-connection open/close hook, so a
// connection that never sends a request is invisible to the gateway's own code; the kernel sees every one.
// Thread: main. Runs once per GET /metrics, never per request: two file reads and one pass over their lines
// (about 130 bytes per socket in the network namespace; 10,000 rows scan in about 5 ms).
import { open, type FileHandle } from 'node:fs/promises';

export interface ClientConnectionCounts {
  /** Sockets some process holds a descriptor for (ESTABLISHED, CLOSE_WAIT …): accepted by the gateway. */
  accepted: number;
  /** Handshakes the kernel completed that wait in the listen sockets' accept queues (no descriptor yet). */
  queued: number;
}

const TABLES = ['/proc/net/tcp', '/proc/net/tcp6'] as const;
const LISTEN = '0A';

/**
 * Holds both tables open for the gateway's life and re-reads them from offset 0 per count. Opening them per
 * scrape would need a free descriptor, and the moment the count matters most is when the process has none
 * left (uWS accepts until the open-file limit, see README "Errors"); a seq file read at offset 0 restarts.
 */
export class ClientConnectionCounter {
  private buf = Buffer.allocUnsafe(64 * 1024);

  private constructor(private readonly files: FileHandle[], private readonly portHex: string) {}

  /** A table that cannot be opened (not Linux, no IPv6) is skipped; with none, count() rejects. */
  static async open(port: number): Promise<ClientConnectionCounter> {
    const files = (await Promise.all(TABLES.map((f) => open(f, 'r').catch(() => null)))).filter((f) => f !== null);
    return new ClientConnectionCounter(files, `:${port.toString(16).toUpperCase().padStart(4, '0')} `);
  }

  async count(): Promise<ClientConnectionCounts> {
    if (this.files.length === 0) throw new Error('no /proc/net/tcp table readable');
    const out: ClientConnectionCounts = { accepted: 0, queued: 0 };
    for (const f of this.files) countTable(await this.readAll(f), this.portHex, out);
    return out;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.files.map((f) => f.close()));
    this.files.length = 0;
  }

  private async readAll(f: FileHandle): Promise<string> {
    let n = 0;
    for (;;) {
      if (n === this.buf.length) {
        const bigger = Buffer.allocUnsafe(this.buf.length * 2);
        this.buf.copy(bigger, 0, 0, n);
        this.buf = bigger; // kept: the table's size is the next scrape's best guess
      }
      const { bytesRead } = await f.read(this.buf, n, this.buf.length - n, n);
      if (bytesRead === 0) return this.buf.toString('latin1', 0, n);
      n += bytesRead;
    }
  }
}

/**
 * One table. Each row: `sl: local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode …`, local as
 * HEXADDR:PORT. A listen row's rx_queue is its accept queue's current length (tx_queue its maximum); an
 * accepted socket has a non-zero inode, while a connection still in the accept queue, or closed by the
 * gateway and lingering in FIN_WAIT/TIME_WAIT, has inode 0 (no descriptor). Exported for the unit test.
 */
export function countTable(text: string, portHex: string, out: ClientConnectionCounts): void {
  let lineStart = text.indexOf('\n') + 1; // skip the header
  while (lineStart > 0 && lineStart < text.length) {
    let lineEnd = text.indexOf('\n', lineStart);
    if (lineEnd < 0) lineEnd = text.length;
    const colon = text.indexOf(': ', lineStart);
    if (colon > 0 && colon < lineEnd) {
      const localStart = colon + 2;
      const localEnd = text.indexOf(' ', localStart);
      // Compare the port with its trailing space in place: no substring per row that is not ours.
      if (localEnd > 0 && text.startsWith(portHex, localEnd - portHex.length + 1)) {
        const f = text.slice(localEnd + 1, lineEnd).trim().split(/\s+/);
        // f: rem, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode, …
        if (f[1] === LISTEN) out.queued += Number.parseInt(f[2]!.slice(f[2]!.indexOf(':') + 1), 16) || 0;
        else if (f[7] !== undefined && f[7] !== '0') out.accepted++;
      }
    }
    lineStart = lineEnd + 1;
  }
}
