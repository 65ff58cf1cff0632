// Races found in review (issue 10), forced against the real API server. The
// collector runs in this process so that the test can act at an exact point
// between kubegc's read and its write: its client's `intercept` hook runs right
// before a request goes on the wire, and there the test changes the object the
// way a concurrent controller or user would. Each test failed on the code
// before its fix.
import * as k8s from '@kubernetes/client-node';
import type { InterceptedRequest } from '../../src/api/request.ts';
import type { GraphEvent } from '../../src/graph/propagator.ts';
import { exists, statusOf, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { heldChain, inProcessGc } from '../support/in-process-gc.ts';
import {
  configMap,
  isGone,
  ownerRef,
  read,
  releaseConfigMap,
  type Ref,
} from '../support/objects.ts';

const { cluster, c, namespace } = await e2e();
const g = await inProcessGc(cluster, {
  userAgent: 'kubegc-e2e-races',
  // Watches end normally every 5-10 s, so that tests can meet a reconnect.
  gc: { informer: { minWatchTimeoutSec: 5 } },
});
const { gc, observed } = g;
/** An informer's initial list: a paginated LIST, or a watch-list (a watch with sendInitialEvents). */
const initialList = (r: InterceptedRequest): boolean =>
  r.verb === 'LIST' || (r.verb === 'WATCH' && r.query?.sendInitialEvents === true);

async function ownerUids(r: Ref): Promise<string[] | undefined> {
  const obj = await read(c, r);
  return obj?.metadata?.ownerReferences?.map((o) => o.uid);
}

/** Adds an owner reference to a ConfigMap, as a controller adopting it would. */
async function adopt(ns: string, name: string, owner: Ref): Promise<void> {
  const cm = await c.core.readNamespacedConfigMap({ name, namespace: ns });
  cm.metadata = {
    ...cm.metadata,
    ownerReferences: [...(cm.metadata?.ownerReferences ?? []), ownerRef(owner)],
  };
  await c.core.replaceNamespacedConfigMap({ name, namespace: ns, body: cm });
}

/** The collector has decided X again: it dropped A, or it started deleting X. */
async function xDecided(x: Ref, a: Ref): Promise<k8s.KubernetesObject | undefined> {
  return waitFor('kubegc to decide X', async () => {
    const obj = await read(c, x);
    if (!obj) return { gone: true } as k8s.KubernetesObject;
    const dropped = !obj.metadata?.ownerReferences?.some((r) => r.uid === a.uid);
    return obj.metadata?.deletionTimestamp || dropped ? obj : undefined;
  });
}

describe('item 1: the cycle breaker', () => {
  // Where the controller's change lands: before the unblock PATCH (the PATCH
  // gets a 409), or between the PATCH and the DELETE (the DELETE gets one).
  const RACES = [
    {
      when: 'before its unblock PATCH',
      method: 'PATCH',
      isTheWrite: (r: InterceptedRequest) =>
        JSON.stringify(r.body).includes('"blockOwnerDeletion":false'),
    },
    { when: 'between the unblock PATCH and the DELETE', method: 'DELETE', isTheWrite: () => true },
  ];
  test.each(RACES)(
    'a live owner added $when (409): X is decided again and kept',
    async ({ method, isTheWrite }) => {
      const ns = await namespace(`race-unblock-${method.toLowerCase()}`);
      const b = await configMap(c, ns, 'b');
      await observed(b);
      const { a, x } = await heldChain(c, g, ns);
      let raced = false;
      g.intercept = async (r) => {
        if (raced || r.method !== method || !r.path.endsWith(`/namespaces/${ns}/configmaps/x`))
          return;
        if (!isTheWrite(r)) return;
        raced = true;
        await adopt(ns, 'x', b);
      };
      await c.core.deleteNamespacedConfigMap({
        name: 'a',
        namespace: ns,
        body: { propagationPolicy: 'Foreground' },
      });

      const decided = await xDecided(x, a);
      expect(raced).toBe(true);
      expect(decided?.metadata?.deletionTimestamp).toBeUndefined();
      expect(await ownerUids(x)).toEqual([b.uid]);
      await releaseConfigMap(c, ns, 'z');
    },
  );
});

test('item 5: an owner switched from Foreground to Orphan that the graph still shows waiting: its dependent is orphaned, not deleted', async () => {
  const ns = await namespace('race-fg-orphan');
  const o = await configMap(c, ns, 'o');
  const d = await configMap(c, ns, 'd', [ownerRef(o, { blockOwnerDeletion: true })]);
  await observed(o, d);
  // The informer's lag, made explicit: from the switch on, O's events are held
  // back from the graph, which keeps showing O in foreground deletion.
  const held: GraphEvent[] = [];
  let holding = false;
  const push = gc.propagator.push.bind(gc.propagator);
  gc.propagator.push = (e: GraphEvent) => {
    if (holding && (e.type === 'upsert' || e.type === 'delete') && e.meta.uid === o.uid)
      held.push(e);
    else push(e);
  };
  // The first request kubegc makes about D or O after the Foreground DELETE:
  // before it leaves, a second DELETE switches O to Orphan (from then on the
  // API server shows the orphan finalizer).
  let switched: string | undefined;
  g.intercept = async (r) => {
    // A write names the object in its path; a live read is a LIST of its name.
    const about = [d, o].find(
      (x) =>
        r.path.endsWith(`/namespaces/${ns}/configmaps/${x.name}`) ||
        (r.path.endsWith(`/namespaces/${ns}/configmaps`) &&
          r.query?.fieldSelector === `metadata.name=${x.name}`),
    );
    if (switched || !about) return;
    switched = `${r.method} ${about.name}`;
    holding = true;
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Orphan' },
    });
    const now = await read(c, o);
    if (!now?.metadata?.finalizers?.includes('orphan'))
      throw new Error(`O does not show the orphan finalizer: ${JSON.stringify(now?.metadata)}`);
  };
  try {
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Foreground' },
    });
    await waitFor('kubegc to act on the Foreground DELETE', () => Promise.resolve(switched));
    // Nothing ready or in flight (other tests' leftovers may wait in backoff; they are not D).
    await g.decided();
    expect(gc.graph.get(o.uid)?.deletingDependents).toBe(true); // still stale: the race was on
    const dep = await read(c, d);
    expect(dep).toBeDefined();
    expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
  } finally {
    holding = false;
    gc.propagator.push = push;
    for (const e of held.splice(0)) push(e);
  }
  // With O's events through, kubegc orphans D and lets O go.
  await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 30_000 });
  await waitFor(
    'D to lose its reference to O',
    async () => ((await ownerUids(d)) ?? []).length === 0,
  );
});

