// Foreground and orphan deletion, cycles, invalid cross-namespace references
// and the legacy Orphan defaults, against the real control plane
// (sections 2-4 of the reference). One kubegc serves the file.
import type * as k8s from '@kubernetes/client-node';
import { recordDeletions, staysTrue, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { kubegcController } from '../support/kubegc.ts';
import {
  configMap,
  collectBlockingCycle,
  configMapNames,
  isGone,
  ownerRef,
  pod,
  read,
  times,
  type Ref,
  deploymentBody,
} from '../support/objects.ts';

const HOLD = 'e2e.kubegc.io/hold';

const { cluster, c, namespace } = await e2e();
await kubegcController(cluster);

async function heldConfigMap(
  ns: string,
  name: string,
  owners: k8s.V1OwnerReference[],
): Promise<Ref> {
  const cm = await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name, finalizers: [HOLD], ownerReferences: owners } },
  });
  return { apiVersion: 'v1', kind: 'ConfigMap', name, uid: cm.metadata?.uid ?? '', namespace: ns };
}

async function release(ns: string, name: string): Promise<void> {
  await c.core.patchNamespacedConfigMap({
    namespace: ns,
    name,
    body: [{ op: 'remove', path: '/metadata/finalizers' }],
  });
}

async function finalizersOf(
  ns: string,
  name: string,
): Promise<{ finalizers: string[]; deleting: boolean } | undefined> {
  try {
    const cm = await c.core.readNamespacedConfigMap({ namespace: ns, name });
    return {
      finalizers: cm.metadata?.finalizers ?? [],
      deleting: cm.metadata?.deletionTimestamp !== undefined,
    };
  } catch {
    return undefined;
  }
}

test('Foreground: the owner waits (with deletionTimestamp) for its last blocking dependent, then goes', async () => {
  const ns = await namespace('fin-foreground');
  const rec = await recordDeletions(c.kc, [`/api/v1/namespaces/${ns}/configmaps`]);
  try {
    const owner = await configMap(c, ns, 'owner');
    await times(49, (i) =>
      configMap(c, ns, `dep-${i}`, [ownerRef(owner, { blockOwnerDeletion: true })]),
    );
    const held = await heldConfigMap(ns, 'held', [ownerRef(owner, { blockOwnerDeletion: true })]);
    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'owner',
      propagationPolicy: 'Foreground',
    });
    await waitFor(
      'the 49 free dependents to be gone',
      async () => (await configMapNames(c, ns)).filter((n) => n.startsWith('dep-')).length === 0,
    );
    await waitFor(
      'the held dependent to be marked for deletion',
      async () => (await finalizersOf(ns, 'held'))?.deleting === true,
    );
    // The test holds the last blocking dependent for 5 s: the owner must wait.
    await staysTrue(
      'the owner to exist, being deleted, while a blocking dependent remains',
      async () => {
        const o = await finalizersOf(ns, 'owner');
        return o !== undefined && o.deleting && o.finalizers.includes('foregroundDeletion');
      },
      5000,
    );
    await release(ns, 'held');
    await waitFor('the owner to be gone', () => isGone(c, owner));
    await waitFor(
      'both DELETED events',
      async () => rec.deleted.has(owner.uid) && rec.deleted.has(held.uid),
    );
    expect(rec.deleted.get(held.uid)).toBeLessThan(rec.deleted.get(owner.uid) ?? 0);
  } finally {
    rec.stop();
  }
});

test('Foreground through three levels: Deployment → ReplicaSet → Pods all go, the Deployment last', async () => {
  const ns = await namespace('fin-three-levels');
  const rec = await recordDeletions(c.kc, [
    `/apis/apps/v1/namespaces/${ns}/deployments`,
    `/apis/apps/v1/namespaces/${ns}/replicasets`,
    `/api/v1/namespaces/${ns}/pods`,
  ]);
  try {
    const d = await c.apps.createNamespacedDeployment({
      namespace: ns,
      body: deploymentBody('fg', 3),
    });
    const [rs, pods] = await waitFor('the ReplicaSet and 3 Pods', async () => {
      const [r, p] = await Promise.all([
        c.apps.listNamespacedReplicaSet({ namespace: ns }),
        c.core.listNamespacedPod({ namespace: ns }),
      ]);
      return r.items.length === 1 && p.items.length === 3
        ? ([r.items, p.items] as const)
        : undefined;
    });
    await c.apps.deleteNamespacedDeployment({
      namespace: ns,
      name: 'fg',
      propagationPolicy: 'Foreground',
    });
    const uids = [...rs, ...pods].map((o) => o.metadata?.uid ?? '');
    const deployUid = d.metadata?.uid ?? '';
    await waitFor(
      'every DELETED event',
      async () => rec.deleted.has(deployUid) && uids.every((u) => rec.deleted.has(u)),
      { timeoutMs: 90_000 },
    );
    const last = rec.deleted.get(deployUid) ?? 0;
    for (const u of uids) expect(rec.deleted.get(u)).toBeLessThan(last);
  } finally {
    rec.stop();
  }
});

