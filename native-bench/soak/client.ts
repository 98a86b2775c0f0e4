// One soak request over real HTTP (fetch) and what its user saw: a complete answer, a stream cut by a fault
// (exactly one `data: {"error":…}` event and no [DONE]), an HTTP error status, or a broken answer (a stream
// with neither terminator, several error events, a transport error or a timeout): the last is never
// acceptable, the others are counted. Thread: the bench's main thread.
export type Outcome = 'ok' | 'cut' | 'http_error' | 'broken';

export interface Answer {
  outcome: Outcome;
  status: number;
  detail: string;
}

export async function sendSoakRequest(url: string, apiKey: string, body: string, stream: boolean, timeoutMs: number): Promise<Answer> {
  let status = 0;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    const text = await res.text();
    if (status !== 200) return { outcome: 'http_error', status, detail: /"code":\s*"([a-z_]+)"/.exec(text)?.[1] ?? '' };
    if (!stream) {
      const ok = (JSON.parse(text) as { choices?: unknown[] }).choices?.length === 1;
      return ok ? { outcome: 'ok', status, detail: '' } : { outcome: 'broken', status, detail: text.slice(0, 200) };
    }
    const errors = text.split('\n\n').filter((f) => f.startsWith('data: {"error"')).length;
    const done = text.endsWith('data: [DONE]\n\n');
    if (errors === 0 && done) return { outcome: 'ok', status, detail: '' };
    if (errors === 1 && !text.includes('data: [DONE]')) return { outcome: 'cut', status, detail: '' };
    return { outcome: 'broken', status, detail: `${errors} error events, [DONE] ${done}: …${text.slice(-200)}` };
  } catch (err) {
    return { outcome: 'broken', status, detail: (err as Error).message };
  }
}
