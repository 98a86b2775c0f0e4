// The conversation as vLLM's chat_utils hands it to a model's Jinja template (parse_chat_messages and
// _postprocess_messages), from the request's messages:
// - content parts: text, input_text, output_text (their `text`), refusal (its `refusal`), thinking, plain
//   strings; image_url / input_image / image_embeds become {type: "image"}, input_audio / audio_url
//   {type: "audio"}, video_url {type: "video"}; a part whose payload is missing is skipped (vLLM logs it);
//   a part with no type or an unknown type is a 400, as vLLM's parser raises;
// - "string" content format (the template does not loop over content): the texts joined with "\n", null → "";
//   "openai": the parts as {type: "text", text} / {type: "image"}, null → []; a tool message whose parts are all
//   text is flattened to a string in both formats;
// - assistant tool_calls: copied, each call's arguments JSON-parsed (json.loads: a string that is not JSON is
//   a 400; empty or missing → {}); `reasoning` / `reasoning_content` passed on under both names; tool
//   messages keep tool_call_id; a string `name` is kept.
// Thread: any. Per chat request on a Jinja pool: one pass over the messages.
import { ChatTemplateError } from './chat-template.ts';
import type { ChatMessage } from './types.ts';

export type ContentFormat = 'string' | 'openai';

const TEXT_FIELDS: Readonly<Record<string, string>> = {
  text: 'text', input_text: 'text', output_text: 'text', refusal: 'refusal', thinking: 'thinking',
};
const MEDIA_TYPES: Readonly<Record<string, 'image' | 'audio' | 'video'>> = {
  image_url: 'image', input_image: 'image', image_embeds: 'image', image_pil: 'image',
  input_audio: 'audio', audio_url: 'audio', video_url: 'video',
};

/** One content part as vLLM's parser sees it: text, a media item, or nothing (skipped). */
type Part = { type: 'text'; text: string } | { type: 'image' | 'audio' | 'video' } | null;

function parsePart(part: unknown): Part {
  if (typeof part === 'string') return { type: 'text', text: part };
  if (typeof part !== 'object' || part === null || Array.isArray(part)) throw new ChatTemplateError('each content part must be an object or a string');
  const p = part as Record<string, unknown>;
  let type = p.type;
  if (type === undefined || type === null) type = Object.keys(MEDIA_TYPES).find((k) => k in p);
  if (typeof type !== 'string') throw new ChatTemplateError("Missing 'type' field in multimodal part.");
  const field = TEXT_FIELDS[type];
  if (field !== undefined) {
    const text = p[field];
    if (text === undefined || text === null) return null;
    if (typeof text !== 'string') throw new ChatTemplateError(`a ${type} content part needs a string "${field}"`);
    return { type: 'text', text };
  }
  const media = MEDIA_TYPES[type];
  if (media === undefined) throw new ChatTemplateError(`Unknown part type: ${type}`);
  const payload = p[type];
  const url = typeof payload === 'object' && payload !== null ? (payload as { url?: unknown }).url ?? payload : payload;
  return url === undefined || url === null ? null : { type: media };
}

export interface ShapedConversation {
  messages: Array<Record<string, unknown>>;
  /** Media items by modality, in order (vLLM's multimodal tracker counts them per request). */
  images: number;
  otherMedia: number;
}

function toolArguments(args: unknown): unknown {
  // Python's truthiness, as vLLM's `if content := ...get("arguments")`: None, "", {}, [] all become {}.
  const empty = args === undefined || args === null || args === '' || args === false || args === 0 ||
    (Array.isArray(args) && args.length === 0) || (typeof args === 'object' && Object.keys(args).length === 0);
  if (empty) return {};
  if (typeof args !== 'string') return args;
  try {
    return JSON.parse(args) as unknown;
  } catch (err) {
    throw new ChatTemplateError(`tool call arguments are not valid JSON: ${(err as Error).message}`);
  }
}

/** The messages as the template receives them, and the media they carry. */
export function shapeConversation(messages: readonly ChatMessage[], format: ContentFormat): ShapedConversation {
  if (!Array.isArray(messages)) throw new ChatTemplateError('messages must be an array');
  let images = 0;
  let otherMedia = 0;
  const shaped = messages.map((message) => {
    if (typeof message !== 'object' || message === null) throw new ChatTemplateError('each message must be an object');
    const m = message as unknown as Record<string, unknown>;
    const role = m.role;
    if (typeof role !== 'string') throw new ChatTemplateError('message role must be a string');
    const raw = m.content;
    let parts: Part[];
    if (raw === null || raw === undefined) parts = [];
    else if (typeof raw === 'string') parts = [{ type: 'text', text: raw }];
    else if (Array.isArray(raw)) parts = raw.map(parsePart);
    else throw new ChatTemplateError('message content must be a string or an array of content parts');
    const kept = parts.filter((p): p is NonNullable<Part> => p !== null);
    for (const p of kept) {
      if (p.type === 'image') images++;
      else if (p.type !== 'text') otherMedia++;
    }
    const allText = kept.every((p) => p.type === 'text');
    const texts = kept.flatMap((p) => (p.type === 'text' ? [p.text] : []));
    const content: unknown = format === 'string' || (role === 'tool' && allText) ? texts.join('\n') : kept;
    const out: Record<string, unknown> = { role, content };
    if (role === 'assistant') {
      const calls = m.tool_calls;
      if (Array.isArray(calls) && calls.length > 0) {
        out.tool_calls = calls.map((call: unknown) => {
          const c = call as Record<string, unknown> | null;
          if (typeof c !== 'object' || c === null || typeof c.function !== 'object' || c.function === null) throw new ChatTemplateError('each tool call needs a function');
          const f = c.function as Record<string, unknown>;
          return { ...c, function: { ...f, arguments: toolArguments(f.arguments) } };
        });
      }
      const reasoning = m.reasoning ?? m.reasoning_content;
      if (reasoning !== undefined && reasoning !== null) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    } else if (role === 'tool' && m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
  return { messages: shaped, images, otherMedia };
}

/** The texts of a message's content (for estimates): string content, or its text parts. */
export function messageText(message: Record<string, unknown>): string {
  const c = message.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c.flatMap((p: { type?: string; text?: string }) => (p.type === 'text' && typeof p.text === 'string' ? [p.text] : [])).join('\n');
}
