// Operating kubegc: the deploy/ manifests and their RBAC, leader election
// between two replicas, a real Prometheus scraping /metrics, /debug/graph and
// `kubegc explain`, all against the real control plane.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import { waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import {
  applyMetricsReaderRoles,
  deleteBindings,
  httpsGet,
  serviceAccountToken,
} from '../support/metrics-access.ts';
import { startPrometheus } from '../support/prometheus.ts';
import { serviceAccountKubeconfig } from '../support/service-account.ts';
import { selfSignedCert } from '../support/tls.ts';
import { addresses, runKubegc, startController, type KubegcProcess } from '../support/kubegc.ts';
import { configMap, deploymentBody, configMapNames, ownerRef, times } from '../support/objects.ts';

const execFileAsync = promisify(execFile);

const { cluster, c, namespace } = await e2e();

async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(
    cluster.kubectl,
    ['--kubeconfig', cluster.kubeconfig, ...args],
    { cwd: REPO_ROOT },
  );
  return stdout;
}

async function kubegcCli(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [
      '--disable-warning=ExperimentalWarning',
      path.join(REPO_ROOT, 'src', 'cli.ts'),
      ...args,
    ]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('deploy/: server dry run, real apply, and RBAC that grants the GC what it needs and no more', async () => {
  // Server-side dry run of namespaced objects needs their namespace to exist.
  await kubectl('apply', '-f', 'deploy/namespace.yaml');
  const dry = await kubectl('apply', '-k', 'deploy/', '--dry-run=server');
  // "created" on a fresh cluster, "unchanged"/"configured" when the e2e cluster is reused.
  expect(dry).toMatch(
    /deployment\.apps\/kubegc-controller (created|unchanged|configured) \(server dry run\)/,
  );
  const applied = await kubectl('apply', '-k', 'deploy/');
  for (const obj of [
    'serviceaccount/kubegc-controller',
    'clusterrole.rbac.authorization.k8s.io/kubegc-controller',
    'clusterrolebinding.rbac.authorization.k8s.io/kubegc-controller',
    'role.rbac.authorization.k8s.io/kubegc-controller-leader-election',
    'deployment.apps/kubegc-controller',
    'service/kubegc-metrics',
    'daemonset.apps/kubegc-node',
  ]) {
    expect(applied).toMatch(
      new RegExp(`${obj.replace(/[.]/g, '\\.')} (created|unchanged|configured)`),
    );
  }
  const d = await c.apps.readNamespacedDeployment({
    namespace: 'kubegc-system',
    name: 'kubegc-controller',
  });
  expect(d.spec?.replicas).toBe(2);
  const container = d.spec?.template.spec?.containers[0];
  expect(container?.image).toBe('ghcr.io/kubegc/kubegc:0.1.0');
  expect(container?.securityContext).toMatchObject({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
  });
  expect(d.spec?.template.spec?.securityContext?.runAsNonRoot).toBe(true);

  const sa = 'system:serviceaccount:kubegc-system:kubegc-controller';
  const can = async (...args: string[]): Promise<string> =>
    (
      await kubectl('auth', 'can-i', '--as', sa, ...args).catch((e: { stdout: string }) => e.stdout)
    ).trim();
  for (const verb of ['list', 'watch', 'delete', 'patch']) {
    expect(await can(verb, 'pods', '-A')).toBe('yes');
    expect(await can(verb, 'replicasets.apps', '-A')).toBe('yes');
    expect(await can(verb, 'widgets.example.com', '-A')).toBe('yes');
  }
  // No `get` (live reads are LISTs of one name), so none on the kubelet's API or logs.
  expect(await can('get', 'pods', '-A')).toBe('no');
  expect(await can('get', 'nodes', '--subresource=proxy')).toBe('no');
  expect(await can('get', 'pods', '--subresource=log', '-A')).toBe('no');
  expect(await can('get', 'pods', '--subresource=exec', '-A')).toBe('no');
  expect(await can('create', 'events.events.k8s.io', '-n', 'default')).toBe('yes');
  expect(await can('update', 'leases.coordination.k8s.io', '-n', 'kubegc-system')).toBe('yes');
  // And no more: it never creates or updates workloads, nor takes leases elsewhere.
  expect(await can('create', 'pods', '-n', 'default')).toBe('no');
  expect(await can('update', 'deployments.apps', '-n', 'default')).toBe('no');
  expect(await can('update', 'leases.coordination.k8s.io', '-n', 'default')).toBe('no');
  expect(await can('create', 'secrets', '-n', 'default')).toBe('no');
  // The metrics port's delegated authentication and authorization.
  expect(await can('create', 'tokenreviews.authentication.k8s.io')).toBe('yes');
  expect(await can('create', 'subjectaccessreviews.authorization.k8s.io')).toBe('yes');
  const nodeSa = 'system:serviceaccount:kubegc-system:kubegc-node';
  const nodeCan = async (...args: string[]): Promise<string> =>
    (
      await kubectl('auth', 'can-i', '--as', nodeSa, ...args).catch(
        (e: { stdout: string }) => e.stdout,
      )
    ).trim();
  expect(await nodeCan('list', 'pods', '-A')).toBe('yes');
  expect(await nodeCan('create', 'tokenreviews.authentication.k8s.io')).toBe('yes');
  for (const verb of ['get', 'watch', 'delete', 'patch'])
    expect(await nodeCan(verb, 'pods', '-A')).toBe('no');
  expect(await nodeCan('get', 'secrets', '-A')).toBe('no');
  // Images expected back: the workload of an image about to go is read by name, never listed or watched.
  for (const workload of [
    'jobs.batch',
    'cronjobs.batch',
    'replicasets.apps',
    'deployments.apps',
    'statefulsets.apps',
    'daemonsets.apps',
  ]) {
    expect(await nodeCan('get', workload, '-A')).toBe('yes');
    for (const verb of ['list', 'watch', 'update', 'delete'])
      expect(await nodeCan(verb, workload, '-A')).toBe('no');
  }
  expect(await nodeCan('get', 'replicationcontrollers', '-A')).toBe('no');
  // Events about its Node live in default: created there, nowhere else, never patched.
  expect(await nodeCan('create', 'events.events.k8s.io', '-n', 'default')).toBe('yes');
  expect(await nodeCan('create', 'events.events.k8s.io', '-n', 'kube-system')).toBe('no');
  expect(await nodeCan('patch', 'events.events.k8s.io', '-n', 'default')).toBe('no');
  expect(await nodeCan('create', 'events', '-n', 'default')).toBe('no');

  // Every optional component renders and passes the API server's validation.
  const components = await kubectl(
    'apply',
    '-k',
    'test/e2e/components-overlay',
    '--dry-run=server',
  );
  for (const obj of [
    'networkpolicy.networking.k8s.io/kubegc-metrics',
    'deployment.apps/kubegc-controller',
    'clusterrole.rbac.authorization.k8s.io/kubegc-metrics-reader',
    'validatingadmissionpolicy.admissionregistration.k8s.io/kubegc-guardrails',
    'validatingadmissionpolicybinding.admissionregistration.k8s.io/kubegc-guardrails',
    'validatingadmissionpolicy.admissionregistration.k8s.io/kubegc-node-guardrails',
    'validatingadmissionpolicybinding.admissionregistration.k8s.io/kubegc-node-guardrails',
  ])
    expect(components).toContain(obj);
});

test('leader election: exactly one of two replicas deletes; SIGKILL the leader and the other finishes the cascade', async () => {
  const ns = await namespace('op-leader');
  // As shipped: kubegc's service account, its Lease in kubegc-system (the only
  // namespace its Role grants), under a name of this test's own.
  const leaseRef = { namespace: 'kubegc-system', name: ns };
  const lease = [
    '--leader-elect',
    '--leader-elect-resource-namespace',
    leaseRef.namespace,
    '--leader-elect-resource-name',
    leaseRef.name,
    '--leader-elect-lease-duration',
    '4s',
    '--leader-elect-renew-deadline',
    '3s',
    '--leader-elect-retry-period',
    '500ms',
  ];
  const common = [
    'controller',
    '--kubeconfig',
    await serviceAccountKubeconfig(cluster),
    '--metrics-bind-address',
    '127.0.0.1:0',
    '--health-probe-bind-address',
    '127.0.0.1:0',
    ...lease,
  ];
  // A slow leader (client limited to 20 requests/s) so the cascade is still running when it dies.
  const a = runKubegc([...common, '--kube-api-qps', '20', '--kube-api-burst', '1']);
  await a.waitForLog('replica A to lead', (l) => l.msg === 'became leader');
  const b = runKubegc(common);
  try {
    await b.waitForLog(
      'replica B to sync its graph',
      (l) => l.msg === 'waiting to acquire the leader lease',
    );
    const owner = await configMap(c, ns, 'owner');
    await times(300, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]), 40);
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    await waitFor(
      'the leader to start collecting',
      async () => a.lines.some((l) => l.msg === 'deleted' && l.namespace === ns),
      { intervalMs: 50 },
    );
    expect(b.lines.some((l) => l.msg === 'became leader')).toBe(false);
    expect(b.lines.filter((l) => l.msg === 'deleted')).toEqual([]);
    const leases = c.kc.makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api);
    const held = (await leases.readNamespacedLease(leaseRef)) as k8s.V1Lease;
    // A renewal A made before the kill; its real last one may be later, never earlier.
    const renewedAt = new Date(held.spec?.renewTime ?? 0).getTime();
    expect(renewedAt).toBeGreaterThan(0);
    await a.kill();
    const left = (await configMapNames(c, ns)).length;
    expect(left).toBeGreaterThan(0);
    const took = await b.waitForLog(
      'replica B to take over',
      (l) => l.msg === 'became leader',
      30_000,
    );
    // Never two leaders: B takes the lease only once A's last renewal has expired
    // (lease duration 4s; renewTime has microsecond precision, hence the 5 ms).
    expect(Date.parse(String(took.ts))).toBeGreaterThanOrEqual(renewedAt + 4000 - 5);
    await waitFor(
      'replica B to finish the cascade',
      async () => (await configMapNames(c, ns)).length === 0,
      { timeoutMs: 60_000 },
    );
    await b.waitForLog(
      'replica B to report a deletion',
      (l) => l.msg === 'deleted' && l.namespace === ns,
      15_000,
    );
    // SIGTERM releases the lease.
    await b.stop();
    const l = (await leases.readNamespacedLease(leaseRef)) as k8s.V1Lease;
    expect(l.spec?.holderIdentity ?? '').toBe('');
  } finally {
    await a.kill();
    await b.kill();
    await c.kc
      .makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api)
      .deleteNamespacedLease(leaseRef)
      .catch(() => undefined);
  }
});

