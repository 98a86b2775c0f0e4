// No import cycle among the modules of src/ and workers/: every file's import and export-from statements
// (relative specifiers) form a graph that must be acyclic, and the test names the first files of each cycle.
// Type-only imports count as edges: a type cycle is two modules each owning part of the other's contract,
// the tangle this guards against, and it is one deleted `type` keyword away from a runtime cycle (an ES
// module cycle evaluates one side first and reads the other's bindings before they exist).
// Dynamic import() is not an edge: it runs after both modules have loaded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** `import … from '…'`, `import type … from '…'`, `export … from '…'`, and `import '…'` at the start of a line. */
const FROM = /^(?:import|export)\s+([\w$*\s{},]*?)\s*from\s*['"]([^'"]+)['"]/gm;
const BARE = /^import\s*['"]([^'"]+)['"]/gm;

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...tsFiles(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Relative import specifiers of one module's source. */
function importsOf(source: string): string[] {
  const specs: string[] = [];
  for (const m of source.matchAll(FROM)) specs.push(m[2]!);
  for (const m of source.matchAll(BARE)) specs.push(m[1]!);
  return specs.filter((s) => s.startsWith('.'));
}

/** Every cycle reached by a depth-first walk, each as the list of files along it (first file repeated last). */
function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      const s = state.get(next);
      if (s === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (s === undefined) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

function sourceGraph(): Map<string, string[]> {
  const files = [...tsFiles(join(ROOT, 'src')), ...tsFiles(join(ROOT, 'workers'))];
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const deps = importsOf(readFileSync(f, 'utf8')).map((s) => resolve(dirname(f), s));
    for (const d of deps) assert.ok(known.has(d), `${relative(ROOT, f)} imports ${relative(ROOT, d)}, which is not a .ts file of src/ or workers/`);
    graph.set(relative(ROOT, f), deps.map((d) => relative(ROOT, d)));
  }
  return graph;
}

test('the scanner sees multi-line, type-only, export-from and bare imports, and skips packages and dynamic import()', () => {
  const src = [
    "import { a,\n  b } from './a.ts';",
    "import type { T } from '../t.ts';",
    "export { c } from './c.ts';",
    "export * from './d.ts';",
    "import './side.ts';",
    "import { pino } from 'pino';",
    "const m = await import('./lazy.ts');",
    "export function f(): void { /* from './not-an-import.ts' */ }",
  ].join('\n');
  assert.deepEqual(importsOf(src).sort(), ['../t.ts', './a.ts', './c.ts', './d.ts', './side.ts']);
});

test('findCycles reports a cycle with its files in order, and none for a diamond', () => {
  assert.deepEqual(findCycles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]])), [['a', 'b', 'c', 'a']]);
  assert.deepEqual(findCycles(new Map([['a', ['b', 'c']], ['b', ['d']], ['c', ['d']], ['d', []]])), []);
});

test('no import cycle among the modules of src/ and workers/', () => {
  const graph = sourceGraph();
  // The scan found the pipeline's imports: an empty graph would pass vacuously.
  assert.ok(graph.get('src/pipeline/handle-completion.ts')?.includes('src/pipeline/parse-body.ts'));
  const cycles = findCycles(graph);
  assert.deepEqual(cycles.map((c) => c.join(' -> ')), [], 'import cycles');
});
