// Structure checks for deploy/k8s and the Dockerfile: the fields a kube-apiserver requires, and that probes,
// ports, config mount, secrets and labels agree with each other and with the gateway (no cluster needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../../src/config/load.ts';

const root = new URL('../../../', import.meta.url);
const k8s = new URL('deploy/k8s/', root);
const read = (rel: string, base = root): string => readFileSync(new URL(rel, base), 'utf8');

type Obj = Record<string, unknown>;
const o = (v: unknown, what: string): Obj => {
  assert.ok(v && typeof v === 'object' && !Array.isArray(v), `${what} is an object`);
  return v as Obj;
};
const a = (v: unknown, what: string): Obj[] => {
  assert.ok(Array.isArray(v), `${what} is a list`);
  return v as Obj[];
};

function docs(file: string): Obj[] {
  return parseAllDocuments(read(file, k8s)).map((d, i) => {
    assert.deepEqual(d.errors, [], `${file} document ${i} parses`);
    return o(d.toJS(), `${file} document ${i}`);
  });
}

const DNS_1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const API_VERSIONS: Record<string, string> = {
  ConfigMap: 'v1', Secret: 'v1', Service: 'v1', Deployment: 'apps/v1', PodDisruptionBudget: 'policy/v1',
};

const kustomization = o(parseAllDocuments(read('kustomization.yaml', k8s))[0]!.toJS(), 'kustomization');
const resources = (kustomization.resources as string[]).flatMap((f) => docs(f));
const secrets = docs('secret.example.yaml');
const all = [...resources, ...secrets];
const byKind = (kind: string): Obj[] => all.filter((d) => d.kind === kind);

function subset(small: Obj, big: Obj): boolean {
  return Object.entries(small).every(([k, v]) => big[k] === v);
}

