// Issue 32, item 2, against the real kube-apiserver: a resource that leaves
// discovery (its APIService deleted) while it holds a dependent of an owner
// deleted with Orphan. kubegc unobserves such a resource's objects; it once
// dropped their owner edges with them, found the owner with no dependents,
// released it, and, the resource back, collected the dependent that still
// named the gone owner. Upstream keeps the nodes and fails to orphan them
// until the resource is back. The collector runs in this process (as kubegc's
// service account) so that the test can run discovery rounds when it says.
import { AggregatedApi } from '../support/aggregated-api.ts';
import { waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { inProcessGc } from '../support/in-process-gc.ts';
import { configMap, isGone, ownerRef, read } from '../support/objects.ts';

const GROUP = 'agg2.e2e.kubegc.io';

const { cluster, c, namespace } = await e2e({ deleteNamespaces: true });
// Closed after the collector has stopped (cleanups run last registered first).
const api = await AggregatedApi.start(cluster, { group: GROUP });
afterFile(() => api.close());
// Discovery runs when the test says so (the fixture's default); the Orphan wait warns after 3 s.
const { gc } = await inProcessGc(cluster, {
  userAgent: 'kubegc-e2e-discovery-flap',
  gc: { orphanWatchWaitMs: 3_000 },
});

async function warnings(ns: string, name: string): Promise<string[]> {
  const list = await c.core.listNamespacedEvent({
    namespace: ns,
    fieldSelector: `involvedObject.name=${name},type=Warning`,
  });
  return list.items.map((e) => e.reason ?? '');
}

test('an Orphan owner keeps its finalizer while a resource that held its dependent is gone from discovery; the dependent is orphaned, not collected, when it is back', async () => {
  const ns = await namespace('discovery-flap');
  const owner = await configMap(c, ns, 'owner');
  const widget = await api.create(ns, 'widget', { ownerReferences: [ownerRef(owner)] });
  await waitFor('the graph to hold the AggWidget as the ConfigMap dependent', () =>
    Promise.resolve(gc.graph.dependents(owner.uid).includes(widget.uid)),
  );

  // The APIService goes: the group leaves discovery, kubegc stops watching it.
  await api.unregister();
  await gc.runDiscovery();
  await waitFor('kubegc to unobserve the AggWidget', () =>
    Promise.resolve(!gc.graph.has(widget.uid)),
  );

  await c.core.deleteNamespacedConfigMap({
    name: owner.name,
    namespace: ns,
    propagationPolicy: 'Orphan',
  });
  await waitFor('kubegc to say the Orphan deletion waits for the resource gone', async () =>
    (await warnings(ns, owner.name)).includes('OrphanWaitingForResource'),
  );
  const held = await read(c, owner);
  expect(held?.metadata?.finalizers).toContain('orphan');

  // Back in discovery: listed again, the AggWidget is orphaned, and the owner goes.
  await api.register();
  await gc.runDiscovery();
  await waitFor('the owner to be released and gone', () => isGone(c, owner));
  const after = await api.get(ns, widget.name);
  expect(after).toBeDefined();
  expect(after?.metadata.ownerReferences ?? []).toEqual([]);
});
