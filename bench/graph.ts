// In-process graph throughput, no API server: synthetic informer pages go
// through the real JSON parse + trimMeta + Propagator + OwnershipGraph, with
// real (never started) WorkQueues as the sinks, exactly as the controller
// wires them.
//   node --expose-gc bench/graph.ts [--objects 1000000] [--fanout 100000]
// Prints one JSON line (GraphResult) on stdout; progress on stderr.
// Run on its own process so the heap holds nothing but the graph.
//   --cpu-profile PREFIX  V8 CPU profiles of the timed windows only (see profile-summary.ts)
//   --heap-snapshot FILE  a heap snapshot when the heap figure is taken (see heap-summary.ts)
//   --skip-updates        no update phase: the heap figure after the adds alone
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import inspector from 'node:inspector/promises';
import v8 from 'node:v8';
import type { ObjectMeta, OwnerReference, ResourceInfo } from '../src/api/resources.ts';
import { AbsentOwnerCache } from '../src/graph/absent-owner-cache.ts';
import { OwnershipGraph } from '../src/graph/graph.ts';
import { Propagator } from '../src/graph/propagator.ts';
import { trimMeta } from '../src/informers/metadata-informer.ts';
import { silentLogger } from '../src/log.ts';
import { done, WorkQueue } from '../src/queue/workqueue.ts';

export interface GraphResult {
  objects: number;
  /** Adds and one update per object, over the time spent applying them. */
  events_per_s: number;
  add_events_per_s: number;
  update_events_per_s: number;
  heap_bytes_per_object: number;
  fanout: number;
  fanout_enqueue_ms: number;
  /** Keys the delete queue held after the fanout delete (must equal fanout). */
  fanout_queued: number;
}

const resource = (group: string, r: string, kind: string): ResourceInfo => ({
  group,
  version: 'v1',
  resource: r,
  kind,
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
});
const DEPLOYMENTS = resource('apps', 'deployments', 'Deployment');
const REPLICASETS = resource('apps', 'replicasets', 'ReplicaSet');
const PODS = resource('', 'pods', 'Pod');
const CONFIGMAPS = resource('', 'configmaps', 'ConfigMap');
const SECRETS = resource('', 'secrets', 'Secret');

/** One object as an informer page item would carry it (before trimMeta). */
interface RawItem {
  resource: ResourceInfo;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
}

interface Owner {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

let rv = 1000;
const hash = (n: number): string =>
  Math.random()
    .toString(36)
    .slice(2, 2 + n)
    .padEnd(n, 'x');

function item(r: ResourceInfo, namespace: string, name: string, owner?: Owner): RawItem {
  const metadata: RawItem['metadata'] = {
    name,
    namespace,
    uid: randomUUID(),
    resourceVersion: String(rv++),
    labels: { app: name.slice(0, 12), 'pod-template-hash': hash(10) },
  };
  if (owner)
    metadata.ownerReferences = [
      { ...owner, controller: true, blockOwnerDeletion: true } satisfies OwnerReference,
    ];
  return { resource: r, metadata };
}

const asOwner = (it: RawItem): Owner => ({
  apiVersion: it.resource.group ? `${it.resource.group}/v1` : 'v1',
  kind: it.resource.kind,
  name: it.metadata.name,
  uid: it.metadata.uid,
});

/** Deployment → 2 ReplicaSets → 5 Pods each (13 objects), owners before dependents. */
function* deploymentTree(namespace: string, i: number): Generator<RawItem> {
  const d = item(DEPLOYMENTS, namespace, `web-${i}`);
  yield d;
  for (let r = 0; r < 2; r++) {
    const rs = item(REPLICASETS, namespace, `web-${i}-${hash(10)}`, asOwner(d));
    yield rs;
    for (let p = 0; p < 5; p++)
      yield item(PODS, namespace, `${rs.metadata.name}-${hash(5)}`, asOwner(rs));
  }
}

/** One ConfigMap owning `n - 1` Secrets: the many-dependents shape. */
function* manyDependents(namespace: string, name: string, n: number): Generator<RawItem> {
  const owner = item(CONFIGMAPS, namespace, name);
  yield owner;
  for (let k = 1; k < n; k++) yield item(SECRETS, namespace, `${name}-dep-${k}`, asOwner(owner));
}

/** `objects` objects: 80% Deployment trees, 20% owners with 1,000 dependents, in 100 namespaces. */
function* cluster(objects: number): Generator<RawItem> {
  let produced = 0;
  for (let i = 0; produced < objects; i++) {
    const namespace = `ns-${i % 100}`;
    const shape =
      i % 5 === 4
        ? manyDependents(namespace, `many-${i}`, Math.min(1000, objects - produced))
        : deploymentTree(namespace, i);
    for (const it of shape) {
      if (produced++ >= objects) return;
      yield it;
    }
  }
}

const OWNERS_FIRST = [DEPLOYMENTS, REPLICASETS, PODS, CONFIGMAPS, SECRETS];

/**
 * Serialised list pages of up to 500 items, resource by resource with owner
 * kinds first (as if their informers synced first), so that no virtual owner
 * is created and the queues stay empty: the figures are the graph's own.
 */
function* pages(
  items: Iterable<RawItem>,
  size = 500,
): Generator<{ r: ResourceInfo; json: string }> {
  const byResource = new Map<ResourceInfo, RawItem['metadata'][]>(OWNERS_FIRST.map((r) => [r, []]));
  for (const it of items) byResource.get(it.resource)?.push(it.metadata);
  for (const [r, all] of byResource) {
    for (let i = 0; i < all.length; i += size) {
      const page = all.slice(i, i + size).map((metadata) => ({ metadata }));
      yield { r, json: JSON.stringify({ items: page }) };
    }
  }
}

interface Harness {
  graph: OwnershipGraph;
  propagator: Propagator;
  deleteQueue: WorkQueue;
}

function harness(): Harness {
  const queue = (name: string): WorkQueue =>
    new WorkQueue({ name, concurrency: 20, process: () => Promise.resolve(done) });
  const deleteQueue = queue('garbage_collector_attempt_to_delete');
  const orphanQueue = queue('garbage_collector_attempt_to_orphan');
  const graph = new OwnershipGraph();
  const propagator = new Propagator(
    graph,
    new AbsentOwnerCache(4096),
    {
      attemptToDelete: (uid) => deleteQueue.add(uid),
      attemptToDeleteRateLimited: (uid) => deleteQueue.addRateLimited(uid),
      attemptToOrphan: (uid) => orphanQueue.add(uid),
    },
    silentLogger,
  );
  return { graph, propagator, deleteQueue };
}

interface ParsedPage {
  r: ResourceInfo;
  metas: ObjectMeta[];
}

/** JSON.parse + trimMeta, as the informer does, ahead of the timed window: parsing is not the graph's cost. */
function parse(source: Iterable<{ r: ResourceInfo; json: string }>): ParsedPage[] {
  const out: ParsedPage[] = [];
  for (const { r, json } of source) {
    const page = JSON.parse(json) as { items: { metadata: Parameters<typeof trimMeta>[0] }[] };
    out.push({ r, metas: page.items.flatMap((i) => trimMeta(i.metadata) ?? []) });
  }
  return out;
}

/** Pushes page after page into the propagator, as informers do, each page until applied. */
async function feed(h: Harness, parsed: ParsedPage[]): Promise<{ events: number; ms: number }> {
  let events = 0;
  const t0 = performance.now();
  for (const { r, metas } of parsed) {
    for (const meta of metas) h.propagator.push({ type: 'upsert', resource: r, meta });
    await h.propagator.onIdle();
    events += metas.length;
  }
  return { events, ms: performance.now() - t0 };
}

/** With --cpu-profile PREFIX, V8 profiles only the timed windows: PREFIX-<phase>.cpuprofile. */
async function profiled<T>(phase: string, fn: () => Promise<T>): Promise<T> {
  const prefix = stringFlag('--cpu-profile');
  if (!prefix) return fn();
  const session = new inspector.Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(`${prefix}-${phase}.cpuprofile`, JSON.stringify(profile));
    session.disconnect();
  }
}

