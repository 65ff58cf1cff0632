// The user's path: the image built from the Dockerfile (`npm run image`),
// `kubectl apply -k` of an overlay of deploy/ that sets only the image, pods
// on a real kubelet node (`npm run cluster -- up --node`), scraped by a real
// Prometheus through Kubernetes service discovery. The node changes the host
// (root), so this file runs its own control plane in .cluster-e2e-node and
// takes it down at the end; the other e2e files never see a node (their Pods
// stay Pending, as they always have).
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, down, up, type Cluster } from '../../cluster/controlplane.ts';
import { helmBinary } from '../../cluster/go-tools.ts';
import { CONTAINERD, PAUSE_IMAGE, downNode, upNode, type LocalNode } from '../../cluster/node.ts';
import { registryCatalog } from '../../cluster/registry.ts';
import { hostToolsLayer, randomLayer } from '../../cluster/oci-image.ts';
import { statFilesystem } from '../../src/node/statfs.ts';
import { deleteBindings, httpsGet, serviceAccountToken } from '../support/metrics-access.ts';
import { startPrometheus, type Prometheus } from '../support/prometheus.ts';
import { checkDashboardQueries } from '../support/dashboard.ts';
import { clients, testNamespace, waitFor, type Clients } from '../support/cluster.ts';
import {
  addNodeGcArgs,
  importNodeImages,
  kubectlOf,
  nodeImages,
  podReady,
  pushKubegcImage,
  run,
} from '../support/local-node.ts';
import { configMap, configMapNames, ownerRef, times } from '../support/objects.ts';

const DIR = path.join(REPO_ROOT, '.cluster-e2e-node');
const OVERLAY = path.join(REPO_ROOT, 'test', 'e2e', 'deploy-overlay');
const NS = 'kubegc-system';
const CONTROLLER_SA = `system:serviceaccount:${NS}:kubegc-controller`;
const log = (l: string): void => void process.stderr.write(`\nin-cluster: ${l}`);

let cluster: Cluster;
let node: LocalNode;
let core: k8s.CoreV1Api;
let coordination: k8s.CoordinationV1Api;
let c: Clients;
/** From `kubectl apply -k` to both controller replicas Ready. */
let applyToReadyMs = 0;
/** containerd's name for the kubegc image. */
let kubegcRef = '';
let deleted = false;

const kubectl = kubectlOf(() => cluster);

async function controllerPods(): Promise<k8s.V1Pod[]> {
  const list = await core.listNamespacedPod({
    namespace: NS,
    labelSelector: 'app.kubernetes.io/name=kubegc,app.kubernetes.io/component=controller',
  });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** The pod whose replica holds the Lease (the identity is `<hostname>_<uuid>`; hostname = pod name). */
async function leaderPod(): Promise<string | undefined> {
  const lease = await coordination
    .readNamespacedLease({ name: 'kubegc', namespace: NS })
    .catch(() => undefined);
  const holder = lease?.spec?.holderIdentity;
  if (!holder) return undefined;
  return (await controllerPods()).find((p) => holder.startsWith(`${p.metadata?.name}_`))?.metadata
    ?.name;
}

/** DELETEs in the audit log, by object name, for one namespace. */
function auditDeletes(namespace: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const files = [`${cluster.auditLog}.1`, cluster.auditLog as string];
  for (const f of files) {
    let text = '';
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (!line.includes('"delete"') || !line.includes(namespace)) continue;
      const e = JSON.parse(line) as {
        verb: string;
        stage: string;
        user: { username: string };
        objectRef?: { namespace?: string; name?: string };
        responseStatus?: { code?: number };
      };
      if (e.verb !== 'delete' || e.stage !== 'ResponseComplete') continue;
      if (e.objectRef?.namespace !== namespace || !e.objectRef.name) continue;
      if ((e.responseStatus?.code ?? 0) >= 300) continue;
      const users = out.get(e.objectRef.name) ?? [];
      users.push(e.user.username);
      out.set(e.objectRef.name, users);
    }
  }
  return out;
}

