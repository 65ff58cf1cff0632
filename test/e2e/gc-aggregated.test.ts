// Issue 32, item 4, against the real kube-apiserver: an aggregated API of our
// own (test/support/aggregated-api.ts) that refuses field selectors and counts
// resourceVersions of its own, far above etcd's. kubegc runs in this process as
// its real service account (deploy/'s RBAC), so every request goes through
// kube-apiserver's authorization and aggregator. Each test failed on the code
// before the fix (0cadf1d).
import type { InterceptedRequest } from '../../src/api/request.ts';
import { AggregatedApi } from '../support/aggregated-api.ts';
import { statusOf, waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { startInProcessGc, type InProcessGc } from '../support/in-process-gc.ts';
import { configMap, isGone, ownerRef, type Ref } from '../support/objects.ts';
import { KUBEGC_SERVICE_ACCOUNT } from '../support/service-account.ts';

const GROUP = 'agg4.e2e.kubegc.io';
/** The grant a resource whose server refuses field selectors needs (docs/security.md). */
const GET_GRANT = 'kubegc-e2e-aggregated-get';

// Cleanups run last registered first: kubegc stops (registered when it starts,
// in a test), then the namespaces go while the aggregated server still answers
// for their AggWidgets, then the server closes, and the grant goes last.
const { cluster, c, namespace, namespaces } = await e2e();
await revokeGet();
afterFile(revokeGet);
const api = await AggregatedApi.start(cluster, { group: GROUP, fieldSelectors: 'refuse' });
afterFile(() => api.close());
afterFile(async () => {
  for (const name of namespaces) await c.core.deleteNamespace({ name }).catch(() => undefined);
});
/** The paths of kubegc's requests, as they went on the wire. */
const sent: InterceptedRequest[] = [];
let kubegc: Promise<InProcessGc> | undefined;

/**
 * Starts kubegc in this process (once, on first use: the first test creates its
 * objects before kubegc starts); stopped after the file, before anything else.
 */
function startKubegc(): Promise<InProcessGc> {
  kubegc ??= startInProcessGc(cluster, {
    userAgent: 'kubegc-e2e-aggregated',
    intercept: (r) => void sent.push(r),
  }).then((g) => {
    afterFile(() => g.stop());
    return g;
  });
  return kubegc;
}

async function grantGet(): Promise<void> {
  await c.rbac
    .createClusterRole({
      body: {
        metadata: { name: GET_GRANT },
        rules: [{ apiGroups: [GROUP], resources: ['widgets'], verbs: ['get'] }],
      },
    })
    .catch((err: unknown) => {
      if (statusOf(err) !== 409) throw err;
    });
  await c.rbac
    .createClusterRoleBinding({
      body: {
        metadata: { name: GET_GRANT },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: GET_GRANT },
        subjects: [{ kind: 'ServiceAccount', ...KUBEGC_SERVICE_ACCOUNT }],
      },
    })
    .catch((err: unknown) => {
      if (statusOf(err) !== 409) throw err;
    });
}

async function revokeGet(): Promise<void> {
  const ignore404 = (err: unknown): void => {
    if (statusOf(err) !== 404) throw err;
  };
  await c.rbac.deleteClusterRoleBinding({ name: GET_GRANT }).catch(ignore404);
  await c.rbac.deleteClusterRole({ name: GET_GRANT }).catch(ignore404);
}

const widgetGone = async (r: Ref): Promise<boolean> =>
  (await api.get(r.namespace ?? '', r.name)) === undefined;
const configMapGone = (r: Ref): Promise<boolean> => isGone(c, r);