function heapUsed(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Re-serialises every object with a new resourceVersion: one MODIFIED per object. */
function* updates(objects: RawItem[]): Generator<RawItem> {
  for (const it of objects)
    yield { ...it, metadata: { ...it.metadata, resourceVersion: String(rv++) } };
}

async function fanoutEnqueue(h: Harness, fanout: number): Promise<{ ms: number; queued: number }> {
  const items = [...manyDependents('fanout', 'fanout-owner', fanout + 1)];
  await feed(h, parse(pages(items)));
  const owner = items[0];
  if (!owner || h.deleteQueue.depth !== 0) throw new Error('fanout set-up left keys queued');
  return profiled('fanout', async () => {
    const t0 = performance.now();
    h.propagator.push({
      type: 'delete',
      resource: CONFIGMAPS,
      meta: { uid: owner.metadata.uid, name: owner.metadata.name, namespace: 'fanout' },
    });
    await h.propagator.onIdle();
    return { ms: performance.now() - t0, queued: h.deleteQueue.depth };
  });
}

export async function runGraphBench(objects: number, fanout: number): Promise<GraphResult> {
  const h = harness();
  const base = heapUsed();
  // The raw items live only until the update phase is over, and are dropped before the heap figure.
  let raw: RawItem[] | undefined = [...cluster(objects)];
  let parsed = parse(pages(raw));
  process.stderr.write(`graph: applying ${objects} adds\n`);
  const adds = await profiled('adds', () => feed(h, parsed));
  if (h.graph.order !== objects) throw new Error(`graph holds ${h.graph.order}, want ${objects}`);
  // --skip-updates: the heap figure after the adds alone.
  parsed = process.argv.includes('--skip-updates') ? [] : parse(pages(updates(raw)));
  raw = undefined;
  process.stderr.write(`graph: applying ${parsed.length ? objects : 0} updates\n`);
  const upd = await profiled('updates', () => feed(h, parsed));
  parsed = [];
  // Heap figure with the raw items dropped: graph + queues only.
  const heapBytes = heapUsed() - base;
  process.stderr.write(`graph: heap ${(heapBytes / objects).toFixed(0)} B/object\n`);
  const snapshot = stringFlag('--heap-snapshot');
  if (snapshot) v8.writeHeapSnapshot(snapshot);
  process.stderr.write(`graph: fanout of ${fanout}\n`);
  const f = await fanoutEnqueue(h, fanout);
  return {
    objects,
    events_per_s: ((adds.events + upd.events) * 1000) / (adds.ms + upd.ms),
    add_events_per_s: (adds.events * 1000) / adds.ms,
    update_events_per_s: upd.events ? (upd.events * 1000) / upd.ms : 0,
    heap_bytes_per_object: heapBytes / objects,
    fanout,
    fanout_enqueue_ms: f.ms,
    fanout_queued: f.queued,
  };
}

function stringFlag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const v = i === -1 ? fallback : Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
}

if (import.meta.main) {
  const result = await runGraphBench(flag('--objects', 1_000_000), flag('--fanout', 100_000));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
