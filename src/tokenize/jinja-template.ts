// A model's own Jinja chat template, rendered as vLLM renders it: transformers' apply_chat_template environment
// (jinja-compat.ts: Python's semantics on @huggingface/jinja, the only importer of the library is that module's
// chain), the tokenizer's whole special_tokens_map, add_generation_prompt (default true), the request's
// chat_template_kwargs (they override the special tokens and add_generation_prompt, as in transformers),
// continue_final_message (the prompt cut after the last message's text, as transformers cuts it), and `tools`
// (each as vLLM's model_dump() shapes it) or none. Messages are shaped as vLLM's chat_utils hands them over
// (chat-messages.ts).
// Failures:
// - the template's own raise_exception, and input vLLM's parser refuses (unknown part type, tool arguments that
//   are not JSON): ChatTemplateError, a 400 `invalid_value`, as vLLM answers;
// - anything else (a feature the library lacks, or an error Python would raise as well): the request is still
//   served, on an estimate (estimateSegments below), and the render is marked with the reason; vLLM then
//   renders for itself (and answers 400 if Python fails too).
// Images: Gemma 3 (a tokenizer with boi/eoi/image tokens) expands each image's <start_of_image> as vLLM's
// Gemma 3 processor does: "\n\n<start_of_image>" + 256 × <image_soft_token> + "<end_of_image>\n\n", encoded
// alone (vLLM replaces token ids). Other models: counted as IMAGE_TOKENS_ESTIMATE each and marked estimated.
// Thread: any. Cost: parsing a template once per thread (cached by its file), then 5-40 µs per render for the
// templates measured (src/tokenize/README.md).
import { readFileSync } from 'node:fs';
import { ChatTemplateError, vllmToolDump } from './chat-template.ts';
import { messageText, shapeConversation, type ContentFormat } from './chat-messages.ts';
import { PyUndefinedError, PythonTemplate, TemplateRaise } from './jinja-compat.ts';
import { PyTypeError } from './jinja-values.ts';
import type { ChatMessage, ChatOptions, ChatTemplateRef, FallbackReason, TextTokenizer } from './types.ts';

interface CompiledTemplate {
  template: PythonTemplate;
  format: ContentFormat;
}

const compiled = new Map<ChatTemplateRef, CompiledTemplate>();

export type { FallbackReason };
export const FALLBACK_REASONS: readonly FallbackReason[] = ['unsupported', 'python_error', 'render_error', 'media_estimate'];

/** Our renderer failed where vLLM's may not: the request is served on an estimate. */
export class TemplateRenderError extends Error {
  override name = 'TemplateRenderError';
  constructor(readonly reason: FallbackReason, message: string) {
    super(message);
  }
}

/** Segments that are an estimate, not vLLM's prompt: why, and the template markup tokens to add. */
export interface EstimateMark {
  reason: FallbackReason;
  extraTokens: number;
}
const estimates = new WeakMap<readonly string[], EstimateMark>();

/** Set when `segments` (a render's result) is an estimate rather than the prompt vLLM renders. */
export function estimateOf(segments: readonly string[] | null): EstimateMark | undefined {
  return segments === null ? undefined : estimates.get(segments);
}

/** Tokens counted per image when the model's placeholder expansion is not modelled (Gemma 3 and SigLIP's 256). */
export const IMAGE_TOKENS_ESTIMATE = 256;
/** Gemma 3's tokens per image (its processor's image_seq_length; vLLM's default disables pan-and-scan). */
const GEMMA3_IMAGE_TOKENS = 256;

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
    hit = { template: new PythonTemplate(source), format: detectContentFormat(source) };
    compiled.set(ref, hit);
  }
  return hit;
}

function classify(err: unknown): Error {
  if (err instanceof TemplateRaise) return new ChatTemplateError(err.message);
  if (err instanceof ChatTemplateError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof PyTypeError || err instanceof PyUndefinedError) return new TemplateRenderError('python_error', message);
  const unsupported = /Unknown (?:\w+ )?(?:filter|test|operator|node type)|not (?:currently )?supported|Cannot call something|Expected iterable/.test(message);
  return new TemplateRenderError(unsupported ? 'unsupported' : 'render_error', message);
}

/** transformers' continue_final_message: the prompt ends where the last message's (last) text ends. */
function continueFinal(rendered: string, last: Record<string, unknown> | undefined): string {
  const content = last?.content;
  let text: string | undefined;
  if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) text = [...content].reverse().find((p: { text?: unknown }) => typeof p.text === 'string')?.text as string | undefined;
  if (text === undefined) throw new ChatTemplateError('continue_final_message is set but we could not find any text to continue in the final message!');
  const stripped = text.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at < 0) throw new ChatTemplateError('continue_final_message is set but the final message does not appear in the chat after applying the chat template!');
  const lstripped = text.trimStart();
  return rendered.slice(0, at + (rendered.slice(at, at + lstripped.length) === text ? lstripped.length : stripped.length));
}