/** An owner ConfigMap with `n` dependents, then the owner deleted: returns when all are gone. */
async function cascade(prefix: string, n: number): Promise<string> {
  const ns = await testNamespace(core, prefix);
  const owner = await configMap(c, ns, 'owner');
  await times(n, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
  await core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
  await waitFor(
    `the in-cluster kubegc to collect ${n} dependents`,
    async () => (await configMapNames(c, ns)).filter((x) => x.startsWith('dep-')).length === 0,
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  return ns;
}

beforeAll(async () => {
  cluster = await up({ dir: DIR, audit: true, log });
  node = await upNode(cluster, { log });
  kubegcRef = await pushKubegcImage(node, log);
  c = clients(cluster);
  core = c.core;
  coordination = c.kc.makeApiClient(k8s.CoordinationV1Api);

  const started = Date.now();
  await kubectl('apply', '-k', OVERLAY);
  await waitFor(
    'both controller replicas to be Ready',
    async () => {
      const pods = await controllerPods();
      return pods.length === 2 && pods.every(podReady);
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  applyToReadyMs = Date.now() - started;
  log(
    `kubectl apply -k → both controller replicas Ready in ${(applyToReadyMs / 1000).toFixed(1)}s`,
  );
}, 1_800_000);

afterAll(async () => {
  // The node GC's log, for a failed run (kept with the cluster's other logs).
  if (cluster && !deleted)
    await kubectl('logs', '-n', NS, 'ds/kubegc-node', '--tail=200')
      .then((text) => fs.writeFile(path.join(DIR, 'logs', 'kubegc-node-pod.log'), text))
      .catch(() => undefined);
  if (cluster && !deleted) await kubectl('delete', '-k', OVERLAY, '--wait=false').catch(() => '');
  await downNode(DIR, log).catch((err: unknown) => log(`node teardown: ${String(err)}`));
  await down(DIR);
}, 300_000);

test('kubectl apply -k: both controller replicas Ready, one holds the Lease', async () => {
  expect(applyToReadyMs).toBeGreaterThan(0);
  const pods = await controllerPods();
  expect(pods.map((p) => p.spec?.nodeName)).toEqual(['kubegc-node', 'kubegc-node']);
  const leader = await waitFor('a replica to hold the Lease', leaderPod);
  expect(pods.map((p) => p.metadata?.name)).toContain(leader);
});

test('a cascade of 300 objects is collected by the in-cluster kubegc, as its own service account, under the guardrails', async () => {
  // The guardrails are in force for that account: an owner-less object cannot be deleted as it.
  const probeNs = await testNamespace(core, 'in-cluster-guardrails');
  await configMap(c, probeNs, 'owner-less');
  const refused = await kubectl(
    'delete',
    'configmap',
    'owner-less',
    '-n',
    probeNs,
    '--as',
    CONTROLLER_SA,
  ).catch((e: { stderr: string }) => e.stderr);
  expect(refused).toContain('kubegc-guardrails: DELETE of configmaps');
  const ns = await cascade('in-cluster', 300);
  const deletes = await waitFor('the audit log to show the deletes', () => {
    const d = auditDeletes(ns);
    return Promise.resolve(d.size >= 301 ? d : undefined);
  });
  for (let i = 0; i < 300; i++) expect(deletes.get(`dep-${i}`)).toEqual([CONTROLLER_SA]);
});

/** A token of a service account bound to the shipped kubegc-metrics-reader (made once). */
let readerToken: string | undefined;
let scraperNs: string | undefined;
async function metricsReaderToken(): Promise<string> {
  if (!readerToken) {
    scraperNs = await testNamespace(core, 'in-cluster-scraper');
    readerToken = await serviceAccountToken(c, scraperNs, 'scraper', ['kubegc-metrics-reader']);
  }
  return readerToken;
}

/** The ready addresses of a Service's `metrics` port, from its EndpointSlices (what a ServiceMonitor's `port: metrics` selects). */
async function metricsEndpoints(service: string): Promise<string[]> {
  const slices = await c.kc.makeApiClient(k8s.DiscoveryV1Api).listNamespacedEndpointSlice({
    namespace: NS,
    labelSelector: `kubernetes.io/service-name=${service}`,
  });
  return slices.items.flatMap((sl) => {
    const port = sl.ports?.find((p) => p.name === 'metrics')?.port;
    if (port === undefined) return [];
    return (sl.endpoints ?? []).flatMap((e) =>
      e.conditions?.ready === false ? [] : e.addresses.map((a) => `${a}:${port}`),
    );
  });
}

/**
 * A real Prometheus scraping each job's addresses as the shipped ServiceMonitors
 * (deploy/components/prometheus-operator) do: HTTPS, a bearer token bound to
 * kubegc-metrics-reader, the self-signed certificate not verified. Debian's
 * Prometheus (2.42) is built without Kubernetes service discovery: each job's
 * endpoints go into a file_sd targets file.
 */
async function scrapeKubegc(jobs: Record<string, string[]>): Promise<Prometheus> {
  const token = await metricsReaderToken();
  return startPrometheus(async (dir) => {
    await fs.writeFile(path.join(dir, 'token'), token);
    const configs: string[] = [];
    for (const [job, addrs] of Object.entries(jobs)) {
      const targets = path.join(dir, `${job}.targets.json`);
      await fs.writeFile(targets, JSON.stringify([{ targets: addrs, labels: {} }]));
      configs.push(`  - job_name: ${job}
    scheme: https
    authorization: { credentials_file: ${path.join(dir, 'token')} }
    tls_config: { insecure_skip_verify: true }
    file_sd_configs:
      - files: [${targets}]
`);
    }
    return `global: { scrape_interval: 2s }\nscrape_configs:\n${configs.join('')}`;
  });
}

test('a real Prometheus scrapes both replicas through the metrics Service, over HTTPS with a token bound to kubegc-metrics-reader, and sees the deletions', async () => {
  const addrs = await waitFor(
    'the metrics Service to have both replicas as endpoints',
    async () => {
      const a = await metricsEndpoints('kubegc-metrics');
      return a.length === 2 ? a : undefined;
    },
  );
  // Unauthenticated, the pods answer 401 (what the ServiceMonitor's token is for).
  expect((await httpsGet(addrs[0] ?? '', '/metrics')).status).toBe(401);
  const prom = await scrapeKubegc({ kubegc: addrs });
  const query = (q: string): Promise<number | undefined> => prom.query(q);
  try {
    // Both replicas are targets; the leader made the deletions of the cascade above.
    const scraped = await Promise.race([
      waitFor('Prometheus to scrape both replicas', async () => {
        const up = await query('count(up{job="kubegc"} == 1)').catch(() => undefined);
        return up === 2 ? up : undefined;
      }),
      prom.down,
    ]);
    expect(scraped).toBe(2);
    const deletions = await waitFor('Prometheus to see the deletions', async () => {
      const v = await query('sum(kubegc_deletions_total{dry_run="false"})').catch(() => undefined);
      return v !== undefined && v >= 300 ? v : undefined;
    });
    expect(deletions).toBeGreaterThanOrEqual(300);
  } finally {
    await prom.stop();
  }
});

test('the leader pod deleted: another replica takes over and collection continues', async () => {
  const leader = await waitFor('a leader', leaderPod);
  const standby = (await controllerPods()).find((p) => p.metadata?.name !== leader)?.metadata?.name;
  expect(standby).toBeDefined();
  await core.deleteNamespacedPod({ namespace: NS, name: leader });
  // The leader releases the Lease on SIGTERM; the warm standby and the
  // Deployment's replacement pod then both campaign, and either may win.
  const next = await waitFor(
    'another replica to hold the Lease',
    async () => {
      const now = await leaderPod();
      return now !== undefined && now !== leader ? now : undefined;
    },
    { timeoutMs: 120_000 },
  );
  log(`the Lease went to ${next === standby ? 'the standby' : 'the replacement pod'} (${next})`);
  const ns = await cascade('in-cluster-failover', 100);
  const deletes = auditDeletes(ns);
  for (let i = 0; i < 100; i++) expect(deletes.get(`dep-${i}`)).toEqual([CONTROLLER_SA]);
});

const usedPercent = async (): Promise<number> => {
  const s = await statFilesystem(CONTAINERD.root);
  return (100 * (s.capacityBytes - s.availableBytes)) / s.capacityBytes;
};

async function nodeGcPods(): Promise<k8s.V1Pod[]> {
  const pods = await core.listNamespacedPod({
    namespace: NS,
    labelSelector: 'app.kubernetes.io/name=kubegc-node',
  });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** The node GC pod's metrics endpoint (pod IP on the node bridge), one sample. */
async function nodeGcMetric(name: string, labels = ''): Promise<number> {
  const ip = (await nodeGcPods())[0]?.status?.podIP;
  if (!ip) throw new Error('no node GC pod IP');
  const answer = await httpsGet(`${ip}:8443`, '/metrics', await metricsReaderToken());
  if (answer.status !== 200) throw new Error(`node GC /metrics: ${answer.status} ${answer.body}`);
  const text = answer.body;
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{${labels}`) || (!labels && line.startsWith(`${name} `)))
      sum += Number(line.split(' ').pop());
  return sum;
}

test('the node GC DaemonSet: the image filesystem pushed past the high threshold is brought below the low one; images in use and the pause image stay', async () => {
  // The one change to what `apply -k` installed, for time only: image GC passes
  // (and container GC) every 15 s instead of every 5 minutes (1 minute). An image's age counts from the pass
  // that first detects it (as the kubelet's does), so with the default period
  // the 2-minute minimum age would keep this test waiting about 10 minutes.
  // And container passes every 5 s, so the next test does not wait a minute.
  await addNodeGcArgs(kubectl, NS, ['--image-gc-period=15s', '--container-gc-period=5s']);
  await kubectl('rollout', 'status', 'daemonset/kubegc-node', '-n', NS, '--timeout=120s');
  await waitFor(
    'the node GC pod to be Ready',
    async () => {
      const pods = await nodeGcPods();
      return pods.length === 1 && pods.every(podReady);
    },
    { timeoutMs: 120_000 },
  );
  // Two images in use by a running pod.
  const tools = hostToolsLayer(['/bin/sleep', '/bin/sh']);
  const apps = [1, 2].map((i) => ({
    name: `kubegc.test/app:${i}`,
    layers: [tools, randomLayer(8 << 20)],
    entrypoint: ['/bin/sleep', '3600'],
  }));
  await importNodeImages(apps);
  const ns = await testNamespace(core, 'node-gc');
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'apps' },
      spec: {
        containers: apps.map((a, i) => ({
          name: `app${i + 1}`,
          image: a.name,
          imagePullPolicy: 'Never',
        })),
      },
    },
  });
  await waitFor('the apps pod to run', async () =>
    podReady(await core.readNamespacedPod({ namespace: ns, name: 'apps' })),
  );

  // Unused images up to ~92% of the image filesystem (each costs its layer twice: content + snapshot).
  const fsNow = await statFilesystem(CONTAINERD.root);
  const need = 0.92 * fsNow.capacityBytes - (fsNow.capacityBytes - fsNow.availableBytes);
  const fillers = Array.from({ length: 4 }, (_, i) => ({
    name: `kubegc.test/filler:${i}`,
    layers: [randomLayer(Math.max(1 << 20, Math.floor(need / 8)))],
  }));
  await importNodeImages(fillers);
  const before = await usedPercent();
  log(`image filesystem ${before.toFixed(1)}% used after the fillers`);
  expect(before).toBeGreaterThan(85);
  const freedBefore = await nodeGcMetric('kubegc_node_image_bytes_freed_total');
  const availableBefore = (await statFilesystem(CONTAINERD.root)).availableBytes;

  // --image-minimum-gc-age=2m (deploy/node/daemonset.yaml): the fillers go once they are 2 minutes old.
  // The DaemonSet's image GC frees to its low threshold (70%), a pressure
  // reclaim (imagefs.available under 15% + 5%) to 25% available: either way below 75%.
  await waitFor('the image filesystem below 75% used', async () => (await usedPercent()) < 75, {
    timeoutMs: 360_000,
    intervalMs: 2000,
  });
  const images = await nodeImages();
  for (const kept of [...apps.map((a) => a.name), PAUSE_IMAGE, kubegcRef])
    expect(images).toContain(kept);
  expect(fillers.filter((f) => !images.includes(f.name)).length).toBeGreaterThan(0);
  // What kubegc reports freeing (statfs before and after each removal) is what the host saw.
  const freed = (await nodeGcMetric('kubegc_node_image_bytes_freed_total')) - freedBefore;
  const seen = (await statFilesystem(CONTAINERD.root)).availableBytes - availableBefore;
  log(`node GC reported ${freed} bytes freed; statfs on the host: ${seen}`);
  expect(freed).toBeGreaterThan(0.8 * seen);
  expect(freed).toBeLessThan(1.2 * seen);
}, 600_000);

test("the node GC DaemonSet: its container GC passes run against the node (pods listed as its service account, CRI), and a deleted pod's dead container and logs go", async () => {
  const ns = await testNamespace(core, 'node-gc-dead');
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'once' },
      spec: {
        restartPolicy: 'Never',
        containers: [
          {
            name: 'once',
            image: 'kubegc.test/app:1',
            imagePullPolicy: 'Never',
            command: ['/bin/sh', '-c', 'echo done'],
          },
        ],
      },
    },
  });
  const pod = await waitFor('the pod to succeed', async () => {
    const p = await core.readNamespacedPod({ namespace: ns, name: 'once' });
    return p.status?.phase === 'Succeeded' ? p : undefined;
  });
  const uid = pod.metadata?.uid ?? '';
  const logDir = path.join('/var/log/pods', `${ns}_once_${uid}`);
  const containersOfPod = async (): Promise<string[]> => {
    const { stdout } = await run('ctr', [
      '--address',
      CONTAINERD.socket,
      '-n',
      'k8s.io',
      'containers',
      'ls',
      '-q',
      `labels."io.kubernetes.pod.uid"==${uid}`,
    ]);
    return stdout.split('\n').filter(Boolean);
  };
  expect((await containersOfPod()).length).toBeGreaterThan(0);
  expect(existsSync(logDir)).toBe(true);
  const passBefore = await nodeGcMetric(
    'kubegc_node_gc_last_success_timestamp_seconds',
    'gc="container"',
  );
  await core.deleteNamespacedPod({ namespace: ns, name: 'once', gracePeriodSeconds: 0 });
  await waitFor(
    "the pod's containers and log directory to be removed",
    async () => (await containersOfPod()).length === 0 && !existsSync(logDir),
    { timeoutMs: 180_000, intervalMs: 1000 },
  );
  // On a real node the kubelet itself removes a deleted pod's dead containers
  // within about a second (its PLEG sees the sandbox stop) and its log
  // directory within a minute, so which of the two removed them is not
  // asserted here: kubegc removing them where nothing else does is
  // test/e2e/node-containers.test.ts. What only kubegc does is asserted: its
  // container GC passes keep succeeding on this node after the deletion.
  await waitFor(
    "a successful kubegc container GC pass after the pod's deletion",
    async () =>
      (await nodeGcMetric('kubegc_node_gc_last_success_timestamp_seconds', 'gc="container"')) >
      passBefore,
    { timeoutMs: 60_000 },
  );
}, 300_000);

test('every query of the Grafana dashboard returns series from a real Prometheus scraping both controller replicas and the node GC, around a cascade, an orphaning and node GC passes', async () => {
  // The Services' endpoints now: after the failover above, one replica is a new pod.
  const controllers = await waitFor('the metrics Service to have both replicas', async () => {
    const a = await metricsEndpoints('kubegc-metrics');
    return a.length === 2 ? a : undefined;
  });
  const nodes = await waitFor('the node GC metrics Service to have its pod', async () => {
    const a = await metricsEndpoints('kubegc-node-metrics');
    return a.length === 1 ? a : undefined;
  });
  const prom = await scrapeKubegc({ kubegc: controllers, 'kubegc-node': nodes });
  try {
    await Promise.race([
      waitFor('Prometheus to scrape both replicas and the node GC', async () => {
        const up = await prom.query('count(up == 1)').catch(() => undefined);
        return up === 3 ? up : undefined;
      }),
      prom.down,
    ]);
    // Collections while Prometheus scrapes: a cascade, and an owner deleted
    // with Orphan (kubegc_orphanings_total has no series before the first
    // orphaning). Image and container GC passes run every 15 s and 5 s
    // since the node GC tests above, and its removals' counters exist since then.
    await cascade('in-cluster-dashboard', 20);
    const ns = await testNamespace(core, 'in-cluster-dashboard-orphan');
    const owner = await configMap(c, ns, 'owner');
    await configMap(c, ns, 'dep', [ownerRef(owner)]);
    await core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'owner',
      propagationPolicy: 'Orphan',
    });
    await waitFor(
      'the dependent to be orphaned and the owner gone',
      async () => {
        const dep = await core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
        const names = await configMapNames(c, ns);
        return (dep.metadata?.ownerReferences ?? []).length === 0 && !names.includes('owner');
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    // rate() and increase() need two samples in their window: poll with a deadline.
    let failures: string[] = [];
    await waitFor(
      'every dashboard query to return series',
      async () => {
        failures = await checkDashboardQueries(prom);
        return failures.length === 0;
      },
      { timeoutMs: 90_000, intervalMs: 2000 },
    ).catch(() => undefined);
    expect(failures).toEqual([]);
  } finally {
    await prom.stop();
  }
}, 300_000);

test('kubectl delete -k leaves nothing behind', async () => {
  // The test's own scraper binding first: it is not part of what apply -k installed.
  if (scraperNs) await deleteBindings(c, scraperNs);
  await kubectl('delete', '-k', OVERLAY, '--wait=true', '--timeout=180s');
  deleted = true;
  await expectNothingLeft();
});

/** The namespace gone, no kubegc cluster-scoped object and no pod of it left. */
async function expectNothingLeft(): Promise<void> {
  await waitFor(
    `namespace ${NS} to be gone`,
    async () => !(await core.listNamespace()).items.some((n) => n.metadata?.name === NS),
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  const left = await kubectl(
    'get',
    'clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings',
    '-o',
    'name',
  );
  expect(left.split('\n').filter((l) => l.includes('kubegc'))).toEqual([]);
  const pods = await core.listPodForAllNamespaces();
  expect(pods.items.filter((p) => p.metadata?.namespace === NS)).toEqual([]);
}

// ---------------------------------------------------------------------------
// The Helm path: the chart packaged, pushed to the node's registry as an OCI
// artifact and installed from oci://, as an operator installs it. Runs after
// `kubectl delete -k`, on the same node and image.

const CHART = path.join(REPO_ROOT, 'charts', 'kubegc');
const CHART_VERSION = '0.1.0';
let helmHome: string | undefined;

/** helm with this control plane's kubeconfig and a home of its own (no ~/.config/helm). */
async function helm(...args: string[]): Promise<string> {
  helmHome ??= await fs.mkdtemp(path.join(DIR, 'helm-home-'));
  const home = helmHome;
  const { stdout } = await run(await helmBinary(), [...args, '--kubeconfig', cluster.kubeconfig], {
    maxBuffer: 64 * 1024 * 1024,
    env: {
      ...process.env,
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
    },
  });
  return stdout;
}

/** The release and its chart in the node's registry, as install and upgrade name them. */
const fromRegistry = (): string[] => [
  'kubegc',
  `oci://${node.registry}/charts/kubegc`,
  '--version',
  CHART_VERSION,
  '--ca-file',
  node.registryCa,
  '--namespace',
  NS,
];

const controllerArgs = async (): Promise<string[][]> =>
  (await controllerPods()).map((p) => p.spec?.containers[0]?.args ?? []);

test('helm install oci:// from the registry: the chart pushed as an OCI artifact, both replicas Ready with the pulled image, a cascade collected by its service account under the guardrails', async () => {
  expect(deleted).toBe(true);
  const out = await fs.mkdtemp(path.join(DIR, 'chart-'));
  await helm('package', CHART, '--destination', out);
  const pushed = await helm(
    'push',
    path.join(out, `kubegc-${CHART_VERSION}.tgz`),
    `oci://${node.registry}/charts`,
    '--ca-file',
    node.registryCa,
  );
  log(`helm push: ${pushed.trim().replace(/\n/g, '; ')}`);
  expect(await registryCatalog(node.registryCa)).toEqual(
    expect.arrayContaining(['charts/kubegc', 'kubegc']),
  );

  const started = Date.now();
  await helm(
    'install',
    ...fromRegistry(),
    '--create-namespace',
    // What a user's values set: the image, and the guardrails (as the kustomize overlay).
    '--set',
    `image.repository=${node.registry}/kubegc`,
    '--set',
    'image.tag=dev',
    '--set',
    'guardrails.enabled=true',
    '--wait',
    '--timeout',
    '300s',
  );
  const pods = await waitFor(
    'both controller replicas of the release to be Ready',
    async () => {
      const p = await controllerPods();
      return p.length === 2 && p.every(podReady) ? p : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  log(
    `helm install → both controller replicas Ready in ${((Date.now() - started) / 1000).toFixed(1)}s`,
  );
  for (const p of pods) expect(p.spec?.containers[0]?.image).toBe(`${node.registry}/kubegc:dev`);
  await waitFor('a replica of the release to hold the Lease', leaderPod, { timeoutMs: 120_000 });
  expect(await helm('status', 'kubegc', '-n', NS)).toContain('STATUS: deployed');

  const ns = await cascade('helm', 100);
  const deletes = await waitFor('the audit log to show the deletes', () => {
    const d = auditDeletes(ns);
    return Promise.resolve(d.size >= 101 ? d : undefined);
  });
  for (let i = 0; i < 100; i++) expect(deletes.get(`dep-${i}`)).toEqual([CONTROLLER_SA]);
}, 600_000);

test('helm upgrade with changed values rolls the controller; helm uninstall (and the namespace helm was told to create) leaves nothing behind', async () => {
  const before = new Set((await controllerPods()).map((p) => p.metadata?.name));
  expect(before.size).toBe(2);
  await helm(
    'upgrade',
    ...fromRegistry(),
    '--reuse-values',
    '--set',
    'controller.extraArgs={--log-level=debug}',
    '--wait',
    '--timeout',
    '300s',
  );
  await kubectl('rollout', 'status', 'deployment/kubegc-controller', '-n', NS, '--timeout=180s');
  const rolled = await waitFor(
    'two Ready replicas, all new, with the changed value',
    async () => {
      const p = await controllerPods();
      const ok =
        p.length === 2 &&
        p.every(podReady) &&
        p.every((x) => !before.has(x.metadata?.name)) &&
        p.every((x) => x.spec?.containers[0]?.args?.includes('--log-level=debug'));
      return ok ? p : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  expect(rolled).toHaveLength(2);
  expect((await controllerArgs()).every((a) => a.includes('--log-level=debug'))).toBe(true);
  // Revision 2 is the upgrade, and the one deployed.
  expect(await helm('history', 'kubegc', '-n', NS)).toMatch(
    /^2\s.*\sdeployed\s.*Upgrade complete/m,
  );
  // Still collecting after the roll.
  await cascade('helm-upgraded', 20);

  await helm('uninstall', 'kubegc', '--namespace', NS, '--wait', '--timeout', '180s');
  // --create-namespace made the namespace; helm does not own it (its release
  // record lives there), so deleting it is the operator's last step.
  await kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
  await expectNothingLeft();
}, 600_000);
