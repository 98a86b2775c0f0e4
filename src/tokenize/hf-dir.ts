// A Hugging Face tokenizer directory, as vLLM loads one: tokenizer.json (the model: vocabulary, merges,
// normalizer, pre-tokenizer, added tokens), tokenizer_config.json (bos/eos/unk/pad tokens as strings or
// AddedToken objects, add_bos_token / add_eos_token, often the chat template) and chat_template.jinja (newer
// models ship the template there; chat_template.json is the older spelling of the same).
// Thread: any; setup only (config validation on the main thread, tokenizer build on every thread that needs it).
// Cost: reading and parsing tokenizer.json (5-30 MB, ~0.1-0.5 s); each thread reads it once and keeps what it
// built from it, not the parsed JSON.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { SpecialTokensMap } from './types.ts';

/** The directory or a file in it is missing, unreadable or not what a Hugging Face tokenizer directory holds. */
export class TokenizerDirError extends Error {
  override name = 'TokenizerDirError';
}


export interface AddedTokenSpec {
  id: number;
  content: string;
  special: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  singleWord: boolean;
}

export interface HfTokenizerFiles {
  /** Absolute path of the directory. */
  dir: string;
  /** tokenizer.json, parsed. */
  tokenizer: Record<string, unknown>;
  /** tokenizer_config.json, parsed ({} when the directory has none). */
  config: Record<string, unknown>;
  specialTokens: SpecialTokensMap;
  addedTokens: AddedTokenSpec[];
}

function readJson(path: string, what: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TokenizerDirError(`cannot read ${what} (${path}): ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TokenizerDirError(`${what} (${path}) is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TokenizerDirError(`${what} (${path}) is not a JSON object`);
  return value as Record<string, unknown>;
}

/** A token given as a string or as an AddedToken object ({"__type": "AddedToken", "content": …}). */
export function tokenContent(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** Throws TokenizerDirError unless `dir` is an absolute path to a directory. */
export function checkAbsoluteDir(dir: string): string {
  if (!isAbsolute(dir)) throw new TokenizerDirError(`tokenizer directory must be an absolute path: ${dir}`);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    throw new TokenizerDirError(`cannot read tokenizer directory ${dir}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  if (!isDir) throw new TokenizerDirError(`${dir} is not a directory`);
  return resolve(dir);
}

/**
 * The directory's files, parsed and checked for shape. Not cached: the parsed tokenizer.json is large (up to
 * ~200 MB of JS objects for a 200k vocabulary) and only needed while a tokenizer is built from it.
 */
export function readTokenizerDir(dir: string): HfTokenizerFiles {
  const abs = checkAbsoluteDir(dir);
  const tokenizer = readJson(join(abs, 'tokenizer.json'), 'tokenizer.json');
  const model = tokenizer.model as Record<string, unknown> | undefined;
  if (typeof model !== 'object' || model === null || typeof model.vocab !== 'object' || model.vocab === null) {
    throw new TokenizerDirError(`tokenizer.json (${join(abs, 'tokenizer.json')}) has no "model" with a "vocab"`);
  }
  const configPath = join(abs, 'tokenizer_config.json');
  const config = existsSync(configPath) ? readJson(configPath, 'tokenizer_config.json') : {};
  const addedTokens: AddedTokenSpec[] = [];
  const added = tokenizer.added_tokens;
  if (added !== undefined && added !== null && !Array.isArray(added)) throw new TokenizerDirError('tokenizer.json: "added_tokens" must be an array');
  for (const a of (added ?? []) as Array<Record<string, unknown>>) {
    if (typeof a.id !== 'number' || typeof a.content !== 'string') throw new TokenizerDirError('tokenizer.json: every added token needs a numeric "id" and a string "content"');
    addedTokens.push({ id: a.id, content: a.content, special: a.special === true, lstrip: a.lstrip === true, rstrip: a.rstrip === true, normalized: a.normalized === true, singleWord: a.single_word === true });
  }
  return { dir: abs, tokenizer, config, specialTokens: specialTokensMap(config), addedTokens };
}

/**
 * transformers' special_tokens_map as apply_chat_template passes it: each of the seven named tokens that is set,
 * additional_special_tokens when non-empty, then the model's extra_special_tokens by name (a dict in
 * tokenizer_config.json; a list there is taken as additional tokens, as transformers does).
 */
export function specialTokensMap(config: Record<string, unknown>): SpecialTokensMap {
  const map: SpecialTokensMap = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const) {
    const content = tokenContent(config[key]);
    if (content !== undefined) map[key] = content;
  }
  const extra = config.extra_special_tokens;
  const additional = [config.additional_special_tokens, Array.isArray(extra) ? extra : []].flatMap((list) => (Array.isArray(list) ? list.map(tokenContent).filter((t): t is string => t !== undefined) : []));
  if (additional.length > 0) map.additional_special_tokens = additional;
  if (typeof extra === 'object' && extra !== null && !Array.isArray(extra)) {
    for (const [name, value] of Object.entries(extra)) {
      const content = tokenContent(value);
      if (content !== undefined && !(name in map)) map[name] = content;
    }
  }
  return map;
}

/**
 * The chat template the directory ships, as transformers finds it: chat_template.jinja, else chat_template.json's
 * "chat_template", else tokenizer_config.json's "chat_template" (a string, or a list of {name, template} of which
 * "default" is taken). Returns the file it came from (for messages) and the template text, or null.
 */
export function dirChatTemplate(dir: string): { source: string; text: string } | null {
  const jinjaPath = join(dir, 'chat_template.jinja');
  if (existsSync(jinjaPath)) return { source: jinjaPath, text: readTemplateFile(jinjaPath) };
  for (const name of ['chat_template.json', 'tokenizer_config.json']) {
    const path = join(dir, name);
    if (!existsSync(path)) continue;
    const value = readJson(path, name).chat_template;
    if (typeof value === 'string') return { source: path, text: value };
    if (Array.isArray(value)) {
      const named = (value as Array<{ name?: unknown; template?: unknown }>).find((t) => t.name === 'default');
      if (named !== undefined && typeof named.template === 'string') return { source: path, text: named.template };
    }
  }
  return null;
}

export function readTemplateFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new TokenizerDirError(`cannot read chat template ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}
