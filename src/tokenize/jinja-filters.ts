// Jinja2's built-in filters as Python's jinja2 3.1 runs them, for the ones @huggingface/jinja lacks or runs
// differently (format, min, max, sum, select/reject(attr) with any test, map with a filter name, groupby,
// batch, truncate, trim(chars), string/list/first/last on any sequence, join of non-strings, tojson with
// transformers' arguments, …). jinja-compat.ts consults this table before the library's own filters.
// Thread: any. Per call: plain work on the values.
import { percentFormat, pyStrip, strFormat } from './jinja-python.ts';
import {
  NONE, PyTypeError, UNDEFINED, arr, bool, int, isMap, isNoneOrUndef, isNum, isSeq, isStr, num, pyCompare, pyJson,
  pyStr, splitArgs, str, tuple, type RV,
} from './jinja-values.ts';

/** What a filter may ask of the interpreter: other filters and tests by name. */
export interface FilterHost {
  applyNamed(value: RV, name: string, args: RV[]): RV;
  test(name: string, value: RV, args: RV[]): boolean;
}

type Filter = (value: RV, args: RV[], host: FilterHost) => RV;

/** The items of an iterable as Python iterates it: list, tuple, str (characters), dict (keys). */
export function iterItems(v: RV): RV[] {
  if (isSeq(v)) return v.value as RV[];
  if (isStr(v)) return Array.from(v.value as string, str);
  if (isMap(v)) return [...(v.value as Map<string, RV>).keys()].map(str);
  throw new PyTypeError(`'${v.type}' object is not iterable`);
}

/** Jinja's attribute lookup for filters: "a.b.0" through dicts and lists. */
function attrOf(item: RV, path: string): RV {
  let cur = item;
  for (const part of path.split('.')) {
    if (isMap(cur)) cur = (cur.value as Map<string, RV>).get(part) ?? UNDEFINED;
    else if (isSeq(cur) && /^-?\d+$/.test(part)) cur = (cur.value as RV[]).at(Number(part)) ?? UNDEFINED;
    else return UNDEFINED;
  }
  return cur;
}

function lowerKey(v: RV, caseSensitive: boolean): RV {
  return !caseSensitive && isStr(v) ? str((v.value as string).toLowerCase()) : v;
}

function arg(pos: RV[], kw: Map<string, RV>, i: number, name: string): RV | undefined {
  return pos[i] ?? kw.get(name);
}

function minMax(wantMax: boolean): Filter {
  return (value, args) => {
    const [pos, kw] = splitArgs(args);
    const cs = arg(pos, kw, 0, 'case_sensitive')?.__bool__().value === true;
    const attribute = arg(pos, kw, 1, 'attribute');
    const items = iterItems(value);
    if (items.length === 0) return UNDEFINED;
    const key = (x: RV): RV => lowerKey(attribute !== undefined && !isNoneOrUndef(attribute) ? attrOf(x, pyStr(attribute)) : x, cs);
    let best = items[0]!;
    for (const x of items.slice(1)) {
      const d = pyCompare(key(x), key(best));
      if (wantMax ? d > 0 : d < 0) best = x;
    }
    return best;
  };
}

function selectFilter(reject: boolean, byAttr: boolean): Filter {
  return (value, args, host) => {
    const [pos] = splitArgs(args);
    const attr = byAttr ? pos.shift() : undefined;
    const testName = pos.shift();
    const out = iterItems(value).filter((item) => {
      const subject = attr === undefined ? item : attrOf(item, pyStr(attr));
      const ok = testName === undefined ? subject.__bool__().value : host.test(pyStr(testName), subject, pos);
      return reject ? !ok : ok;
    });
    return arr(out);
  };
}

function tojson(value: RV, args: RV[]): RV {
  const [pos, kw] = splitArgs(args);
  const ensureAscii = arg(pos, kw, 0, 'ensure_ascii')?.__bool__().value === true;
  const indentArg = arg(pos, kw, 1, 'indent');
  const indent = indentArg === undefined || isNoneOrUndef(indentArg) ? null : isStr(indentArg) ? (indentArg.value as string) : Number(indentArg.value);
  const sepArg = arg(pos, kw, 2, 'separators');
  let itemSep = indent === null ? ', ' : ',';
  let keySep = ': ';
  if (sepArg !== undefined && !isNoneOrUndef(sepArg)) {
    const seps = iterItems(sepArg);
    if (seps.length !== 2) throw new PyTypeError('separators must be a pair of strings');
    itemSep = pyStr(seps[0]!);
    keySep = pyStr(seps[1]!);
  }
  const sortKeys = arg(pos, kw, 3, 'sort_keys')?.__bool__().value === true;
  return str(pyJson(value, { ensureAscii, indent, itemSep, keySep, sortKeys }));
}

