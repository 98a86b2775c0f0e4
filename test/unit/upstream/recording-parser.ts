// An H1ResponseParser whose sink records what it reports, for the parser's unit tests.
import { H1ResponseParser } from '../../../src/upstream/h1-response-parser.ts';

export interface Seen {
  status: number[];
  body: string;
  completes: boolean[];
  error: string | null;
}

export function parser(): { p: H1ResponseParser; seen: Seen } {
  const seen: Seen = { status: [], body: '', completes: [], error: null };
  const p = new H1ResponseParser({
    onHead: (s) => seen.status.push(s),
    onBody: (c) => { seen.body += c.toString('latin1'); },
    onComplete: (k) => seen.completes.push(k),
  });
  return { p, seen };
}