test('non-blocking references do not hold an owner in foreground deletion', async () => {
  const ns = await namespace('fin-nonblocking');
  const owner = await configMap(c, ns, 'owner');
  await times(5, (i) =>
    configMap(c, ns, `dep-${i}`, [ownerRef(owner, { blockOwnerDeletion: false })]),
  );
  await heldConfigMap(ns, 'held', [ownerRef(owner)]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Foreground',
  });
  await waitFor('the owner to be gone', () => isGone(c, owner));
  // The held dependent still exists: it did not hold the owner.
  expect((await finalizersOf(ns, 'held'))?.finalizers).toContain(HOLD);
  await waitFor('the free dependents to be collected too', async () =>
    (await configMapNames(c, ns)).every((n) => n === 'held'),
  );
  await release(ns, 'held');
});

test('Orphan: 100 dependents survive with only that reference removed, and the owner goes', async () => {
  const ns = await namespace('fin-orphan');
  const owner = await configMap(c, ns, 'owner');
  const other = await configMap(c, ns, 'other');
  await times(100, (i) =>
    c.core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: `dep-${i}`,
          labels: { keep: 'me' },
          ownerReferences: [ownerRef(owner, { blockOwnerDeletion: true }), ownerRef(other)],
        },
        data: { i: String(i) },
      },
    }),
  );
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Orphan',
  });
  await waitFor('the owner to be gone', () => isGone(c, owner));
  const check = async (): Promise<boolean> => {
    const list = await c.core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'keep=me' });
    return (
      list.items.length === 100 &&
      list.items.every(
        (cm) =>
          cm.metadata?.ownerReferences?.length === 1 &&
          cm.metadata.ownerReferences[0]?.uid === other.uid &&
          cm.data?.i === cm.metadata.name?.slice('dep-'.length),
      )
    );
  };
  await waitFor('every dependent to keep only the other reference', check);
  await staysTrue('all 100 dependents to exist, unchanged', check, 30_000, 3000);
});

test('a dependent with a solid owner and an owner in foreground deletion survives with only the solid reference', async () => {
  const ns = await namespace('fin-solid-waiting');
  const solid = await configMap(c, ns, 'solid');
  const waiting = await configMap(c, ns, 'waiting');
  await configMap(c, ns, 'dep', [ownerRef(solid), ownerRef(waiting, { blockOwnerDeletion: true })]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'waiting',
    propagationPolicy: 'Foreground',
  });
  await waitFor('the owner in foreground deletion to be gone', () => isGone(c, waiting));
  const dep = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
  expect(dep.metadata?.deletionTimestamp).toBeUndefined();
  expect(dep.metadata?.ownerReferences?.map((r) => r.uid)).toEqual([solid.uid]);
});

test('a cycle of three blocking references is collected when one member is deleted with Foreground', async () => {
  const ns = await namespace('fin-cycle');
  await collectBlockingCycle(c, ns);
});

test('pods in a blocking cycle are collected too', async () => {
  const ns = await namespace('fin-pod-cycle');
  const p1 = await pod(c, ns, 'p1');
  const p2 = await pod(c, ns, 'p2', [ownerRef(p1, { blockOwnerDeletion: true })]);
  const p3 = await pod(c, ns, 'p3', [ownerRef(p2, { blockOwnerDeletion: true })]);
  await c.core.patchNamespacedPod({
    namespace: ns,
    name: 'p1',
    body: [
      {
        op: 'add',
        path: '/metadata/ownerReferences',
        value: [ownerRef(p3, { blockOwnerDeletion: true })],
      },
    ],
  });
  await c.core.deleteNamespacedPod({ namespace: ns, name: 'p2', propagationPolicy: 'Foreground' });
  await waitFor(
    'the three pods to be gone',
    async () => (await c.core.listNamespacedPod({ namespace: ns })).items.length === 0,
    { timeoutMs: 90_000 },
  );
});

test('repeated Foreground deletes of an object with another finalizer never leave foregroundDeletion behind', async () => {
  const ns = await namespace('fin-double');
  await heldConfigMap(ns, 'x', []);
  for (let round = 1; round <= 2; round++) {
    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'x',
      propagationPolicy: 'Foreground',
    });
    await waitFor(
      `round ${round}: foregroundDeletion removed, the other finalizer kept`,
      async () => {
        const f = await finalizersOf(ns, 'x');
        return f?.deleting === true && f.finalizers.length === 1 && f.finalizers[0] === HOLD;
      },
    );
  }
  await release(ns, 'x');
  await waitFor(
    'x to be gone once released',
    async () => (await finalizersOf(ns, 'x')) === undefined,
  );
});

