// Chat templates rendered as vLLM renders them, as a list of per-message text segments.
// Thread: any (acceptor or tokenize worker). Hot path: one string concat per message, no regex.
// Why segments: every segment starts with a special token (<|begin_of_text|>/<|start_header_id|> or
// <|im_start|>) and the text between two specials never crosses a segment boundary, so
// tokens(join(segments)) == concat(tokens(segment)). The per-message token cache (phase 2) relies on it;
// test/unit/tokenize/chat-template.test.ts and prompt.test.ts check it on a corpus.
//
// llama3.1 follows the Llama 3.1 Instruct tokenizer_config.json template as vLLM applies it with
// add_generation_prompt=true, no tools, no date_string (so "26 Jul 2024"):
//  - the first message is pulled out as the system message when its role is "system" (content trimmed);
//    the system turn is always emitted, opening with the knowledge-cutoff and date lines;
//  - other turns: <|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>;
//  - an assistant turn with tool_calls renders the single call as {"name": ..., "parameters": ...};
//  - tool/ipython turns use the "ipython" header and tojson(content) (a string is "iterable" in Jinja, so
//    it is JSON-quoted), untrimmed.
//  - request-level `tools` (non-null): "Environment: ipython\n" opens the system turn, and the first
//    remaining message becomes a user turn listing each tool as tojson(indent=4) (tools_in_user_message);
//    each tool is first normalised as vLLM's pydantic model_dump() shapes it (see vllmToolDump).
// Content arrays are reduced as vLLM does for "string"-format templates: text parts joined with "\n";
// null content is "". `trim` is Python's str.strip() (its whitespace set differs from JS's trim()).
// Not modelled: continue_final_message, chat_template_kwargs; chatml ignores tools.
import type { ChatContentPart, ChatMessage, ChatTemplateName, ChatToolCall } from './types.ts';

/** The template refused the messages, as the model's Jinja template raises (vLLM answers 400). */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

const LLAMA_SYSTEM_PREAMBLE = 'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n';
const LLAMA_GENERATION_PROMPT = '<|start_header_id|>assistant<|end_header_id|>\n\n';
const CHATML_GENERATION_PROMPT = '<|im_start|>assistant\n';

/** Text-like content part types and the field holding their text, as vLLM's chat parser reads them. */
const TEXT_PART_FIELDS: Readonly<Record<string, string>> = { text: 'text', input_text: 'text', output_text: 'text', refusal: 'refusal', thinking: 'thinking' };

/** Message content as the template sees it: a string, text parts joined with "\n", or "" for null. */
export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  // Bodies are parsed JSON: a shape the types rule out can still arrive, and must be a 400, not a crash.
  if (!Array.isArray(content)) throw new ChatTemplateError('message content must be a string or an array of content parts');
  let out = '';
  let first = true;
  for (const part of content as unknown[]) {
    let text: unknown;
    if (typeof part === 'string') text = part;
    else {
      const type = typeof part === 'object' && part !== null ? (part as ChatContentPart).type : undefined;
      const field = type === undefined ? undefined : TEXT_PART_FIELDS[type];
      // vLLM's parser: text-like parts give their text; media parts need a multimodal model (the built-in
      // templates are text models'), anything else is an unknown part type. Both are 400s there.
      if (field === undefined) throw new ChatTemplateError(type === undefined ? "Missing 'type' field in multimodal part." : `content parts of type ${type} are not supported by this text model`);
      text = (part as Record<string, unknown>)[field];
      if (text === undefined || text === null) continue;
    }
    if (typeof text !== 'string') throw new ChatTemplateError('a text content part needs a string "text"');
    out = first ? text : `${out}\n${text}`;
    first = false;
  }
  return out;
}

// Python's str.isspace() set: JS's String.prototype.trim() also strips U+FEFF and misses U+001C-U+001F, U+0085.
const PY_WHITESPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002,
  0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

/** Jinja's `trim` filter, i.e. Python's str.strip() with no argument. */
export function pythonStrip(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && PY_WHITESPACE.has(text.charCodeAt(start))) start++;
  while (end > start && PY_WHITESPACE.has(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/**
 * The `tojson` filter of transformers' chat-template environment: json.dumps(x, ensure_ascii=False) with
 * Python's default separators (", " and ": "), keys in insertion order.
 */
export function pythonToJson(value: unknown, indent: number | null = null, depth = 0): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
    // JSON.parse gives no int/float distinction; integral values print as Python ints.
    return JSON.stringify(value);
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  const items: string[] = [];
  const isArray = Array.isArray(value);
  if (isArray) for (const v of value as unknown[]) items.push(pythonToJson(v, indent, depth + 1));
  else if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) items.push(`${JSON.stringify(k)}: ${pythonToJson(v, indent, depth + 1)}`);
  } else return JSON.stringify(String(value));
  const [open, close] = isArray ? ['[', ']'] : ['{', '}'];
  if (items.length === 0) return open + close;
  // json.dumps: separators (", ", ": ") without indent; with indent, "," + newline + indentation.
  if (indent === null) return open + items.join(', ') + close;
  const inner = '\n' + ' '.repeat(indent * (depth + 1));
  return open + inner + items.join(',' + inner) + '\n' + ' '.repeat(indent * depth) + close;
}

