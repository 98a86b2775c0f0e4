// Reads usage and finish_reason out of a non-streaming completion body without parsing the whole body: the
// body is passed through as bytes, and a long completion can be hundreds of KB of text. Safe because a key's
// closing quote followed by a colon (`"usage":`) cannot occur inside a JSON string, where every quote is
// escaped. Falls back to a full parse when the shape is unexpected.
// Thread: main. Hot path for non-streaming requests: two native Buffer searches and one small JSON.parse.
const USAGE = Buffer.from('"usage":{');
const FINISH = Buffer.from('"finish_reason":');

export interface JsonFigures {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  finishReason: string | null;
}

interface UsageJson { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null }

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
          return figures(JSON.parse(body.toString('utf8', start, i + 1)) as UsageJson, finishReasonAt(body));
        } catch {
          break;
        }
      }
    }
  }
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { usage?: UsageJson | null; choices?: Array<{ finish_reason?: string | null }> };
    return figures(parsed.usage ?? {}, parsed.choices?.[0]?.finish_reason ?? null);
  } catch {
    return null;
  }
}

function figures(u: UsageJson, finishReason: string | null): JsonFigures {
  return { promptTokens: u.prompt_tokens ?? 0, completionTokens: u.completion_tokens ?? 0, cachedTokens: u.prompt_tokens_details?.cached_tokens ?? 0, finishReason };
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
