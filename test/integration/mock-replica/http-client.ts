// A bare node:http client for the mock replica's tests: it sees the raw bytes, when headers arrive, and can
// drop the socket mid-stream (fetch hides all three). Thread: main (test process).
import { request, type IncomingMessage } from 'node:http';

export interface OpenStream {
  /** Resolves with the response head (status, headers) once it arrives. */
  head: Promise<IncomingMessage>;
  /** Body text received so far. */
  text(): string;
  /** Complete `data: …` frames received so far (payload strings). */
  frames(): string[];
  /** Resolves when the body ended ('end') or the socket failed ('error'), with the full text. */
  done: Promise<{ outcome: 'end' | 'error'; text: string }>;
  /** Resolves once at least `n` frames arrived (rejects if the stream ends first). */
  waitFrames(n: number): Promise<void>;
  /** Destroys the client socket at once (a client that hangs up). */
  destroy(): void;
}

export function openStream(baseUrl: string, path: string, body: unknown, headers: Record<string, string> = {}): OpenStream {
  let text = '';
  const waiters: Array<{ n: number; resolve: () => void; reject: (e: Error) => void }> = [];
  // A Responses API event's `event: TYPE` line is dropped: frames are the data payloads.
  const frames = (): string[] => text.split('\n\n').map((f) => f.replace(/^event: [^\n]*\n/, '')).filter((f) => f.startsWith('data: ')).map((f) => f.slice(6)).slice(0, text.endsWith('\n\n') ? undefined : -1);
  const check = (): void => {
    const have = frames().length;
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (have >= waiters[i]!.n) {
        waiters[i]!.resolve();
        waiters.splice(i, 1);
      }
    }
  };
  let settle!: (v: { outcome: 'end' | 'error'; text: string }) => void;
  const done = new Promise<{ outcome: 'end' | 'error'; text: string }>((r) => (settle = r));
  const req = request(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } });
  const head = new Promise<IncomingMessage>((resolve, reject) => {
    req.on('response', (res) => {
      resolve(res);
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        check();
      });
      res.on('end', () => settle({ outcome: 'end', text }));
      res.on('error', () => settle({ outcome: 'error', text }));
      res.on('aborted', () => settle({ outcome: 'error', text }));
    });
    req.on('error', (e) => {
      reject(e);
      settle({ outcome: 'error', text });
    });
  });
  head.catch(() => undefined);
  let status = 0;
  void head.then((res) => (status = res.statusCode ?? 0), () => undefined);
  void done.then(({ outcome }) => {
    // What came instead of the frames (an error answer's status and body) says why the stream ended early.
    const what = `stream ended (${outcome}, HTTP ${status || 'none'}) with ${frames().length} frames: ${text.slice(0, 300)}`;
    for (const w of waiters.splice(0)) w.reject(new Error(what));
  });
  req.end(JSON.stringify(body));
  return {
    head,
    text: () => text,
    frames,
    done,
    waitFrames: (n) => new Promise<void>((resolve, reject) => {
      waiters.push({ n, resolve, reject });
      check();
    }),
    destroy: () => req.destroy(),
  };
}

export interface MockState {
  running: number;
  waiting: number;
  free_blocks: number;
  total_blocks: number;
  cached_blocks: number;
  preemptions: number;
  aborted: number;
  completed: number;
  loaded_adapters: string[];
  requests: Array<{ id: string; state: string; adapter: string | null; prompt_tokens: number; cached_tokens: number; output_tokens: number }>;
}

export async function mockState(baseUrl: string): Promise<MockState> {
  return (await (await fetch(`${baseUrl}/_mock/state`)).json()) as MockState;
}

export async function setFault(baseUrl: string, fault: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${baseUrl}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(fault) });
  if (res.status !== 200) throw new Error(`POST /_mock/faults answered ${res.status}: ${await res.text()}`);
}

export async function postJson(baseUrl: string, path: string, body: unknown): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
