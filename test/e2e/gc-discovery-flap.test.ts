// Issue 32, item 2, against the real kube-apiserver: a resource that leaves
// discovery (its APIService deleted) while it holds a dependent of an owner
// deleted with Orphan. kubegc unobserves such a resource's objects; it once
// dropped their owner edges with them, found the owner with no dependents,
// released it, and, the resource back, collected the dependent that still
// named the gone owner. Upstream keeps the nodes and fails to orphan them
// until the resource is back. The collector runs in this process (as kubegc's
// service account) so that the test can run discovery rounds when it says.
import type { Cluster } from '../../cluster/controlplane.ts';
import { KubeClient } from '../../src/api/client.ts';
import { GarbageCollector } from '../../src/gc/garbage-collector.ts';
import { createLogger } from '../../src/log.ts';
import { AggregatedApi } from '../support/aggregated-api.ts';
import {
  clients,
  e2eCluster,
  kubegcKubeConfig,
  testNamespace,
  waitFor,
  type Clients,
} from '../support/cluster.ts';
import { configMap, isGone, ownerRef, read } from '../support/objects.ts';

const GROUP = 'agg2.e2e.kubegc.io';

let cluster: Cluster;
let c: Clients;
let api: AggregatedApi;
let client: KubeClient;
let gc: GarbageCollector;
let ns: string;

beforeAll(async () => {
  cluster = await e2eCluster();
  c = clients(cluster);
  api = await AggregatedApi.start(cluster, { group: GROUP });
  client = await KubeClient.create(await kubegcKubeConfig(cluster), {
    userAgent: 'kubegc-e2e-discovery-flap',
  });
  // Discovery runs when the test says so; the Orphan wait warns after 3 s.
  gc = new GarbageCollector(client, createLogger('warn'), {
    discoveryPeriodMs: 3_600_000,
    orphanWatchWaitMs: 3_000,
  });
  await gc.start();
});

afterAll(async () => {
  await gc?.stop();
  client?.close();
  if (ns) await c.core.deleteNamespace({ name: ns }).catch(() => undefined);
  await api?.close();
});

async function warnings(name: string): Promise<string[]> {
  const list = await c.core.listNamespacedEvent({
    namespace: ns,
    fieldSelector: `involvedObject.name=${name},type=Warning`,
  });
  return list.items.map((e) => e.reason ?? '');
}

test('an Orphan owner keeps its finalizer while a resource that held its dependent is gone from discovery; the dependent is orphaned, not collected, when it is back', async () => {
  ns = await testNamespace(c.core, 'discovery-flap');
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
    (await warnings(owner.name)).includes('OrphanWaitingForResource'),
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