/** A namespaced CRD with versions v1 (storage) and v2 (served or not), named uniquely for this run. */
async function twoVersionCrd(group: string, kindPrefix: string, v2Served: boolean) {
  const ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
  const custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
  const suffix = Date.now().toString(36);
  const plural = `${kindPrefix.toLowerCase()}s${suffix}`;
  const kind = `${kindPrefix}${suffix}`;
  const schema = {
    openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
  };
  const crdName = `${plural}.${group}`;
  await ext.createCustomResourceDefinition({
    body: {
      metadata: { name: crdName },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural, singular: plural, kind },
        versions: [
          { name: 'v1', served: true, storage: true, schema },
          { name: 'v2', served: v2Served, storage: false, schema },
        ],
      },
    },
  });
  return { ext, custom, group, plural, kind, crdName };
}

/** A custom resource "owner" (stored as v1) and a ConfigMap naming it in `refVersion`, both observed. */
async function ownerAndDependent(
  group: string,
  plural: string,
  kind: string,
  ns: string,
  refVersion: string,
): Promise<{ owner: Ref; d: Ref }> {
  const custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
  const created = (await custom.createNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural,
    body: { apiVersion: `${group}/v1`, kind, metadata: { name: 'owner' } },
  })) as k8s.KubernetesObject;
  const owner: Ref = {
    apiVersion: `${group}/${refVersion}`,
    kind,
    name: 'owner',
    uid: created.metadata?.uid ?? '',
    namespace: ns,
  };
  const d = await configMap(c, ns, 'dependent', [ownerRef(owner)]);
  await observed(owner, d);
  return { owner, d };
}

