// Is collection keeping up, and what is stuck? The collection SLIs read
// through the HTTPS metrics port as a reader would, and the DeletionBlocked
// events, against the real API server: a cascade (lag observed once per
// collected object), and stuck deletions built for real, each cleared by
// removing its blocker: a Foreground owner held by a dependent with a foreign
// finalizer, a blocking dependent whose delete RBAC refuses, and an Orphan
// deletion held while RBAC refuses the watch of one resource.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';
import { KubeClient, loadKubeConfig } from '../../src/api/client.ts';
import { discover } from '../../src/api/discovery.ts';
import type { Report, StuckDeletion } from '../../src/doctor/analyze.ts';
import { parsePrometheusText } from '../../src/doctor/gc-metrics.ts';
import { waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import {
  deleteBindings,
  httpsGet,
  metricsReaderToken,
  serviceAccountToken,
} from '../support/metrics-access.ts';
import {
  configMap,
  configMapNames,
  isGone,
  ownerRef,
  read,
  secret,
  times,
} from '../support/objects.ts';
import { mintServiceAccountKubeconfig } from '../support/service-account.ts';
import { addresses, kubegcController, type KubegcProcess } from '../support/kubegc.ts';

const fixture = await e2e();
const { cluster, c, namespace } = fixture;
const readerToken = await metricsReaderToken(fixture, 'slis-reader');

// ---- reading /metrics --------------------------------------------------------

/** The metrics as the kubegc-metrics-reader role reads them, over HTTPS. */
async function scrape(
  gc: KubegcProcess,
): Promise<(name: string, labels?: Record<string, string>) => number> {
  const answer = await httpsGet(addresses(gc).metrics, '/metrics', readerToken);
  if (answer.status !== 200) throw new Error(`GET /metrics: ${answer.status} ${answer.body}`);
  const samples = parsePrometheusText(answer.body);
  return (name, labels = {}) =>
    samples
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((sum, s) => sum + s.value, 0);
}

async function blockedEvent(ns: string, uid: string): Promise<k8s.EventsV1Event[]> {
  const events = c.kc.makeApiClient(k8s.EventsV1Api);
  return (await events.listNamespacedEvent({ namespace: ns })).items.filter(
    (e) => e.reason === 'DeletionBlocked' && e.regarding?.uid === uid,
  );
}

/** `kubegc doctor -n NS -o json` (exit 1: findings) and its stuck deletion of `uid`. */
async function doctorStuck(ns: string, uid: string): Promise<StuckDeletion | undefined> {
  const out = await promisify(execFile)(
    process.execPath,
    kubegcArgv(['doctor', '--kubeconfig', cluster.kubeconfig, '-n', ns, '-o', 'json']),
  ).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );
  expect(out.code).toBe(1);
  const report = JSON.parse(out.stdout) as Report;
  return report.findings.find(
    (f): f is StuckDeletion => f.kind === 'stuck-deletion' && f.object.uid === uid,
  );
}

// ---- a service account with kubegc's permissions minus some ---------------------

/**
 * A service account with kubegc's ClusterRole (list, watch, patch, delete on
 * everything; events) except the verbs `without` on core `secrets`, plus what
 * the metrics port's delegated authentication needs. RBAC cannot subtract, so
 * core resources are named one by one and every other group granted whole.
 */
async function restrictedKubeconfig(
  ns: string,
  name: string,
  without: string[],
): Promise<{
  kubeconfig: string;
  grant(): Promise<void>;
}> {
  const admin = await KubeClient.create(await loadKubeConfig(cluster.kubeconfig), {
    userAgent: 'kubegc-e2e-slis',
  });
  let d;
  try {
    d = await discover(admin);
  } finally {
    admin.close();
  }
  const core = [
    ...new Set(
      d.all.filter((r) => r.group === '' && !r.resource.includes('/')).map((r) => r.resource),
    ),
  ];
  const groups = [...new Set(d.all.filter((r) => r.group !== '').map((r) => r.group))];
  const verbs = ['list', 'watch', 'patch', 'delete'];
  const rules = (withSecrets: boolean): k8s.V1PolicyRule[] => [
    { apiGroups: groups, resources: ['*'], verbs },
    { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: [''], resources: core.filter((r) => r !== 'secrets'), verbs },
    {
      apiGroups: [''],
      resources: ['secrets'],
      verbs: withSecrets ? verbs : verbs.filter((v) => !without.includes(v)),
    },
  ];
  const role = `${ns}-${name}`;
  await c.rbac.createClusterRole({ body: { metadata: { name: role }, rules: rules(false) } });
  afterFile(async () => {
    await c.rbac.deleteClusterRole({ name: role });
  });
  afterFile(() => deleteBindings(c, ns));
  await serviceAccountToken(c, ns, name, [role, 'system:auth-delegator']);
  const kubeconfig = await mintServiceAccountKubeconfig(cluster, { namespace: ns, name });
  return {
    kubeconfig,
    async grant() {
      await c.rbac.replaceClusterRole({
        name: role,
        body: { metadata: { name: role }, rules: rules(true) },
      });
    },
  };
}

