// The node arguments that run a module as a child process, compiled or not like the caller: in npm test's
// compiled tree (scripts/test-build.ts) the module's .js runs directly, from the sources its .ts under tsx.
// A child started under tsx costs ~0.6 s more CPU to load the gateway's or the mock's modules.
import { fileURLToPath } from 'node:url';
import { siblingModule } from '../../src/util/spawn-worker.ts';

/** `relPath` is relative to `base` (the caller's import.meta.url) and written without its extension. */
export function nodeEntry(relPath: string, base: string): string[] {
  const url = siblingModule(relPath, base);
  const path = fileURLToPath(url);
  return url.pathname.endsWith('.ts') ? ['--import', 'tsx', path] : ['--enable-source-maps', path];
}
