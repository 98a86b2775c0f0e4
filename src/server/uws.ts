// The one module that imports uWebSockets.js. Pinned to @trufflesuite/uws-js-unofficial@20.30.0-unofficial.0
// (uWebSockets.js v20.30 on the uWS v20.43 core, prebuilt for Node ABI 115 on glibc 2.36). Swapping the build means changing this file only.
// Its HTTP parser's limits are compiled in and read from no environment variable (UWS_HTTP_MAX_HEADERS_SIZE came
// with uWS v20.50): 4 KiB of an unfinished head kept between reads, a 512 KiB read buffer, 48 header fields, a
// 10 s idle timeout. The gateway's own head cap and Keep-Alive hint build on them (docs/operations.md).
// Thread: main. Setup only.
import uws from '@trufflesuite/uws-js-unofficial';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket };

/**
 * The package silently falls back to a slow pure-JS server when its native binary does not load. The native
 * build exports H3App; the fallback does not. main.ts refuses to start on the fallback unless told to.
 */
export const uwsIsNative: boolean = 'H3App' in uws;

export function createApp(): TemplatedApp {
  // uWS writes `uWebSockets: 20` into every response head unless its loop is "silent"; `_cfg('silent')` is the
  // build's switch for it (addon.cpp's uWS_cfg → Loop::setSilent). It is per thread's loop and costs nothing per
  // response. The Date header stays: HTTP/1.1 asks for it.
  uws._cfg('silent');
  return uws.App();
}

export function closeListenSocket(s: us_listen_socket): void {
  uws.us_listen_socket_close(s);
}

export function listenPort(s: us_listen_socket): number {
  return uws.us_socket_local_port(s as unknown as Parameters<typeof uws.us_socket_local_port>[0]);
}

/** Closes the app's listen sockets and every open connection. The build has App.close() (uWS.js ≥ 20.20) without its typing. */
export function closeApp(app: TemplatedApp): void {
  (app as TemplatedApp & { close(): void }).close();
}