/** Runs discovery until kubegc watches `key` through `version` (and, with `synced`, has listed it). */
async function watchedThrough(key: string, version: string, synced: boolean): Promise<void> {
  await waitFor(`kubegc to watch ${key} through ${version}`, async () => {
    await gc.runDiscovery();
    const inf = gc.informers.get(key);
    return inf?.resource.version === version && (!synced || inf.synced);
  });
}

/** Serves v2 of a CRD made by twoVersionCrd (its preferred version from then on) and waits until the server does. */
async function serveV2(
  crd: { ext: k8s.ApiextensionsV1Api; crdName: string; group: string; kind: string },
  ns: string,
): Promise<void> {
  await crd.ext.patchCustomResourceDefinition(
    { name: crd.crdName, body: [{ op: 'replace', path: '/spec/versions/1/served', value: true }] },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  await waitFor('discovery to prefer v2', async () => {
    const g = await c.objects.list(`${crd.group}/v2`, crd.kind, ns).catch(() => undefined);
    return g !== undefined;
  });
}

// Issue 19 follow-up, found by the CI soak: O switched from Foreground to
// Orphan after kubegc read it (waiting) and before D's DELETE left. The DELETE
// is held before the wire (the intercept runs before the client's last check)
// until the graph has seen the switch, and the orphan worker's PATCH of D is
// held too, so that D's resourceVersion still matches the DELETE's
// precondition: before the fix, the DELETE went out and D was deleted.
test("an owner switched to Orphan between kubegc's read of it and its dependent's DELETE leaving: the DELETE is not sent, the dependent is orphaned", async () => {
  const ns = await namespace('race-fg-orphan-wire');
  const o = await configMap(c, ns, 'o');
  const d = await configMap(c, ns, 'd', [ownerRef(o, { blockOwnerDeletion: true })]);
  await observed(o, d);
  const dPath = `/api/v1/namespaces/${ns}/configmaps/d`;
  let deleteHeld = false;
  let releaseDelete: () => void = () => undefined;
  const deleteReleased = new Promise<void>((r) => (releaseDelete = r));
  let orphanPatchSeen = false;
  let releasePatch: () => void = () => undefined;
  const patchReleased = new Promise<void>((r) => (releasePatch = r));
  g.intercept = async (r) => {
    if (r.path !== dPath) return;
    if (r.method === 'DELETE' && !deleteHeld) {
      deleteHeld = true;
      await deleteReleased;
    } else if (r.method === 'PATCH' && !orphanPatchSeen) {
      orphanPatchSeen = true;
      await patchReleased;
    }
  };
  try {
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Foreground' },
    });
    await waitFor("kubegc's DELETE of D, decided on O read as waiting", () =>
      Promise.resolve(deleteHeld),
    );
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Orphan' },
    });
    // The graph has the switch once the orphan worker acts on it (its PATCH of D, held).
    await waitFor('the orphan worker to start on O', () => Promise.resolve(orphanPatchSeen));
    expect(gc.graph.get(o.uid)?.hasOrphanFinalizer).toBe(true);
    releaseDelete();
    // The released DELETE and the decision after it are over (the orphan PATCH is still held).
    await g.decided('kubegc to finish deciding D');
    const dep = await read(c, d);
    expect(dep).toBeDefined();
    expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
  } finally {
    releaseDelete();
    releasePatch();
  }
  await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 30_000 });
  await waitFor(
    'D to lose its reference to O',
    async () => ((await ownerUids(d)) ?? []).length === 0,
  );
  const dep = await read(c, d);
  expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
});

