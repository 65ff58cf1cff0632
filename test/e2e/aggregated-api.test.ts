// The aggregated API fixture (test/support/aggregated-api.ts) through the real
// kube-apiserver, as the cluster admin: what the tests that use it (issue 32,
// items 2 and 4, the soak) rely on, checked once here rather than assumed.
import { KubeClient } from '../../src/api/client.ts';
import { ApiError } from '../../src/api/errors.ts';
import { METADATA_LIST_ACCEPT } from '../../src/api/request.ts';
import { PROTOBUF_METADATA_LIST_ACCEPT } from '../../src/api/protobuf-meta.ts';
import { AggregatedApi } from '../support/aggregated-api.ts';
import { kubeConfig, waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';

// Cleanups run last registered first: the admin client closes, then the
// namespaces go while the server still answers for their AggWidgets (the
// namespace controller deletes them), then the server closes.
const { cluster, c, namespace, namespaces } = await e2e();
const api = await AggregatedApi.start(cluster, { group: 'fixture.e2e.kubegc.io' });
afterFile(() => api.close());
afterFile(async () => {
  for (const name of namespaces) await c.core.deleteNamespace({ name }).catch(() => undefined);
});
const admin = await KubeClient.create(kubeConfig(cluster));
afterFile(() => admin.close());

type List = {
  metadata?: { resourceVersion?: string };
  kind?: string;
  items?: { metadata: { name: string } }[];
};

/** The HTTP status a request through kube-apiserver gets (2xx: 200). */
async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    if (err instanceof ApiError) return err.status;
    throw err;
  }
}

test('list, field selectors (supported, then refused), metadata-only answers, its own resourceVersions, 406 and 415', async () => {
  const ns = await namespace('agg-fixture');
  const a = await api.create(ns, 'a');
  await api.create(ns, 'b');
  const path = `/apis/${api.apiVersion}/namespaces/${ns}/widgets`;
  const byName = await admin.request<List>('GET', path, {
    query: { fieldSelector: 'metadata.name=a' },
    accept: METADATA_LIST_ACCEPT,
  });
  expect(byName.kind).toBe('PartialObjectMetadataList');
  expect(byName.items?.map((i) => i.metadata.name)).toEqual(['a']);
  // Its own counter, far above the test cluster's etcd revisions.
  expect(BigInt(byName.metadata?.resourceVersion ?? '0')).toBeGreaterThan(10n ** 12n);
  // Protobuf is refused when it is all the client takes; kubegc's Accept falls back to JSON.
  expect(
    await statusOf(admin.request('GET', path, { accept: 'application/vnd.kubernetes.protobuf' })),
  ).toBe(406);
  const fallback = await admin.request<List>('GET', path, {
    accept: PROTOBUF_METADATA_LIST_ACCEPT,
  });
  expect(fallback.items?.map((i) => i.metadata.name)).toEqual(['a', 'b']);
  expect(
    await statusOf(
      admin.request('PATCH', `${path}/a`, {
        contentType: 'application/strategic-merge-patch+json',
        body: { metadata: { labels: { x: 'y' } } },
      }),
    ),
  ).toBe(415);
  // A merge patch with a stale resourceVersion is a conflict; with the right one it applies.
  expect(
    await statusOf(
      admin.request('PATCH', `${path}/a`, {
        contentType: 'application/merge-patch+json',
        body: { metadata: { resourceVersion: '1', labels: { x: 'y' } } },
      }),
    ),
  ).toBe(409);
  api.fieldSelectors = 'refuse';
  try {
    const refused = await statusOf(
      admin.request('GET', path, { query: { fieldSelector: 'metadata.name=a' } }),
    );
    expect(refused).toBe(400);
  } finally {
    api.fieldSelectors = 'support';
  }
  // A DELETE whose uid precondition is another object's: 409, and the object stays.
  expect(
    await statusOf(
      admin.request('DELETE', `${path}/a`, {
        body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: 'other' } },
      }),
    ),
  ).toBe(409);
  expect((await api.get(ns, 'a'))?.metadata.uid).toBe(a.uid);
  await api.delete(ns, 'a');
  expect(await api.get(ns, 'a')).toBeUndefined();
});

test('a watch through kube-apiserver delivers events, holds them while told to, and a version older than its counter is 410', async () => {
  const ns = await namespace('agg-fixture-watch');
  const path = `/apis/${api.apiVersion}/namespaces/${ns}/widgets`;
  const list = await admin.request<List>('GET', path);
  const lines: string[] = [];
  const abort = new AbortController();
  const streaming = admin
    .stream(
      path,
      {
        query: { watch: true, resourceVersion: list.metadata?.resourceVersion },
        signal: abort.signal,
      },
      () => undefined,
      (l) => void lines.push(l),
    )
    .catch(() => undefined);
  try {
    await api.create(ns, 'first');
    await waitFor('the ADDED event of the first', () =>
      Promise.resolve(lines.some((l) => l.includes('"ADDED"') && l.includes('"first"'))),
    );
    api.holdWatches();
    await api.create(ns, 'held');
    expect(api.stored(ns, 'held')).toBeDefined();
    expect(lines.some((l) => l.includes('"held"'))).toBe(false);
    api.releaseWatches();
    await waitFor('the held ADDED event once released', () =>
      Promise.resolve(lines.some((l) => l.includes('"ADDED"') && l.includes('"held"'))),
    );
  } finally {
    api.releaseWatches();
    abort.abort();
    await streaming;
  }
  const expired: string[] = [];
  await admin.stream(
    path,
    { query: { watch: true, resourceVersion: '5' } },
    () => undefined,
    (l) => void expired.push(l),
  );
  expect(expired.join('')).toContain('"code":410');
});

test('the group leaves discovery when its APIService is deleted and comes back; unavailable, it answers 503', async () => {
  const path = `/apis/${api.apiVersion}/namespaces/default/widgets`;
  api.setAvailable(false);
  try {
    expect(await statusOf(admin.request('GET', path))).toBe(503);
  } finally {
    api.setAvailable(true);
  }
  expect(await statusOf(admin.request('GET', path))).toBe(200);
  await api.unregister();
  expect(await statusOf(admin.request('GET', path))).toBe(404);
  await api.register();
  expect(await api.inDiscovery()).toBe(true);
  expect(await statusOf(admin.request('GET', path))).toBe(200);
});

test('a server without aggregated discovery: the aggregator falls back to /apis/<group>/<version>', async () => {
  const legacy = await AggregatedApi.start(cluster, {
    group: 'legacy.e2e.kubegc.io',
    aggregatedDiscovery: false,
  });
  try {
    // The aggregator asked /apis (for v2) and got the legacy APIGroupList, yet
    // kube-apiserver's discovery shows the resource: it read /apis/<group>/<version>.
    expect(legacy.requests.some((r) => r.path === '/apis' && r.status === 200)).toBe(true);
    expect(await legacy.inDiscovery()).toBe(true);
  } finally {
    await legacy.close();
  }
});
