// The Helm chart (charts/kubegc) against deploy/: `helm template` must render
// the same objects as `kubectl kustomize` of deploy/, or of an overlay of it
// with a component, an image, replicas or patches, compared object by object,
// so the two installs cannot drift. Also: helm lint, the values schema refusing
// bad values with the key named, the README's values table and the schema
// against values.yaml, the chart's copies of the component's alerts and
// dashboard, and helm package. helm is built from its Go module by
// cluster/go-tools.ts (minutes when the cache is cold, then cached).
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump, load, loadAll } from 'js-yaml';
import { binaryDir } from '../../cluster/controlplane.ts';
import { helmBinary } from '../../cluster/go-tools.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = path.join(ROOT, 'charts/kubegc');
const DEPLOY = path.join(ROOT, 'deploy');
const COMPONENTS = path.join(DEPLOY, 'components');
const PROMETHEUS_COMPONENT = path.join(COMPONENTS, 'prometheus-operator');
const NAMESPACE = 'kubegc-system';
const NAMESPACE_KEY = `v1 Namespace ${NAMESPACE}`;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Objects by "apiVersion kind [namespace/]name". */
type Objects = Record<string, K8sObject>;

/** The parts of a kustomization an overlay of deploy/ uses here. */
interface Overlay {
  components?: string[];
  images?: { name: string; newName?: string; newTag?: string }[];
  replicas?: { name: string; count: number }[];
  patches?: { target: { kind: string; name: string }; patch: string }[];
}

type Values = Record<string, unknown>;

const deployKustomization = load(readFileSync(path.join(DEPLOY, 'kustomization.yaml'), 'utf8')) as {
  images: { name: string; newName: string; newTag: string }[];
};
/** The image deploy/ renders (its `images:`), which overlays rename. */
const DEPLOY_IMAGE = deployKustomization.images[0]?.newName as string;
const chartValues = load(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Values;

let helm: string;
let kubectl: string;
let tmp: string;
let helmEnv: NodeJS.ProcessEnv;
let counter = 0;

/**
 * kubectl for `kubectl kustomize`: $KUBECTL, else the one built with the local
 * control plane (a pinned version), else the machine's.
 */
async function findKubectl(): Promise<string> {
  if (process.env.KUBECTL) return process.env.KUBECTL;
  const built = path.join(await binaryDir(), 'kubectl');
  if (existsSync(built)) return built;
  const onPath = spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' });
  const found = onPath.stdout.trim();
  if (onPath.status !== 0 || found === '') {
    throw new Error(
      'no kubectl for `kubectl kustomize`: set KUBECTL, put kubectl on PATH, or build the control plane (npm run cluster -- up)',
    );
  }
  return found;
}

beforeAll(async () => {
  helm = await helmBinary();
  kubectl = await findKubectl();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'kubegc-chart-'));
  // helm's own state (repositories, registry logins, caches) stays in the test's directory.
  helmEnv = {
    ...process.env,
    HELM_CACHE_HOME: path.join(tmp, 'helm-cache'),
    HELM_CONFIG_HOME: path.join(tmp, 'helm-config'),
    HELM_DATA_HOME: path.join(tmp, 'helm-data'),
  };
}, 900_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

function run(cmd: string, args: string[], env = process.env) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env, maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function keyOf(o: K8sObject): string {
  const ns = o.metadata.namespace === undefined ? '' : `${o.metadata.namespace}/`;
  return `${o.apiVersion} ${o.kind} ${ns}${o.metadata.name}`;
}

function parseObjects(text: string, source: string): Objects {
  const objects: Objects = {};
  for (const doc of loadAll(text)) {
    if (doc === null || doc === undefined) continue;
    const o = doc as K8sObject;
    const key = keyOf(o);
    if (key in objects) throw new Error(`${source} renders ${key} twice`);
    objects[key] = o;
  }
  return objects;
}

function newDir(prefix: string): string {
  const dir = path.join(tmp, `${prefix}-${++counter}`);
  mkdirSync(dir);
  return dir;
}

function valuesFile(values: Values): string {
  const file = path.join(newDir('values'), 'values.yaml');
  writeFileSync(file, dump(values));
  return file;
}

function helmRun(...args: string[]) {
  return run(helm, args, helmEnv);
}