test('item 3: an owner deleted while its informer is replaced (new preferred version): its dependents are collected', async () => {
  const crd = await twoVersionCrd('races.kubegc.io', 'Racer', false);
  const { ext, custom, group, plural, kind, crdName } = crd;
  const key = `${plural}.${group}`;
  try {
    // Discovery may lag the CRD's creation by a moment; run it until the resource is watched.
    await watchedThrough(key, 'v1', true);
    const ns = await namespace('race-swap');
    const { d } = await ownerAndDependent(group, plural, kind, ns, 'v1');

    // v2 becomes the preferred version: the next discovery replaces the informer.
    await serveV2(crd, ns);
    // The old informer is stopped; before the new one lists, the owner goes.
    let raced = false;
    g.intercept = async (r) => {
      if (raced || !initialList(r) || !r.path.endsWith(`/apis/${group}/v2/${plural}`)) return;
      raced = true;
      await custom.deleteNamespacedCustomObject({
        group,
        version: 'v2',
        namespace: ns,
        plural,
        name: 'owner',
      });
      await waitFor('the owner to be gone', async () => {
        const there = await exists(() =>
          custom.getNamespacedCustomObject({
            group,
            version: 'v1',
            namespace: ns,
            plural,
            name: 'owner',
          }),
        );
        return !there;
      });
    };
    await watchedThrough(key, 'v2', false);

    await waitFor('the dependent to be collected', () => isGone(c, d), { timeoutMs: 30_000 });
    expect(raced).toBe(true);
  } finally {
    await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
  }
});

// Found by the soak (crd-version-flip): a GET of an owner through a version
// the server no longer serves answers a 404 that names no object ("the server
// could not find the requested resource"). It says nothing about the owner;
// kube-controller-manager's GC takes it for "gone" and deletes the dependent.
test('an owner referenced through a version no longer served (404 for the path, not the object): its dependent is kept', async () => {
  const { ext, custom, group, plural, kind, crdName } = await twoVersionCrd(
    'unserved.kubegc.io',
    'Thing',
    true,
  );
  try {
    await waitFor('kubegc to know v2 of the custom resource', async () => {
      await gc.runDiscovery();
      return gc.informers.get(`${plural}.${group}`)?.synced;
    });
    const ns = await namespace('race-unserved');
    // The dependent names its owner in v2.
    const { d } = await ownerAndDependent(group, plural, kind, ns, 'v2');
    // v2 stops being served; kubegc's discovery has not run since (its mapper still has v2).
    await ext.patchCustomResourceDefinition(
      { name: crdName, body: [{ op: 'replace', path: '/spec/versions/1/served', value: false }] },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
    await waitFor('v2 to answer 404 for the path', async () => {
      try {
        await custom.getNamespacedCustomObject({
          group,
          version: 'v2',
          namespace: ns,
          plural,
          name: 'owner',
        });
        return false;
      } catch (err) {
        return statusOf(err) === 404;
      }
    });
    let asked = 0;
    g.intercept = (r) => {
      // A live read is a LIST of the one name (src/gc/operations.ts getMeta).
      if (
        r.verb === 'GET' &&
        r.path.endsWith(`/apis/${group}/v2/namespaces/${ns}/${plural}`) &&
        r.query?.fieldSelector === 'metadata.name=owner'
      )
        asked++;
      return Promise.resolve();
    };
    gc.deleteQueue.add(d.uid, 'user');
    await waitFor('kubegc to read the owner through v2', () => Promise.resolve(asked > 0));
    await g.decided();
    const dep = await read(c, d);
    expect(dep).toBeDefined();
    expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
  } finally {
    await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
  }
});

// Found by the soak (crd-version-flip, I3; upstream #26120): the orphan worker
// takes an owner's dependents from the graph. A dependent created while its
// resource's informer was being replaced had not been seen, kept its
// reference, was found after the owner was gone and was deleted.
test('a dependent created while its informer is replaced, its owner then deleted with Orphan: it is orphaned, not deleted', async () => {
  const crd = await twoVersionCrd('orphanswap.kubegc.io', 'Widget', false);
  const { ext, custom, group, plural, kind, crdName } = crd;
  const key = `${plural}.${group}`;
  try {
    await watchedThrough(key, 'v1', true);
    const ns = await namespace('race-orphan-swap');
    const o = await configMap(c, ns, 'o');
    await observed(o);
    await serveV2(crd, ns);
    // The v1 informer is stopped; before the v2 one lists, a widget naming O is
    // created and O is deleted with Orphan. The LIST waits for O to go (5 s at most).
    let raced: Promise<boolean> | undefined;
    let w: Ref | undefined;
    const race = async (): Promise<boolean> => {
      const created = (await custom.createNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: ns,
        plural,
        body: {
          apiVersion: `${group}/v1`,
          kind,
          metadata: { name: 'w', ownerReferences: [ownerRef(o)] },
        },
      })) as k8s.KubernetesObject;
      w = {
        apiVersion: `${group}/v1`,
        kind,
        name: 'w',
        uid: created.metadata?.uid ?? '',
        namespace: ns,
      };
      await c.core.deleteNamespacedConfigMap({
        name: 'o',
        namespace: ns,
        body: { propagationPolicy: 'Orphan' },
      });
      // true: O went while the new informer had not listed (the race lost).
      return waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 5_000 }).then(
        () => true,
        () => false,
      );
    };
    g.intercept = async (r) => {
      if (raced || !initialList(r) || !r.path.endsWith(`/apis/${group}/v2/${plural}`)) return;
      raced = race();
      await raced;
    };
    await watchedThrough(key, 'v2', false);
    expect(raced).toBeDefined();
    // kubegc did not let O go on the new informer's word: it waited for it, or
    // read the widgets with a consistent LIST (and orphaned W on what it found).
    await raced;
    await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 30_000 });
    const dep = w as Ref;
    await waitFor('W to be orphaned or deleted', async () => {
      const refs = await ownerUids(dep);
      return refs === undefined || !refs.includes(o.uid);
    });
    const now = await read(c, dep);
    expect(now).toBeDefined();
    expect(now?.metadata?.deletionTimestamp).toBeUndefined();
    expect((now?.metadata?.ownerReferences ?? []).map((x) => x.uid)).not.toContain(o.uid);
  } finally {
    await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
  }
});