void test('every manifest has apiVersion, kind and a valid metadata.name', () => {
  assert.equal(resources.length, 4);
  for (const d of all) {
    assert.equal(d.apiVersion, API_VERSIONS[String(d.kind)], `${String(d.kind)} apiVersion`);
    const meta = o(d.metadata, `${String(d.kind)}.metadata`);
    assert.match(String(meta.name), DNS_1123);
    for (const [k, v] of Object.entries(o(meta.labels ?? {}, 'labels'))) {
      assert.equal(typeof v, 'string', `label ${k} is a string`);
    }
  }
  assert.deepEqual(resources.map((d) => d.kind).sort(), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service']);
});

const deployment = byKind('Deployment')[0]!;
const spec = o(deployment.spec, 'deployment.spec');
const template = o(spec.template, 'template');
const podLabels = o(o(template.metadata, 'template.metadata').labels, 'pod labels');
const pod = o(template.spec, 'pod spec');
const container = a(pod.containers, 'containers')[0]!;
const ports = a(container.ports, 'ports');
const env = new Map(a(container.env, 'env').map((e) => [String(e.name), e]));
const httpPort = ports.find((p) => p.name === 'http')!;

void test('the deployment runs n replicas whose probes hit /readyz and /healthz on the port the gateway listens on', () => {
  assert.ok(Number(spec.replicas) >= 2, 'more than one gateway');
  const selector = o(o(spec.selector, 'selector').matchLabels, 'matchLabels');
  assert.ok(subset(selector, podLabels), 'selector matches the pod template labels');
  assert.equal(typeof container.name, 'string');
  assert.match(String(container.image), /^[\w./-]+:[\w.-]+$/);
  assert.ok(httpPort, 'a port named http');
  assert.equal(env.get('PORT')!.value, String(httpPort.containerPort), 'PORT env equals the container port');
  assert.equal(env.get('HOST')!.value, '0.0.0.0', 'listens beyond loopback');
  const probe = (name: string): Obj => o(o(container[name], name).httpGet, `${name}.httpGet`);
  assert.equal(probe('readinessProbe').path, '/readyz');
  assert.equal(probe('livenessProbe').path, '/healthz');
  for (const name of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
    const port = probe(name).port;
    assert.ok(port === 'http' || port === httpPort.containerPort, `${name} targets the gateway port`);
  }
});

void test('the config comes from the configmap at GATEWAY_CONFIG and is a valid gateway config', () => {
  const path = String(env.get('GATEWAY_CONFIG')!.value);
  const mount = a(container.volumeMounts, 'volumeMounts').find((m) => path.startsWith(`${String(m.mountPath)}/`));
  assert.ok(mount, `a volume is mounted above ${path}`);
  const volume = a(pod.volumes, 'volumes').find((v) => v.name === mount.name)!;
  const cmName = o(volume.configMap, 'configMap volume').name;
  const cm = byKind('ConfigMap').find((c) => o(c.metadata, 'meta').name === cmName);
  assert.ok(cm, `ConfigMap ${String(cmName)} is in the kustomization`);
  const key = path.slice(String(mount.mountPath).length + 1);
  const text = o(cm.data, 'data')[key];
  assert.equal(typeof text, 'string', `ConfigMap has key ${key}`);

  // Environment as the pod sees it: literal env, REDIS_URL from its secret, envFrom secrets.
  const podEnv: Record<string, string> = {};
  for (const [name, e] of env) if (typeof e.value === 'string') podEnv[name] = e.value;
  const ref = o(o(env.get('REDIS_URL')!.valueFrom, 'REDIS_URL.valueFrom').secretKeyRef, 'secretKeyRef');
  const secretData = (name: unknown): Obj => o(secrets.find((s) => o(s.metadata, 'meta').name === name)?.stringData, `secret ${String(name)}`);
  podEnv.REDIS_URL = String(secretData(ref.name)[String(ref.key)]);
  for (const from of a(container.envFrom ?? [], 'envFrom')) {
    Object.assign(podEnv, secretData(o(from.secretRef, 'secretRef').name));
  }
  const cfg = parseConfig(parseAllDocuments(String(text))[0]!.toJS(), podEnv);
  assert.equal(cfg.server.port, httpPort.containerPort);
  assert.equal(cfg.quota.backend, 'redis', 'gateways share quota state through Redis');
  const preStopSeconds = 5;
  assert.ok(Number(pod.terminationGracePeriodSeconds) * 1000 > cfg.server.shutdown_grace_ms + preStopSeconds * 1000,
    'the kubelet waits for the drain before SIGKILL');
});

void test('service and disruption budget select the gateway pods and the named port', () => {
  const service = o(byKind('Service')[0]!.spec, 'service.spec');
  assert.ok(subset(o(service.selector, 'service selector'), podLabels));
  const sp = a(service.ports, 'service ports')[0]!;
  assert.ok(sp.targetPort === 'http' || sp.targetPort === httpPort.containerPort);
  const pdb = o(byKind('PodDisruptionBudget')[0]!.spec, 'pdb.spec');
  assert.ok(subset(o(o(pdb.selector, 'pdb selector').matchLabels, 'pdb matchLabels'), podLabels));
  const maxUnavailable = Number(pdb.maxUnavailable ?? 0);
  assert.ok(maxUnavailable >= 1 && maxUnavailable < Number(spec.replicas), 'drains can proceed and never take all gateways');
});

void test('pods run as the image user, non-root, with a writable /tmp only', () => {
  const psc = o(pod.securityContext, 'pod securityContext');
  assert.equal(psc.runAsNonRoot, true);
  assert.equal(psc.runAsUser, 1000, 'uid of the node user the Dockerfile switches to');
  const csc = o(container.securityContext, 'container securityContext');
  assert.equal(csc.readOnlyRootFilesystem, true);
  assert.ok(a(container.volumeMounts, 'mounts').some((m) => m.mountPath === '/tmp'), 'tsx needs a writable cache dir');
});

void test('the dockerfile is multi-stage, installs production deps with npm ci and runs the gateway as non-root', () => {
  const dockerfile = read('Dockerfile').replace(/\\\n/g, ' ');
  const lines = dockerfile.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const stages = lines.filter((l) => /^FROM /i.test(l));
  assert.ok(stages.length >= 2, 'multi-stage');
  assert.ok(lines.some((l) => /^RUN .*npm ci .*--omit=dev/.test(l)), 'npm ci --omit=dev');
  const finalStage = lines.slice(lines.lastIndexOf(stages.at(-1)!));
  const user = finalStage.filter((l) => /^USER /.test(l)).at(-1);
  assert.ok(user && !/root|^USER 0/.test(user), 'final stage switches to a non-root user');
  for (const l of finalStage.filter((x) => /^COPY /.test(x) && !x.includes('--from='))) {
    const parts = l.split(/\s+/).filter((p) => !p.startsWith('--')).slice(1, -1);
    for (const src of parts) assert.ok(existsSync(new URL(src, root)), `COPY source ${src} exists`);
  }
  const cmd = finalStage.find((l) => /^CMD /.test(l))!;
  const argv = JSON.parse(cmd.slice(4)) as string[];
  assert.ok(existsSync(new URL(argv.at(-1)!, root)), 'CMD runs an entry file that exists');
  assert.ok(argv.includes('tsx'));
  const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
  assert.ok(pkg.dependencies.tsx, 'tsx is a runtime dependency, so --omit=dev keeps it');
  assert.ok(lines.some((l) => l === `EXPOSE ${String(httpPort.containerPort)}`));
});