// ---- tests -------------------------------------------------------------------

test('collection lag during a cascade: one observation per object collected, nothing left pending', async () => {
  const ns = await namespace('slis-lag');
  const gc = await kubegcController(cluster);
  const before = await scrape(gc);
  const deleted = (m: typeof before): number => m('kubegc_deletions_total', { dry_run: 'false' });
  const lagCount = (m: typeof before): number => m('kubegc_collection_lag_seconds_count');

  const background = await configMap(c, ns, 'background');
  await times(40, (i) => configMap(c, ns, `bg-${i}`, [ownerRef(background)]));
  const foreground = await configMap(c, ns, 'foreground');
  await times(10, (i) =>
    configMap(c, ns, `fg-${i}`, [ownerRef(foreground, { blockOwnerDeletion: true })]),
  );
  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'background' });
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'foreground',
    propagationPolicy: 'Foreground',
  });
  await waitFor('both cascades', async () => (await configMapNames(c, ns)).length === 0, {
    timeoutMs: 90_000,
  });
  // The lag is observed when the informers see each deletion, after the request counted it.
  const after = await waitFor('a lag observation for every deletion', async () => {
    const m = await scrape(gc);
    return lagCount(m) - lagCount(before) === deleted(m) - deleted(before) &&
      m('kubegc_pending_collections') === 0
      ? m
      : undefined;
  });
  expect(deleted(after) - deleted(before)).toBeGreaterThanOrEqual(50);
  expect(after('kubegc_collection_lag_seconds_sum')).toBeGreaterThan(
    before('kubegc_collection_lag_seconds_sum'),
  );
  // Every object collected here was collected within the histogram's range.
  expect(after('kubegc_collection_lag_seconds_bucket', { le: '+Inf' })).toBe(lagCount(after));
  expect(after('kubegc_oldest_pending_collection_seconds')).toBe(0);
  await gc.stop();
});

test('a Foreground owner held by a blocking dependent with a foreign finalizer: the gauge by reason, one DeletionBlocked event naming the dependent and its finalizer, cleared when the finalizer goes', async () => {
  const ns = await namespace('slis-held');
  const gc = await kubegcController(cluster, ['--blocked-deletion-event-after', '5s']);
  const owner = await configMap(c, ns, 'owner');
  const held = await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: {
        name: 'held',
        finalizers: ['kubegc.test/hold'],
        ownerReferences: [ownerRef(owner, { blockOwnerDeletion: true })],
      },
    },
  });
  // The test removes the finalizer itself when it passes.
  afterFile(async () => {
    await c.core
      .patchNamespacedConfigMap({
        namespace: ns,
        name: 'held',
        body: [{ op: 'remove', path: '/metadata/finalizers' }],
      })
      .catch(() => undefined);
  });
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Foreground',
  });
  await waitFor('kubegc to delete the held dependent', async () =>
    Boolean(
      (await c.core.readNamespacedConfigMap({ namespace: ns, name: 'held' })).metadata
        ?.deletionTimestamp,
    ),
  );
  const reason = { reason: 'dependent-finalizer' };
  const event = await waitFor(
    'a DeletionBlocked event on the owner',
    async () => (await blockedEvent(ns, owner.uid))[0],
  );
  expect(event).toMatchObject({ type: 'Warning', reportingController: 'kubegc' });
  expect(event.note).toContain(`ConfigMap ${ns}/held (uid ${held.metadata?.uid})`);
  expect(event.note).toContain('kubegc.test/hold');
  expect(event.note).toContain('(dependent-finalizer)');
  const during = await scrape(gc);
  expect(during('kubegc_blocked_deletions', reason)).toBeGreaterThanOrEqual(1);
  expect(during('kubegc_oldest_blocked_deletion_seconds', reason)).toBeGreaterThanOrEqual(5);
  // The owner is still there, as is its dependent: nothing was collected around the blocker.
  expect(await read(c, owner)).toBeDefined();

  await c.core.patchNamespacedConfigMap({
    namespace: ns,
    name: 'held',
    body: [{ op: 'remove', path: '/metadata/finalizers' }],
  });
  await waitFor('the owner to finish deleting', () => isGone(c, owner));
  await waitFor('the gauge to clear', async () => {
    const m = await scrape(gc);
    return m('kubegc_blocked_deletions', reason) === during('kubegc_blocked_deletions', reason) - 1;
  });
  // Told once, not on every sweep.
  expect(await blockedEvent(ns, owner.uid)).toHaveLength(1);
  await gc.stop();
});