test('an invalid cross-namespace reference counts as absent (with an OwnerRefInvalidNamespace event); a same-namespace one is kept', async () => {
  const nsOwner = await namespace('fin-xns-owner');
  const ns = await namespace('fin-xns');
  const elsewhere = await configMap(c, nsOwner, 'owner');
  const here = await configMap(c, ns, 'owner-here');
  const invalid = await configMap(c, ns, 'invalid', [ownerRef(elsewhere)]);
  const valid = await configMap(c, ns, 'valid', [ownerRef(here)]);
  await waitFor('the dependent with the cross-namespace reference to be collected', () =>
    isGone(c, invalid),
  );
  const event = await waitFor('the OwnerRefInvalidNamespace event', async () => {
    const events = await c.kc
      .makeApiClient((await import('@kubernetes/client-node')).EventsV1Api)
      .listNamespacedEvent({ namespace: ns });
    return events.items.find(
      (e) => e.reason === 'OwnerRefInvalidNamespace' && e.regarding?.uid === invalid.uid,
    );
  });
  expect(event).toMatchObject({ type: 'Warning', reportingController: 'kubegc' });
  expect(event.note).toContain(`does not exist in namespace "${ns}"`);
  expect(await read(c, valid)).toBeDefined();
  expect(await read(c, elsewhere)).toBeDefined();
});

test('ReplicationController and Job deleted without a policy orphan their Pods', async () => {
  const ns = await namespace('fin-legacy');
  const labels = { app: 'legacy' };
  const rc = await c.core.createNamespacedReplicationController({
    namespace: ns,
    body: {
      metadata: { name: 'rc' },
      spec: {
        replicas: 2,
        selector: labels,
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] },
        },
      },
    },
  });
  const batch = c.kc.makeApiClient((await import('@kubernetes/client-node')).BatchV1Api);
  const job = await batch.createNamespacedJob({
    namespace: ns,
    body: {
      metadata: { name: 'job' },
      spec: {
        parallelism: 2,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
          },
        },
      },
    },
  });
  const ownedBy = (p: k8s.V1Pod, uid: string | undefined): boolean =>
    p.metadata?.ownerReferences?.some((r) => r.uid === uid) ?? false;
  await waitFor('2 Pods of the RC and 2 of the Job', async () => {
    const pods = (await c.core.listNamespacedPod({ namespace: ns })).items;
    return (
      pods.filter((p) => ownedBy(p, rc.metadata?.uid)).length === 2 &&
      pods.filter((p) => ownedBy(p, job.metadata?.uid)).length === 2
    );
  });
  await c.core.deleteNamespacedReplicationController({ namespace: ns, name: 'rc' });
  await batch.deleteNamespacedJob({ namespace: ns, name: 'job' });
  await waitFor('the RC and the Job to be gone', async () => {
    const [rcs, jobs] = await Promise.all([
      c.core.listNamespacedReplicationController({ namespace: ns }),
      batch.listNamespacedJob({ namespace: ns }),
    ]);
    return rcs.items.length === 0 && jobs.items.length === 0;
  });
  const pods = (await c.core.listNamespacedPod({ namespace: ns })).items;
  expect(pods).toHaveLength(4);
  for (const p of pods) {
    expect(ownedBy(p, rc.metadata?.uid) || ownedBy(p, job.metadata?.uid)).toBe(false);
    expect(p.metadata?.deletionTimestamp).toBeUndefined();
  }
});

test('CronJob → Job → Pods deleted with Background: all collected', async () => {
  const ns = await namespace('fin-cronjob');
  const batch = c.kc.makeApiClient((await import('@kubernetes/client-node')).BatchV1Api);
  const template = {
    spec: {
      restartPolicy: 'Never',
      containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
  const cj = await batch.createNamespacedCronJob({
    namespace: ns,
    body: {
      metadata: { name: 'cj' },
      spec: { schedule: '0 0 1 1 *', suspend: true, jobTemplate: { spec: { template } } },
    },
  });
  // The Job the CronJob controller would make, made now instead of waiting for a schedule.
  const cjRef: Ref = {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    name: 'cj',
    uid: cj.metadata?.uid ?? '',
  };
  const job = await batch.createNamespacedJob({
    namespace: ns,
    body: {
      metadata: {
        name: 'cj-manual',
        ownerReferences: [ownerRef(cjRef, { controller: true, blockOwnerDeletion: true })],
      },
      spec: { parallelism: 2, template },
    },
  });
  await waitFor(
    'the Job to make 2 Pods',
    async () =>
      (await c.core.listNamespacedPod({ namespace: ns })).items.filter(
        (p) => p.metadata?.ownerReferences?.[0]?.uid === job.metadata?.uid,
      ).length === 2,
  );
  await batch.deleteNamespacedCronJob({
    namespace: ns,
    name: 'cj',
    propagationPolicy: 'Background',
  });
  await waitFor(
    'the Job and its Pods to be collected',
    async () => {
      const [jobs, pods] = await Promise.all([
        batch.listNamespacedJob({ namespace: ns }),
        c.core.listNamespacedPod({ namespace: ns }),
      ]);
      return jobs.items.length === 0 && pods.items.length === 0;
    },
    { timeoutMs: 90_000 },
  );
});
