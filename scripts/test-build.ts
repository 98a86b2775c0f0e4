// The compiled tree `npm test` runs the suite from: a mirror of the repository in a temporary directory, every
// file a symlink to its source, and beside every TypeScript file its transpiled .js (esbuild, one module per
// file, relative `.ts` imports rewritten to `.js`, inline source maps so stack traces and failure locations
// name the .ts sources). The only module that imports esbuild.
//
// Why: under `node --import tsx` every module of every test process, and of every worker thread it starts,
// goes through tsx's loader (resolve and load hooks on a separate thread, one message round trip each): about
// 0.6 s of CPU per process that imports the gateway and 0.3-0.5 s per worker, on a suite that is CPU-bound on
// two cores. The compiled gateway starts compiled workers (siblingModule in src/util/spawn-worker.ts). The
// .ts symlinks stay, so what a test starts by a .ts path (`node --import tsx src/main.ts`, the mock CLI, a
// test's own worker file) runs from source as before; relative paths from import.meta.url (fixtures, Lua
// scripts, config) resolve in the mirror as in the repository. Cost: ~1 s of CPU for the ~550 files.
// Thread: main of the `npm test` process.
import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Top-level entries not mirrored: the node_modules symlink stands for the first; k6 scripts run under k6. */
const SKIP_TOP = new Set(['node_modules', '.git', 'k6']);

export interface TestTree {
  /** The mirror's root: ROOT's layout, a .js beside every .ts. */
  dir: string;
  /** How many .ts files were transpiled. */
  files: number;
  remove(): void;
}

/** Mirrors `root` into a fresh temporary directory and transpiles its TypeScript there. */
export async function buildTestTree(root: string): Promise<TestTree> {
  const dir = mkdtempSync(join(tmpdir(), 'expediter-test-build-'));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    const sources: string[] = [];
    const mirror = (rel: string): void => {
      for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
        if (rel === '' && SKIP_TOP.has(entry.name)) continue;
        const r = rel === '' ? entry.name : `${rel}/${entry.name}`;
        if (entry.isDirectory()) {
          mkdirSync(join(dir, r));
          mirror(r);
          continue;
        }
        symlinkSync(join(root, r), join(dir, r));
        if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) sources.push(join(root, r));
      }
    };
    mirror('');
    await build({
      entryPoints: sources, outdir: dir, outbase: root, bundle: true, packages: 'external',
      format: 'esm', platform: 'node', target: 'node20', sourcemap: 'inline', logLevel: 'error',
      plugins: [{
        name: 'relative-ts-to-js',
        setup(b) {
          // Each file stays its own module (import.meta.url and module identity as under tsx): a relative import
          // is left external, pointing at the sibling .js.
          b.onResolve({ filter: /^\.\.?\// }, (args) => args.kind === 'entry-point' ? undefined : { path: args.path.replace(/\.ts$/, '.js'), external: true });
        },
      }],
    });
    return { dir, files: sources.length, remove };
  } catch (err) {
    remove();
    throw err;
  }
}
