// Python's string methods and printf/str.format formatting, and strftime, as chat templates call them under
// transformers' Jinja2: what @huggingface/jinja lacks or does differently (strip('\n') stripping all whitespace,
// no splitlines/count/format/find/join, JS whitespace for strip() and split()). jinja-compat.ts wires them in.
// Thread: any. Per call: plain string work, no caches.
import {
  PyTypeError, arr, bool, int, isInt, isNoneOrUndef, isSeq, isStr, pyRepr, pyStr, splitArgs, str, type RV,
} from './jinja-values.ts';

// Python's str.isspace() set (JS's \s adds U+FEFF and lacks U+001C-U+001F, U+0085).
const PY_SPACE = '\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';
const LINE_BREAKS = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;

/** str.strip / lstrip / rstrip: `chars` null strips Python whitespace; otherwise exactly those characters. */
export function pyStrip(s: string, chars: string | null, left: boolean, right: boolean): string {
  const set = Array.from(chars ?? PY_SPACE);
  const cps = Array.from(s);
  let start = 0;
  let end = cps.length;
  if (left) while (start < end && set.includes(cps[start]!)) start++;
  if (right) while (end > start && set.includes(cps[end - 1]!)) end--;
  return start === 0 && end === cps.length ? s : cps.slice(start, end).join('');
}

function optStr(v: RV | undefined, what: string): string | null {
  if (v === undefined || isNoneOrUndef(v)) return null;
  if (!isStr(v)) throw new PyTypeError(`${what} arg must be None or str`);
  return v.value as string;
}

/** str.split(sep=None, maxsplit=-1) and rsplit. */
function pySplit(s: string, sepArg: RV | undefined, maxArg: RV | undefined, fromRight: boolean): string[] {
  const sep = optStr(sepArg, 'split');
  const max = maxArg !== undefined && isInt(maxArg) ? (maxArg.value as number) : -1;
  if (sep === '') throw new PyTypeError('empty separator');
  let parts: string[];
  if (sep === null) {
    parts = [];
    let word = '';
    for (const ch of s) {
      if (PY_SPACE.includes(ch)) {
        if (word !== '') parts.push(word);
        word = '';
      } else word += ch;
    }
    if (word !== '') parts.push(word);
    if (max < 0 || parts.length <= max + 1) return parts;
    // With maxsplit, the rest keeps its inner whitespace: re-cut the text itself.
    const trimmed = pyStrip(s, null, !fromRight, fromRight);
    const out: string[] = [];
    let rest = trimmed;
    for (let i = 0; i < max; i++) {
      const cps = Array.from(rest);
      if (fromRight) {
        let e = cps.length;
        while (e > 0 && !PY_SPACE.includes(cps[e - 1]!)) e--;
        out.unshift(cps.slice(e).join(''));
        rest = pyStrip(cps.slice(0, e).join(''), null, false, true);
      } else {
        let e = 0;
        while (e < cps.length && !PY_SPACE.includes(cps[e]!)) e++;
        out.push(cps.slice(0, e).join(''));
        rest = pyStrip(cps.slice(e).join(''), null, true, false);
      }
    }
    return fromRight ? [rest, ...out] : [...out, rest];
  }
  parts = s.split(sep);
  if (max < 0 || parts.length <= max + 1) return parts;
  return fromRight ? [parts.slice(0, parts.length - max).join(sep), ...parts.slice(parts.length - max)] : [...parts.slice(0, max), parts.slice(max).join(sep)];
}

function pySplitlines(s: string, keepends: boolean): string[] {
  const out: string[] = [];
  let rest = s;
  for (let m = LINE_BREAKS.exec(rest); m !== null; m = LINE_BREAKS.exec(rest)) {
    out.push(rest.slice(0, keepends ? m.index + m[0].length : m.index));
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest !== '') out.push(rest);
  return out;
}

function pyCapitalize(s: string): string {
  const cps = Array.from(s);
  return cps.length === 0 ? s : cps[0]!.toUpperCase() + cps.slice(1).join('').toLowerCase();
}

function pyTitle(s: string): string {
  let out = '';
  let prevCased = false;
  for (const ch of s) {
    const cased = ch.toLowerCase() !== ch.toUpperCase();
    out += cased ? (prevCased ? ch.toLowerCase() : ch.toUpperCase()) : ch;
    prevCased = cased;
  }
  return out;
}

function needStr(v: RV | undefined, what: string): string {
  if (v === undefined || !isStr(v)) throw new PyTypeError(`${what}() argument must be str`);
  return v.value as string;
}

function cpIndex(s: string, unitIndex: number): number {
  return unitIndex < 0 ? -1 : Array.from(s.slice(0, unitIndex)).length;
}