test('a blocking dependent whose delete RBAC refuses: dependent-undeletable with the 403 named, cleared when the dependent is deleted by hand', async () => {
  const ns = await namespace('slis-rbac');
  const sa = await restrictedKubeconfig(ns, 'gc-nodelete', ['delete']);
  const gc = await kubegcController(cluster, ['--blocked-deletion-event-after', '5s'], {
    kubeconfig: sa.kubeconfig, // kubegc's permissions minus delete on secrets
  });
  const owner = await configMap(c, ns, 'owner');
  const dep = await secret(c, ns, 'dep', [ownerRef(owner, { blockOwnerDeletion: true })]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Foreground',
  });
  const reason = { reason: 'dependent-undeletable' };
  const event = await waitFor(
    'a DeletionBlocked event on the owner',
    async () => (await blockedEvent(ns, owner.uid))[0],
  );
  expect(event.note).toContain(`Secret ${ns}/dep (uid ${dep.uid}) cannot be deleted`);
  expect(event.note).toContain('403');
  const during = await scrape(gc);
  expect(during('kubegc_blocked_deletions', reason)).toBeGreaterThanOrEqual(1);
  expect(await read(c, owner)).toBeDefined();
  expect(await read(c, dep)).toBeDefined();
  // doctor, from the cluster alone, names the same blocker: the Secret nobody could delete.
  const stuck = await doctorStuck(ns, owner.uid);
  expect(stuck?.gcFinalizers).toEqual(['foregroundDeletion']);
  expect(stuck?.blockers[0]?.state).toBe('not-deleted');
  expect(stuck?.chain.at(-1)?.uid).toBe(dep.uid);

  await c.core.deleteNamespacedSecret({ namespace: ns, name: 'dep' });
  await waitFor('the owner to finish deleting', () => isGone(c, owner));
  await waitFor('the gauge to clear', async () => {
    const m = await scrape(gc);
    return m('kubegc_blocked_deletions', reason) === during('kubegc_blocked_deletions', reason) - 1;
  });
  await gc.stop();
});

test('an Orphan deletion held while RBAC refuses the watch of secrets: orphan-waiting-for-watches naming them, cleared once the watch is allowed', async () => {
  const ns = await namespace('slis-orphan');
  const sa = await restrictedKubeconfig(ns, 'gc-nowatch', ['list', 'watch']);
  const gc = await kubegcController(
    cluster,
    ['--blocked-deletion-event-after', '5s', '--orphan-watch-timeout', '10m'],
    { kubeconfig: sa.kubeconfig }, // kubegc's permissions minus list and watch on secrets
  );
  const owner = await configMap(c, ns, 'owner');
  const dep = await configMap(c, ns, 'dep', [ownerRef(owner)]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Orphan',
  });
  const reason = { reason: 'orphan-waiting-for-watches' };
  const event = await waitFor(
    'a DeletionBlocked event on the owner',
    async () => (await blockedEvent(ns, owner.uid))[0],
  );
  expect(event.note).toContain('secrets');
  expect(event.note).toContain('(orphan-waiting-for-watches)');
  const during = await scrape(gc);
  expect(during('kubegc_blocked_deletions', reason)).toBeGreaterThanOrEqual(1);
  const live = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
  expect(live.metadata?.ownerReferences?.map((r) => r.uid)).toEqual([owner.uid]);
  const stuck = await doctorStuck(ns, owner.uid);
  expect(stuck?.gcFinalizers).toEqual(['orphan']);
  expect(stuck?.dependents).toBe(1);

  await sa.grant();
  await waitFor('the owner to finish deleting', () => isGone(c, owner), { timeoutMs: 90_000 });
  const orphaned = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
  expect(orphaned.metadata?.uid).toBe(dep.uid);
  expect(orphaned.metadata?.ownerReferences ?? []).toEqual([]);
  await waitFor('the gauge to clear', async () => {
    const m = await scrape(gc);
    return m('kubegc_blocked_deletions', reason) === during('kubegc_blocked_deletions', reason) - 1;
  });
  await gc.stop();
});
