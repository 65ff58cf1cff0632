// In-process graph throughput, no API server: synthetic informer pages go
// through the real JSON parse + trimMeta + Propagator + OwnershipGraph, with
// real (never started) WorkQueues as the sinks, exactly as the controller
// wires them.
//   node --expose-gc bench/graph.ts [--objects 1000000] [--fanout 100000] [--mix realistic|chains]
//   --mix realistic       (default) half the objects in no ownership relation, dependents' pages
//                         before their owners', a few percent of updates changing owner references
//   --mix chains          the original mix: every object in an ownership chain, owners first
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
import { trimMeta } from '../src/api/resources.ts';
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
  /** Keys the fanout delete added to the delete queue (must equal fanout). */
  fanout_queued: number;
  /** Objects held as graphology nodes when the heap figure is taken (the rest are standalone). */
  graphology_nodes: number;
  /** Updates that changed owner references (none in the chains mix). */
  owner_reference_changes: number;
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
const STATEFULSETS = resource('apps', 'statefulsets', 'StatefulSet');
const CONTROLLERREVISIONS = resource('apps', 'controllerrevisions', 'ControllerRevision');
const JOBS = resource('batch', 'jobs', 'Job');
const PODS = resource('', 'pods', 'Pod');
const CONFIGMAPS = resource('', 'configmaps', 'ConfigMap');
const SECRETS = resource('', 'secrets', 'Secret');
const SERVICES = resource('', 'services', 'Service');
const SERVICEACCOUNTS = resource('', 'serviceaccounts', 'ServiceAccount');

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
  if (owner) metadata.ownerReferences = [controllerRef(owner)];
  return { resource: r, metadata };
}

const controllerRef = (owner: Owner): OwnerReference => ({
  ...owner,
  controller: true,
  blockOwnerDeletion: true,
});

const asOwner = (it: RawItem): Owner => ({
  apiVersion: it.resource.group ? `${it.resource.group}/v1` : 'v1',
  kind: it.resource.kind,
  name: it.metadata.name,
  uid: it.metadata.uid,
});