function groupby(value: RV, args: RV[]): RV {
  const [pos, kw] = splitArgs(args);
  const attribute = arg(pos, kw, 0, 'attribute');
  if (attribute === undefined) throw new PyTypeError("groupby() missing 'attribute'");
  const dflt = arg(pos, kw, 1, 'default');
  const cs = arg(pos, kw, 2, 'case_sensitive')?.__bool__().value === true;
  const raw = (x: RV): RV => {
    const v = attrOf(x, pyStr(attribute));
    return v.type === 'UndefinedValue' && dflt !== undefined ? dflt : v;
  };
  const key = (x: RV): RV => lowerKey(raw(x), cs);
  const sorted = iterItems(value).slice().sort((a, b) => pyCompare(key(a), key(b)));
  const groups: RV[] = [];
  let members: RV[] = [];
  for (let i = 0; i < sorted.length; i++) {
    members.push(sorted[i]!);
    if (i === sorted.length - 1 || pyCompare(key(sorted[i]!), key(sorted[i + 1]!)) !== 0) {
      const list = arr(members);
      // A namedtuple (grouper, list): unpacks as a pair, and answers .grouper / .list.
      const group = tuple([raw(members[0]!), list]);
      (group as unknown as { _builtins: Map<string, RV> })._builtins = new Map([['grouper', raw(members[0]!)], ['list', list], ['length', int(2)]]);
      groups.push(group);
      members = [];
    }
  }
  return arr(groups);
}

