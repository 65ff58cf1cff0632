// What a restart costs kubegc before it collects anything (issue 34, items 2
// and 3): on the local control plane (started or reused in .cluster/), N
// owned ConfigMaps whose owners all exist and N leaked ones (each naming an
// owner of its own that is gone) are made while no GC runs; then a collector
// starts in this process and the run reports, for each set, how many of its
// objects and owners were added to the attempt-to-delete queue and the owner
// reads sent (single reads, bulk LIST pages), and the seconds until the
// leaked ones are all collected.
//   node bench/restart-verify.ts [--n 2000] [--qps 500 --burst 1000] [--min-owners 20]
// --qps/--burst: the collector's client budget (kube-controller-manager's GC
// has 40/60); --min-owners Infinity: every owner read on its own.
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { KubeClient, loadKubeConfig } from '../src/api/client.ts';
import { type InterceptedRequest } from '../src/api/request.ts';
import { GarbageCollector } from '../src/gc/garbage-collector.ts';
import { silentLogger } from '../src/log.ts';
import { REPO_ROOT, up } from '../cluster/controlplane.ts';
import { benchClient, createConfigMaps, createNamespace, deleteNamespace } from './lib/kube.ts';

const argv = process.argv.slice(2);
const opt = (name: string, fallback: number): number => {
  const i = argv.indexOf(name);
  const v = i === -1 ? fallback : Number(argv[i + 1]);
  if (!(v > 0)) throw new Error(`${name} must be a positive number`);
  return v;
};
const n = opt('--n', 2000);
const qps = opt('--qps', 500);
const burst = opt('--burst', 1000);
const minOwners = opt('--min-owners', 20);

const cluster = await up({
  dir: process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster'),
});
const admin = await benchClient(cluster.kubeconfig);
const run = Date.now().toString(36);
const healthy = `bench-restart-healthy-${run}`;
const leaked = `bench-restart-leaked-${run}`;
await createNamespace(admin, healthy);
await createNamespace(admin, leaked);

const ownerUids = await createConfigMaps(
  admin,
  healthy,
  Array.from({ length: n }, (_, i) => ({ name: `owner-${i}` })),
);
const owned = (uid: string, name: string) => ({ name, uid, blockOwnerDeletion: false });
// Named to be listed before their owners: each owner is first known from its dependent.
const healthyUids = await createConfigMaps(
  admin,
  healthy,
  ownerUids.map((uid, i) => ({ name: `dep-${i}`, owner: owned(uid, `owner-${i}`) })),
);
const leakedOwners = Array.from({ length: n }, () => randomUUID());
await createConfigMaps(
  admin,
  leaked,
  leakedOwners.map((uid, i) => ({ name: `dep-${i}`, owner: owned(uid, `owner-${i}`) })),
);

const sets = {
  healthy: new Set([...ownerUids, ...healthyUids]),
  leaked: new Set<string>(leakedOwners),
};
const queued = { healthy: 0, leaked: 0 };
const reads = {
  healthy: { single: 0, bulkPages: 0 },
  leaked: { single: 0, bulkPages: 0 },
  clusterWidePages: 0,
};
/** Every request about the leaked namespace, by verb: the reads of owners and the DELETEs. */
const leakedRequests: Record<string, number> = {};
const count = (r: InterceptedRequest): void => {
  if (r.path === '/api/v1/configmaps' && r.verb === 'LIST') reads.clusterWidePages++;
  if (r.path.startsWith(`/api/v1/namespaces/${leaked}/`)) {
    const verb = r.verb ?? r.method;
    leakedRequests[verb] = (leakedRequests[verb] ?? 0) + 1;
  }
  for (const set of ['healthy', 'leaked'] as const) {
    const ns = set === 'healthy' ? healthy : leaked;
    if (!r.path.startsWith(`/api/v1/namespaces/${ns}/configmaps`)) continue;
    const selector = r.query?.fieldSelector;
    if (r.verb === 'GET' && typeof selector === 'string' && selector.includes('owner-'))
      reads[set].single++;
    else if (r.verb === 'LIST' && selector === undefined) reads[set].bulkPages++;
  }
};
const client = await KubeClient.create(await loadKubeConfig(cluster.kubeconfig), {
  qps,
  burst,
  userAgent: 'kubegc-bench-restart',
  intercept: count,
});
const started = performance.now();
const gc = new GarbageCollector(client, silentLogger, { bulkVerify: { minOwners } });
const add = gc.deleteQueue.add.bind(gc.deleteQueue);
gc.deleteQueue.add = (key, lane) => {
  if (sets.healthy.has(key)) queued.healthy++;
  if (sets.leaked.has(key)) queued.leaked++;
  add(key, lane);
};
await gc.sync();
const syncedAfter = (performance.now() - started) / 1000;
gc.startWorkers();

const leftInLeaked = async (): Promise<number> => {
  const list = await admin.request<{ items: { metadata: { name: string } }[] }>(
    'GET',
    `/api/v1/namespaces/${leaked}/configmaps`,
    { query: { limit: 2 } },
  );
  return list.items.filter((i) => i.metadata.name !== 'kube-root-ca.crt').length;
};
while ((await leftInLeaked()) > 0) await new Promise((r) => setTimeout(r, 100));
const collectedAfter = (performance.now() - started) / 1000;
await gc.stop();
client.close();
await deleteNamespace(admin, healthy);
await deleteNamespace(admin, leaked);
admin.close();

const result = {
  n,
  qps,
  burst,
  minOwners,
  syncedAfterSeconds: Number(syncedAfter.toFixed(2)),
  leakedCollectedAfterSeconds: Number(collectedAfter.toFixed(2)),
  queuedOwners: queued,
  ownerReads: reads,
  leakedRequests,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
