// A pool's tokenizer and chat template as the tokenize stage names them (TokenizerRef, ChatTemplateRef: plain
// strings that cross to workers), from its config: a built-in name, or `{ path: DIR }` (a Hugging Face tokenizer
// directory) with `chat_template: auto` (the directory's own template) or a template file's path.
// Also the config check: the directory and template must load, or the config is refused naming the field.
// Thread: any. Per request: one WeakMap lookup (pool config objects are frozen and live as long as the config).
import { statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { checkAbsoluteDir, dirChatTemplate, readTokenizerDir, TokenizerDirError } from './hf-dir.ts';
import { compileChatTemplate } from './jinja-template.ts';
import { isBuiltinTemplate } from './prompt-template.ts';
import type { ChatTemplateRef, TokenizerRef } from './types.ts';

/** The two pool fields this module reads (PoolConfig's shape, without importing the config module). */
export interface PoolTokenizerFields {
  tokenizer: string | { path: string };
  chat_template: string;
}

export interface PromptRefs {
  tokenizer: TokenizerRef;
  template: ChatTemplateRef;
}

/** A pool's tokenizer or template setting that cannot be used; `field` names it within the pool. */
export class PoolTokenizerError extends Error {
  override name = 'PoolTokenizerError';
  constructor(readonly field: 'tokenizer.path' | 'chat_template', message: string) {
    super(message);
  }
}

const resolved = new WeakMap<object, PromptRefs>();
/** Directories whose tokenizer.json passed checkPoolTokenizer, with that file's size and mtime then. */
const checked = new Map<string, string>();

function fileStamp(path: string): string | null {
  try {
    const st = statSync(path);
    return `${st.size}:${st.mtimeMs}`;
  } catch {
    return null;
  }
}

function absolute(path: string): string {
  return isAbsolute(path) ? path : resolve(path);
}

/**
 * The pool's refs; paths are made absolute (relative ones against the working directory) and `auto` becomes the
 * file the directory's template is in. Throws PoolTokenizerError when the directory or template is missing.
 */
export function promptRefs(pool: PoolTokenizerFields): PromptRefs {
  const hit = resolved.get(pool);
  if (hit !== undefined) return hit;
  let tokenizer: TokenizerRef;
  let dir: string | null = null;
  if (typeof pool.tokenizer === 'string') tokenizer = pool.tokenizer;
  else {
    try {
      dir = checkAbsoluteDir(absolute(pool.tokenizer.path));
    } catch (err) {
      throw new PoolTokenizerError('tokenizer.path', (err as Error).message);
    }
    tokenizer = dir;
  }
  let template: ChatTemplateRef;
  if (isBuiltinTemplate(pool.chat_template)) template = pool.chat_template;
  else if (pool.chat_template === 'auto') {
    if (dir === null) throw new PoolTokenizerError('chat_template', '"auto" takes the template from a tokenizer directory: set tokenizer: { path: DIR }');
    let found: { source: string } | null;
    try {
      found = dirChatTemplate(dir);
    } catch (err) {
      throw new PoolTokenizerError('chat_template', (err as Error).message);
    }
    if (found === null) throw new PoolTokenizerError('chat_template', `${dir} has no chat template (chat_template.jinja, or chat_template in chat_template.json or tokenizer_config.json): give a .jinja file`);
    template = found.source;
  } else template = absolute(pool.chat_template);
  const refs = { tokenizer, template };
  resolved.set(pool, refs);
  return refs;
}

/**
 * Loads what the pool's prompts need, as a config check (startup and reload): the tokenizer directory's files
 * parse and have a vocabulary, and the template file reads and compiles. ~0.1-1 s per directory the first time
 * (it parses tokenizer.json; nothing is kept), then only when that file's size or mtime changed.
 */
export function checkPoolTokenizer(pool: PoolTokenizerFields): void {
  // The directory first: a missing tokenizer.json is the error to report, not the template it also lacks.
  if (typeof pool.tokenizer !== 'string') {
    const dir = absolute(pool.tokenizer.path);
    try {
      // A reload re-reads only a tokenizer.json that changed: parsing one blocks this thread for ~0.1-1 s.
      const stamp = fileStamp(join(dir, 'tokenizer.json'));
      if (stamp === null || checked.get(dir) !== stamp) {
        readTokenizerDir(dir);
        if (stamp !== null) checked.set(dir, stamp);
      }
    } catch (err) {
      if (err instanceof TokenizerDirError) throw new PoolTokenizerError('tokenizer.path', err.message);
      throw err;
    }
  }
  const refs = promptRefs(pool);
  if (!isBuiltinTemplate(refs.template)) {
    try {
      compileChatTemplate(refs.template);
    } catch (err) {
      throw new PoolTokenizerError('chat_template', `${refs.template}: ${(err as Error).message}`);
    }
  }
}

/** The distinct tokenizers a set of pools uses: what every thread builds at setup. */
export function poolTokenizerRefs(pools: readonly PoolTokenizerFields[]): TokenizerRef[] {
  return [...new Set(pools.map((p) => promptRefs(p).tokenizer))];
}

/** The distinct (tokenizer, template) pairs the pools use: what the prompt path is warmed on (warm-code.ts). */
export function poolPromptRefs(pools: readonly PoolTokenizerFields[]): PromptRefs[] {
  const byKey = new Map<string, PromptRefs>();
  for (const p of pools) {
    const refs = promptRefs(p);
    byKey.set(`${refs.tokenizer}\n${refs.template}`, refs);
  }
  return [...byKey.values()];
}