/** `helm template` of the chart (or a packaged one) with these values. */
function helmTemplate(values: Values = {}, opts: { chart?: string; namespace?: string } = {}) {
  const r = helmRun(
    'template',
    'kubegc',
    opts.chart ?? CHART,
    '--namespace',
    opts.namespace ?? NAMESPACE,
    '-f',
    valuesFile(values),
  );
  if (r.status !== 0) throw new Error(`helm template failed (exit ${r.status}):\n${r.stderr}`);
  return parseObjects(r.stdout, 'helm template');
}

/**
 * `kubectl kustomize` of deploy/, or of an overlay of deploy/ written for the occasion.
 * kustomize (go-yaml v3, in kubectl 1.32 and 1.35 alike) reads a more-indented
 * line inside a folded scalar (`>-`) with a blank line before it, where the YAML
 * spec, sigs.k8s.io/yaml (what `kubectl apply -f` and helm use) and js-yaml keep
 * one line break: two CEL expressions of the guardrails policy are written so.
 * Such a blank line is read back as one break; no string of deploy/ holds a
 * blank line followed by an indented one otherwise.
 */
function kustomize(overlay?: Overlay): Objects {
  let dir = DEPLOY;
  if (overlay) {
    dir = newDir('overlay');
    // kustomize takes no absolute paths: deploy/ and its components relative to the overlay.
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [path.relative(dir, DEPLOY)],
      ...overlay,
      components: (overlay.components ?? []).map((c) =>
        path.relative(dir, path.join(COMPONENTS, c)),
      ),
    };
    writeFileSync(path.join(dir, 'kustomization.yaml'), dump(kustomization));
  }
  const r = run(kubectl, ['kustomize', dir]);
  if (r.status !== 0) throw new Error(`kubectl kustomize failed (exit ${r.status}):\n${r.stderr}`);
  return replaceStrings(parseObjects(r.stdout, 'kubectl kustomize'), /\n\n(?= )/g, '\n');
}

function without(objects: Objects, keys: Iterable<string>): Objects {
  const drop = new Set(keys);
  return Object.fromEntries(Object.entries(objects).filter(([k]) => !drop.has(k)));
}

function only(objects: Objects, keep: (o: K8sObject) => boolean): Objects {
  return Object.fromEntries(Object.entries(objects).filter(([, o]) => keep(o)));
}

/** The keys of the objects manifest files of deploy/ hold (their namespaces are written out). */
function keysOfFiles(...files: string[]): string[] {
  return files.flatMap((f) =>
    loadAll(readFileSync(path.join(DEPLOY, f), 'utf8'))
      .filter((d) => d !== null && d !== undefined)
      .map((d) => keyOf(d as K8sObject)),
  );
}

/** The same keys first (a short failure: what is missing, what is extra), then each object deep-equal. */
function expectSameObjects(actual: Objects, expected: Objects): void {
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const key of Object.keys(expected)) {
    // One object per assertion: jest's diff shows its differing fields, headed by its key.
    try {
      expect(actual[key]).toStrictEqual(expected[key]);
    } catch (e) {
      if (e instanceof Error)
        e.message = `${key}, helm template (+) against kustomize (-):\n${e.message}`;
      throw e;
    }
  }
}

const isDashboard = (o: K8sObject): boolean =>
  o.kind === 'ConfigMap' && o.metadata.labels?.grafana_dashboard === '1';

function containers(objects: Objects): { object: string; image: unknown; pullPolicy: unknown }[] {
  return Object.values(objects).flatMap((o) => {
    const pod = (o.spec as { template?: { spec?: { containers?: Record<string, unknown>[] } } })
      ?.template?.spec;
    return (pod?.containers ?? []).map((c) => ({
      object: keyOf(o),
      image: c.image,
      pullPolicy: c.imagePullPolicy,
    }));
  });
}

/** Every string in a value with `from` replaced by `to`. */
function replaceStrings<T>(value: T, from: string | RegExp, to: string): T {
  return JSON.parse(JSON.stringify(value), (_k, v: unknown) =>
    typeof v === 'string' ? v.replaceAll(from, to) : v,
  ) as T;
}

/** A JSON 6902 patch of one object of deploy/, as an overlay entry. */
function jsonPatch(kind: string, name: string, ops: object[]) {
  return { target: { kind, name }, patch: dump(ops) };
}

const CONTROLLER = ['Deployment', 'kubegc-controller'] as const;
const NODE = ['DaemonSet', 'kubegc-node'] as const;
const CONTAINER = '/spec/template/spec/containers/0';

