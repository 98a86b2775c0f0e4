// A chat template rendered as transformers renders it with Python's jinja2, on @huggingface/jinja's parser and
// interpreter. Where the library departs from Python on what chat templates use, one subclass corrects it:
// - string methods with Python semantics and arguments (strip/lstrip/rstrip(chars), split/rsplit, splitlines,
//   count, find, join, format, title/capitalize, is*) — jinja-python.ts;
// - filters (format, min, max, sum, select/reject(attr) with any test, map by filter name, groupby, batch,
//   truncate, trim(chars), tojson with transformers' ensure_ascii/indent/separators/sort_keys, …) — jinja-filters.ts;
// - operators: 'x' * n, n * 'x', list * n, printf `%`, Python's modulo sign, `+` of str and non-str is a
//   TypeError (as in Python), == / in by Python equality, < on strings;
// - output as Python's str(): None, True/False, floats as repr, lists and dicts as repr;
// - attribute access on an undefined value raises, as jinja2's default Undefined does;
// - globals: raise_exception, strftime_now (Python's strftime, C locale), range, dict, namespace.
// Why wrap rather than fork or patch the package: the library's parser and most of its interpreter are right,
// and it is the one that tracks new template syntax; a subclass overrides five methods of its (TypeScript-
// private, JavaScript-public) interpreter and touches no shared prototype, so a library upgrade either keeps
// working or fails the compatibility test (test/unit/tokenize/jinja-compat.test.ts, whose expected outputs
// Python's jinja2 wrote) rather than drifting silently.
// Thread: any. Cost: a render allocates the library's values as before; the overrides add a switch per call.
import { Interpreter, Environment, Template } from '@huggingface/jinja';
import { PY_FILTERS, iterItems, type FilterHost } from './jinja-filters.ts';
import { percentOperator, stringMethod, strftime } from './jinja-python.ts';
import {
  PyTypeError, UNDEFINED, V, arr, bindLibraryValues, bool, fn, int, isMap, isNum, isSeq, isStr, num, pyCompare, pyEq, pyStr,
  pyTypeName, splitArgs, str, type RV,
} from './jinja-values.ts';

/** The template called raise_exception(message): the template's own verdict, a 400 in vLLM. */
export class TemplateRaise extends Error {
  override name = 'TemplateRaise';
}

/** Jinja2's UndefinedError: Python raises it too, so vLLM would answer 400. */
export class PyUndefinedError extends Error {
  override name = 'UndefinedError';
}

interface Node { type: string; [k: string]: any } // eslint-disable-line @typescript-eslint/no-explicit-any -- the library's AST

/** The library interpreter's methods as they exist at run time (TypeScript marks them private). */
interface BaseMethods {
  evaluate(node: Node | undefined, env: Environment): RV;
  applyFilter(operand: RV, filter: Node, env: Environment): RV;
  evaluateBinaryExpression(node: Node, env: Environment): RV;
  evaluateMemberExpression(node: Node, env: Environment): RV;
  evaluateTestExpression(node: Node, env: Environment): RV;
  evaluateCallArguments(args: Node[], env: Environment): RV[];
  evaluateSliceExpression(object: RV, node: Node, env: Environment): RV;
  renderIf(node: Node, env: Environment): string;
  renderFor(node: Node, env: Environment): string;
  executeSet(node: Node, env: Environment): void;
}

bindLibraryValues(new Environment());
const base = Interpreter.prototype as unknown as BaseMethods;
/** The library's Interpreter with the members this module uses (its published types do not resolve them all). */
const InterpreterBase = Interpreter as unknown as new (env: Environment) => { global: Environment; run(program: unknown): unknown };

// Tests Python's jinja2 answers differently: a dict and a string are iterable, bool is a number.
const PY_TESTS = new Map<string, (v: RV, args: RV[]) => boolean>([
  ['iterable', (v) => isSeq(v) || isStr(v) || isMap(v)],
  ['sequence', (v) => isSeq(v) || isStr(v) || isMap(v)],
  ['number', (v) => isNum(v)],
  ['integer', (v) => v.type === 'IntegerValue'],
  ['float', (v) => v.type === 'FloatValue'],
  ['eq', (v, a) => a[0] !== undefined && pyEq(v, a[0])],
  ['equalto', (v, a) => a[0] !== undefined && pyEq(v, a[0])],
  ['ne', (v, a) => a[0] === undefined || !pyEq(v, a[0])],
  ['in', (v, a) => a[0] !== undefined && iterItems(a[0]).some((x) => pyEq(x, v))],
  ['divisibleby', (v, a) => Number(v.value) % Number(a[0]?.value) === 0],
]);

