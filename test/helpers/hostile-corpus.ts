// The hostile-input corpus (test/fixtures/hostile/corpus.jsonl): loads its cases, sends each over a fresh raw
// TCP connection, and judges what came back against the case's expectation. Used by
// test/integration/gateway/hostile-corpus.test.ts. Thread: main (test process).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sendRaw } from './raw-http.ts';

export type Segment = string | { hex: string } | { repeat: string; times: number };
/** generate.ts documents each form. */
export type Expect = { status: number; code?: string; forwarded?: true; noBody?: true } | 'closed' | 'silent';

export interface HostileCase { name: string; send: Segment[]; expect: Expect }

/** The corpus's first line: the gateway configuration its expectations assume. */
export interface CorpusMeta { max_body_bytes: number; api_key: string; model: string; max_context_tokens: number; cases: number }

export function loadCorpus(): { meta: CorpusMeta; cases: HostileCase[] } {
  const path = fileURLToPath(new URL('../fixtures/hostile/corpus.jsonl', import.meta.url));
  const [first, ...rest] = readFileSync(path, 'utf8').split('\n').filter(Boolean);
  const meta = (JSON.parse(first!) as { meta: CorpusMeta }).meta;
  const cases = rest.map((l) => JSON.parse(l) as HostileCase);
  if (cases.length !== meta.cases) throw new Error(`corpus.jsonl holds ${cases.length} cases, its header says ${meta.cases}`);
  return { meta, cases };
}

export function caseBytes(c: HostileCase): Buffer {
  return Buffer.concat(c.send.map((s) => {
    if (typeof s === 'string') return Buffer.from(s, 'utf8');
    if ('hex' in s) return Buffer.from(s.hex, 'hex');
    return Buffer.from(s.repeat.repeat(s.times), 'utf8');
  }));
}

export const expectsForward = (e: Expect): boolean => typeof e === 'object' && e.forwarded === true;

/** The x-request-id the case sends (generate.ts derives it from the name), if any. */
export function caseRequestId(c: HostileCase): string | undefined {
  const first = c.send.find((s): s is string => typeof s === 'string');
  return first === undefined ? undefined : /\r\nx-request-id: (hc-[0-9a-f]{8})\r\n/.exec(first)?.[1];
}

/** What the gateway did with one case, in the corpus's terms. */
export type Outcome =
  | { kind: 'reply'; status: number; head: string; body: string }
  | { kind: 'closed' }
  | { kind: 'silent' };

/** How long a case expected to get no byte back is watched before the client gives up on it. */
export const SILENT_WATCH_MS = 600;
/** No answer within this is a hang. */
export const ANSWER_TIMEOUT_MS = 8000;

export async function runCase(host: string, port: number, c: HostileCase): Promise<Outcome> {
  const quiet = c.expect === 'silent';
  const headOnly = typeof c.expect === 'object' && c.expect.noBody === true;
  const r = await sendRaw(host, port, [caseBytes(c)], quiet || headOnly ? SILENT_WATCH_MS : ANSWER_TIMEOUT_MS, headOnly);
  if (r.text === '') return r.closed ? { kind: 'closed' } : { kind: 'silent' };
  const end = r.text.indexOf('\r\n\r\n');
  const head = end === -1 ? r.text : r.text.slice(0, end);
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? 0);
  let body = end === -1 ? '' : r.text.slice(end + 4);
  if (/\r\ntransfer-encoding: chunked/i.test(head)) body = dechunk(body);
  // The socket carries latin1 text here; bodies are UTF-8.
  return { kind: 'reply', status, head, body: Buffer.from(body, 'latin1').toString('utf8') };
}

function dechunk(s: string): string {
  let out = '';
  let i = 0;
  for (;;) {
    const eol = s.indexOf('\r\n', i);
    if (eol === -1) return out;
    const n = parseInt(s.slice(i, eol), 16);
    if (!(n > 0)) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    i = eol + 2 + n + 2;
  }
}

/** Why `o` does not meet `c.expect`, or null when it does. */
export function mismatch(c: HostileCase, o: Outcome): string | null {
  const e = c.expect;
  const got = o.kind === 'reply' ? `${o.status} ${o.body.slice(0, 160)}` : o.kind;
  if (e === 'closed' || e === 'silent') return o.kind === e ? null : `expected ${e}, got ${got}`;
  if (o.kind !== 'reply') return `expected ${e.status}, got ${o.kind}`;
  if (o.status !== e.status) return `expected ${e.status}, got ${got}`;
  if (e.noBody === true) return o.body === '' ? null : `expected no body, got ${JSON.stringify(o.body.slice(0, 80))}`;
  if (e.code === undefined) return null;
  if (!/\r\ncontent-type: application\/json/i.test(o.head)) return `no JSON content-type: ${o.head}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(o.body);
  } catch {
    return `body is not JSON: ${got}`;
  }
  const err = (parsed as { error?: Record<string, unknown> }).error;
  if (err === undefined || Object.keys(parsed as object).length !== 1) return `not an OpenAI error envelope: ${got}`;
  if (typeof err.message !== 'string' || err.message === '' || typeof err.type !== 'string' || !(err.param === null || typeof err.param === 'string') || typeof err.code !== 'string') {
    return `malformed error fields: ${got}`;
  }
  if (Object.keys(err).sort().join() !== 'code,message,param,type') return `extra error fields: ${got}`;
  return err.code === e.code ? null : `expected code ${e.code}, got ${got}`;
}