function truncate(value: RV, args: RV[]): RV {
  const [pos, kw] = splitArgs(args);
  const s = Array.from(pyStr(value));
  const length = Number(arg(pos, kw, 0, 'length')?.value ?? 255);
  const killwords = arg(pos, kw, 1, 'killwords')?.__bool__().value === true;
  const end = pyStr(arg(pos, kw, 2, 'end') ?? str('...'));
  const leewayArg = arg(pos, kw, 3, 'leeway');
  const leeway = leewayArg === undefined || isNoneOrUndef(leewayArg) ? 5 : Number(leewayArg.value);
  if (s.length <= length + leeway) return str(s.join(''));
  const head = s.slice(0, Math.max(0, length - Array.from(end).length)).join('');
  if (killwords) return str(head + end);
  const cut = head.lastIndexOf(' ');
  return str((cut < 0 ? head : head.slice(0, cut)) + end);
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&#34;', "'": '&#39;' };

export const PY_FILTERS: ReadonlyMap<string, Filter> = new Map<string, Filter>([
  ['tojson', tojson],
  ['trim', (v, args) => str(pyStrip(pyStr(v), args[0] !== undefined && !isNoneOrUndef(args[0]) ? pyStr(args[0]) : null, true, true))],
  ['format', (v, args) => {
    const [pos, kw] = splitArgs(args);
    return str(kw.size > 0 ? percentFormat(pyStr(v), [], kw) : percentFormat(pyStr(v), pos, null));
  }],
  ['min', minMax(false)],
  ['max', minMax(true)],
  ['sum', (v, args) => {
    const [pos, kw] = splitArgs(args);
    const attribute = arg(pos, kw, 0, 'attribute');
    const start = arg(pos, kw, 1, 'start') ?? int(0);
    let total = Number(start.value);
    let float = start.type === 'FloatValue';
    for (const item of iterItems(v)) {
      const x = attribute !== undefined && !isNoneOrUndef(attribute) ? attrOf(item, pyStr(attribute)) : item;
      if (!isNum(x)) throw new PyTypeError(`unsupported operand type(s) for +: 'int' and '${x.type}'`);
      total += Number(x.value);
      float ||= x.type === 'FloatValue';
    }
    return num(total, float);
  }],
  ['select', selectFilter(false, false)],
  ['reject', selectFilter(true, false)],
  ['selectattr', selectFilter(false, true)],
  ['rejectattr', selectFilter(true, true)],
  ['map', (v, args, host) => {
    const [pos, kw] = splitArgs(args);
    const attribute = kw.get('attribute');
    if (attribute !== undefined) {
      const dflt = kw.get('default');
      return arr(iterItems(v).map((x) => {
        const got = attrOf(x, pyStr(attribute));
        return got.type === 'UndefinedValue' && dflt !== undefined ? dflt : got;
      }));
    }
    const name = pos.shift();
    if (name === undefined) throw new PyTypeError('map() needs a filter name or an attribute');
    return arr(iterItems(v).map((x) => host.applyNamed(x, pyStr(name), pos)));
  }],
  ['groupby', groupby],
  ['batch', (v, args) => {
    const [pos, kw] = splitArgs(args);
    const size = Number(arg(pos, kw, 0, 'linecount')?.value ?? 1);
    const fill = arg(pos, kw, 1, 'fill_with');
    const items = iterItems(v);
    const out: RV[] = [];
    for (let i = 0; i < items.length; i += size) {
      const row = items.slice(i, i + size);
      if (fill !== undefined && !isNoneOrUndef(fill)) while (row.length < size) row.push(fill);
      out.push(arr(row));
    }
    return arr(out);
  }],
  ['truncate', truncate],
  ['string', (v) => str(pyStr(v))],
  ['list', (v) => arr(iterItems(v))],
  ['first', (v) => iterItems(v)[0] ?? UNDEFINED],
  ['last', (v) => iterItems(v).at(-1) ?? UNDEFINED],
  ['length', (v) => int(iterItems(v).length)],
  ['count', (v) => int(iterItems(v).length)],
  ['reverse', (v) => (isStr(v) ? str(Array.from(v.value as string).reverse().join('')) : arr(iterItems(v).slice().reverse()))],
  ['join', (v, args) => {
    const [pos, kw] = splitArgs(args);
    const sep = pyStr(arg(pos, kw, 0, 'd') ?? str(''));
    const attribute = arg(pos, kw, 1, 'attribute');
    return str(iterItems(v).map((x) => pyStr(attribute !== undefined && !isNoneOrUndef(attribute) ? attrOf(x, pyStr(attribute)) : x)).join(sep));
  }],
  ['capitalize', (v) => {
    const s = Array.from(pyStr(v));
    return str(s.length === 0 ? '' : s[0]!.toUpperCase() + s.slice(1).join('').toLowerCase());
  }],
  ['wordcount', (v) => int((pyStr(v).match(/\w+/gu) ?? []).length)],
  ['center', (v, args) => {
    const s = pyStr(v);
    const width = Number(args[0]?.value ?? 80);
    const len = Array.from(s).length;
    if (len >= width) return str(s);
    const total = width - len;
    const left = Math.floor(total / 2) + (total & width & 1);
    return str(' '.repeat(left) + s + ' '.repeat(total - left));
  }],
  ['round', (v, args) => {
    const [pos, kw] = splitArgs(args);
    const precision = Number(arg(pos, kw, 0, 'precision')?.value ?? 0);
    const method = pyStr(arg(pos, kw, 1, 'method') ?? str('common'));
    const f = 10 ** precision;
    const x = Number(v.value) * f;
    const r = method === 'ceil' ? Math.ceil(x) : method === 'floor' ? Math.floor(x) : Math.sign(x) * Math.round(Math.abs(x));
    return num(r / f, true);
  }],
  ['escape', (v) => str(pyStr(v).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!))],
  ['e', (v) => str(pyStr(v).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!))],
  ['d', (v, args) => {
    const [pos, kw] = splitArgs(args);
    const fallback = arg(pos, kw, 0, 'default_value') ?? str('');
    const asBool = arg(pos, kw, 1, 'boolean')?.__bool__().value === true;
    return v.type === 'UndefinedValue' || (asBool && !v.__bool__().value) ? fallback : v;
  }],
  ['items', (v) => {
    if (!isMap(v)) throw new PyTypeError('items() needs a mapping');
    return arr([...(v.value as Map<string, RV>)].map(([k, x]) => tuple([str(k), x])));
  }],
  ['attr', (v, args) => (isMap(v) ? (v.value as Map<string, RV>).get(pyStr(args[0] ?? NONE)) ?? UNDEFINED : UNDEFINED)],
  ['bool', (v) => bool(v.__bool__().value)],
]);

export { strFormat };