/** The Python str methods templates call, by name; null when Python's str has no such method we model. */
export function stringMethod(s: string, name: string): ((args: RV[]) => RV) | null {
  switch (name) {
    case 'strip':
    case 'lstrip':
    case 'rstrip':
      return (args) => str(pyStrip(s, optStr(args[0], name), name !== 'rstrip', name !== 'lstrip'));
    case 'split':
    case 'rsplit':
      return (args) => {
        const [pos, kw] = splitArgs(args);
        return arr(pySplit(s, pos[0] ?? kw.get('sep'), pos[1] ?? kw.get('maxsplit'), name === 'rsplit').map(str));
      };
    case 'splitlines':
      return (args) => arr(pySplitlines(s, args[0]?.__bool__().value === true).map(str));
    case 'count':
      return (args) => {
        const sub = needStr(args[0], 'count');
        if (sub === '') return int(Array.from(s).length + 1);
        return int(s.split(sub).length - 1);
      };
    case 'find':
    case 'index':
      return (args) => {
        const i = cpIndex(s, s.indexOf(needStr(args[0], name)));
        if (i < 0 && name === 'index') throw new PyTypeError('substring not found');
        return int(i);
      };
    case 'rfind':
      return (args) => int(cpIndex(s, s.lastIndexOf(needStr(args[0], name))));
    case 'join':
      return (args) => {
        const items = args[0];
        if (items === undefined) throw new PyTypeError('join() takes exactly one argument');
        const list = isStr(items) ? Array.from(items.value as string) : isSeq(items) ? (items.value as RV[]).map((x) => {
          if (!isStr(x)) throw new PyTypeError('sequence item: expected str instance');
          return x.value as string;
        }) : null;
        if (list === null) throw new PyTypeError('can only join an iterable');
        return str(list.join(s));
      };
    case 'format':
      return (args) => str(strFormat(s, args));
    case 'upper':
      return () => str(s.toUpperCase());
    case 'lower':
      return () => str(s.toLowerCase());
    case 'capitalize':
      return () => str(pyCapitalize(s));
    case 'title':
      return () => str(pyTitle(s));
    case 'isdigit':
      return () => bool(s.length > 0 && /^\p{Nd}+$/u.test(s));
    case 'isspace':
      return () => bool(s.length > 0 && Array.from(s).every((c) => PY_SPACE.includes(c)));
    case 'isalpha':
      return () => bool(s.length > 0 && /^\p{L}+$/u.test(s));
    case 'isalnum':
      return () => bool(s.length > 0 && /^[\p{L}\p{Nd}]+$/u.test(s));
    case 'isupper':
      return () => bool(s.toUpperCase() === s && s.toLowerCase() !== s);
    case 'islower':
      return () => bool(s.toLowerCase() === s && s.toUpperCase() !== s);
    default:
      return null;
  }
}

/** '{} {name} {0!r}'.format(...): auto and manual numbering, names, !r/!s; format specs are not modelled. */
export function strFormat(template: string, args: RV[]): string {
  const [pos, kw] = splitArgs(args);
  let auto = 0;
  return template.replace(/\{\{|\}\}|\{([^{}!:]*)(?:!([rs]))?(?::([^{}]*))?\}/g, (whole, field: string | undefined, conv: string | undefined, spec: string | undefined) => {
    if (whole === '{{') return '{';
    if (whole === '}}') return '}';
    if (spec !== undefined && spec !== '') throw new PyTypeError(`format spec '${spec}' is not supported`);
    const key = field ?? '';
    const value = key === '' ? pos[auto++] : /^\d+$/.test(key) ? pos[Number(key)] : kw.get(key);
    if (value === undefined) throw new PyTypeError(`Replacement index ${key || auto - 1} out of range for positional args tuple`);
    return conv === 'r' ? pyRepr(value) : pyStr(value);
  });
}

