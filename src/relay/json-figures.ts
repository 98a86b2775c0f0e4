// Reads usage and finish_reason out of a non-streaming completion body without parsing the whole body: the
// body is passed through as bytes, and a long completion can be hundreds of KB of text. Safe because a key's
// closing quote followed by a colon (`"usage":`) cannot occur inside a JSON string, where every quote is
// escaped. Falls back to a full parse when the shape is unexpected.
// Thread: main. Hot path for non-streaming requests: two native Buffer searches and one small JSON.parse.
// replyText() (only when the routing policy wants a finished reply's block hashes) reads the first choice's
// text the same way: two searches and one decode of the text, a full parse only for an unexpected shape.
import { jsonStringField } from './json-string.ts';
import { usageNumbers } from './usage-numbers.ts';

const USAGE = Buffer.from('"usage":{');
const FINISH = Buffer.from('"finish_reason":');
const MESSAGE = Buffer.from('"message":{');
const CONTENT = Buffer.from('"content":"');
const CHOICES = Buffer.from('"choices":[');
const TEXT = Buffer.from('"text":"');

export interface JsonFigures {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  finishReason: string | null;
}


export function jsonFigures(body: Buffer): JsonFigures | null {
  const u = body.lastIndexOf(USAGE);
  if (u !== -1) {
    const start = u + USAGE.length - 1;
    let depth = 0;
    for (let i = start; i < body.length; i++) {
      const c = body[i];
      if (c === 0x7b) depth++;
      else if (c === 0x7d && --depth === 0) {
        try {
          return figures(JSON.parse(body.toString('utf8', start, i + 1)) as unknown, finishReasonAt(body));
        } catch {
          break;
        }
      }
    }
  }
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { usage?: unknown; choices?: Array<{ finish_reason?: string | null }> };
    return figures(parsed.usage ?? {}, parsed.choices?.[0]?.finish_reason ?? null);
  } catch {
    return null;
  }
}

/**
 * The first choice's reply text: a chat body's message content, a completions body's text; null when it has
 * none (a tool call's null content) or the body is not JSON.
 */
export function replyText(body: Buffer, isChat: boolean): string | null {
  const anchor = body.indexOf(isChat ? MESSAGE : CHOICES);
  if (anchor !== -1) {
    const from = anchor + (isChat ? MESSAGE.length - 1 : CHOICES.length);
    const text = jsonStringField(body, isChat ? CONTENT : TEXT, from, body.length);
    if (text !== null) return text;
  }
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { choices?: Array<{ message?: { content?: unknown }; text?: unknown }> };
    const choice = parsed.choices?.[0];
    const text = isChat ? choice?.message?.content : choice?.text;
    return typeof text === 'string' ? text : null;
  } catch {
    return null;
  }
}

function figures(u: unknown, finishReason: string | null): JsonFigures {
  const n = usageNumbers(u);
  return n === null
    ? { promptTokens: 0, completionTokens: 0, cachedTokens: 0, finishReason }
    : { promptTokens: n.promptTokens, completionTokens: n.completionTokens, cachedTokens: n.cachedTokens, finishReason };
}

/** The first choice's finish_reason: a quoted string or null. */
function finishReasonAt(body: Buffer): string | null {
  const f = body.indexOf(FINISH);
  if (f === -1) return null;
  let i = f + FINISH.length;
  while (body[i] === 0x20) i++;
  if (body[i] !== 0x22) return null;
  const end = body.indexOf(0x22, i + 1);
  return end === -1 ? null : body.toString('utf8', i + 1, end);
}