/**
 * The whole rendered prompt for `messages` with the template at `ref` and the pool's tokenizer's special tokens.
 * `tools`: the request's tools, or null when it sent none (the template then sees none). Throws ChatTemplateError
 * (a 400) or TemplateRenderError (serve on an estimate).
 */
export function renderJinja(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer, options: ChatOptions | null = null): string {
  return renderJinjaPrompt(ref, messages, tools, tokenizer, options).text;
}

/** renderJinja's text, and the media items the conversation carries. */
function renderJinjaPrompt(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer, options: ChatOptions | null): { text: string; images: number; otherMedia: number } {
  const { template, format } = compileChatTemplate(ref);
  const conversation = shapeConversation(messages, format);
  const kwargs = options?.templateKwargs ?? {};
  if ('chat_template' in kwargs || 'tokenize' in kwargs) throw new ChatTemplateError('Found unexpected chat template kwargs from request: chat_template and tokenize may not be set');
  const continueFinalMessage = (kwargs.continue_final_message ?? options?.continueFinalMessage ?? false) === true;
  const env: Record<string, unknown> = {
    ...tokenizer.specialTokens,
    add_generation_prompt: options?.addGenerationPrompt ?? true,
    continue_final_message: continueFinalMessage,
    ...kwargs,
    messages: conversation.messages,
    tools: tools === null ? null : tools.map(vllmToolDump),
  };
  let text: string;
  try {
    text = template.render(env);
  } catch (err) {
    throw classify(err);
  }
  if (continueFinalMessage) text = continueFinal(text, conversation.messages.at(-1));
  return { text, images: conversation.images, otherMedia: conversation.otherMedia };
}

/** Gemma 3's expansion of one image, or null when the tokenizer is not Gemma 3's. */
function imageExpansion(tokenizer: TextTokenizer): { boi: string; text: string } | null {
  const t = tokenizer.specialTokens;
  const boi = t.boi_token;
  const eoi = t.eoi_token;
  const image = t.image_token;
  if (typeof boi !== 'string' || typeof eoi !== 'string' || typeof image !== 'string') return null;
  return { boi, text: `\n\n${boi}${image.repeat(GEMMA3_IMAGE_TOKENS)}${eoi}\n\n` };
}

/**
 * The request's text as an estimate of its prompt: each message's role and text (and tool calls as JSON), the
 * tools as JSON; 4 tokens of markup per message (turn open and close tokens, newlines) and 4 for the generation
 * prompt are added when counting, and IMAGE_TOKENS_ESTIMATE per image.
 */
function estimateSegments(messages: readonly ChatMessage[], tools: readonly unknown[] | null, reason: FallbackReason): string[] {
  const shaped = shapeConversation(messages, 'openai');
  const segments = shaped.messages.map((m) => `${String(m.role)}\n${messageText(m)}${m.tool_calls === undefined ? '' : JSON.stringify(m.tool_calls)}\n`);
  if (tools !== null && tools.length > 0) segments.unshift(JSON.stringify(tools));
  estimates.set(segments, { reason, extraTokens: 4 * shaped.messages.length + 4 + IMAGE_TOKENS_ESTIMATE * (shaped.images + shaped.otherMedia) });
  return segments;
}

/**
 * The rendered prompt cut into segments before each special token (tokenizer.segmentCut), so each can be
 * tokenized and cached on its own: HF splits added tokens out before anything else, so tokens(prompt) equals the
 * segments' tokens concatenated. A render our renderer cannot do returns estimateSegments (see estimateOf).
 */
export function renderJinjaSegments(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer, options: ChatOptions | null = null): string[] {
  let rendered: ReturnType<typeof renderJinjaPrompt>;
  try {
    rendered = renderJinjaPrompt(ref, messages, tools, tokenizer, options);
  } catch (err) {
    if (err instanceof TemplateRenderError) return estimateSegments(messages, tools, err.reason);
    throw err;
  }
  const { text } = rendered;
  const expansion = rendered.images > 0 && rendered.otherMedia === 0 ? imageExpansion(tokenizer) : null;
  if ((rendered.images > 0 || rendered.otherMedia > 0) && expansion === null) return estimateSegments(messages, tools, 'media_estimate');
  const cut = tokenizer.segmentCut;
  if (cut === null) return [text];
  const segments: string[] = [];
  let start = 0;
  let imagesLeft = rendered.images;
  for (let m = cut.next(text, 0); m !== null; m = cut.next(text, m.end)) {
    if (m.start > start) {
      segments.push(text.slice(start, m.start));
      start = m.start;
    }
    if (expansion !== null && imagesLeft > 0 && m.token === expansion.boi) {
      // vLLM swaps the placeholder's id for the expansion's own ids: the expansion is encoded alone.
      segments.push(expansion.text);
      imagesLeft--;
      start = m.end;
    }
  }
  segments.push(text.slice(start));
  if (imagesLeft > 0) return estimateSegments(messages, tools, 'media_estimate');
  return segments;
}
