// upstreamBody appends the gateway's overrides (model, max_tokens, stream_options) to the client's own bytes as
// later duplicates of their keys instead of re-serialising the parsed body. That is only right if the replica
// keeps the last of duplicate keys: vLLM's FastAPI reads the body with Python's json, and its request models
// are pydantic. Here the bodies the gateway would send are read by Python's json.loads and by pydantic's
// model_validate_json in a python3 process, and by JSON.parse, and each must see the gateway's values, with
// every other field the client's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { parseBody, upstreamBody, type ParsedBody, type Route } from '../../../src/pipeline/parse-body.ts';

const PY = String.raw`
import json, sys
from typing import Optional
from pydantic import BaseModel, ConfigDict

class Request(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    max_tokens: Optional[int] = None
    max_completion_tokens: Optional[int] = None
    max_output_tokens: Optional[int] = None
    stream_options: Optional[dict] = None

out = []
for line in sys.stdin:
    body = json.loads(line)
    d = json.loads(body)
    m = Request.model_validate_json(body)
    out.append({"json": d, "pydantic": m.model_dump()})
print(json.dumps(out))
`;

interface Seen { json: Record<string, unknown>; pydantic: Record<string, unknown> }

function python(bodies: string[]): Seen[] {
  const stdout = execFileSync('python3', ['-c', PY], { input: bodies.map((b) => JSON.stringify(b)).join('\n') + '\n', encoding: 'utf8' });
  return JSON.parse(stdout) as Seen[];
}

function parsed(route: Route, text: string): ParsedBody {
  const p = parseBody(route, Buffer.from(text));
  assert.ok(!('code' in p), `rejected: ${JSON.stringify(p)}`);
  return p;
}

const CASES: Array<{ name: string; route: Route; text: string; stream: boolean; keep: Record<string, unknown> }> = [
  {
    name: 'chat stream with the three keys the gateway overrides',
    route: 'chat',
    text: JSON.stringify({ model: 'alias', messages: [{ role: 'user', content: 'héllo "quoted" \u2028 😀' }], max_tokens: 7, stream: true, stream_options: { include_usage: false }, temperature: 0.3 }),
    stream: true,
    keep: { temperature: 0.3, stream: true, messages: [{ role: 'user', content: 'héllo "quoted" \u2028 😀' }] },
  },
  {
    name: 'max_completion_tokens, which vLLM prefers to max_tokens, and stream_options with another field',
    route: 'chat',
    text: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], model: 'alias', max_completion_tokens: 9, stream: true, stream_options: { continuous_usage_stats: true } }),
    stream: true,
    keep: { stream: true },
  },
  {
    name: 'a client body that already repeats model (the last wins for the gateway too), pretty-printed, trailing whitespace',
    route: 'completions',
    text: '{\n  "model": "first",\n  "prompt": "p",\n  "model": "alias",\n  "max_tokens": 3\n}\n\t ',
    stream: false,
    keep: { prompt: 'p' },
  },
  {
    name: 'no override key in the client body at all',
    route: 'completions',
    text: '{"model":"alias","prompt":[1,2,3]}',
    stream: false,
    keep: { prompt: [1, 2, 3] },
  },
];

test('Python json, pydantic and JSON.parse read the gateway\'s values from the spliced body, and the client\'s for the rest', () => {
  const bodies = CASES.map((c) => {
    const p = parsed(c.route, c.text);
    assert.equal(p.model, 'alias', c.name);
    return upstreamBody(p, 'served-model', 42);
  });
  const seen = python(bodies);
  CASES.forEach((c, i) => {
    const js = JSON.parse(bodies[i]!) as Record<string, unknown>;
    for (const [who, d] of [['JSON.parse', js], ['python json', seen[i]!.json], ['pydantic', seen[i]!.pydantic]] as const) {
      const at = `${c.name} (${who})`;
      assert.equal(d.model, 'served-model', at);
      assert.equal(d.max_tokens, 42, at);
      assert.equal(d.max_completion_tokens ?? null, null, `${at}: nothing that would win over max_tokens`);
      if (c.stream) assert.equal((d.stream_options as Record<string, unknown>).include_usage, true, at);
      else assert.equal(d.stream_options ?? null, null, at);
      for (const [k, v] of Object.entries(c.keep)) assert.deepEqual(d[k], v, `${at}: ${k}`);
    }
    if (c.text.includes('continuous_usage_stats')) assert.deepEqual(js.stream_options, { continuous_usage_stats: true, include_usage: true });
  });
});

test('a Responses body gets its max_output_tokens and model the same way', () => {
  const p = parsed('responses', JSON.stringify({ model: 'alias', input: 'hi', max_output_tokens: 5, store: false }));
  const body = upstreamBody(p, 'served-model', 77);
  const [seen] = python([body]);
  for (const d of [JSON.parse(body) as Record<string, unknown>, seen!.json, seen!.pydantic]) {
    assert.equal(d.model, 'served-model');
    assert.equal(d.max_output_tokens, 77);
    assert.equal(d.input, 'hi');
    assert.equal(d.store, false);
  }
});
