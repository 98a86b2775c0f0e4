// Finds a model's added tokens in text the way HF tokenizers' added-vocabulary matcher does: leftmost, and the
// longest token at that position (HF runs a leftmost-longest Aho-Corasick automaton). Used to split added
// tokens out before BPE and to cut a rendered prompt into independently tokenized segments.
// Why not one RegExp alternation of the tokens: V8 tries its alternatives one by one at every candidate
// position, so Llama 3's 256 specials (or DeepSeek's 800, Gemma's 6,400) cost ~1 µs per occurrence of their
// shared first character and made the added-token scans most of a warm request. Here: a scan for the tokens'
// first characters (a character-class RegExp, which irregexp runs as a fast loop), then a walk down a trie of
// the tokens from each such position: O(token length) per candidate.
// Thread: any; built once per tokenizer per thread. Hot path: yes (per uncached segment and per rendered prompt).
// Memory: one Map per trie node, ~100 bytes per token character (~2 MB for Gemma 3's 6,400 added tokens).

interface TrieNode {
  next: Map<number, TrieNode> | null;
  /** The token ending here, when one does. */
  token: string | null;
}

export interface AddedTokenMatch {
  start: number;
  end: number;
  /** The token's text (without the whitespace an lstrip/rstrip token took with it). */
  token: string;
}

/** Unicode White_Space: what lstrip/rstrip tokens take with them (HF trims with char::is_whitespace). */
function isWhiteSpace(c: number): boolean {
  return (c >= 0x09 && c <= 0x0d) || c === 0x20 || c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;
}

export class AddedTokenMatcher {
  private readonly root: TrieNode = { next: new Map(), token: null };
  private readonly firsts: RegExp;
  private readonly lstrip: Set<string>;
  private readonly rstrip: Set<string>;
  readonly size: number;

  constructor(tokens: ReadonlyArray<{ content: string; lstrip?: boolean; rstrip?: boolean }>) {
    const first = new Set<string>();
    this.lstrip = new Set(tokens.filter((t) => t.lstrip === true).map((t) => t.content));
    this.rstrip = new Set(tokens.filter((t) => t.rstrip === true).map((t) => t.content));
    let size = 0;
    for (const { content } of tokens) {
      if (content.length === 0) continue;
      let node = this.root;
      for (let i = 0; i < content.length; i++) {
        const c = content.charCodeAt(i);
        node.next ??= new Map();
        let child = node.next.get(c);
        if (child === undefined) {
          child = { next: null, token: null };
          node.next.set(c, child);
        }
        node = child;
      }
      if (node.token === null) size++;
      node.token = content;
      first.add(content[0]!);
    }
    this.size = size;
    const cls = [...first].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    this.firsts = new RegExp(cls === '' ? '(?!)' : `[${cls}]`, 'g');
  }

  /** The first added token at or after `from` (leftmost, then longest), or null. */
  next(text: string, from: number): AddedTokenMatch | null {
    const re = this.firsts;
    re.lastIndex = from;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const start = m.index;
      let node: TrieNode | undefined = this.root;
      let token: string | null = null;
      let end = start;
      for (let i = start; i < text.length && node !== undefined; i++) {
        node = node.next?.get(text.charCodeAt(i));
        if (node !== undefined && node.token !== null) {
          token = node.token;
          end = i + 1;
        }
      }
      if (token === null) {
        re.lastIndex = start + 1;
        continue;
      }
      let s = start;
      let e = end;
      if (this.lstrip.size > 0 && this.lstrip.has(token)) while (s > from && isWhiteSpace(text.charCodeAt(s - 1))) s--;
      if (this.rstrip.size > 0 && this.rstrip.has(token)) while (e < text.length && isWhiteSpace(text.charCodeAt(e))) e++;
      return { start: s, end: e, token };
    }
    return null;
  }
}
