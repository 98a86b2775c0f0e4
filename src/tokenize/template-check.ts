// At startup, each pool with a Jinja chat template renders a representative set of conversations (system,
// multi-turn, tools, a tool round trip, reasoning, images, leading whitespace); each that the template refuses
// (raise_exception) or that our renderer cannot render as vLLM would is reported by name, so an operator sees
// "pool qwen: tool round trip: unsupported: Unknown filter ..." before the first request is served on an
// estimate (jinja-template.ts) rather than in a request's 400.
// Thread: main. Setup only: ~7 renders per pool.
import { ChatTemplateError } from './chat-template.ts';
import { TemplateRenderError, renderJinja } from './jinja-template.ts';
import { promptRefs, type PoolTokenizerFields } from './pool-refs.ts';
import { isBuiltinTemplate } from './prompt-template.ts';
import { getTokenizer } from './tokenizer.ts';
import type { ChatMessage } from './types.ts';

const WEATHER_TOOL = {
  type: 'function',
  function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

/** The conversations every Jinja pool renders at startup, by name. */
export const REPRESENTATIVE_CONVERSATIONS: ReadonlyArray<{ name: string; messages: ChatMessage[]; tools: unknown[] | null }> = [
  { name: 'system', messages: [{ role: 'system', content: 'You are a careful assistant.' }, { role: 'user', content: 'Hello!' }], tools: null },
  { name: 'multi-turn', messages: [{ role: 'user', content: 'What is 2+2?' }, { role: 'assistant', content: '4.' }, { role: 'user', content: 'And 3+3?' }], tools: null },
  { name: 'tools', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [WEATHER_TOOL] },
  {
    name: 'tool round trip',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 18}' },
    ],
    tools: [WEATHER_TOOL],
  },
  { name: 'reasoning', messages: [{ role: 'user', content: 'Sort [3,1,2].' }, { role: 'assistant', content: '<think>\nUse sorted().\n</think>\n\n    sorted([3, 1, 2])' }, { role: 'user', content: 'Thanks' }], tools: null },
  { name: 'images', messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] as unknown as ChatMessage['content'] }], tools: null },
  { name: 'leading whitespace', messages: [{ role: 'user', content: '\n\n   indented question\n' }], tools: null },
];

export interface TemplateProblem {
  pool: string;
  conversation: string;
  /** 'raises' (the template's own raise_exception), or the fallback reason. */
  reason: string;
  message: string;
}

/** Renders the representative set for every pool with a Jinja template; returns what failed, by name. */
export function checkPoolTemplates(pools: ReadonlyArray<PoolTokenizerFields & { id: string }>): TemplateProblem[] {
  const problems: TemplateProblem[] = [];
  for (const pool of pools) {
    const refs = promptRefs(pool);
    if (isBuiltinTemplate(refs.template)) continue;
    const tokenizer = getTokenizer(refs.tokenizer);
    for (const c of REPRESENTATIVE_CONVERSATIONS) {
      try {
        renderJinja(refs.template, c.messages, c.tools, tokenizer);
      } catch (err) {
        if (err instanceof ChatTemplateError) problems.push({ pool: pool.id, conversation: c.name, reason: 'raises', message: err.message });
        else if (err instanceof TemplateRenderError) problems.push({ pool: pool.id, conversation: c.name, reason: err.reason, message: err.message });
        else throw err;
      }
    }
  }
  return problems;
}