function testFn(env: Environment, name: string): ((v: RV, args: RV[]) => boolean) | null {
  const own = PY_TESTS.get(name);
  if (own !== undefined) return own;
  const lib = (env as unknown as { tests: ReadonlyMap<string, (...v: RV[]) => boolean> }).tests.get(name);
  return lib === undefined ? null : (v, args) => lib(v, ...args);
}

/** The interpreter with Python's semantics where chat templates need them. */
class PythonInterpreter extends InterpreterBase implements FilterHost {
  scope: Environment = this.global;

  applyNamed(value: RV, name: string, args: RV[]): RV {
    const own = PY_FILTERS.get(name);
    if (own !== undefined) return own(value, args, this);
    if (args.length > 0) throw new PyTypeError(`filter ${name} with arguments inside map() is not supported`);
    return base.applyFilter.call(this, value, { type: 'Identifier', value: name }, this.scope);
  }

  test(name: string, value: RV, args: RV[]): boolean {
    const t = testFn(this.scope, name);
    if (t === null) throw new PyTypeError(`No test named '${name}'`);
    return t(value, args);
  }
}

const proto = PythonInterpreter.prototype as unknown as BaseMethods & PythonInterpreter;

proto.applyFilter = function applyFilter(this: typeof proto, operand: RV, filter: Node, env: Environment): RV {
  const name = filter.type === 'Identifier' ? (filter.value as string) : filter.type === 'CallExpression' && filter.callee.type === 'Identifier' ? (filter.callee.value as string) : null;
  const own = name === null ? undefined : PY_FILTERS.get(name);
  if (own === undefined) return base.applyFilter.call(this, operand, filter, env);
  const args = filter.type === 'CallExpression' ? base.evaluateCallArguments.call(this, filter.args as Node[], env) : [];
  this.scope = env;
  return own(operand, args, this);
};

proto.evaluateTestExpression = function evaluateTestExpression(this: typeof proto, node: Node, env: Environment): RV {
  const operand = base.evaluate.call(this, node.operand as Node, env);
  const t = testFn(env, node.test.value as string);
  if (t === null) throw new PyTypeError(`No test named '${node.test.value as string}'`);
  const result = t(operand, []);
  return bool(node.negate === true ? !result : result);
};

function repeat(seq: RV, times: RV): RV {
  const n = Math.max(0, Number(times.value));
  if (isStr(seq)) return str((seq.value as string).repeat(n));
  const out: RV[] = [];
  for (let i = 0; i < n; i++) out.push(...(seq.value as RV[]));
  return arr(out);
}

const HANDLED_OPERATORS = new Set(['+', '*', '%', '~', '==', '!=', 'in', 'not in', '<', '>', '<=', '>=']);

proto.evaluateBinaryExpression = function evaluateBinaryExpression(this: typeof proto, node: Node, env: Environment): RV {
  const op = node.operator.value as string;
  if (!HANDLED_OPERATORS.has(op)) return base.evaluateBinaryExpression.call(this, node, env);
  const left = base.evaluate.call(this, node.left as Node, env);
  const right = base.evaluate.call(this, node.right as Node, env);
  const numeric = isNum(left) && isNum(right);
  const float = left.type === 'FloatValue' || right.type === 'FloatValue';
  switch (op) {
    case '~':
      return str(pyStr(left) + pyStr(right));
    case '==':
      return bool(pyEq(left, right));
    case '!=':
      return bool(!pyEq(left, right));
    case 'in':
    case 'not in': {
      let found: boolean;
      if (right.type === 'UndefinedValue') found = false;
      else if (isStr(right)) {
        if (!isStr(left)) throw new PyTypeError(`'in <string>' requires string as left operand, not ${pyTypeName(left)}`);
        found = (right.value as string).includes(left.value as string);
      } else if (isMap(right)) found = isStr(left) && (right.value as Map<string, RV>).has(left.value as string);
      else found = iterItems(right).some((x) => pyEq(x, left));
      return bool(op === 'in' ? found : !found);
    }
    case '<':
    case '>':
    case '<=':
    case '>=': {
      const d = pyCompare(left, right);
      return bool(op === '<' ? d < 0 : op === '>' ? d > 0 : op === '<=' ? d <= 0 : d >= 0);
    }
    case '+':
      if (numeric) return num(Number(left.value) + Number(right.value), float);
      if (isStr(left) && isStr(right)) return str((left.value as string) + (right.value as string));
      if (isSeq(left) && isSeq(right)) return arr([...(left.value as RV[]), ...(right.value as RV[])]);
      throw new PyTypeError(`unsupported operand type(s) for +: '${pyTypeName(left)}' and '${pyTypeName(right)}'`);
    case '*':
      if (numeric) return num(Number(left.value) * Number(right.value), float);
      if ((isStr(left) || isSeq(left)) && right.type === 'IntegerValue') return repeat(left, right);
      if ((isStr(right) || isSeq(right)) && left.type === 'IntegerValue') return repeat(right, left);
      throw new PyTypeError(`unsupported operand type(s) for *: '${pyTypeName(left)}' and '${pyTypeName(right)}'`);
    default: // '%'
      if (isStr(left)) return str(percentOperator(left.value as string, right));
      if (numeric) {
        const a = Number(left.value);
        const b = Number(right.value);
        if (b === 0) throw new PyTypeError('integer division or modulo by zero');
        return num(a - b * Math.floor(a / b), float);
      }
      throw new PyTypeError(`unsupported operand type(s) for %: '${pyTypeName(left)}' and '${pyTypeName(right)}'`);
  }
};