// --- --mix chains: the original synthetic mix, every object in an ownership chain.

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
function* chainsCluster(objects: number): Generator<RawItem> {
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

// --- --mix realistic (the default): about half the objects own nothing and
// are owned by nothing, as ConfigMaps, Secrets, Services and ServiceAccounts
// are in real clusters; the rest are Deployments → ReplicaSets → Pods,
// StatefulSets → ControllerRevisions and Pods, Jobs → Pods.

/** What the update phase does to an object besides a new resourceVersion. */
type Change =
  | { kind: 'orphan' } // a Pod released by its controller (labels changed)
  | { kind: 'dropSecondOwner' } // a Pod's extra, non-controller owner removed
  | { kind: 'addOwner'; owner: Owner }; // adopted (a ConfigMap) or given a second owner (a Pod)

interface Unit {
  items: RawItem[];
  /** By index in `items`. */
  changes: Map<number, Change>;
}

/**
 * One application, in a deterministic rotation: a Deployment (current and
 * old ReplicaSet, 3 Pods) with its ConfigMap, 2 Secrets, Service and
 * ServiceAccount; a StatefulSet (ControllerRevision, 3 Pods) with the same
 * five standalone objects; a Job (1 Pod) with a ConfigMap and a Secret.
 * Every ~50th Pod also names the application's ConfigMap as a second,
 * non-controller owner; the update phase changes a few percent of the owner
 * references (see Change).
 */
function unit(namespace: string, i: number): Unit {
  const items: RawItem[] = [];
  const changes = new Map<number, Change>();
  const add = (it: RawItem): RawItem => {
    items.push(it);
    return it;
  };
  const app = `app-${i}`;
  const cm = add(item(CONFIGMAPS, namespace, `${app}-config`));
  add(item(SECRETS, namespace, `${app}-tls`));
  const pods: RawItem[] = [];
  let controllerOwner: RawItem;
  switch (i % 5) {
    case 0:
    case 1:
    case 2: {
      add(item(SECRETS, namespace, `${app}-token`));
      add(item(SERVICES, namespace, app));
      add(item(SERVICEACCOUNTS, namespace, app));
      const d = add(item(DEPLOYMENTS, namespace, app));
      controllerOwner = d;
      add(item(REPLICASETS, namespace, `${app}-${hash(10)}`, asOwner(d)));
      const rs = add(item(REPLICASETS, namespace, `${app}-${hash(10)}`, asOwner(d)));
      for (let p = 0; p < 3; p++)
        pods.push(add(item(PODS, namespace, `${rs.metadata.name}-${hash(5)}`, asOwner(rs))));
      break;
    }
    case 3: {
      add(item(SECRETS, namespace, `${app}-token`));
      add(item(SERVICES, namespace, app));
      add(item(SERVICEACCOUNTS, namespace, app));
      const s = add(item(STATEFULSETS, namespace, app));
      controllerOwner = s;
      add(item(CONTROLLERREVISIONS, namespace, `${app}-${hash(10)}`, asOwner(s)));
      for (let p = 0; p < 3; p++) pods.push(add(item(PODS, namespace, `${app}-${p}`, asOwner(s))));
      break;
    }
    default: {
      const j = add(item(JOBS, namespace, app));
      controllerOwner = j;
      pods.push(add(item(PODS, namespace, `${app}-${hash(5)}`, asOwner(j))));
    }
  }
  // Deterministic per unit: i and the pod's position pick the changes.
  pods.forEach((pod, p) => {
    const k = i * 3 + p;
    const index = items.indexOf(pod);
    if (k % 50 === 7) {
      pod.metadata.ownerReferences?.push({ ...asOwner(cm), blockOwnerDeletion: true });
      if (k % 100 === 7) changes.set(index, { kind: 'dropSecondOwner' });
    } else if (k % 50 === 13) changes.set(index, { kind: 'orphan' });
    else if (k % 50 === 29) changes.set(index, { kind: 'addOwner', owner: asOwner(cm) });
  });
  // A standalone ConfigMap adopted by the application's controller.
  if (i % 40 === 11)
    changes.set(items.indexOf(cm), { kind: 'addOwner', owner: asOwner(controllerOwner) });
  return { items, changes };
}

interface Cluster {
  items: RawItem[];
  /** By index in `items`: the update phase's owner-reference changes. */
  changes: Map<number, Change>;
}

function realisticCluster(objects: number): Cluster {
  const items: RawItem[] = [];
  const changes = new Map<number, Change>();
  for (let i = 0; ; i++) {
    const namespace = `ns-${i % 200}`;
    const u = unit(namespace, i);
    if (items.length + u.items.length > objects) {
      // Whole applications only (no dangling owner): the rest are Secrets.
      while (items.length < objects) items.push(item(SECRETS, namespace, `fill-${items.length}`));
      return { items, changes };
    }
    for (const [index, c] of u.changes) changes.set(items.length + index, c);
    items.push(...u.items);
  }
}

function chains(objects: number): Cluster {
  return { items: [...chainsCluster(objects)], changes: new Map() };
}

const OWNERS_FIRST = [DEPLOYMENTS, REPLICASETS, PODS, CONFIGMAPS, SECRETS];

/**
 * Dependents first: informers list independently, and Pods (the most
 * numerous) arrive before their ReplicaSets, ReplicaSets before Deployments.
 * Pages are taken in turns from each resource (as several informers'
 * pages interleave), so later owners' pages also overtake some dependents.
 */
const DEPENDENTS_FIRST = [
  PODS,
  CONTROLLERREVISIONS,
  REPLICASETS,
  JOBS,
  STATEFULSETS,
  DEPLOYMENTS,
  CONFIGMAPS,
  SECRETS,
  SERVICES,
  SERVICEACCOUNTS,
];

/**
 * Serialised list pages of up to 500 items. `chains`: resource by resource
 * with owner kinds first (as if their informers synced first), so that no
 * virtual owner is created and the queues stay empty. `realistic`: pages in
 * turns across resources, dependents' resources first.
 */
function* pages(
  items: Iterable<RawItem>,
  mix: Mix,
  size = 500,
): Generator<{ r: ResourceInfo; json: string }> {
  const order = mix === 'chains' ? OWNERS_FIRST : DEPENDENTS_FIRST;
  const byResource = new Map<ResourceInfo, RawItem['metadata'][]>(order.map((r) => [r, []]));
  for (const it of items) byResource.get(it.resource)?.push(it.metadata);
  const page = (r: ResourceInfo, all: RawItem['metadata'][], i: number) => ({
    r,
    json: JSON.stringify({ items: all.slice(i, i + size).map((metadata) => ({ metadata })) }),
  });
  if (mix === 'chains') {
    for (const [r, all] of byResource)
      for (let i = 0; i < all.length; i += size) yield page(r, all, i);
    return;
  }
  for (let i = 0, more = true; more; i += size) {
    more = false;
    for (const [r, all] of byResource) {
      if (i >= all.length) continue;
      more = true;
      yield page(r, all, i);
    }
  }
}

type Mix = 'realistic' | 'chains';

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
      attemptToDelete: (uid, lane) => deleteQueue.add(uid, lane),
      attemptToDeleteRateLimited: (uid, lane) => deleteQueue.addRateLimited(uid, lane),
      attemptToOrphan: (uid, lane) => orphanQueue.add(uid, lane),
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

/**
 * Pushes page after page into the propagator, as informers do, each page
 * until applied. An applied page is let go (an informer keeps none), so the
 * collector does not trace a million parsed objects the graph no longer needs.
 */
async function feed(
  h: Harness,
  parsed: (ParsedPage | undefined)[],
): Promise<{ events: number; ms: number }> {
  let events = 0;
  const t0 = performance.now();
  for (let i = 0; i < parsed.length; i++) {
    const page = parsed[i];
    parsed[i] = undefined;
    if (!page) continue;
    for (const meta of page.metas) h.propagator.push({ type: 'upsert', resource: page.r, meta });
    await h.propagator.onIdle();
    events += page.metas.length;
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

/**
 * Re-serialises every object with a new resourceVersion: one MODIFIED per
 * object, a few of which change owner references (Cluster.changes).
 */
function* updates(c: Cluster): Generator<RawItem> {
  for (let i = 0; i < c.items.length; i++) {
    const it = c.items[i] as RawItem;
    const metadata = { ...it.metadata, resourceVersion: String(rv++) };
    const change = c.changes.get(i);
    const refs = metadata.ownerReferences ?? [];
    if (change?.kind === 'orphan') delete metadata.ownerReferences;
    else if (change?.kind === 'dropSecondOwner') metadata.ownerReferences = refs.slice(0, 1);
    else if (change?.kind === 'addOwner')
      metadata.ownerReferences = [
        ...refs,
        refs.length === 0
          ? controllerRef(change.owner)
          : { ...change.owner, blockOwnerDeletion: true },
      ];
    yield { ...it, metadata };
  }
}

async function fanoutEnqueue(h: Harness, fanout: number): Promise<{ ms: number; queued: number }> {
  const items = [...manyDependents('fanout', 'fanout-owner', fanout + 1)];
  // The realistic mix leaves the keys of its (since observed) virtual owners queued.
  const before = h.deleteQueue.depth;
  await feed(h, parse(pages(items, 'chains')));
  const owner = items[0];
  if (!owner || h.deleteQueue.depth !== before) throw new Error('fanout set-up left keys queued');
  return profiled('fanout', async () => {
    const t0 = performance.now();
    h.propagator.push({
      type: 'delete',
      resource: CONFIGMAPS,
      meta: { uid: owner.metadata.uid, name: owner.metadata.name, namespace: 'fanout' },
    });
    await h.propagator.onIdle();
    return { ms: performance.now() - t0, queued: h.deleteQueue.depth - before };
  });
}

export async function runGraphBench(
  objects: number,
  fanout: number,
  mix: Mix = 'realistic',
): Promise<GraphResult> {
  const h = harness();
  const base = heapUsed();
  // Both phases' pages are serialised before any is applied: during the timed
  // windows the heap holds the graph, JSON text (which the collector does not
  // trace) and the pages not yet applied, not a million raw objects.
  const raw = mix === 'chains' ? chains(objects) : realisticCluster(objects);
  const ownerChanges = raw.changes.size;
  const addPages = [...pages(raw.items, mix)];
  let updatePages = process.argv.includes('--skip-updates') ? [] : [...pages(updates(raw), mix)];
  raw.items.length = 0;
  raw.changes.clear();
  let parsed: (ParsedPage | undefined)[] = parse(addPages);
  addPages.length = 0;
  process.stderr.write(`graph: applying ${objects} adds (${mix} mix)\n`);
  // Collected before each timed window: parsing the pages (not the graph's
  // work) leaves collector work that would otherwise land in the window.
  heapUsed();
  const adds = await profiled('adds', () => feed(h, parsed));
  if (h.graph.order !== objects) throw new Error(`graph holds ${h.graph.order}, want ${objects}`);
  // Every owner exists, so every virtual node must have been observed since.
  if (h.graph.countVirtual() !== 0) throw new Error('virtual nodes left after the adds');
  // --skip-updates: the heap figure after the adds alone.
  parsed = parse(updatePages);
  updatePages = [];
  process.stderr.write(`graph: applying ${parsed.length ? objects : 0} updates\n`);
  heapUsed();
  const upd = await profiled('updates', () => feed(h, parsed));
  parsed = [];
  if (h.graph.order !== objects) throw new Error(`graph holds ${h.graph.order}, want ${objects}`);
  // Heap figure with the raw items dropped: graph + queues only.
  const heapBytes = heapUsed() - base;
  const graphologyNodes = h.graph.g.order;
  process.stderr.write(
    `graph: heap ${(heapBytes / objects).toFixed(0)} B/object; ${graphologyNodes} graphology nodes, ${h.graph.g.size} edges, ${h.deleteQueue.depth} keys queued\n`,
  );
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
    graphology_nodes: graphologyNodes,
    owner_reference_changes: ownerChanges,
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
  const mix = stringFlag('--mix') ?? 'realistic';
  if (mix !== 'realistic' && mix !== 'chains') throw new Error('--mix must be realistic or chains');
  const result = await runGraphBench(flag('--objects', 1_000_000), flag('--fanout', 100_000), mix);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
