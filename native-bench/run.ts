// `npm run bench -- SCENARIO [args]`: runs native-bench/scenarios/SCENARIO.ts, prints a markdown table and
// writes the result as JSON to native-bench/results/SCENARIO-<timestamp>.json.
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { BenchResult, BenchScenario } from './types.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const [name, ...args] = process.argv.slice(2);
const available = readdirSync(`${here}scenarios`).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- SCENARIO [args]\nscenarios: ${available.join(', ')}`);
  process.exit(2);
}

const mod = (await import(`./scenarios/${name}.ts`)) as { default: BenchScenario };
const result: BenchResult = await mod.default(args);
const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;

const lines = [`### ${result.title}`, '', `| ${result.columns.join(' | ')} |`, `| ${result.columns.map(() => '---').join(' | ')} |`];
for (const row of result.rows) lines.push(`| ${row.join(' | ')} |`);
lines.push('', `Machine: ${machine}. Command: \`npm run bench -- ${[name, ...args].join(' ')}\``);
for (const n of result.notes ?? []) lines.push(`- ${n}`);
console.log(lines.join('\n'));

mkdirSync(`${here}results`, { recursive: true });
const file = `${here}results/${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
writeFileSync(file, JSON.stringify({ scenario: name, args, machine, ...result }, null, 2));
console.error(`wrote ${file}`);
if (result.failed !== undefined) console.error(`FAILED: ${result.failed}`);
process.exit(result.failed === undefined ? 0 : 1);