/**
 * A request tool as vLLM hands it to the template: ChatCompletionToolsParam.model_dump(), i.e. `type`
 * (default "function"), then `function` with name, description and parameters (null when absent), then any
 * extra keys the client sent (OpenAIBaseModel allows extras; model_dump puts them after declared fields).
 * Builds that add a declared `strict` field would also print "strict": null; the ones we follow do not.
 */
export function vllmToolDump(tool: unknown): Record<string, unknown> {
  if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) throw new ChatTemplateError('each tool must be an object');
  const t = tool as Record<string, unknown>;
  const fn = t.function;
  if (typeof fn !== 'object' || fn === null || Array.isArray(fn) || typeof (fn as Record<string, unknown>).name !== 'string') {
    throw new ChatTemplateError('each tool needs a function with a string name');
  }
  const f = fn as Record<string, unknown>;
  const dumpedFn: Record<string, unknown> = { name: f.name, description: f.description ?? null, parameters: f.parameters ?? null };
  for (const [k, v] of Object.entries(f)) if (!(k in dumpedFn)) dumpedFn[k] = v;
  const out: Record<string, unknown> = { type: t.type ?? 'function', function: dumpedFn };
  for (const [k, v] of Object.entries(t)) if (!(k in out)) out[k] = v;
  return out;
}

const LLAMA_TOOLS_PREAMBLE =
  'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n';

/**
 * vLLM's _postprocess_messages: an assistant tool call's arguments string is json.loads()-ed before the
 * template sees it (a string that is not JSON is a 400 there); empty or missing arguments become {}.
 */
function toolArguments(args: string | Record<string, unknown> | null | undefined): unknown {
  if (args === null || args === undefined || args === '') return {};
  if (typeof args !== 'string') return args;
  try {
    return JSON.parse(args) as unknown;
  } catch {
    throw new ChatTemplateError('tool call arguments must be a JSON string');
  }
}

function llamaTurn(message: ChatMessage): string {
  const role = message.role;
  if (typeof role !== 'string') throw new ChatTemplateError('message role must be a string');
  if (role === 'tool' || role === 'ipython') {
    // Jinja: a string is `iterable`, so string content goes through tojson too.
    return `<|start_header_id|>ipython<|end_header_id|>\n\n${pythonToJson(contentText(message.content))}<|eot_id|>`;
  }
  if (message.tool_calls !== undefined && message.tool_calls !== null) {
    if (message.tool_calls.length !== 1) throw new ChatTemplateError('This model only supports single tool-calls at once!');
    const call = (message.tool_calls[0] as ChatToolCall).function;
    return `<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "${call.name}", "parameters": ${pythonToJson(toolArguments(call.arguments))}}<|eot_id|>`;
  }
  return `<|start_header_id|>${role}<|end_header_id|>\n\n${pythonStrip(contentText(message.content))}<|eot_id|>`;
}

/**
 * Llama 3.1 Instruct: [system segment, one segment per remaining message, generation prompt].
 * The first segment holds <|begin_of_text|> and the whole system turn.
 */
export function renderLlama31Segments(messages: readonly ChatMessage[], tools: readonly unknown[] | null = null): string[] {
  const segments: string[] = [];
  let first = 0;
  let systemText = '';
  if (messages.length > 0 && (messages[0] as ChatMessage).role === 'system') {
    systemText = pythonStrip(contentText((messages[0] as ChatMessage).content));
    first = 1;
  }
  const environment = tools === null ? '' : 'Environment: ipython\n';
  segments.push(`<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n${environment}${LLAMA_SYSTEM_PREAMBLE}${systemText}<|eot_id|>`);
  if (tools !== null) {
    if (first >= messages.length) throw new ChatTemplateError("Cannot put tools in the first user message when there's no first user message!");
    let text = `<|start_header_id|>user<|end_header_id|>\n\n${LLAMA_TOOLS_PREAMBLE}`;
    for (const tool of tools) text += `${pythonToJson(vllmToolDump(tool), 4)}\n\n`;
    segments.push(`${text}${pythonStrip(contentText((messages[first] as ChatMessage).content))}<|eot_id|>`);
    first++;
  }
  for (let i = first; i < messages.length; i++) segments.push(llamaTurn(messages[i] as ChatMessage));
  segments.push(LLAMA_GENERATION_PROMPT);
  return segments;
}

/** ChatML (<|im_start|>role\ncontent<|im_end|>\n), no system default, content untrimmed. */
export function renderChatmlSegments(messages: readonly ChatMessage[]): string[] {
  const segments: string[] = [];
  for (const message of messages) {
    if (typeof message.role !== 'string') throw new ChatTemplateError('message role must be a string');
    segments.push(`<|im_start|>${message.role}\n${contentText(message.content)}<|im_end|>\n`);
  }
  segments.push(CHATML_GENERATION_PROMPT);
  return segments;
}

/** `tools`: the request's tools array, or null/undefined when it sent none (vLLM passes tools=None). */
export function renderChatSegments(template: ChatTemplateName, messages: readonly ChatMessage[], tools: readonly unknown[] | null = null): string[] {
  switch (template) {
    case 'llama3.1':
      return renderLlama31Segments(messages, tools);
    case 'chatml':
      return renderChatmlSegments(messages);
  }
}

/** The whole prompt text, as vLLM hands it to the tokenizer (add_special_tokens=False). */
export function renderChat(template: ChatTemplateName, messages: readonly ChatMessage[], tools: readonly unknown[] | null = null): string {
  return renderChatSegments(template, messages, tools).join('');
}
