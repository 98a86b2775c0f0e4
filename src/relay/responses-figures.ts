// What billing, routing and the response-owner map need from a Responses API response object (a
// non-streamed body, or the `response` of a streamed response.completed event): its id, status, usage
// (input_tokens, output_tokens, input_tokens_details.cached_tokens) and the texts of its output messages.
// Thread: main. Once per Responses request, on an object already parsed.
import { responsesUsage, type UsageNumbers } from './usage-numbers.ts';

export interface ResponseFigures {
  id: string | null;
  status: string | null;
  /** null when the object carries no usable usage (billing keeps its own counts). */
  usage: UsageNumbers | null;
  /** output_text of each output message, in order (what vLLM replays as assistant turns). */
  outputTexts: string[];
}

export function responseFigures(r: unknown): ResponseFigures {
  const o = (r !== null && typeof r === 'object' ? r : {}) as { id?: unknown; status?: unknown; usage?: unknown; output?: unknown };
  return {
    id: typeof o.id === 'string' ? o.id : null,
    status: typeof o.status === 'string' ? o.status : null,
    usage: responsesUsage(o.usage),
    outputTexts: outputTexts(o.output),
  };
}

function outputTexts(output: unknown): string[] {
  const texts: string[] = [];
  if (!Array.isArray(output)) return texts;
  for (const item of output as Array<{ type?: unknown; content?: unknown }>) {
    if (item === null || typeof item !== 'object' || item.type !== 'message' || !Array.isArray(item.content)) continue;
    for (const part of item.content as Array<{ type?: unknown; text?: unknown }>) {
      if (part !== null && typeof part === 'object' && part.type === 'output_text' && typeof part.text === 'string') texts.push(part.text);
    }
  }
  return texts;
}

/**
 * Responses carry no finish_reason: `incomplete`, or output that used the whole max_output_tokens, reads as
 * 'length' (vLLM reports `completed` for both); any other finished response as 'stop'.
 */
export function responsesFinishReason(f: ResponseFigures, maxTokens: number): string | null {
  if (f.status === 'incomplete') return 'length';
  if (f.status !== 'completed') return f.status;
  return f.usage !== null && f.usage.completionTokens >= maxTokens ? 'length' : 'stop';
}
