// The gateway's Jinja renderer against Python's jinja2 in transformers' environment, feature by feature:
// test/fixtures/goldens/jinja-compat.json is written by scripts/goldens/render-jinja-compat.py (run by hand;
// no Python needed here). A case Python renders must render identically; a case Python fails must fail here
// too, and a raise_exception must stay the template's own error (TemplateRaise: a 400, as in vLLM).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { PythonTemplate, TemplateRaise } from '../../../src/tokenize/jinja-compat.ts';

interface Case {
  name: string;
  template: string;
  context: Record<string, unknown>;
  text?: string;
  error?: 'raise' | 'python';
  message?: string;
}

const cases = JSON.parse(readFileSync(new URL('../../fixtures/goldens/jinja-compat.json', import.meta.url), 'utf8')) as Case[];
// hf_env.py's NOW: 2025-03-04 05:06:07, local time.
const NOW = (): Date => new Date(2025, 2, 4, 5, 6, 7);

for (const c of cases) {
  void test(`jinja2 parity: ${c.name}`, () => {
    const template = new PythonTemplate(c.template);
    if (c.text !== undefined) {
      assert.equal(template.render(c.context, NOW), c.text);
      return;
    }
    assert.throws(() => template.render(c.context, NOW), (err: Error) => {
      if (c.error === 'raise') return err instanceof TemplateRaise && err.message === c.message;
      return !(err instanceof TemplateRaise);
    });
  });
}

void test('the golden file covers every feature the renderer corrects', () => {
  assert.ok(cases.length >= 25);
  assert.ok(cases.some((c) => c.error === 'raise') && cases.some((c) => c.error === 'python'));
});