proto.evaluateMemberExpression = function evaluateMemberExpression(this: typeof proto, expr: Node, env: Environment): RV {
  const object = base.evaluate.call(this, expr.object as Node, env);
  if (object.type === 'UndefinedValue') throw new PyUndefinedError('a member of an undefined value was read');
  if (expr.computed === true && expr.property.type === 'SliceExpression') return base.evaluateSliceExpression.call(this, object, expr.property as Node, env);
  const property = expr.computed === true ? base.evaluate.call(this, expr.property as Node, env)
    : expr.property.type === 'IntegerLiteral' ? int(expr.property.value as number) : str(expr.property.value as string);
  if (isStr(object) && isStr(property)) {
    const method = stringMethod(object.value as string, property.value as string);
    return method !== null ? fn(method) : object.builtins.get(property.value as string) ?? UNDEFINED;
  }
  if (isMap(object) && isStr(property)) {
    return (object.value as Map<string, RV>).get(property.value as string) ?? object.builtins.get(property.value as string) ?? UNDEFINED;
  }
  if ((isSeq(object) || isStr(object)) && property.type === 'IntegerValue') {
    const items = isStr(object) ? Array.from(object.value as string, str) : (object.value as RV[]);
    return items.at(property.value as number) ?? UNDEFINED;
  }
  if (object.type === 'NamespaceValue' && isStr(property)) return (object.value as Map<string, RV>).get(property.value as string) ?? UNDEFINED;
  if (isSeq(object) && isStr(property)) return object.builtins.get(property.value as string) ?? UNDEFINED;
  return UNDEFINED;
};

// Output as Python's str(): {{ none }} is "None", {{ true }} "True", containers their repr.
(proto as unknown as { renderBlock: (statements: Node[], env: Environment) => string }).renderBlock = function renderBlock(this: typeof proto, statements: Node[], env: Environment): string {
  let out = '';
  for (const s of statements) {
    switch (s.type) {
      case 'StringLiteral': out += s.value as string; break;
      case 'If': out += base.renderIf.call(this, s, env); break;
      case 'For': out += base.renderFor.call(this, s, env); break;
      case 'Set': base.executeSet.call(this, s, env); break;
      case 'Comment': case 'Macro': base.evaluate.call(this, s, env); break;
      default:
        out += pyStr(base.evaluate.call(this, s, env));
    }
  }
  return out;
};

function pyRange(args: RV[]): RV {
  const n = args.map((a) => Number(a.value));
  const [start, stop, step] = n.length === 1 ? [0, n[0]!, 1] : [n[0]!, n[1]!, n[2] ?? 1];
  if (step === 0) throw new PyTypeError('range() arg 3 must not be zero');
  const out: RV[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(int(i));
  return arr(out);
}

/** A parsed template, rendered with transformers' globals and Python's semantics. */
export class PythonTemplate {
  private readonly parsed: Template['parsed'];

  /** Parses `source` (the library's lexer with trim_blocks and lstrip_blocks, as transformers sets them). */
  constructor(source: string) {
    this.parsed = new Template(source).parsed;
  }

  /** `now` fixes strftime_now's clock (tests); the default is the current time, as transformers reads it. */
  render(items: Record<string, unknown>, now: () => Date = () => new Date()): string {
    const env = new Environment();
    for (const [k, v] of [['true', true], ['false', false], ['none', null], ['True', true], ['False', false], ['None', null]] as const) env.set(k, v);
    const globals = env as unknown as { variables: Map<string, RV> };
    globals.variables.set('raise_exception', fn((args) => {
      throw new TemplateRaise(args[0] === undefined ? '' : pyStr(args[0]));
    }));
    globals.variables.set('strftime_now', fn((args) => str(strftime(now(), args[0] === undefined ? '' : pyStr(args[0])))));
    globals.variables.set('range', fn(pyRange));
    globals.variables.set('dict', fn((args) => new V.Obj(new Map(splitArgs(args)[1]))));
    const convert = new Environment();
    for (const [k, v] of Object.entries(items)) globals.variables.set(k, convert.set(k, v) as RV);
    const interpreter = new PythonInterpreter(env);
    return (interpreter.run(this.parsed) as RV).value as string;
  }
}