test('an AggWidget deleted while kubegc was not watching: its dependents are kept while kubegc may not GET widgets, then collected; dependents of live owners stay', async () => {
  const ns = await namespace('agg-gone-owner');
  const gone = await api.create(ns, 'gone');
  const cmOfGone = await configMap(c, ns, 'cm-of-gone', [ownerRef(gone)]);
  const wOfGone = await api.create(ns, 'w-of-gone', { ownerReferences: [ownerRef(gone)] });
  const live = await api.create(ns, 'live');
  const cmOfLive = await configMap(c, ns, 'cm-of-live', [ownerRef(live)]);
  const cmOwner = await configMap(c, ns, 'cm-owner');
  const wOfCm = await api.create(ns, 'w-of-cm', { ownerReferences: [ownerRef(cmOwner)] });
  // Deleted before kubegc starts: it never sees the delete, and must read `gone` live.
  await api.delete(ns, 'gone');
  const g = await startKubegc();
  await g.observed(cmOfGone, wOfGone, cmOfLive, wOfCm, live);

  // The server refuses the LIST by field selector; the GET it falls back to is
  // forbidden (deploy/'s ClusterRole has no `get`): a failed read, not "absent".
  const getsOfGone = (): number =>
    sent.filter((r) => r.method === 'GET' && r.path.endsWith(`/namespaces/${ns}/widgets/gone`))
      .length;
  await waitFor('kubegc to read the gone AggWidget by GET, twice', () =>
    Promise.resolve(getsOfGone() >= 2),
  );
  expect(
    api.requests.some(
      (r) => r.status === 400 && r.query.get('fieldSelector') === 'metadata.name=gone',
    ),
  ).toBe(true);
  expect(await configMapGone(cmOfGone)).toBe(false);
  expect(await widgetGone(wOfGone)).toBe(false);

  await grantGet();
  await waitFor(
    'the dependents of the gone AggWidget to be collected',
    async () => (await configMapGone(cmOfGone)) && (await widgetGone(wOfGone)),
  );
  // Decided on the same reads: the dependents of live owners stay.
  expect(await configMapGone(cmOfLive)).toBe(false);
  expect(await widgetGone(wOfCm)).toBe(false);
});

test('AggWidgets of a ConfigMap deleted with Background are collected, and with Orphan lose only the reference', async () => {
  await grantGet();
  const ns = await namespace('agg-cm-owner');
  const background = await configMap(c, ns, 'background');
  const wCollected = await api.create(ns, 'w-collected', {
    ownerReferences: [ownerRef(background)],
  });
  const orphan = await configMap(c, ns, 'orphan');
  const wOrphaned = await api.create(ns, 'w-orphaned', { ownerReferences: [ownerRef(orphan)] });
  const g = await startKubegc();
  await g.observed(background, wCollected, orphan, wOrphaned);

  await c.core.deleteNamespacedConfigMap({ name: 'background', namespace: ns });
  await c.core.deleteNamespacedConfigMap({
    name: 'orphan',
    namespace: ns,
    body: { propagationPolicy: 'Orphan' },
  });
  await waitFor(
    'the Background dependent collected and the Orphan owner gone',
    async () => (await widgetGone(wCollected)) && (await configMapGone(orphan)),
  );
  const kept = await api.get(ns, 'w-orphaned');
  expect(kept?.metadata.uid).toBe(wOrphaned.uid);
  expect(kept?.metadata.ownerReferences).toBeUndefined();
});

test("an Orphan owner's AggWidget dependent that the aggregated watch has not delivered (its resourceVersions far above etcd's) is found by a LIST and orphaned, not deleted", async () => {
  await grantGet();
  const ns = await namespace('agg-watch-behind');
  const owner = await configMap(c, ns, 'owner');
  const g = await startKubegc();
  await g.observed(owner);
  // From here the aggregated server's watch is behind: it delivers nothing.
  api.holdWatches();
  let held: Ref;
  try {
    held = await api.create(ns, 'w-held', { ownerReferences: [ownerRef(owner)] });
    await c.core.deleteNamespacedConfigMap({
      name: 'owner',
      namespace: ns,
      body: { propagationPolicy: 'Orphan' },
    });
    await waitFor('the Orphan owner gone', () => configMapGone(owner));
  } finally {
    api.releaseWatches();
  }
  // The watch catches up: the graph shows the AggWidget as the server holds it, unless it is gone.
  const outcome = await waitFor('the graph to catch up with the held AggWidget', () => {
    const now = api.stored(ns, 'w-held');
    if (!now) return Promise.resolve({ deleted: true });
    return Promise.resolve(
      g.gc.graph.get(held.uid)?.resourceVersion === now.metadata.resourceVersion
        ? { deleted: false, ownerReferences: now.metadata.ownerReferences }
        : undefined,
    );
  });
  expect(outcome).toEqual({ deleted: false, ownerReferences: undefined });
});
