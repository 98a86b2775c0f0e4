// Tracing settings from the standard OTEL_ environment and the config's `tracing` section: off by default, on
// with an endpoint, the section overriding each variable, and a bad value stopping the start with one
// ConfigError line that names the variable or field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, parseConfig } from '../../../src/config/load.ts';
import { tracingSettings } from '../../../src/tracing/settings.ts';

const BASE = { pools: [{ id: 'p', model: 'm', replicas: [{ id: 'r', url: 'http://127.0.0.1:9' }] }] };
const settings = (env: Record<string, string>, tracing?: Record<string, unknown>): ReturnType<typeof tracingSettings> =>
  tracingSettings(parseConfig(tracing === undefined ? BASE : { ...BASE, tracing }, env).tracing, env);

test('off without an endpoint, with OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none, and with enabled: false', () => {
  assert.equal(settings({}), null);
  assert.equal(settings({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), null);
  assert.equal(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), null);
  assert.equal(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), null);
  assert.equal(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, { enabled: false }), null);
  // Off, a stray variable does not stop the start.
  assert.equal(settings({ OTEL_TRACES_SAMPLER: 'bogus' }), null);
});

test('the environment: base endpoint gets /v1/traces, the traces endpoint is used as is, spec defaults', () => {
  const s = settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })!;
  assert.equal(s.endpoint, 'http://collector:4318/v1/traces');
  assert.equal(s.protocol, 'http/protobuf');
  assert.equal(s.sampler, 'parentbased_always_on');
  assert.equal(s.serviceName, 'expediter');
  assert.equal(s.exportDelayMs, 5000);
  assert.equal(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/otlp/' })!.endpoint, 'http://collector:4318/otlp/v1/traces');
  const t = settings({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:1',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/api/spans',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
    OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,k8s.pod.name=gw-0,note=a%2Cb',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret%3D',
  })!;
  assert.equal(t.endpoint, 'https://traces.example/api/spans');
  assert.equal(t.protocol, 'http/json');
  assert.equal(t.sampler, 'parentbased_traceidratio');
  assert.equal(t.samplerArg, 0.25);
  assert.equal(t.serviceName, 'from-resource');
  assert.deepEqual(t.resourceAttributes, { 'k8s.pod.name': 'gw-0', note: 'a,b' });
  assert.deepEqual(t.headers, { 'x-api-key': 'secret=' });
  assert.equal(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'svc', OTEL_RESOURCE_ATTRIBUTES: 'service.name=other' })!.serviceName, 'svc');
});

test('the tracing section overrides each variable; enabled: true alone uses the default collector', () => {
  const s = settings({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_SERVICE_NAME: 'env',
    OTEL_TRACES_SAMPLER: 'always_off', OTEL_RESOURCE_ATTRIBUTES: 'a=1,b=2', OTEL_SDK_DISABLED: 'true',
  }, {
    traces_endpoint: 'http://cfg:4318/v1/traces', protocol: 'http/json', service_name: 'cfg', sampler: 'traceidratio', sampler_arg: 0.5,
    resource_attributes: { b: 'cfg' },
  })!;
  assert.equal(s.endpoint, 'http://cfg:4318/v1/traces');
  assert.equal(s.protocol, 'http/json');
  assert.equal(s.serviceName, 'cfg');
  assert.equal(s.sampler, 'traceidratio');
  assert.equal(s.samplerArg, 0.5);
  assert.deepEqual(s.resourceAttributes, { a: '1', b: 'cfg' });
  assert.equal(settings({}, { enabled: true })!.endpoint, 'http://localhost:4318/v1/traces');
});

test('a bad value stops the start with one line naming it', () => {
  const bad = (env: Record<string, string>, tracing?: Record<string, unknown>): string => {
    try {
      settings(env, tracing);
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      assert.ok(!err.message.includes('\n'), 'one line');
      return err.message;
    }
    assert.fail('accepted');
  };
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
  assert.match(bad({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /^config: tracing: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: must be one of http\/protobuf, http\/json \(grpc is not built in/);
  assert.match(bad({ ...on, OTEL_TRACES_SAMPLER: 'jaeger_remote' }), /^config: tracing: OTEL_TRACES_SAMPLER=jaeger_remote: must be one of always_on,/);
  assert.match(bad({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }), /OTEL_TRACES_SAMPLER_ARG=1\.5: must be a ratio from 0 to 1/);
  assert.match(bad({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), /OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318: must be an http:\/\/ or https:\/\/ URL/);
  assert.match(bad({ ...on, OTEL_RESOURCE_ATTRIBUTES: 'novalue' }), /OTEL_RESOURCE_ATTRIBUTES: "novalue" is not key=value/);
  assert.match(bad({ ...on, OTEL_BSP_SCHEDULE_DELAY: 'soon' }), /OTEL_BSP_SCHEDULE_DELAY=soon: must be a positive whole number/);
  assert.match(bad({ ...on, OTEL_TRACES_EXPORTER: 'zipkin' }), /OTEL_TRACES_EXPORTER=zipkin: only otlp \(or none\)/);
  assert.match(bad({}, { sampler: 'sometimes' }), /^config: tracing\.sampler: /);
  assert.match(bad({}, { traces_endpoint: 'collector:4318' }), /^config: tracing\.traces_endpoint: must be an http\(s\):\/\/ URL/);
  assert.match(bad({}, { sampler_arg: 2 }), /^config: tracing\.sampler_arg: /);
});
