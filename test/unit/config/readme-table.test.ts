// docs/configuration.md's "## Configuration" table (columns: key | default | meaning), the reference the README points to, lists exactly the keys of
// src/config/schema.ts, with the schema's defaults, so docs and code cannot drift. Keys come from walking the
// zod schema: a new key fails this test with its name until a README row documents it.
//
// Key cells hold backticked keys, comma-separated; a key starting with "." is a sibling of the previous one
// (`pools[].id`, `.model` = pools[].model). Array elements are written `[]`. A default cell holds one value per
// key (comma-separated), or is empty when no key of the row has a default; sizes may be written `4 MiB`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { configSchema } from '../../../src/config/schema.ts';

interface SchemaKey { key: string; hasDefault: boolean; defaultValue: unknown }
interface DocRow { keys: string[]; defaults: string; line: string }

/** Minimal view of a zod v4 schema's definition: enough to walk objects, arrays and wrappers. */
interface ZodDef {
  type: string;
  shape?: Record<string, ZodNode>;
  element?: ZodNode;
  innerType?: ZodNode;
  in?: ZodNode;
  defaultValue?: unknown;
}
interface ZodNode { _zod: { def: ZodDef } }

/** Every leaf key of the schema with its default: objects recurse, arrays of objects recurse as `name[]`. */
function schemaKeys(node: ZodNode, path: string, out: SchemaKey[], dflt: { has: boolean; value: unknown }): void {
  const def = node._zod.def;
  switch (def.type) {
    case 'default':
      return schemaKeys(def.innerType!, path, out, { has: true, value: def.defaultValue });
    case 'prefault': case 'optional': case 'nullable': case 'readonly':
      return schemaKeys(def.innerType!, path, out, dflt);
    case 'pipe':
      return schemaKeys(def.in!, path, out, dflt);
    case 'object':
      for (const [k, child] of Object.entries(def.shape!)) {
        schemaKeys(child, path === '' ? k : `${path}.${k}`, out, { has: false, value: undefined });
      }
      return;
    case 'array': {
      const el = unwrap(def.element!);
      if (el._zod.def.type === 'object') return schemaKeys(el, `${path}[]`, out, { has: false, value: undefined });
      break;
    }
  }
  out.push({ key: path, hasDefault: dflt.has, defaultValue: dflt.value });
}

function unwrap(node: ZodNode): ZodNode {
  const def = node._zod.def;
  if (def.type === 'pipe' && def.in) return unwrap(def.in);
  if (def.innerType && ['default', 'prefault', 'optional', 'nullable', 'readonly'].includes(def.type)) return unwrap(def.innerType);
  return node;
}

const README = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');

/** The rows of the table under `## Configuration` whose header is key | default | meaning. */
function configTable(markdown: string): DocRow[] {
  const start = markdown.search(/^## Configuration\s*$/m);
  assert.notEqual(start, -1, 'docs/configuration.md has a "## Configuration" section');
  const rest = markdown.slice(start).split('\n').slice(1);
  const end = rest.findIndex((l) => l.startsWith('## '));
  const section = end === -1 ? rest : rest.slice(0, end);
  const cells = (l: string): string[] => l.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  const head = section.findIndex((l) => l.trim().startsWith('|') && cells(l).map((c) => c.toLowerCase()).join('|') === 'key|default|meaning');
  assert.notEqual(head, -1, 'the Configuration section holds a table with columns key | default | meaning');
  assert.match(section[head + 1] ?? '', /^\|\s*:?-{3,}/, 'a separator row follows the header');
  const rows: DocRow[] = [];
  for (const line of section.slice(head + 2)) {
    if (!line.trim().startsWith('|')) break;
    const [keyCell = '', defaults = ''] = cells(line);
    const keys: string[] = [];
    for (const m of keyCell.matchAll(/`([^`]+)`/g)) {
      const k = m[1]!;
      if (k.startsWith('.')) {
        const prev = keys.at(-1);
        assert.ok(prev !== undefined, `a ".key" needs a full key before it in its cell: ${line}`);
        keys.push(prev.slice(0, prev.lastIndexOf('.')) + k);
      } else {
        keys.push(k);
      }
    }
    assert.ok(keys.length > 0, `a row without a backticked key: ${line}`);
    rows.push({ keys, defaults, line });
  }
  return rows;
}

const UNITS: Record<string, number> = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** Whether a README default cell states the schema's default value. */
function statesDefault(cell: string, value: unknown): boolean {
  const text = cell.replace(/^`(.*)`$/, '$1').trim();
  if (typeof value === 'number') {
    const sized = /^([\d.]+)\s*(KiB|MiB|GiB)$/.exec(text);
    if (sized) return Number(sized[1]) * UNITS[sized[2]!]! === value;
    return Number(text.replace(/[,_]/g, '')) === value;
  }
  return text === (typeof value === 'string' ? value : JSON.stringify(value));
}

const keys: SchemaKey[] = [];
schemaKeys(configSchema as unknown as ZodNode, '', keys, { has: false, value: undefined });

test('the schema walk finds the config keys (sanity: nested objects, arrays of objects, wrappers)', () => {
  const names = keys.map((k) => k.key);
  for (const k of ['server.port', 'pools[].replicas[].url', 'tenants[].api_keys', 'expose_route_header']) {
    assert.ok(names.includes(k), `walk found ${k}`);
  }
  assert.equal(keys.find((k) => k.key === 'server.port')?.defaultValue, 8080);
});

test('the config reference table lists every key of src/config/schema.ts once, and no other', () => {
  const documented = configTable(README).flatMap((r) => r.keys);
  const inSchema = new Set(keys.map((k) => k.key));
  const missing = [...inSchema].filter((k) => !documented.includes(k));
  const unknown = documented.filter((k) => !inSchema.has(k));
  const twice = documented.filter((k, i) => documented.indexOf(k) !== i);
  assert.deepEqual(missing, [], `docs/configuration.md "## Configuration" lacks rows for schema keys: ${missing.join(', ')}`);
  assert.deepEqual(unknown, [], `docs/configuration.md "## Configuration" lists keys the schema does not have: ${unknown.join(', ')}`);
  assert.deepEqual(twice, [], `docs/configuration.md "## Configuration" lists keys twice: ${twice.join(', ')}`);
});

test('each documented default is the schema\'s default', () => {
  const byKey = new Map(keys.map((k) => [k.key, k]));
  for (const row of configTable(README)) {
    const specs = row.keys.map((k) => byKey.get(k)).filter((s): s is SchemaKey => s !== undefined);
    if (specs.length !== row.keys.length) continue; // unknown keys are the previous test's failure
    const withDefault = specs.filter((s) => s.hasDefault);
    if (row.defaults === '') {
      assert.deepEqual(withDefault.map((s) => s.key), [], `no default stated for keys that have one: ${row.line}`);
      continue;
    }
    const values = row.keys.length === 1 ? [row.defaults] : row.defaults.split(/,\s+/);
    assert.equal(values.length, specs.length, `one default per key (comma-separated) in: ${row.line}`);
    specs.forEach((s, i) => {
      if (!s.hasDefault) {
        assert.ok(values[i] === '' || values[i] === '-', `${s.key} has no default in the schema, README says ${values[i]}`);
        return;
      }
      assert.ok(statesDefault(values[i]!, s.defaultValue),
        `${s.key}: README default "${values[i]}", schema default ${JSON.stringify(s.defaultValue)}`);
    });
  }
});
