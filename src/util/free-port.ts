// A port free right now on a host (the kernel's pick), for `server.port: 0` (tests). The gateway binds that
// port explicitly rather than binding 0: reuse-port sockets cannot share an ephemeral pick in this uWS build,
// and a socket bound to 0 cannot be bound again while a connection it accepted is open, which re-listening
// after an open-file-limit pause needs (src/server/listen-guard.ts). Another process may take the port
// between the pick and the bind; callers retry with a new pick. Thread: main, setup only.
import { createServer } from 'node:net';

export const FREE_PORT_ATTEMPTS = 5;

export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
