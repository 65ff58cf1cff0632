// Issue 10, item 4: one unlistable resource must not restart every replica.
// A custom resource whose conversion webhook is broken cannot be listed or
// watched in its preferred version; kubegc reports it (metric, Warning event,
// a line in /readyz) while /healthz, the liveness probe, stays 200.
import * as k8s from '@kubernetes/client-node';
import http from 'node:http';
import type { Cluster } from '../../cluster/controlplane.ts';
import { KubeClient } from '../../src/api/client.ts';
import { GarbageCollector } from '../../src/gc/garbage-collector.ts';
import { silentLogger } from '../../src/log.ts';
import { createControllerMetrics } from '../../src/observability/metrics.ts';
import { controllerProbes } from '../../src/observability/probes.ts';
import {
  startObservabilityServer,
  type ObservabilityServer,
} from '../../src/observability/server.ts';
import {
  clients,
  e2eCluster,
  kubegcKubeConfig,
  waitFor,
  type Clients,
} from '../support/cluster.ts';
import { breakConversion } from '../support/objects.ts';

let cluster: Cluster;
let c: Clients;

beforeAll(async () => {
  cluster = await e2eCluster();
  c = clients(cluster);
});

function get(address: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(`http://${address}${path}`, (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

test('a watch stalled by a broken conversion webhook: /healthz stays 200; metric, event and /readyz say which', async () => {
  const ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
  const custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
  const group = 'stall.kubegc.io';
  const plural = `gadgets${Date.now().toString(36)}`;
  const crdName = `${plural}.${group}`;
  const key = `${plural}.${group}`;
  const schema = {
    openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
  };
  await ext.createCustomResourceDefinition({
    body: {
      metadata: { name: crdName },
      spec: {
        group,
        scope: 'Cluster',
        names: { plural, singular: plural, kind: `Gadget${plural.slice(7)}` },
        versions: [
          { name: 'v1', served: true, storage: true, schema },
          { name: 'v2', served: true, storage: false, schema },
        ],
      },
    },
  });
  let client: KubeClient | undefined;
  let gc: GarbageCollector | undefined;
  let server: ObservabilityServer | undefined;
  try {
    // One object stored as v1: listing it as v2 (the preferred version) needs a conversion.
    await waitFor('the custom resource to be served', async () => {
      await custom.createClusterCustomObject({
        group,
        version: 'v1',
        plural,
        body: {
          apiVersion: `${group}/v1`,
          kind: `Gadget${plural.slice(7)}`,
          metadata: { name: 'one' },
        },
      });
      return true;
    });
    await breakConversion(ext, crdName);

    client = await KubeClient.create(await kubegcKubeConfig(cluster));
    const metrics = createControllerMetrics();
    // Short watch cycles, so that "stalled" (two failed cycles plus the grace) comes in seconds.
    gc = new GarbageCollector(
      client,
      silentLogger,
      {
        discoveryPeriodMs: 3_600_000,
        initialSyncTimeoutMs: 2_000,
        informer: { minWatchTimeoutSec: 1, watchdogGraceMs: 1_000, maxBackoffMs: 500 },
      },
      metrics.gc,
    );
    const collector = gc;
    metrics.bind({
      graphNodes: () => collector.graph.order,
      virtualNodes: () => collector.graph.countVirtual(),
      monitoredResources: () => collector.monitoredResources(),
      stalledResources: () => collector.stalledInformers(),
      queues: () => [collector.deleteQueue, collector.orphanQueue],
      isLeader: () => false,
    });
    server = await startObservabilityServer({
      metricsAddress: '127.0.0.1:0',
      healthAddress: '127.0.0.1:0',
      secure: undefined,
      registry: metrics.registry,
      ...controllerProbes(collector),
    });
    // A standby's work: discover, watch, build the graph (no workers, no deletes).
    await collector.sync();
    expect(collector.informers.get(key)?.resource.version).toBe('v2');

    await waitFor('the watch to be reported stalled', async () => {
      await collector.runDiscovery(); // reports new stalls
      return collector.stalledInformers().includes(key);
    });
    const health = server.health ?? '';
    const live = await get(health, '/healthz');
    expect(live).toEqual({ status: 200, body: 'ok' });
    const ready = await get(health, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toContain(key);
    const scraped = await get(server.metrics ?? '', '/metrics');
    expect(scraped.body).toContain(`kubegc_watch_stalled{resource="${key}"} 1`);
    expect(scraped.body).toContain('kubegc_watch_stalled{resource="configmaps"} 0');
    await waitFor('a WatchStalled event on the APIService', async () => {
      const events = await c.kc
        .makeApiClient(k8s.EventsV1Api)
        .listNamespacedEvent({ namespace: 'default' });
      return events.items.some(
        (e) => e.reason === 'WatchStalled' && e.regarding?.name === `v2.${group}`,
      );
    });
  } finally {
    await server?.close();
    await gc?.stop();
    client?.close();
    await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
  }
});
