// promtool (Debian's `prometheus` package; .ci/run installs it) checks the /metrics expositions. Without it the
// promtool checks skip with the reason, except under CI=true, where they fail: CI never passes by skipping.
import { spawnSync } from 'node:child_process';

function missing(): string | false {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8', timeout: 20_000 });
  if (r.status === 0) return false;
  const why = `promtool not installed (apt-get install prometheus): ${r.error?.message ?? `exit ${r.status}`}`;
  if (process.env.CI === 'true') throw new Error(why);
  return why;
}

/** For node:test's `skip` option: false when promtool runs, else why not. Throws under CI=true. */
export const PROMTOOL_SKIP: string | false = missing();

/** `promtool check metrics` on an exposition: its exit status and everything it printed. */
export function promtoolCheck(exposition: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8', timeout: 20_000 });
  if (r.error) throw new Error(`promtool did not run (apt-get install prometheus): ${r.error.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}
