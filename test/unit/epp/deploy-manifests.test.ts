// deploy/epp without a cluster: every file is valid YAML, and the references between the manifests hold
// (Deployment ↔ Service ↔ InferencePool ↔ HTTPRoute ↔ RBAC ↔ ConfigMap), the picker's own config parses with
// the gateway's parser and agrees with the InferencePool (selector, target port, picker port), and the Envoy
// Gateway example's message timeout exceeds the admission queue's longest wait.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../../src/config/load.ts';

const dir = new URL('../../../deploy/epp/', import.meta.url);
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function docs(file: string): Obj[] {
  return parseAllDocuments(readFileSync(new URL(file, dir), 'utf8')).map((d, i) => {
    assert.deepEqual(d.errors, [], `${file} document ${i} parses`);
    return d.toJS() as Obj;
  });
}

const kustomization = docs('kustomization.yaml')[0]!;
const applied = (kustomization.resources as string[]).flatMap(docs);
const one = (kind: string): Obj => {
  const found = applied.filter((d) => d.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0]!;
};
const deployment = one('Deployment');
const service = one('Service');
const pool = one('InferencePool');
const route = one('HTTPRoute');
const configMap = one('ConfigMap');
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
// The kubelet's environment in a pod names the API server.
const cfg = parseConfig(parseAllDocuments(configMap.data['gateway.yaml'])[0]!.toJS(), { KUBERNETES_SERVICE_HOST: '10.96.0.1' });

test('every file under deploy/epp is valid YAML with apiVersion, kind and a name; the kustomization lists the cluster resources', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  for (const f of files) for (const d of docs(f)) {
    assert.ok(typeof d.apiVersion === 'string' && typeof d.kind === 'string', `${f}: apiVersion and kind`);
    if (d.kind !== 'Kustomization') assert.match(d.metadata?.name ?? '', /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, `${f}: ${d.kind} name`);
  }
  assert.deepEqual(new Set(applied.map((d) => d.kind)), new Set(['ServiceAccount', 'Role', 'RoleBinding', 'ConfigMap', 'Deployment', 'Service', 'InferencePool', 'HTTPRoute']));
});

test('the InferencePool follows GIE v1 and points at the picker Service; its selector and port are the config\'s', () => {
  assert.equal(pool.apiVersion, 'inference.networking.k8s.io/v1');
  assert.equal(pool.spec.endpointPickerRef.name, service.metadata.name);
  const port = service.spec.ports.find((p: Obj) => p.port === pool.spec.endpointPickerRef.port.number);
  assert.ok(port, 'the picker port is a Service port');
  assert.equal(port.appProtocol, 'http2');
  const k = cfg.epp!.kubernetes!;
  assert.deepEqual(Object.fromEntries(k.label_selector.split(',').map((kv) => kv.split('='))), pool.spec.selector.matchLabels);
  assert.deepEqual(pool.spec.targetPorts.map((p: Obj) => p.number), [k.target_port]);
  assert.equal(k.namespace, kustomization.namespace);
  assert.ok(['FailClose', 'FailOpen'].includes(pool.spec.endpointPickerRef.failureMode));
});

test('the Service and the Deployment select the picker pods; the gRPC port and probes are the config\'s epp.port', () => {
  const labels = deployment.spec.template.metadata.labels;
  assert.deepEqual(deployment.spec.selector.matchLabels, labels);
  for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(labels[k], v, `Service selector ${k}`);
  const grpcPort = container.ports.find((p: Obj) => p.name === service.spec.ports.find((s: Obj) => s.port === pool.spec.endpointPickerRef.port.number).targetPort);
  assert.equal(grpcPort.containerPort, cfg.epp!.port);
  assert.equal(container.readinessProbe.grpc.port, cfg.epp!.port);
  assert.equal(container.readinessProbe.grpc.service, 'readiness');
  assert.equal(container.livenessProbe.grpc.service, 'liveness');
  const mount = container.volumeMounts.find((m: Obj) => m.name === pod.volumes.find((v: Obj) => v.configMap?.name === configMap.metadata.name).name);
  assert.equal(container.env.find((e: Obj) => e.name === 'GATEWAY_CONFIG').value, `${mount.mountPath}/gateway.yaml`);
  assert.equal(cfg.epp!.pool, cfg.pools[0]!.id);
});

test('RBAC: the pod\'s service account may list and watch pods', () => {
  const sa = one('ServiceAccount');
  const role = one('Role');
  const binding = one('RoleBinding');
  assert.equal(pod.serviceAccountName, sa.metadata.name);
  assert.equal(binding.roleRef.name, role.metadata.name);
  assert.equal(binding.roleRef.kind, 'Role');
  assert.ok(binding.subjects.some((s: Obj) => s.kind === 'ServiceAccount' && s.name === sa.metadata.name));
  const pods = role.rules.find((r: Obj) => r.resources.includes('pods') && r.apiGroups.includes(''));
  for (const verb of ['list', 'watch']) assert.ok(pods.verbs.includes(verb), `pods ${verb}`);
});

test('the HTTPRoute sends its paths to the InferencePool', () => {
  const ref = route.spec.rules[0].backendRefs[0];
  assert.equal(ref.group, 'inference.networking.k8s.io');
  assert.equal(ref.kind, 'InferencePool');
  assert.equal(ref.name, pool.metadata.name);
});

test('Envoy Gateway example: message timeout above the admission queue\'s longest wait, the picker\'s body modes, FailClose', () => {
  const policy = docs('envoy-gateway.yaml')[0]!;
  const ext = policy.spec.extProc[0];
  const seconds = Number(/^(\d+(?:\.\d+)?)s$/.exec(ext.messageTimeout)![1]);
  assert.ok(seconds * 1000 > cfg.admission.max_queue_ms, `${ext.messageTimeout} > ${cfg.admission.max_queue_ms} ms`);
  assert.equal(ext.backendRefs[0].name, service.metadata.name);
  assert.equal(ext.backendRefs[0].port, pool.spec.endpointPickerRef.port.number);
  assert.equal(ext.processingMode.request.body, 'FullDuplexStreamed');
  assert.equal(ext.failOpen, false);
  assert.equal(policy.spec.targetRefs[0].name, route.metadata.name);
});
