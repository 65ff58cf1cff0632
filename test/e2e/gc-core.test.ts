// kubegc controller against the real control plane: background cascading
// deletion and the owner classifications of section 3 of the reference.
// One kubegc process serves the whole file; each test has its own namespace.
import { randomUUID } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { exists, staysTrue, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { kubegcController, type LogLine } from '../support/kubegc.ts';
import {
  configMap,
  configMapNames,
  isGone,
  ownerRef,
  pod,
  read,
  secret,
  times,
  type Ref,
  deploymentBody,
} from '../support/objects.ts';

const { cluster, c, namespace } = await e2e();
const gc = await kubegcController(cluster);

// Objects that must never be collected, created first so the last test can
// check them after a full minute of kubegc running.
let unservedNs: string;
let unservedDependent: Ref;
let clusterScopedDependent: Ref;
let keptSince: number;

beforeAll(async () => {
  unservedNs = await namespace('gc-unserved');
  unservedDependent = await configMap(c, unservedNs, 'dependent-of-unserved-kind', [
    ownerRef({ apiVersion: 'example.kubegc.io/v1', kind: 'Widget', name: 'w', uid: randomUUID() }),
  ]);
  const cr = await c.rbac.createClusterRole({
    body: {
      metadata: {
        name: `kubegc-e2e-cluster-dependent-${Date.now()}`,
        ownerReferences: [
          ownerRef({ apiVersion: 'v1', kind: 'ConfigMap', name: 'nope', uid: randomUUID() }),
        ],
      },
    },
  });
  clusterScopedDependent = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    name: cr.metadata?.name ?? '',
    uid: cr.metadata?.uid ?? '',
  };
  keptSince = Date.now();
});

test('a ConfigMap owner with 200 dependents (ConfigMaps, Secrets, bare Pods): Background delete collects all', async () => {
  const ns = await namespace('gc-fanout');
  const owner = await configMap(c, ns, 'owner');
  const dependents = await times(200, (i) => {
    const make = [configMap, secret, pod][i % 3] ?? configMap;
    return make(c, ns, `dep-${i}`, [ownerRef(owner)]);
  });
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  await waitFor(
    'all 200 dependents to be collected',
    async () => {
      const left = await Promise.all([
        c.core.listNamespacedConfigMap({ namespace: ns }),
        c.core.listNamespacedSecret({ namespace: ns }),
        c.core.listNamespacedPod({ namespace: ns }),
      ]);
      const names = left
        .flatMap((l) => l.items.map((i) => i.metadata?.name ?? ''))
        .filter((n) => n.startsWith('dep-'));
      return names.length === 0 ? true : undefined;
    },
    { timeoutMs: 120_000 },
  );
  const deletedByKubegc = (lines: LogLine[]): Ref[] => {
    const uids = new Set(lines.filter((l) => l.msg === 'deleted').map((l) => l.uid));
    return dependents.filter((d) => !uids.has(d.uid));
  };
  await gc
    .waitForLines('a "deleted" line for every dependent', (l) => deletedByKubegc(l).length === 0)
    .catch(() => undefined);
  expect(deletedByKubegc(gc.lines)).toEqual([]);
});

test('a Deployment deleted with Background: its ReplicaSet and Pods are collected', async () => {
  const ns = await namespace('gc-deploy');
  const d = await c.apps.createNamespacedDeployment({
    namespace: ns,
    body: deploymentBody('web', 3),
  });
  await waitFor('the ReplicaSet and 3 Pods', async () => {
    const [rs, pods] = await Promise.all([
      c.apps.listNamespacedReplicaSet({ namespace: ns }),
      c.core.listNamespacedPod({ namespace: ns }),
    ]);
    return rs.items.length === 1 && pods.items.length === 3;
  });
  await c.apps.deleteNamespacedDeployment({
    namespace: ns,
    name: 'web',
    propagationPolicy: 'Background',
  });
  await waitFor('the ReplicaSet and Pods to be collected', async () => {
    const [rs, pods] = await Promise.all([
      c.apps.listNamespacedReplicaSet({ namespace: ns }),
      c.core.listNamespacedPod({ namespace: ns }),
    ]);
    return rs.items.length === 0 && pods.items.length === 0;
  });
  await gc.waitForLog(
    'kubegc to report deleting the ReplicaSet',
    (l) => l.msg === 'deleted' && l.resource === 'replicasets.apps' && l.namespace === ns,
    15_000,
  );
  expect(d.metadata?.uid).toBeDefined();
});

