// A model's own Jinja chat template, rendered as vLLM renders it, with @huggingface/jinja (the only importer).
// The environment matches transformers' chat-template sandbox: trim_blocks and lstrip_blocks, `tojson` without
// ASCII escaping and with Python's separators, raise_exception, strftime_now (the library provides all four), the
// tokenizer's bos/eos/unk/pad tokens by name, add_generation_prompt=true, and `tools` (each as vLLM's
// model_dump() shapes it) or none.
// The messages are shaped as vLLM's chat_utils hands them to the template:
// - content: the template's content format is detected as vLLM does ("openai" when the template loops over a
//   message's content, else "string"). "string": text parts (text, input_text, output_text, refusal) joined
//   with "\n", null → "". "openai": a list of {type: "text", text} parts (a string becomes one part, null none);
//   a tool message's all-text parts are still flattened to a string, as vLLM does for every template;
// - assistant tool_calls: copied, each call's arguments JSON-parsed into an object (a string that is not JSON
//   becomes {}; an empty tool_calls list is dropped); tool messages keep tool_call_id; a string `name` is kept.
// A template that raises (raise_exception, or a runtime error such as adding a string to a dict) becomes a
// ChatTemplateError: a 400 `invalid_value` for the client, with the template's own message.
// Thread: any. Cost: parsing a template once per thread (cached by its file), then 5-15 µs per render for the
// templates measured (src/tokenize/README.md).
import { Template } from '@huggingface/jinja';
import { readFileSync } from 'node:fs';
import { ChatTemplateError, contentText, vllmToolDump } from './chat-template.ts';
import type { ChatMessage, ChatTemplateRef, TextTokenizer } from './types.ts';

type ContentFormat = 'string' | 'openai';

interface CompiledTemplate {
  template: Template;
  format: ContentFormat;
}

const compiled = new Map<ChatTemplateRef, CompiledTemplate>();

/** The template text a reference names: a .json file's "chat_template" (a string or the "default" entry), else the file. */
export function readChatTemplate(ref: ChatTemplateRef): string {
  const text = readFileSync(ref, 'utf8');
  if (!ref.endsWith('.json')) return text;
  const value = (JSON.parse(text) as { chat_template?: unknown }).chat_template;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = (value as Array<{ name?: unknown; template?: unknown }>).find((t) => t.name === 'default');
    if (named !== undefined && typeof named.template === 'string') return named.template;
  }
  throw new Error(`${ref} has no "chat_template"`);
}

/**
 * vLLM's content-format detection, reduced to what it looks for: a `for` loop over a message's content
 * (`message['content']`, `message.content`, or a variable set from either) means the template wants OpenAI-style
 * parts.
 */
export function detectContentFormat(source: string): ContentFormat {
  const access = String.raw`\w+(?:\[\s*['"]content['"]\s*\]|\.content)`;
  if (new RegExp(String.raw`\{%-?\s*for\s+\w+\s+in\s+${access}`).test(source)) return 'openai';
  const alias = new RegExp(String.raw`\{%-?\s*set\s+(\w+)\s*=\s*${access}\s*-?%\}`, 'g');
  for (let m = alias.exec(source); m !== null; m = alias.exec(source)) {
    if (new RegExp(String.raw`\{%-?\s*for\s+\w+\s+in\s+${m[1]}\s`).test(source)) return 'openai';
  }
  return 'string';
}

/** Parses the template (a syntax error is thrown as is: a setup error, caught by config validation). */
export function compileChatTemplate(ref: ChatTemplateRef): CompiledTemplate {
  let hit = compiled.get(ref);
  if (hit === undefined) {
    const source = readChatTemplate(ref);
    hit = { template: new Template(source), format: detectContentFormat(source) };
    compiled.set(ref, hit);
  }
  return hit;
}

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text', 'refusal']);

function textParts(content: ChatMessage['content']): Array<{ type: 'text'; text: string }> {
  if (content === null || content === undefined) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw new ChatTemplateError('message content must be a string or an array of content parts');
  const out: Array<{ type: 'text'; text: string }> = [];
  for (const part of content as unknown[]) {
    if (typeof part !== 'object' || part === null) continue;
    const p = part as { type?: unknown; text?: unknown };
    if (typeof p.type !== 'string' || !TEXT_PART_TYPES.has(p.type)) continue;
    if (typeof p.text !== 'string') throw new ChatTemplateError('a text content part needs a string "text"');
    out.push({ type: 'text', text: p.text });
  }
  return out;
}

function parsedArguments(args: unknown): unknown {
  if (typeof args === 'string') {
    try {
      return JSON.parse(args) as unknown;
    } catch {
      return {};
    }
  }
  return typeof args === 'object' && args !== null ? args : {};
}

/** One message as vLLM's parse_chat_messages + _postprocess_messages leave it for the template. */
function conversationMessage(message: ChatMessage, format: ContentFormat): Record<string, unknown> {
  const role = message.role;
  if (typeof role !== 'string') throw new ChatTemplateError('message role must be a string');
  let content: unknown;
  if (format === 'string') content = contentText(message.content);
  else {
    const parts = textParts(message.content);
    content = role === 'tool' ? parts.map((p) => p.text).join('\n') : parts;
  }
  const out: Record<string, unknown> = { role, content };
  if (role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
    out.tool_calls = message.tool_calls.map((call) => {
      if (typeof call !== 'object' || call === null || typeof call.function !== 'object' || call.function === null) {
        throw new ChatTemplateError('each tool call needs a function');
      }
      return { ...call, function: { ...call.function, arguments: parsedArguments(call.function.arguments) } };
    });
  } else if (role === 'tool' && message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
  if (typeof message.name === 'string') out.name = message.name;
  return out;
}

/**
 * The whole rendered prompt for `messages` with the template at `ref` and the pool's tokenizer's special tokens.
 * `tools`: the request's tools, or null when it sent none (the template then sees none).
 */
export function renderJinja(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer): string {
  const { template, format } = compileChatTemplate(ref);
  if (!Array.isArray(messages)) throw new ChatTemplateError('messages must be an array');
  const conversation = messages.map((m) => conversationMessage(m, format));
  const env: Record<string, unknown> = {
    messages: conversation,
    tools: tools === null ? null : tools.map(vllmToolDump),
    add_generation_prompt: true,
    ...tokenizer.specialTokens,
  };
  try {
    return template.render(env);
  } catch (err) {
    throw new ChatTemplateError(`the chat template raised: ${(err as Error).message}`);
  }
}

/**
 * The rendered prompt cut into segments before each special token (tokenizer.segmentCut), so each can be
 * tokenized and cached on its own: HF splits added tokens out before anything else, so tokens(prompt) equals the
 * segments' tokens concatenated.
 */
export function renderJinjaSegments(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer): string[] {
  const text = renderJinja(ref, messages, tools, tokenizer);
  const cut = tokenizer.segmentCut;
  if (cut === null) return [text];
  const segments: string[] = [];
  let start = 0;
  for (let m = cut.next(text, 0); m !== null; m = cut.next(text, m.end)) {
    if (m.start > start) {
      segments.push(text.slice(start, m.start));
      start = m.start;
    }
  }
  segments.push(text.slice(start));
  return segments;
}