// Issue 19, item 2: a watch that ended normally at its timeout counted as
// caught up while it reconnected, so an Orphan owner went before a dependent
// created meanwhile was delivered; delivered later, it was deleted (its owner
// read live: 404). This test failed on the code before the fix.
test('a dependent created while its watch reconnects after a normal end, its owner deleted with Orphan meanwhile: it is orphaned, not deleted', async () => {
  const ns = await namespace('race-rewatch');
  const o = await configMap(c, ns, 'o');
  await observed(o);
  let releaseRewatch: () => void = () => undefined;
  const rewatchHeld = new Promise<void>((r) => (releaseRewatch = r));
  let held = false;
  g.intercept = async (r) => {
    // The secrets informer's next watch from a known resourceVersion (a reconnect).
    if (
      held ||
      r.verb !== 'WATCH' ||
      r.path !== '/api/v1/secrets' ||
      r.query?.resourceVersion === undefined
    )
      return;
    held = true;
    await rewatchHeld;
  };
  try {
    await waitFor('the secrets watch to end and reconnect', () => Promise.resolve(held), {
      timeoutMs: 30_000,
    });
    const created = await c.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'd', ownerReferences: [ownerRef(o)] } },
    });
    const d: Ref = {
      apiVersion: 'v1',
      kind: 'Secret',
      name: 'd',
      uid: created.metadata?.uid ?? '',
    };
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Orphan' },
    });
    await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 30_000 });
    releaseRewatch();
    await waitFor('the graph to observe D (or D to be gone)', async () => {
      if (gc.graph.get(d.uid)?.virtual === false) return true;
      return isGone(c, d);
    });
    // Whatever kubegc decides about D now is decided: nothing of it ready or in flight.
    await g.decided();
    const now = await c.core
      .readNamespacedSecret({ name: 'd', namespace: ns })
      .catch(() => undefined);
    expect(now).toBeDefined();
    expect(now?.metadata?.deletionTimestamp).toBeUndefined();
    expect((now?.metadata?.ownerReferences ?? []).map((x) => x.uid)).not.toContain(o.uid);
  } finally {
    releaseRewatch();
  }
});