// Every component of deploy/components/ is a value (or two) of the chart.
const COMPONENT_VALUES: Record<string, Values> = {
  guardrails: { guardrails: { enabled: true } },
  'control-plane-placement': { controlPlanePlacement: { enabled: true } },
  'metrics-network-policy': { metricsNetworkPolicy: { enabled: true } },
  // The component carries the Grafana dashboard too; the chart has a value for each.
  'prometheus-operator': { prometheusOperator: { enabled: true }, dashboard: { enabled: true } },
};
const ALL_COMPONENTS = Object.keys(COMPONENT_VALUES);
const ALL_ON: Values = Object.assign({}, ...Object.values(COMPONENT_VALUES)) as Values;

describe('helm template renders what kubectl kustomize renders', () => {
  test('every component of deploy/components/ has its values', () => {
    const dirs = readdirSync(COMPONENTS, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    expect(dirs.sort()).toEqual([...ALL_COMPONENTS].sort());
  });

  test('default values: deploy/ without its Namespace (createNamespace is off)', () => {
    const deploy = kustomize();
    expect(deploy[NAMESPACE_KEY]).toStrictEqual({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: NAMESPACE },
    });
    expectSameObjects(helmTemplate(), without(deploy, [NAMESPACE_KEY]));
  });

  test('createNamespace=true: deploy/, Namespace included', () => {
    expectSameObjects(helmTemplate({ createNamespace: true }), kustomize());
  });

  test.each(ALL_COMPONENTS)('component %s', (component) => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, ...COMPONENT_VALUES[component] }),
      kustomize({ components: [component] }),
    );
  });

  test('every component at once', () => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, ...ALL_ON }),
      kustomize({ components: ALL_COMPONENTS }),
    );
  });

  test('prometheusOperator without dashboard: the component without its dashboard ConfigMap', () => {
    const expected = kustomize({ components: ['prometheus-operator'] });
    expectSameObjects(
      helmTemplate({ createNamespace: true, prometheusOperator: { enabled: true } }),
      only(expected, (o) => !isDashboard(o)),
    );
  });

  test("dashboard alone: deploy/ and the component's dashboard ConfigMap", () => {
    const dashboards = only(kustomize({ components: ['prometheus-operator'] }), isDashboard);
    expect(Object.keys(dashboards)).toHaveLength(1);
    expectSameObjects(helmTemplate({ createNamespace: true, dashboard: { enabled: true } }), {
      ...kustomize(),
      ...dashboards,
    });
  });

  test('controller.enabled=false: deploy/ without deploy/controller/', () => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, controller: { enabled: false } }),
      without(kustomize(), keysOfFiles('controller/rbac.yaml', 'controller/deployment.yaml')),
    );
  });

  test('node.enabled=false: deploy/ without deploy/node/', () => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, node: { enabled: false } }),
      without(
        kustomize(),
        keysOfFiles('node/rbac.yaml', 'node/explain-rbac.yaml', 'node/daemonset.yaml'),
      ),
    );
  });

  test('a workload turned off takes its ServiceMonitor and its alerts along', () => {
    const all = kustomize({ components: ALL_COMPONENTS });
    expectSameObjects(
      helmTemplate({ createNamespace: true, ...ALL_ON, controller: { enabled: false } }),
      without(all, [
        ...keysOfFiles('controller/rbac.yaml', 'controller/deployment.yaml'),
        `monitoring.coreos.com/v1 ServiceMonitor ${NAMESPACE}/kubegc`,
        `monitoring.coreos.com/v1 PrometheusRule ${NAMESPACE}/kubegc`,
      ]),
    );
    expectSameObjects(
      helmTemplate({ createNamespace: true, ...ALL_ON, node: { enabled: false } }),
      without(all, [
        ...keysOfFiles('node/rbac.yaml', 'node/explain-rbac.yaml', 'node/daemonset.yaml'),
        `monitoring.coreos.com/v1 ServiceMonitor ${NAMESPACE}/kubegc-node`,
        `monitoring.coreos.com/v1 PrometheusRule ${NAMESPACE}/kubegc-node`,
      ]),
    );
  });

  test("a changed image: everywhere kustomize's images: puts it", () => {
    const image = { repository: 'registry.example.com/team/kubegc', tag: '1.2.3-rc.1' };
    const rendered = helmTemplate({ createNamespace: true, ...ALL_ON, image });
    expectSameObjects(
      rendered,
      kustomize({
        components: ALL_COMPONENTS,
        images: [{ name: DEPLOY_IMAGE, newName: image.repository, newTag: image.tag }],
      }),
    );
    expect(containers(rendered)).toEqual([
      expect.objectContaining({ image: 'registry.example.com/team/kubegc:1.2.3-rc.1' }),
      expect.objectContaining({ image: 'registry.example.com/team/kubegc:1.2.3-rc.1' }),
    ]);
  });

  test('a tag alone keeps the repository', () => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, image: { tag: '0.2.0' } }),
      kustomize({ images: [{ name: DEPLOY_IMAGE, newTag: '0.2.0' }] }),
    );
  });

  test('image.pullPolicy: on both containers, and on none by default', () => {
    expect(containers(helmTemplate()).map((c) => c.pullPolicy)).toEqual([undefined, undefined]);
    const op = { op: 'add', path: `${CONTAINER}/imagePullPolicy`, value: 'Always' };
    expectSameObjects(
      helmTemplate({ createNamespace: true, image: { pullPolicy: 'Always' } }),
      kustomize({
        patches: [jsonPatch(...CONTROLLER, [op]), jsonPatch(...NODE, [op])],
      }),
    );
  });

  test("controller.replicas: kustomize's replicas:", () => {
    expectSameObjects(
      helmTemplate({ createNamespace: true, controller: { replicas: 3 } }),
      kustomize({ replicas: [{ name: 'kubegc-controller', count: 3 }] }),
    );
  });

  test('resources merge with the defaults, and null removes one', () => {
    expectSameObjects(
      helmTemplate({
        createNamespace: true,
        controller: { resources: { requests: { cpu: '500m' }, limits: { cpu: '2' } } },
        node: { resources: { limits: null } },
      }),
      kustomize({
        patches: [
          jsonPatch(...CONTROLLER, [
            { op: 'replace', path: `${CONTAINER}/resources/requests/cpu`, value: '500m' },
            { op: 'add', path: `${CONTAINER}/resources/limits/cpu`, value: '2' },
          ]),
          jsonPatch(...NODE, [{ op: 'remove', path: `${CONTAINER}/resources/limits` }]),
        ],
      }),
    );
  });

  test('extraArgs: appended to each container', () => {
    const add = (value: string) => ({ op: 'add', path: `${CONTAINER}/args/-`, value });
    expectSameObjects(
      helmTemplate({
        createNamespace: true,
        controller: { extraArgs: ['--dry-run', '--workers', '40'] },
        node: { extraArgs: ['--image-gc-high-threshold=85', '--log-level=debug'] },
      }),
      kustomize({
        patches: [
          jsonPatch(...CONTROLLER, [add('--dry-run'), add('--workers'), add('40')]),
          jsonPatch(...NODE, [add('--image-gc-high-threshold=85'), add('--log-level=debug')]),
        ],
      }),
    );
  });

  test("prometheusOperator.prometheusServiceAccount: the reader binding's subject", () => {
    const expected = kustomize({
      components: ['prometheus-operator'],
      patches: [
        jsonPatch('ClusterRoleBinding', 'kubegc-metrics-reader-prometheus', [
          { op: 'replace', path: '/subjects/0/name', value: 'prometheus' },
          { op: 'replace', path: '/subjects/0/namespace', value: 'observability' },
        ]),
      ],
    });
    expectSameObjects(
      helmTemplate({
        createNamespace: true,
        prometheusOperator: {
          enabled: true,
          prometheusServiceAccount: { name: 'prometheus', namespace: 'observability' },
        },
      }),
      only(expected, (o) => !isDashboard(o)),
    );
  });

  test('another release namespace: every mention of kubegc-system follows, CEL included', () => {
    // deploy/ names kubegc-system only as the namespace (objects, subjects, the
    // guardrails' username, Lease namespace and message): all of them move.
    const moved = Object.values(kustomize({ components: ALL_COMPONENTS })).map((o) =>
      replaceStrings(o, NAMESPACE, 'gc'),
    );
    const rendered = helmTemplate({ createNamespace: true, ...ALL_ON }, { namespace: 'gc' });
    expectSameObjects(rendered, Object.fromEntries(moved.map((o) => [keyOf(o), o])));
    expect(JSON.stringify(rendered)).not.toContain(NAMESPACE);
  });
});

