// A node:test reporter for scripts/test.ts: one JSON line per test file, {file, spanMs}, written when the run
// ends: from the `test:dequeue` of the file itself (named by its path: it starts running) to its
// `test:complete`. Those two come in real time; the runner replays the events of the tests in a file later, in
// file order. Plain JavaScript: node loads
// reporters before any --import hook could compile TypeScript.
export default async function* fileTimes(source) {
  const files = new Map();
  for await (const ev of source) {
    const file = ev.data?.file;
    if (file === undefined || ev.data.name !== file) continue;
    const now = Date.now();
    if (ev.type === 'test:dequeue' && !files.has(file)) files.set(file, { first: now, last: now });
    if (ev.type === 'test:complete' && files.has(file)) files.get(file).last = now;
  }
  for (const [file, f] of files) yield `${JSON.stringify({ file, spanMs: f.last - f.first })}\n`;
}
