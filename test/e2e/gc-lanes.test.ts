// A user's cascade is never queued behind the GC's own housekeeping (issue
// 34). A restart finds many dependents whose owners were deleted while no GC
// ran, each naming an owner of its own: every such owner needs a live read
// before its dependent can go, a backlog of two requests per leaked object.
// A user who deletes an owner with Background right after the start must not
// wait for that backlog: the cascade's work is in the user lane, taken first
// by the workers and served first by the client's rate limiter, while the
// verifications keep going at their share of it.
//
// The client is held to 20 requests a second (kube-controller-manager's
// order of magnitude), so that the backlog lasts about two minutes. The test
// asserts on order, not on time: when the cascade is done, few of the owner
// reads have been sent (they all would have, before it, with one FIFO), and
// in the end every leaked object is collected too. Meanwhile the backlog is
// in the housekeeping lane's gauges, and `kubegc doctor --gc-metrics` reads
// them from the collector's HTTPS metrics port beside the leaks it finds.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';
import { KubeClient } from '../../src/api/client.ts';
import { type InterceptedRequest } from '../../src/api/request.ts';
import type { Report } from '../../src/doctor/analyze.ts';
import { silentLogger } from '../../src/log.ts';
import { createControllerMetrics } from '../../src/observability/metrics.ts';
import { controllerProbes } from '../../src/observability/probes.ts';
import { secureServing } from '../../src/shared/serving/secure-serving.ts';
import { startObservabilityServer } from '../../src/shared/serving/server.ts';
import { kubeConfig, waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { e2eLogger, startInProcessGc } from '../support/in-process-gc.ts';
import { metricsReaderToken } from '../support/metrics-access.ts';
import { configMap, configMapNames, ownerRef, times } from '../support/objects.ts';

const fixture = await e2e();
const { cluster, c, namespace } = fixture;
const readerTokenFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'kubegc-lanes-')), 'token');
writeFileSync(readerTokenFile, await metricsReaderToken(fixture, 'lanes-reader'));

/** `kubegc doctor -n NS -o json` with the view of the collector whose /metrics is at `url`. */
async function doctorWithGc(ns: string, url: string): Promise<Report> {
  const out = await promisify(execFile)(
    process.execPath,
    kubegcArgv([
      'doctor',
      '--kubeconfig',
      cluster.kubeconfig,
      '-n',
      ns,
      '-o',
      'json',
      '--gc-metrics',
      url,
      '--gc-metrics-token-file',
      readerTokenFile,
      '--gc-metrics-insecure-skip-tls-verify',
    ]),
    { maxBuffer: 64 << 20 },
  ).then(
    (r) => r.stdout,
    (e: { stdout: string }) => e.stdout, // exit 1: findings (the leaks)
  );
  return JSON.parse(out) as Report;
}

const LEAKED = 1_200;
const CASCADE = 50;
const QPS = 20;

/** What one of the collector's requests in `ns` was: an owner read, or the DELETE of which object. */
function classify(r: InterceptedRequest, ns: string): string | undefined {
  const base = `/api/v1/namespaces/${ns}/configmaps`;
  const selector = r.query?.fieldSelector;
  if (r.path === base && typeof selector === 'string' && selector.startsWith('metadata.name=gone-'))
    return 'owner-read';
  if (r.method === 'DELETE' && r.path.startsWith(`${base}/`))
    return `delete ${r.path.slice(base.length + 1)}`;
  return undefined;
}

