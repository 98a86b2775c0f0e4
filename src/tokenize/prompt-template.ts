// Which chat template renders a pool's prompt: the built-in renderers (chat-template.ts: 'llama3.1', 'chatml')
// or a model's own Jinja template (jinja-template.ts; the reference is the template file's absolute path).
// Both return the prompt as segments that tokenize independently (each starts at a special token), which the
// segment cache keys on.
// Thread: any. Hot path: once per chat request (one Map lookup for the compiled template, then the render).
import { renderChatSegments } from './chat-template.ts';
import { renderJinjaSegments } from './jinja-template.ts';
import type { ChatMessage, ChatOptions, ChatTemplateName, ChatTemplateRef, TextTokenizer } from './types.ts';

/** True for a built-in template name, false for a Jinja template file. */
export function isBuiltinTemplate(ref: ChatTemplateRef): ref is ChatTemplateName {
  return ref === 'llama3.1' || ref === 'chatml';
}

/** The prompt's segments; throws ChatTemplateError when the template refuses the messages (a 400). */
export function renderPromptSegments(ref: ChatTemplateRef, messages: readonly ChatMessage[], tools: readonly unknown[] | null, tokenizer: TextTokenizer, options: ChatOptions | null = null): string[] {
  return isBuiltinTemplate(ref) ? renderChatSegments(ref, messages, tools) : renderJinjaSegments(ref, messages, tools, tokenizer, options);
}