describe('the values schema refuses bad values, naming the key', () => {
  const cases: [string, Values | string[], string][] = [
    [
      'a string for a number',
      ['--set', 'controller.replicas=two'],
      "at '/controller/replicas': got string, want integer",
    ],
    [
      'a negative replica count',
      ['--set', 'controller.replicas=-1'],
      "at '/controller/replicas': minimum: got -1, want 0",
    ],
    [
      'an unknown key',
      ['--set', 'controller.replica=3'],
      "at '/controller': additional properties 'replica' not allowed",
    ],
    [
      'an unknown top-level key',
      ['--set', 'guardrail.enabled=true'],
      "at '': additional properties 'guardrail' not allowed",
    ],
    [
      'a misspelt switch',
      { dashboard: { enable: true } },
      "at '/dashboard': additional properties 'enable' not allowed",
    ],
    [
      'a string for a switch',
      ['--set-string', 'guardrails.enabled=true'],
      "at '/guardrails/enabled': got string, want boolean",
    ],
    ['a number for the tag', { image: { tag: 1.2 } }, "at '/image/tag': got number, want string"],
    [
      'a tag in the repository',
      { image: { repository: 'ghcr.io/kubegc/kubegc:0.1.0' } },
      "at '/image/repository': 'ghcr.io/kubegc/kubegc:0.1.0' does not match pattern",
    ],
    [
      'an unknown pull policy',
      ['--set', 'image.pullPolicy=Sometimes'],
      "at '/image/pullPolicy': value must be one of '', 'Always', 'IfNotPresent', 'Never'",
    ],
    [
      'a negative quantity',
      { node: { resources: { limits: { memory: '-1Gi' } } } },
      "at '/node/resources/limits/memory'",
    ],
    [
      'a misspelt resources key',
      { controller: { resources: { request: { cpu: '1' } } } },
      "at '/controller/resources': additional properties 'request' not allowed",
    ],
    [
      'a string for the args',
      ['--set', 'controller.extraArgs=--dry-run'],
      "at '/controller/extraArgs': got string, want array",
    ],
  ];

  test.each(cases)('%s', (_name, bad, message) => {
    const args = Array.isArray(bad) ? bad : ['-f', valuesFile(bad)];
    const r = helmRun('template', 'kubegc', CHART, '--namespace', NAMESPACE, ...args);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("values don't meet the specifications of the schema");
    expect(r.stderr).toContain(message);
  });
});