test('a dependent whose owner UID never existed is deleted', async () => {
  const ns = await namespace('gc-never');
  const dep = await configMap(c, ns, 'dep', [
    ownerRef({ apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: randomUUID() }),
  ]);
  await waitFor('the dependent to be deleted', () => isGone(c, dep));
});

test('an owner recreated under the same name: dependents of the old UID go, those of the new UID stay', async () => {
  const ns = await namespace('gc-recreate');
  const first = await configMap(c, ns, 'owner');
  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
  await waitFor('the first owner to be gone', () => isGone(c, first));
  const second = await configMap(c, ns, 'owner');
  expect(second.uid).not.toBe(first.uid);
  const oldDep = await configMap(c, ns, 'dep-of-old', [ownerRef(first)]);
  const newDep = await configMap(c, ns, 'dep-of-new', [ownerRef(second)]);
  await waitFor('the dependent of the old UID to be deleted', () => isGone(c, oldDep));
  await staysTrue(
    'the dependent of the new UID to exist',
    async () => !(await isGone(c, newDep)),
    3000,
  );
  await gc.waitForLog(
    'kubegc to report deleting the dependent of the old UID',
    (l) => l.msg === 'deleted' && l.uid === oldDep.uid,
    15_000,
  );
});

test('a dependent with two owners, one deleted: it survives with only the live owner reference', async () => {
  const ns = await namespace('gc-two-owners');
  const a = await configMap(c, ns, 'owner-a');
  const b = await configMap(c, ns, 'owner-b');
  const dep = await configMap(c, ns, 'dep', [
    ownerRef(a),
    ownerRef(b, { controller: true, blockOwnerDeletion: true }),
  ]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner-a',
    propagationPolicy: 'Background',
  });
  const refs = await waitFor('the reference to the deleted owner to be removed', async () => {
    const cm = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
    const r = cm.metadata?.ownerReferences ?? [];
    return r.length === 1 ? r : undefined;
  });
  expect(refs).toEqual([
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'owner-b',
      uid: b.uid,
      controller: true,
      blockOwnerDeletion: true,
    },
  ]);
  expect(await isGone(c, dep)).toBe(false);
});

test('a cluster-scoped owner (ClusterRole) with namespaced dependents: the cascade works', async () => {
  const ns = await namespace('gc-cluster-owner');
  const cr = await c.rbac.createClusterRole({
    body: { metadata: { name: `kubegc-e2e-owner-${Date.now()}` } },
  });
  const owner: Ref = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    name: cr.metadata?.name ?? '',
    uid: cr.metadata?.uid ?? '',
  };
  const deps = await times(5, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
  await c.rbac.deleteClusterRole({ name: owner.name, propagationPolicy: 'Background' });
  await waitFor(
    'the namespaced dependents of the ClusterRole to be collected',
    async () => (await configMapNames(c, ns)).length === 0,
  );
  expect(deps).toHaveLength(5);
});

test('an unserved owner kind keeps its dependent (logged), and a cluster-scoped dependent of a namespaced kind is never collected', async () => {
  await gc.waitForLog(
    'the unresolvable kind',
    (l) => l.msg === 'cannot decide yet' && String(l.error).includes('Widget'),
  );
  await gc.waitForLog(
    'the invalid cluster-scoped dependent',
    (l) => l.msg === 'not collecting object' && l.uid === clusterScopedDependent.uid,
  );
  // The user is told why, on the object itself.
  const events = c.kc.makeApiClient(k8s.EventsV1Api);
  const event = await waitFor('an OwnerRefUnresolvable event on the kept dependent', async () =>
    (await events.listNamespacedEvent({ namespace: unservedNs })).items.find(
      (e) => e.reason === 'OwnerRefUnresolvable' && e.regarding?.uid === unservedDependent.uid,
    ),
  );
  expect(event.note).toContain('Widget');
  const remaining = Math.max(0, 60_000 - (Date.now() - keptSince));
  await staysTrue(
    'both objects to exist',
    async () => !(await isGone(c, unservedDependent)) && !(await isGone(c, clusterScopedDependent)),
    remaining,
    2000,
  );
  expect(await read(c, unservedDependent)).toBeDefined();
  await c.rbac.deleteClusterRole({ name: clusterScopedDependent.name });
  expect(await exists(() => c.core.readNamespace({ name: unservedNs }))).toBe(true);
});
