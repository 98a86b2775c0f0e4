// @huggingface/jinja's runtime values seen from outside the library, and Python's view of them: str(), repr(),
// ==, ordering, truthiness, and json.dumps as transformers' `tojson` calls it. jinja-python.ts (filters, string
// methods) and jinja-compat.ts (the interpreter) build on these.
// The library's value classes are not exported from its entry point; their constructors are taken from values
// its own Environment.set() creates (jinja-compat.ts, the library's one importer, calls bindLibraryValues), so
// this code depends on its public API only, and a release that renames a class fails at load, not a render.
// Thread: any. Setup: one probe per thread. Per render: plain function calls on the values.

/** The part of a library runtime value this code reads. */
export interface RV {
  type: string;
  value: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- the library's values hold any JS value
  __bool__(): { value: boolean };
  toString(): string;
  readonly builtins: ReadonlyMap<string, RV>;
}

type Ctor<T> = new (value: T) => RV;
/** What jinja-compat.ts hands over: the library's Environment, whose set() converts JS values into its own. */
export interface ValueFactory {
  set(name: string, value: unknown): unknown;
}

/** The library's value constructors; filled by bindLibraryValues before any template is rendered. */
export const V = {} as {
  Str: Ctor<string>; Int: Ctor<number>; Float: Ctor<number>; Bool: Ctor<boolean>; Obj: Ctor<Map<string, RV>>;
  Arr: Ctor<RV[]>; Null: Ctor<null>; Undef: Ctor<undefined>; Fn: Ctor<(args: RV[], env: unknown) => RV>;
};

/** Takes the constructors from values the library's own Environment.set() creates. */
export function bindLibraryValues(probe: ValueFactory): void {
  const ctor = <T>(name: string, value: unknown): Ctor<T> => (probe.set(name, value) as object).constructor as Ctor<T>;
  Object.assign(V, {
    Str: ctor<string>('s', ''), Int: ctor<number>('i', 1), Float: ctor<number>('f', 1.5), Bool: ctor<boolean>('b', true),
    Obj: ctor<Map<string, RV>>('o', {}), Arr: ctor<RV[]>('a', []), Null: ctor<null>('n', null), Undef: ctor<undefined>('u', undefined),
    Fn: ctor<(args: RV[], env: unknown) => RV>('fn', () => 0),
  });
  NONE = new V.Null(null);
  UNDEFINED = new V.Undef(undefined);
}

export const str = (s: string): RV => new V.Str(s);
export const int = (n: number): RV => new V.Int(n);
export const bool = (b: boolean): RV => new V.Bool(b);
export const arr = (items: RV[]): RV => new V.Arr(items);
/**
 * A Python tuple: the library's array value marked as one, so it prints as (a, b) and still unpacks in a for
 * loop (the library unpacks ArrayValue only).
 */
export function tuple(items: RV[]): RV {
  const t = new V.Arr(items);
  (t as { pyTuple?: boolean }).pyTuple = true;
  return t;
}

const isTuple = (v: RV): boolean => v.type === 'TupleValue' || (v as { pyTuple?: boolean }).pyTuple === true;
export let NONE: RV;
export let UNDEFINED: RV;
export const fn = (f: (args: RV[]) => RV): RV => new V.Fn((args) => f(args));
export const num = (n: number, float: boolean): RV => (float ? new V.Float(n) : new V.Int(n));

export const isStr = (v: RV): boolean => v.type === 'StringValue';
export const isInt = (v: RV): boolean => v.type === 'IntegerValue';
export const isNum = (v: RV): boolean => v.type === 'IntegerValue' || v.type === 'FloatValue' || v.type === 'BooleanValue';
export const isSeq = (v: RV): boolean => v.type === 'ArrayValue' || v.type === 'TupleValue';
export const isMap = (v: RV): boolean => v.type === 'ObjectValue' || v.type === 'KeywordArgumentsValue';
export const isNoneOrUndef = (v: RV): boolean => v.type === 'NullValue' || v.type === 'UndefinedValue';

/** A Python TypeError raised by the template's own operations (the render then falls back, see jinja-template.ts). */
export class PyTypeError extends Error {
  override name = 'TypeError';
}

/** Positional arguments and the keyword arguments the library appends as one KeywordArgumentsValue. */
export function splitArgs(args: readonly RV[]): [RV[], Map<string, RV>] {
  const last = args[args.length - 1];
  if (last !== undefined && last.type === 'KeywordArgumentsValue') return [args.slice(0, -1), last.value as Map<string, RV>];
  return [args.slice(), new Map()];
}

/** Python float repr: 1.0, 0.1, 1e-07, 1e+16, inf, nan. */
export function floatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Object.is(x, -0)) return '-0.0';
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e16 || a < 1e-4)) {
    const [m, e] = x.toExponential().split('e') as [string, string];
    const exp = Number(e);
    return `${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  return Number.isInteger(x) ? x.toFixed(1) : String(x);
}

/** Python repr() of a string: single quotes unless it holds a ' and no ". */
export function strRepr(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === q) out += `\\${q}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || (c >= 0x7f && c < 0xa0)) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + q;
}