describe('helm lint', () => {
  function expectClean(r: ReturnType<typeof helmRun>): void {
    expect(`${r.stdout}${r.stderr}`).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.status).toBe(0);
    expect(r.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  }

  test('passes, --strict too', () => {
    expectClean(helmRun('lint', CHART));
    expectClean(helmRun('lint', '--strict', CHART));
  });

  test('passes --strict with every option on', () => {
    expectClean(
      helmRun('lint', '--strict', CHART, '-f', valuesFile({ createNamespace: true, ...ALL_ON })),
    );
  });
});

describe('the chart and what it is checked against', () => {
  /** values.yaml's leaves: "a.b.c" for every value that is not a non-empty map. */
  function leaves(values: unknown, prefix = ''): Record<string, unknown> {
    if (values === null || typeof values !== 'object' || Array.isArray(values)) {
      return { [prefix]: values };
    }
    const entries = Object.entries(values as Values);
    if (entries.length === 0 && prefix !== '') return { [prefix]: values };
    return Object.assign(
      {},
      ...entries.map(([k, v]) => leaves(v, prefix === '' ? k : `${prefix}.${k}`)),
    ) as Record<string, unknown>;
  }

  test("the README's values table lists every value of values.yaml with its default, and nothing else", () => {
    const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
    const rows = [...readme.matchAll(/^\|\s*`([^`]+)`\s*\|\s*`([^`]*)`\s*\|/gm)].map((m) => [
      m[1] as string,
      m[2] as string,
    ]);
    expect(rows.length).toBe(new Set(rows.map(([k]) => k)).size);
    const expected = Object.fromEntries(
      Object.entries(leaves(chartValues)).map(([k, v]) => [k, JSON.stringify(v)]),
    );
    expect(Object.fromEntries(rows)).toEqual(expected);
  });

  test('the schema describes exactly the keys of values.yaml', () => {
    interface Schema {
      $ref?: string;
      properties?: Record<string, Schema>;
      additionalProperties?: boolean | Schema;
    }
    const schema = JSON.parse(
      readFileSync(path.join(CHART, 'values.schema.json'), 'utf8'),
    ) as Schema & { definitions: Record<string, Schema> };
    const resolve = (s: Schema): Schema =>
      s.$ref ? resolve(schema.definitions[s.$ref.replace('#/definitions/', '')] as Schema) : s;
    // Every map the schema spells out has exactly values.yaml's keys (global
    // aside: a parent chart sets it); maps of free keys (quantities) are not spelt out.
    const check = (s: Schema, values: unknown, at: string): void => {
      const r = resolve(s);
      if (!r.properties) return;
      expect(r.additionalProperties).toBe(false);
      const keys = Object.keys(r.properties).filter((k) => !(at === '' && k === 'global'));
      expect([at, Object.keys(values as Values).sort()]).toEqual([at, keys.sort()]);
      for (const k of keys) {
        check(r.properties[k] as Schema, (values as Values)[k], at === '' ? k : `${at}.${k}`);
      }
    };
    check(schema, chartValues, '');
  });

  test('Chart.yaml: kubegc 0.1.0, appVersion and image as deploy/kustomization.yaml sets them', () => {
    const chart = load(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as Values;
    expect(chart).toMatchObject({
      apiVersion: 'v2',
      name: 'kubegc',
      version: '0.1.0',
      appVersion: '0.1.0',
    });
    expect(deployKustomization.images).toEqual([
      { name: 'kubegc', newName: 'ghcr.io/kubegc/kubegc', newTag: chart.appVersion },
    ]);
    expect(chartValues.image).toMatchObject({ repository: DEPLOY_IMAGE, tag: '' });
  });

  // Copies, not links: a packaged chart carries no file outside its directory.
  test.each([
    ['files/prometheusrule.yaml', 'prometheusrule.yaml'],
    ['files/prometheusrule-node.yaml', 'prometheusrule-node.yaml'],
    ['dashboards/kubegc.json', 'dashboards/kubegc.json'],
  ])("%s is the component's %s", (copy, original) => {
    const from = path.join(PROMETHEUS_COMPONENT, original);
    const to = path.join(CHART, copy);
    try {
      expect(readFileSync(to, 'utf8')).toBe(readFileSync(from, 'utf8'));
    } catch (e) {
      if (e instanceof Error) {
        e.message = `copy it: cp ${path.relative(ROOT, from)} ${path.relative(ROOT, to)}\n${e.message}`;
      }
      throw e;
    }
  });

  test('helm is the release cluster/helm/go.mod pins', () => {
    const gomod = readFileSync(path.join(ROOT, 'cluster/helm/go.mod'), 'utf8');
    const pinned = /^require\s+helm\.sh\/helm\/v4\s+(v\S+)/m.exec(gomod)?.[1];
    expect(pinned).toMatch(/^v4\./);
    expect(helmRun('version', '--short').stdout.trim()).toBe(pinned);
  });
});

describe('helm package', () => {
  let tgz: string;

  beforeAll(() => {
    const dir = newDir('package');
    const r = helmRun('package', CHART, '--destination', dir);
    expect(r).toMatchObject({ status: 0 });
    tgz = path.join(dir, 'kubegc-0.1.0.tgz');
  });

  test('makes kubegc-0.1.0.tgz holding the schema, the README and the files the templates read', () => {
    expect(existsSync(tgz)).toBe(true);
    const list = run('tar', ['-tzf', tgz]);
    expect(list.status).toBe(0);
    const files = list.stdout.trim().split('\n');
    expect(files).toEqual(
      expect.arrayContaining([
        'kubegc/Chart.yaml',
        'kubegc/values.yaml',
        'kubegc/values.schema.json',
        'kubegc/README.md',
        'kubegc/files/prometheusrule.yaml',
        'kubegc/files/prometheusrule-node.yaml',
        'kubegc/dashboards/kubegc.json',
      ]),
    );
    expect(files).not.toContain('kubegc/templates/.prettierrc.json');
    const schema = run('tar', ['-xzOf', tgz, 'kubegc/values.schema.json']);
    expect(schema.stdout).toBe(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8'));
  });

  test('the package renders as the directory does, and checks values with its schema', () => {
    const values = { createNamespace: true, ...ALL_ON };
    expectSameObjects(helmTemplate(values, { chart: tgz }), helmTemplate(values));
    const r = helmRun('template', 'kubegc', tgz, '--set', 'controller.replicas=-1');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("at '/controller/replicas'");
  });
});
