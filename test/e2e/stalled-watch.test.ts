// Issue 10, item 4: one unlistable resource must not restart every replica.
// A custom resource whose conversion webhook is broken cannot be listed or
// watched in its preferred version; kubegc reports it (metric, Warning event,
// a line in /readyz) while /healthz, the liveness probe, stays 200.
import * as k8s from '@kubernetes/client-node';
import { createControllerMetrics } from '../../src/observability/metrics.ts';
import { controllerProbes } from '../../src/observability/probes.ts';
import {
  startObservabilityServer,
  type ObservabilityServer,
} from '../../src/shared/serving/server.ts';
import { waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { httpGet as get } from '../support/http.ts';
import { e2eLogger, startInProcessGc, type InProcessGc } from '../support/in-process-gc.ts';
import { breakConversion } from '../support/objects.ts';

const { cluster, c } = await e2e();

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
  let g: InProcessGc | undefined;
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

    const metrics = createControllerMetrics();
    g = await startInProcessGc(cluster, {
      userAgent: 'kubegc',
      log: e2eLogger('silent'),
      // Short watch cycles, so that "stalled" (two failed cycles plus the grace) comes in seconds.
      gc: {
        initialSyncTimeoutMs: 2_000,
        informer: { minWatchTimeoutSec: 1, watchdogGraceMs: 1_000, maxBackoffMs: 500 },
      },
      metrics: metrics.gc,
      // A standby's work: discover, watch, build the graph (no workers, no deletes).
      run: 'sync',
    });
    const collector = g.gc;
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
    await g?.stop();
    await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
  }
});