/** Python repr() as Jinja's `{{ value }}` shows containers' items. */
export function pyRepr(v: RV): string {
  switch (isTuple(v) ? 'TupleValue' : v.type) {
    case 'StringValue':
      return strRepr(v.value as string);
    case 'ArrayValue':
      return `[${(v.value as RV[]).map(pyRepr).join(', ')}]`;
    case 'TupleValue': {
      const items = (v.value as RV[]).map(pyRepr);
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
    }
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return `{${[...(v.value as Map<string, RV>)].map(([k, x]) => `${strRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
    default:
      return pyStr(v);
  }
}

/** Python str() as `{{ value }}`, `~` and the `string` filter render it. */
export function pyStr(v: RV): string {
  switch (v.type) {
    case 'StringValue':
      return v.value as string;
    case 'IntegerValue':
      return String(v.value);
    case 'FloatValue':
      return floatRepr(v.value as number);
    case 'BooleanValue':
      return v.value === true ? 'True' : 'False';
    case 'NullValue':
      return 'None';
    case 'UndefinedValue':
      return '';
    case 'ArrayValue':
    case 'TupleValue':
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return pyRepr(v);
    default:
      return v.toString();
  }
}

/** Python ==: numbers by value (True == 1), containers item by item, other types never equal. */
export function pyEq(a: RV, b: RV): boolean {
  if (isNum(a) && isNum(b)) return Number(a.value) === Number(b.value);
  if (isSeq(a) && isSeq(b)) {
    if (a.type !== b.type) return false;
    const x = a.value as RV[];
    const y = b.value as RV[];
    return x.length === y.length && x.every((item, i) => pyEq(item, y[i]!));
  }
  if (isMap(a) && isMap(b)) {
    const x = a.value as Map<string, RV>;
    const y = b.value as Map<string, RV>;
    if (x.size !== y.size) return false;
    for (const [k, item] of x) {
      const other = y.get(k);
      if (other === undefined || !pyEq(item, other)) return false;
    }
    return true;
  }
  if (a.type === 'UndefinedValue' || b.type === 'UndefinedValue') return a.type === b.type;
  if (a.type !== b.type) return false;
  return a.value === b.value;
}

/** Code-point order, as Python compares str (JS's < compares UTF-16 units, which differs above U+FFFF). */
export function compareStrings(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return x.length === y.length ? 0 : x.length < y.length ? -1 : 1;
}

/** Python's <, as sorted(), min() and max() use it; a TypeError for unorderable pairs. */
export function pyCompare(a: RV, b: RV): number {
  if (isNum(a) && isNum(b)) return Number(a.value) < Number(b.value) ? -1 : Number(a.value) > Number(b.value) ? 1 : 0;
  if (isStr(a) && isStr(b)) return compareStrings(a.value as string, b.value as string);
  if (isSeq(a) && isSeq(b)) {
    const x = a.value as RV[];
    const y = b.value as RV[];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = pyCompare(x[i]!, y[i]!);
      if (d !== 0) return d;
    }
    return x.length - y.length < 0 ? -1 : x.length === y.length ? 0 : 1;
  }
  throw new PyTypeError(`'<' not supported between instances of '${pyTypeName(a)}' and '${pyTypeName(b)}'`);
}

export function pyTypeName(v: RV): string {
  const names: Record<string, string> = {
    StringValue: 'str', IntegerValue: 'int', FloatValue: 'float', BooleanValue: 'bool', NullValue: 'NoneType',
    ArrayValue: 'list', TupleValue: 'tuple', ObjectValue: 'dict', UndefinedValue: 'Undefined',
  };
  return names[v.type] ?? v.type;
}

export interface JsonOptions {
  ensureAscii: boolean;
  /** null: one line; a number of spaces or a string per level (0 or "" still breaks lines). */
  indent: number | string | null;
  itemSep: string;
  keySep: string;
  sortKeys: boolean;
}

function jsonString(s: string, ensureAscii: boolean): string {
  const out = JSON.stringify(s);
  return ensureAscii ? out.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : out;
}

/** Python's json.dumps with transformers' tojson arguments (ensure_ascii, indent, separators, sort_keys). */
export function pyJson(v: RV, o: JsonOptions, depth = 0): string {
  switch (v.type) {
    case 'NullValue':
      return 'null';
    case 'BooleanValue':
      return v.value === true ? 'true' : 'false';
    case 'IntegerValue':
      return String(v.value);
    case 'FloatValue': {
      const x = v.value as number;
      return Number.isNaN(x) ? 'NaN' : !Number.isFinite(x) ? (x > 0 ? 'Infinity' : '-Infinity') : floatRepr(x);
    }
    case 'StringValue':
      return jsonString(v.value as string, o.ensureAscii);
    case 'ArrayValue':
    case 'TupleValue':
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      break;
    default:
      throw new PyTypeError(`Object of type ${pyTypeName(v)} is not JSON serializable`);
  }
  let items: string[];
  if (isSeq(v)) items = (v.value as RV[]).map((x) => pyJson(x, o, depth + 1));
  else {
    let entries = [...(v.value as Map<string, RV>)];
    if (o.sortKeys) entries = entries.sort(([a], [b]) => compareStrings(a, b));
    items = entries.map(([k, x]) => `${jsonString(k, o.ensureAscii)}${o.keySep}${pyJson(x, o, depth + 1)}`);
  }
  const [open, close] = isSeq(v) ? ['[', ']'] : ['{', '}'];
  if (items.length === 0) return open + close;
  if (o.indent === null) return open + items.join(o.itemSep) + close;
  const unit = typeof o.indent === 'number' ? ' '.repeat(Math.max(0, o.indent)) : o.indent;
  const inner = '\n' + unit.repeat(depth + 1);
  return open + inner + items.join(o.itemSep + inner) + '\n' + unit.repeat(depth) + close;
}
