// `node --import tsx native-bench/load/cli.ts --origin http://127.0.0.1:8080 [flags]`: one closed-loop run
// against any OpenAI-compatible endpoint, printing the LoadResult as JSON. For ad-hoc checks; the relay
// scenario calls runLoad() directly. Thread: main. Not on a hot path.
// Flags: --origin URL (repeatable), --path, --model, --api-key, --stream, --max-tokens N, --concurrency N,
// --requests N, --duration-s S, --warmup N, --pid PID (repeatable: CPU per request of that process tree).
import { parseArgs } from 'node:util';
import { runLoad } from './load-generator.ts';
import { chatBody } from './openai-bodies.ts';

const { values } = parseArgs({
  options: {
    origin: { type: 'string', multiple: true, default: ['http://127.0.0.1:8080'] },
    path: { type: 'string', default: '/v1/chat/completions' },
    model: { type: 'string', default: 'llama-3.1-8b-instruct' },
    'api-key': { type: 'string', default: 'sk-demo-alpha' },
    stream: { type: 'boolean', default: false },
    'max-tokens': { type: 'string', default: '16' },
    concurrency: { type: 'string', default: '32' },
    requests: { type: 'string', default: '2000' },
    'duration-s': { type: 'string', default: '30' },
    warmup: { type: 'string' },
    pid: { type: 'string', multiple: true, default: [] },
  },
});

const concurrency = Number(values.concurrency);
const result = await runLoad({
  origins: values.origin,
  path: values.path,
  body: chatBody({ model: values.model, maxTokens: Number(values['max-tokens']), stream: values.stream }),
  headers: { authorization: `Bearer ${values['api-key']}` },
  stream: values.stream,
  concurrency,
  requests: Number(values.requests),
  maxDurationMs: Number(values['duration-s']) * 1000,
  warmupRequests: values.warmup === undefined ? concurrency * 4 : Number(values.warmup),
  cpuPids: values.pid.length > 0 ? { target: values.pid.map(Number) } : {},
});
console.log(JSON.stringify(result, null, 2));
process.exit(result.errors > 0 ? 1 : 0);