/** printf-style `fmt % values` and the `format` filter: %s %r %d %i %f %e %x %o %c %%, flags, width, precision. */
export function percentFormat(fmt: string, values: RV[], named: Map<string, RV> | null): string {
  let i = 0;
  const out = fmt.replace(/%(?:\(([^)]*)\))?([-+ 0#]*)(\d+|\*)?(?:\.(\d+))?([sdirfFeExXoc%])/g, (_m, name: string | undefined, flags: string, width: string | undefined, prec: string | undefined, conv: string) => {
    if (conv === '%') return '%';
    const next = (): RV => {
      if (name !== undefined) {
        const v = named?.get(name);
        if (v === undefined) throw new PyTypeError(`format requires a mapping with key '${name}'`);
        return v;
      }
      const v = values[i++];
      if (v === undefined) throw new PyTypeError('not enough arguments for format string');
      return v;
    };
    const w = width === '*' ? Number(next().value) : width === undefined ? 0 : Number(width);
    const v = next();
    let body: string;
    const numeric = (): number => {
      if (v.type !== 'IntegerValue' && v.type !== 'FloatValue' && v.type !== 'BooleanValue') throw new PyTypeError(`%${conv} format: a real number is required, not ${v.type}`);
      return Number(v.value);
    };
    switch (conv) {
      case 's': body = pyStr(v); if (prec !== undefined) body = Array.from(body).slice(0, Number(prec)).join(''); break;
      case 'r': body = pyRepr(v); break;
      case 'd': case 'i': body = String(Math.trunc(numeric())); break;
      case 'f': case 'F': body = numeric().toFixed(prec === undefined ? 6 : Number(prec)); break;
      case 'e': case 'E': {
        const [m, e] = numeric().toExponential(prec === undefined ? 6 : Number(prec)).split('e') as [string, string];
        body = `${m}e${Number(e) < 0 ? '-' : '+'}${String(Math.abs(Number(e))).padStart(2, '0')}`;
        if (conv === 'E') body = body.toUpperCase();
        break;
      }
      case 'x': case 'X': case 'o': {
        const n = Math.trunc(numeric());
        body = (n < 0 ? '-' : '') + Math.abs(n).toString(conv === 'o' ? 8 : 16);
        if (conv === 'X') body = body.toUpperCase();
        break;
      }
      default: body = isInt(v) ? String.fromCodePoint(v.value as number) : pyStr(v);
    }
    if (flags.includes('+') && /^[0-9]/.test(body) && 'difFeE'.includes(conv)) body = `+${body}`;
    else if (flags.includes(' ') && /^[0-9]/.test(body) && 'difFeE'.includes(conv)) body = ` ${body}`;
    const len = Array.from(body).length;
    if (len >= w) return body;
    if (flags.includes('-')) return body + ' '.repeat(w - len);
    if (flags.includes('0') && 'difFeExXo'.includes(conv)) {
      const sign = /^[-+ ]/.test(body) ? body[0]! : '';
      return sign + '0'.repeat(w - len) + body.slice(sign.length);
    }
    return ' '.repeat(w - len) + body;
  });
  if (named === null && i < values.length) throw new PyTypeError('not all arguments converted during string formatting');
  return out;
}

/** `fmt % rhs`: a tuple spreads, a dict names, anything else is the one value. */
export function percentOperator(fmt: string, rhs: RV): string {
  if (rhs.type === 'TupleValue') return percentFormat(fmt, rhs.value as RV[], null);
  if (rhs.type === 'ObjectValue') return percentFormat(fmt, [rhs], rhs.value as Map<string, RV>);
  return percentFormat(fmt, [rhs], null);
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** Python's datetime.now().strftime(fmt) in the C locale, local time, with glibc's %-X (no padding). */
export function strftime(date: Date, fmt: string): string {
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const startOfYear = new Date(date.getFullYear(), 0, 1);
  const dayOfYear = Math.floor((date.getTime() - startOfYear.getTime() + (startOfYear.getTimezoneOffset() - date.getTimezoneOffset()) * 60_000) / 86_400_000) + 1;
  const h12 = date.getHours() % 12 === 0 ? 12 : date.getHours() % 12;
  const offset = -date.getTimezoneOffset();
  const fields: Record<string, [number | string, number]> = {
    Y: [date.getFullYear(), 4], y: [date.getFullYear() % 100, 2], m: [date.getMonth() + 1, 2], d: [date.getDate(), 2],
    H: [date.getHours(), 2], I: [h12, 2], M: [date.getMinutes(), 2], S: [date.getSeconds(), 2], j: [dayOfYear, 3],
    e: [String(date.getDate()).padStart(2, ' '), 0], w: [date.getDay(), 1],
    a: [DAYS[date.getDay()]!.slice(0, 3), 0], A: [DAYS[date.getDay()]!, 0], b: [MONTHS[date.getMonth()]!.slice(0, 3), 0],
    h: [MONTHS[date.getMonth()]!.slice(0, 3), 0], B: [MONTHS[date.getMonth()]!, 0], p: [date.getHours() < 12 ? 'AM' : 'PM', 0],
    z: [`${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}${pad(Math.abs(offset) % 60)}`, 0],
  };
  return fmt.replace(/%(-?)([a-zA-Z%])/g, (whole, dash: string, c: string) => {
    if (c === '%') return '%';
    if (c === 'F') return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
    if (c === 'T') return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
    const f = fields[c];
    if (f === undefined) return whole;
    const [value, width] = f;
    if (typeof value === 'string') return value;
    return dash === '-' || width === 0 ? String(value) : pad(value, width);
  });
}