test("a user's Background cascade right after a restart is done before the restart's backlog of owner reads", async () => {
  const ns = await namespace('lanes');
  // Left while no GC runs (this file's collector starts below): each names an owner that never existed.
  await times(
    LEAKED,
    (i) =>
      configMap(c, ns, `leak-${i}`, [
        { apiVersion: 'v1', kind: 'ConfigMap', name: `gone-${i}`, uid: randomUUID() },
      ]),
    30,
  );
  const owner = await configMap(c, ns, 'owner');
  await times(CASCADE, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));

  const sent: string[] = [];
  const metrics = createControllerMetrics();
  const g = await startInProcessGc(cluster, {
    userAgent: 'kubegc-e2e-lanes',
    log: e2eLogger('error'),
    client: { qps: QPS, burst: QPS },
    // Owners read one by one (bulk verification off): the backlog this test
    // orders the user's cascade against is one read per leaked object, as
    // where bulk verification does not pay (gc-bulk-verify covers that path).
    gc: { bulkVerify: { minOwners: Infinity } },
    metrics: metrics.gc,
    intercept: (r) => {
      const what = classify(r, ns);
      if (what) sent.push(what);
    },
  });
  afterFile(() => g.stop());
  const gc = g.gc;
  metrics.bind({
    graphNodes: () => gc.graph.order,
    virtualNodes: () => gc.graph.countVirtual(),
    monitoredResources: () => gc.monitoredResources(),
    queues: () => [gc.deleteQueue, gc.orphanQueue],
    rateLimited: (lane) => g.client.rateLimited(lane),
    isLeader: () => true,
  });
  // Its metrics port as `kubegc controller` serves it: HTTPS, a reader's token reviewed by the API server.
  const reviewClient = await KubeClient.create(kubeConfig(cluster), {
    userAgent: 'kubegc-e2e-lanes metrics-auth',
  });
  afterFile(() => reviewClient.close());
  const server = await startObservabilityServer({
    metricsAddress: '127.0.0.1:0',
    healthAddress: '0',
    secure: await secureServing(
      { secure: true, tokenTtlMs: 10_000, allowedTtlMs: 10_000, deniedTtlMs: 10_000 },
      reviewClient,
      silentLogger,
    ),
    registry: metrics.registry,
    ...controllerProbes(gc),
  });
  afterFile(() => server.close());

  const deletedAt = Date.now();
  // The user's deletion, as soon as the collector runs.
  await c.core.deleteNamespacedConfigMap({
    name: 'owner',
    namespace: ns,
    body: { propagationPolicy: 'Background' },
  });
  const names = async (prefix: string): Promise<string[]> =>
    (await configMapNames(c, ns)).filter((n) => n.startsWith(prefix));
  await waitFor('the cascade to be done', async () => (await names('dep-')).length === 0, {
    timeoutMs: 120_000,
    intervalMs: 100,
  });
  const cascadeSeconds = (Date.now() - deletedAt) / 1000;
  const leakedLeft = (await names('leak-')).length;
  const lastCascadeDelete = sent.reduce(
    (last, s, i) => (s.startsWith('delete dep-') ? i : last),
    -1,
  );
  const readsBefore = sent.slice(0, lastCascadeDelete).filter((s) => s === 'owner-read').length;

  // While the backlog waits, it is there to see: in the housekeeping lane, not the user's.
  const scraped = await metrics.registry.metrics();
  const gauge = (name: string, lane: string): number =>
    Number(
      new RegExp(
        `^${name}\\{name="garbage_collector_attempt_to_delete",lane="${lane}"\\} (\\S+)$`,
        'm',
      ).exec(scraped)?.[1],
    );

  expect(sent.filter((s) => s.startsWith('delete dep-'))).toHaveLength(CASCADE);
  // With one FIFO the cascade came after every owner read queued at start-up (all LEAKED).
  expect(readsBefore).toBeLessThan(LEAKED / 4);
  expect(leakedLeft).toBeGreaterThan(LEAKED / 2);
  expect(gauge('kubegc_workqueue_lane_depth', 'housekeeping')).toBeGreaterThan(LEAKED / 4);
  expect(gauge('kubegc_workqueue_lane_oldest_seconds', 'housekeeping')).toBeGreaterThan(0);
  expect(gauge('kubegc_workqueue_lane_depth', 'user')).toBe(0);

  // kubegc doctor tells both stories: the leaks it finds, and the running GC working through them.
  const report = await doctorWithGc(ns, `https://${server.metrics ?? ''}/metrics`);
  expect(report.gc?.error).toBeUndefined();
  expect(report.gc?.leader).toBe(true);
  const lane = (l: string) =>
    report.gc?.lanes.find((x) => x.queue === 'garbage_collector_attempt_to_delete' && x.lane === l);
  expect(lane('housekeeping')?.waiting).toBeGreaterThan(0);
  expect(lane('user')?.waiting).toBe(0);
  expect(report.summary.byKind['leaked-dependent']).toBeGreaterThan(0);

  // Housekeeping was slowed, not stopped: every leaked object goes too.
  await waitFor(
    'every leaked object to be collected',
    async () => (await names('leak-')).length === 0,
    {
      timeoutMs: 360_000,
      intervalMs: 2_000,
    },
  );
  process.stderr.write(
    `\ngc-lanes: the ${CASCADE}-dependent cascade done ${cascadeSeconds.toFixed(1)} s after the deletion, ` +
      `${readsBefore} of ${LEAKED} owner reads sent before its last DELETE, ${leakedLeft} leaked left then; ` +
      `every leaked object collected ${((Date.now() - deletedAt) / 1000).toFixed(1)} s after the deletion\n`,
  );
  expect(sent.filter((s) => s === 'owner-read').length).toBeGreaterThanOrEqual(LEAKED);
}, 600_000);