test('a real Prometheus scrapes kubegc over HTTPS with a token bound to kubegc-metrics-reader during a cascade; without a token or the role it is refused', async () => {
  const ns = await namespace('op-prometheus');
  await applyMetricsReaderRoles(cluster);
  const readerToken = await serviceAccountToken(c, ns, 'scraper', ['kubegc-metrics-reader']);
  const nobodyToken = await serviceAccountToken(c, ns, 'nobody');
  // A certificate from files, so that Prometheus verifies it (ca_file) instead of skipping.
  const pki = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-op-tls-'));
  const { key, cert } = selfSignedCert(['127.0.0.1']);
  await fs.writeFile(path.join(pki, 'tls.key'), key);
  await fs.writeFile(path.join(pki, 'tls.crt'), cert);
  const gc = await startController(cluster, [
    '--tls-cert-file',
    path.join(pki, 'tls.crt'),
    '--tls-private-key-file',
    path.join(pki, 'tls.key'),
  ]);
  const target = addresses(gc).metrics;
  expect(addresses(gc).scheme).toBe('https');
  const prom = await startPrometheus(async (dir) => {
    await fs.writeFile(path.join(dir, 'reader.token'), readerToken);
    await fs.writeFile(path.join(dir, 'nobody.token'), nobodyToken);
    await fs.writeFile(path.join(dir, 'ca.crt'), cert);
    const job = (name: string, auth: string): string => `  - job_name: ${name}
    scheme: https
    tls_config: { ca_file: ${path.join(dir, 'ca.crt')} }
${auth}    static_configs: [{ targets: ['${target}'] }]
`;
    return `global: { scrape_interval: 1s }
scrape_configs:
${job('kubegc', `    authorization: { credentials_file: ${path.join(dir, 'reader.token')} }\n`)}${job('kubegc-no-token', '')}${job('kubegc-no-role', `    authorization: { credentials_file: ${path.join(dir, 'nobody.token')} }\n`)}`;
  });
  const query = (q: string): Promise<number | undefined> => prom.query(q);
  try {
    const addsQuery = 'workqueue_adds_total{name="garbage_collector_attempt_to_delete"}';
    await Promise.race([
      waitFor(
        'Prometheus to scrape kubegc',
        () => query('up{job="kubegc"} == 1').catch(() => undefined),
        { timeoutMs: 60_000 },
      ),
      prom.down,
    ]);
    // No series until the queue's first add: on a cluster with nothing leaked
    // the initial sync queues nothing (bulk verification), so none may exist yet.
    const before = (await query(addsQuery)) ?? 0;

    const owner = await configMap(c, ns, 'owner');
    await times(50, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    await waitFor('the cascade', async () => (await configMapNames(c, ns)).length === 0);
    const deletedConfigMaps = (): number =>
      gc.lines.filter((l) => l.msg === 'deleted' && l.resource === 'configmaps').length;
    const scraped = await waitFor('Prometheus to see every deletion', async () => {
      const v = await query('sum(kubegc_deletions_total{resource="configmaps",dry_run="false"})');
      return v === deletedConfigMaps() ? v : undefined;
    });
    expect(scraped).toBeGreaterThanOrEqual(50);
    expect(await query(addsQuery)).toBeGreaterThanOrEqual(before + 50);
    expect(await query('kubegc_leader')).toBe(1);
    expect(await query('kubegc_graph_nodes')).toBeGreaterThan(0);
    // The same Prometheus without a token, or with one lacking the role, gets nothing.
    for (const job of ['kubegc-no-token', 'kubegc-no-role'])
      expect(
        await waitFor(`Prometheus to record the ${job} scrapes as failed`, () =>
          query(`max_over_time(up{job="${job}"}[1m]) == 0`).then((v) =>
            v === 0 ? 'down' : undefined,
          ),
        ),
      ).toBe('down');
    // What those scrapes were answered, and /debug/graph needs a role of its own.
    expect((await httpsGet(target, '/metrics', undefined, cert.toString())).status).toBe(401);
    expect((await httpsGet(target, '/metrics', 'not-a-token', cert.toString())).status).toBe(401);
    expect((await httpsGet(target, '/metrics', nobodyToken, cert.toString())).status).toBe(403);
    expect((await httpsGet(target, '/debug/graph', readerToken, cert.toString())).status).toBe(403);
    expect((await httpsGet(target, '/nothing-here', nobodyToken, cert.toString())).status).toBe(
      403,
    );
  } finally {
    await prom.stop();
    await gc.stop();
    await deleteBindings(c, ns);
    await fs.rm(pki, { recursive: true, force: true });
  }
});

test('/debug/graph and kubegc explain: a Deployment tree, and an owner stuck in foreground deletion', async () => {
  const ns = await namespace('op-explain');
  await applyMetricsReaderRoles(cluster);
  const debugToken = await serviceAccountToken(c, ns, 'debugger', ['kubegc-debug-reader']);
  const gc: KubegcProcess = await startController(cluster);
  const debugGraph = async (query: string): Promise<{ status: number; body: string }> =>
    httpsGet(addresses(gc).metrics, `/debug/graph${query}`, debugToken);
  try {
    const d = await c.apps.createNamespacedDeployment({
      namespace: ns,
      body: deploymentBody('web', 2),
    });
    const [rs, pods] = await waitFor('the ReplicaSet and 2 Pods', async () => {
      const [r, p] = await Promise.all([
        c.apps.listNamespacedReplicaSet({ namespace: ns }),
        c.core.listNamespacedPod({ namespace: ns }),
      ]);
      return r.items.length === 1 && p.items.length === 2
        ? ([r.items[0], p.items] as const)
        : undefined;
    });
    const rsUid = rs?.metadata?.uid ?? '';
    expect((await debugGraph('?format=json')).status).toBe(200);
    expect((await httpsGet(addresses(gc).metrics, '/debug/graph')).status).toBe(401);
    const view = await waitFor('the tree in the debug graph', async () => {
      const v = JSON.parse((await debugGraph(`?format=json&uid=${rsUid}`)).body) as {
        nodes: { uid: string; kind: string }[];
        edges: { owner: string; dependent: string }[];
      };
      return v.nodes.length === 4 ? v : undefined;
    });
    expect(view.nodes.map((n) => n.kind).sort()).toEqual([
      'Deployment',
      'Pod',
      'Pod',
      'ReplicaSet',
    ]);
    expect(view.edges).toContainEqual(
      expect.objectContaining({ owner: d.metadata?.uid, dependent: rsUid }),
    );
    const dot = (await debugGraph(`?uid=${rsUid}`)).body;
    expect(dot).toMatch(/^digraph full \{/);
    expect(dot).toContain(`"${rsUid}" -> "${d.metadata?.uid ?? ''}"`);
    expect((await debugGraph('?uid=nope')).status).toBe(404);

    const tree = await kubegcCli(
      'explain',
      'deploy/web',
      '-n',
      ns,
      '--kubeconfig',
      cluster.kubeconfig,
    );
    expect(tree.code).toBe(0);
    expect(tree.stdout).toContain(`Deployment ${ns}/web`);
    expect(tree.stdout).toContain(`ReplicaSet ${ns}/${rs?.metadata?.name ?? ''}`);
    for (const p of pods) expect(tree.stdout).toContain(`Pod ${ns}/${p.metadata?.name ?? ''}`);
    const json = JSON.parse(
      (
        await kubegcCli(
          'explain',
          `pod/${pods[0]?.metadata?.name ?? ''}`,
          '-n',
          ns,
          '-o',
          'json',
          '--kubeconfig',
          cluster.kubeconfig,
        )
      ).stdout,
    ) as {
      owners: {
        kind: string;
        state: string;
        object?: { kind: string; owners: { kind: string }[] };
      }[];
    };
    expect(json.owners[0]).toMatchObject({
      kind: 'ReplicaSet',
      state: 'solid',
      object: { kind: 'ReplicaSet', owners: [{ kind: 'Deployment' }] },
    });

    // An owner stuck in foreground deletion behind a dependent with an extra finalizer.
    const owner = await configMap(c, ns, 'stuck-owner');
    await c.core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'holder',
          finalizers: ['e2e.kubegc.io/hold'],
          ownerReferences: [ownerRef(owner, { blockOwnerDeletion: true })],
        },
      },
    });
    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'stuck-owner',
      propagationPolicy: 'Foreground',
    });
    await waitFor(
      'the holder to be marked for deletion',
      async () =>
        (await c.core.readNamespacedConfigMap({ namespace: ns, name: 'holder' })).metadata
          ?.deletionTimestamp !== undefined,
    );
    const stuck = await kubegcCli(
      'explain',
      'configmap/stuck-owner',
      '-n',
      ns,
      '--kubeconfig',
      cluster.kubeconfig,
    );
    expect(stuck.stdout).toMatch(
      /waiting for 1 blocking dependent: ConfigMap holder \(finalizers: e2e\.kubegc\.io\/hold\)/,
    );
    await c.core.patchNamespacedConfigMap({
      namespace: ns,
      name: 'holder',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });

    const missing = await kubegcCli(
      'explain',
      'configmap/none',
      '-n',
      ns,
      '--kubeconfig',
      cluster.kubeconfig,
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not found');
  } finally {
    await gc.stop();
  }
});
