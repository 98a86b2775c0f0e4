// `npm run bench -- load SCENARIO [flags]`: the open-loop load scenarios of native-bench/load/scenarios/
// (seed-mix, overload, streams, added-latency). Each states its question and flags in its header; the
// method is in native-bench/README.md ("Open-loop load"). Thread: bench main thread.
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BenchScenario } from '../types.ts';

const dir = fileURLToPath(new URL('../load/scenarios/', import.meta.url));

const load: BenchScenario = async (args) => {
  const [name, ...rest] = args;
  const available = readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
  if (!name || !available.includes(name)) {
    throw new Error(`usage: npm run bench -- load SCENARIO [flags]; scenarios: ${available.join(', ')}`);
  }
  const mod = (await import(`../load/scenarios/${name}.ts`)) as { default: BenchScenario };
  return mod.default(rest);
};

export default load;
