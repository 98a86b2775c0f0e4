// README.md's "## Errors" table (columns: status | type | code | when) lists exactly the codes of
// src/errors/codes.ts, each with the same HTTP status and OpenAI type, so docs and code cannot drift.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ERROR_CODES, type ErrorCode } from '../../../src/errors/codes.ts';
import { errorBody, errorEvent } from '../../../src/errors/openai-error-body.ts';

interface DocRow { status: number; type: string; code: string; when: string }

const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const unquote = (cell: string): string => cell.trim().replace(/^`(.*)`$/, '$1');

/** The rows of the first table under `## Errors` (up to the next `## ` heading). */
function errorsTable(markdown: string): DocRow[] {
  const start = markdown.search(/^## Errors\s*$/m);
  assert.notEqual(start, -1, 'README.md has a "## Errors" section');
  const rest = markdown.slice(start).split('\n').slice(1);
  const end = rest.findIndex((l) => l.startsWith('## '));
  const lines = (end === -1 ? rest : rest.slice(0, end)).filter((l) => l.trim().startsWith('|'));
  assert.ok(lines.length >= 3, 'the section holds a table');
  const cells = (l: string): string[] => l.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  const header = cells(lines[0]!).map((c) => c.toLowerCase());
  assert.deepEqual(header, ['status', 'type', 'code', 'when'], 'columns: status | type | code | when');
  assert.match(lines[1]!, /^\|\s*:?-{3,}/, 'a separator row follows the header');
  return lines.slice(2).map((l) => {
    const [status, type, code, when] = cells(l);
    return { status: Number(unquote(status ?? '')), type: unquote(type ?? ''), code: unquote(code ?? ''), when: (when ?? '').trim() };
  });
}

test('README lists every error code of src/errors/codes.ts once, and no other', () => {
  const rows = errorsTable(README);
  const documented = rows.map((r) => r.code);
  assert.equal(new Set(documented).size, documented.length, `a code is listed twice: ${documented.join(', ')}`);
  assert.deepEqual([...documented].sort(), Object.keys(ERROR_CODES).sort());
});

test('each documented code has the status and type the gateway sends, and says when', () => {
  for (const row of errorsTable(README)) {
    const spec = ERROR_CODES[row.code as ErrorCode];
    assert.ok(spec, `unknown code ${row.code}`);
    assert.equal(row.status, spec.status, `${row.code}: status`);
    assert.equal(row.type, spec.type, `${row.code}: type`);
    assert.ok(row.when.length > 0, `${row.code}: the "when" column is filled`);
  }
});

test('the table parser reads the agreed format and catches drift (so the checks above can fail)', () => {
  const doc = [
    '# X', '', '## Errors', '', '| status | type | code | when |', '| --- | --- | --- | --- |',
    '| 400 | `invalid_request_error` | `invalid_json` | the body is not JSON |',
    '| 401 | invalid_request_error | invalid_api_key | bad key |', '', '## Next', '| a | b |',
  ].join('\n');
  assert.deepEqual(errorsTable(doc), [
    { status: 400, type: 'invalid_request_error', code: 'invalid_json', when: 'the body is not JSON' },
    { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', when: 'bad key' },
  ]);
  assert.throws(() => errorsTable('# X\n\n## Usage\n| status | type | code | when |\n| --- | --- | --- | --- |\n'), /Errors/);
  assert.throws(() => errorsTable('## Errors\n| code | status | type | when |\n| --- | --- | --- | --- |\n| x | 1 | y | z |\n'), /columns/);
});

test('every code serialises to the OpenAI envelope with its own type and a string code', () => {
  for (const [code, spec] of Object.entries(ERROR_CODES) as Array<[ErrorCode, (typeof ERROR_CODES)[ErrorCode]]>) {
    const body = JSON.parse(errorBody({ code })) as { error: Record<string, unknown> };
    assert.deepEqual(body, { error: { message: spec.message, type: spec.type, param: null, code } });
    assert.equal(errorEvent({ code }), `data: ${errorBody({ code })}\n\n`);
  }
  const custom = JSON.parse(errorBody({ code: 'invalid_value', param: 'n', message: 'n must be an integer' })) as { error: Record<string, unknown> };
  assert.deepEqual(custom, { error: { message: 'n must be an integer', type: 'invalid_request_error', param: 'n', code: 'invalid_value' } });
});

test('the contract\'s codes and statuses are in the table', () => {
  const contract: Array<[ErrorCode, number]> = [
    ['invalid_api_key', 401], ['invalid_json', 400], ['invalid_value', 400], ['context_length_exceeded', 400],
    ['model_not_found', 404], ['rate_limit_exceeded', 429], ['concurrency_limit_exceeded', 429], ['server_overloaded', 429],
    ['no_healthy_replica', 503], ['upstream_unavailable', 502], ['upstream_timeout', 504],
  ];
  for (const [code, status] of contract) assert.equal(ERROR_CODES[code].status, status, code);
});
