// The measurements on the real control plane. Every contender runs alone (it
// is started for its repetition and stopped right after), on a fresh
// namespace, one after another on the same control plane.
import type { Cluster } from '../../cluster/controlplane.ts';
import { apiRequest, delay } from '../../cluster/controlplane.ts';
import type { KubeClient } from '../../src/api/client.ts';
import {
  bytesRead,
  controlPlanePids,
  cpuSeconds,
  heapSnapshot,
  scrapeGauge,
  settledRss,
  start,
  type ContenderSpec,
  type Extras,
  type Running,
} from './contenders.ts';
import { round2 } from './stats.ts';
import {
  collectionVersion,
  createConfigMaps,
  createNamespace,
  createWidgets,
  deleteConfigMap,
  deleteNamespace,
  emptyCollection,
  patchConfigMapLabel,
  pool,
  watchDeletes,
  watchUntil,
  type ObjectSpec,
} from './kube.ts';

export interface Env {
  cluster: Cluster;
  client: KubeClient;
  log: (line: string) => void;
  /** Experiment knobs (none in a normal run). */
  extras: Extras;
}

/** Longest a single cascade may take before it counts as failed (kcm at QPS 20 needs ~100 s for 2,000). */
const CASCADE_TIMEOUT_MS = 900_000;
let namespaces = 0;

async function freshNamespace(env: Env, prefix: string): Promise<string> {
  const ns = `${prefix}-${Date.now().toString(36)}-${++namespaces}`;
  await createNamespace(env.client, ns);
  return ns;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms / 1000} s`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const depName = (i: number): string => `dep-${String(i).padStart(6, '0')}`;

/** Creates one owner and `n` dependents. */
async function backgroundTree(env: Env, ns: string, n: number): Promise<void> {
  const [uid] = await createConfigMaps(env.client, ns, [{ name: 'owner' }]);
  if (!uid) throw new Error('owner not created');
  const owner = { name: 'owner', uid, blockOwnerDeletion: false };
  const specs = Array.from({ length: n }, (_, i): ObjectSpec => ({ name: depName(i), owner }));
  await createConfigMaps(env.client, ns, specs);
}

/** Starts a contender and waits for its initial sync, then lets its start-up burst calm down. */
async function ready(env: Env, spec: ContenderSpec): Promise<Running> {
  const gc = await start(env.cluster, spec, env.extras);
  try {
    await gc.synced;
    await delay(1000);
  } catch (err) {
    await gc.stop();
    throw err;
  }
  return gc;
}

export interface CascadeRun {
  seconds: number;
  createSeconds: number;
  /** CPU seconds used during the measured window: by the GC (the benchmark process for the ceiling), kube-apiserver, etcd. */
  cpu: WindowCost['cpu'];
  /** ConfigMap requests the API server completed in the window, by verb. */
  requests: WindowCost['requests'];
  /** Scenario-specific counts (e.g. the concurrent writer's PATCHes). */
  extra?: Record<string, number>;
}

/**
 * What the measured window cost: CPU seconds of the GC, kube-apiserver and
 * etcd (a GC competes with the API server for the same cores), and the
 * requests on ConfigMaps the API server completed, by verb (its own
 * apiserver_request_total; the benchmark adds one DELETE, the owner's).
 */
export async function windowMeter(env: Env, gcPid: number): Promise<() => Promise<WindowCost>> {
  const cp = await controlPlanePids(env.cluster);
  const pids = { gc: gcPid, apiserver: cp['kube-apiserver'] ?? 0, etcd: cp.etcd ?? 0 };
  const cpu = async (): Promise<WindowCost['cpu']> => ({
    gc: await cpuSeconds(pids.gc),
    apiserver: await cpuSeconds(pids.apiserver),
    etcd: await cpuSeconds(pids.etcd),
  });
  // Requests read outside the CPU readings, so the scrape's own cost stays out of the window.
  const before = { requests: await configMapRequests(env), cpu: await cpu() };
  return async () => {
    const afterCpu = await cpu();
    const after = { cpu: afterCpu, requests: await configMapRequests(env) };
    const requests: Record<string, number> = {};
    for (const [verb, n] of Object.entries(after.requests)) {
      const d = n - (before.requests[verb] ?? 0);
      if (d > 0) requests[verb] = d;
    }
    return {
      cpu: {
        gc: round2(after.cpu.gc - before.cpu.gc),
        apiserver: round2(after.cpu.apiserver - before.cpu.apiserver),
        etcd: round2(after.cpu.etcd - before.cpu.etcd),
      },
      requests,
    };
  };
}

export interface WindowCost {
  cpu: { gc: number; apiserver: number; etcd: number };
  requests: Record<string, number>;
}

/** apiserver_request_total for core ConfigMaps, summed by verb. */
export async function configMapRequests(env: Env): Promise<Record<string, number>> {
  // The exposition format is text: read it with the control plane's raw helper, not KubeClient (JSON).
  const res = await apiRequest(env.cluster.dir, 'GET', '/metrics');
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
  const out: Record<string, number> = {};
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes('resource="configmaps"'))
      continue;
    const verb = /verb="([^"]+)"/.exec(line)?.[1];
    const code = /code="([^"]+)"/.exec(line)?.[1] ?? '';
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!verb) continue;
    out[verb] = (out[verb] ?? 0) + value;
    // Refusals counted apart too: a 409 is a precondition that caught a stale copy.
    if (!code.startsWith('2')) out[`${verb} ${code}`] = (out[`${verb} ${code}`] ?? 0) + value;
  }
  return out;
}

/** Work started with the trigger that runs until the window is over; returns its figures. */
interface ConcurrentWork {
  stop: () => Promise<Record<string, number>>;
}

interface Watch {
  finished: Promise<number>;
  stop(): void;
}

/**
 * What every timed scenario shares: a fresh namespace holding the objects
 * `build` makes, the contender started on them (none: the ceiling), a watch
 * from the collection's version, then the window from `trigger` to the moment
 * the watch's condition held, with its cost. `trigger` may return work to stop
 * once the window is over (a concurrent writer) and scenario figures;
 * `check` runs after the window and fails the repetition if it throws.
 */
async function timedWindow<W extends Watch>(
  env: Env,
  prefix: string,
  spec: ContenderSpec | undefined,
  build: (ns: string) => Promise<void>,
  watchFrom: (ns: string, rv: string) => W,
  trigger: (ns: string) => Promise<ConcurrentWork | undefined>,
  check: (watch: W) => void = () => undefined,
): Promise<CascadeRun> {
  const ns = await freshNamespace(env, prefix);
  try {
    const t0c = performance.now();
    await build(ns);
    const createSeconds = (performance.now() - t0c) / 1000;
    const gc = spec ? await ready(env, spec) : undefined;
    try {
      const watch = watchFrom(ns, await collectionVersion(env.client, ns));
      try {
        const cost = await windowMeter(env, gc?.pid ?? process.pid);
        const t0 = performance.now();
        const running = await trigger(ns);
        let t1: number;
        let extra: Record<string, number> | undefined;
        try {
          t1 = await withTimeout(watch.finished, CASCADE_TIMEOUT_MS, `${prefix} in ${ns}`);
        } finally {
          extra = await running?.stop();
        }
        check(watch);
        return {
          seconds: (t1 - t0) / 1000,
          createSeconds,
          ...(await cost()),
          ...(extra ? { extra } : {}),
        };
      } finally {
        watch.stop();
      }
    } finally {
      await gc?.stop();
    }
  } finally {
    await deleteNamespace(env.client, ns);
  }
}

/**
 * Background cascade: owner → n dependents, DELETE the owner, seconds until
 * the watch has seen every dependent DELETED. `spec` undefined is the ceiling:
 * no GC runs, and a plain client deletes the owner and then the n dependents
 * itself with `ceilingConcurrency` requests in flight.
 */
export function cascade(
  env: Env,
  spec: ContenderSpec | undefined,
  n: number,
  ceilingConcurrency = 20,
): Promise<CascadeRun> {
  return timedWindow(
    env,
    'bench-cascade',
    spec,
    (ns) => backgroundTree(env, ns, n),
    // The owner and every dependent.
    (ns, rv) => watchDeletes(env.client, ns, rv, (gone) => gone.size >= n + 1),
    async (ns) => {
      await deleteConfigMap(env.client, ns, 'owner', 'Background');
      if (spec) return undefined;
      const names = Array.from({ length: n }, (_, i) => depName(i));
      await pool(names, ceilingConcurrency, (name) =>
        deleteConfigMap(env.client, ns, name, 'Background'),
      );
      return undefined;
    },
  );
}

/** Foreground tree: owner → `middles` objects → `leaves` each, every reference blocking. */
async function foregroundTree(
  env: Env,
  ns: string,
  middles: number,
  leaves: number,
): Promise<void> {
  const [uid] = await createConfigMaps(env.client, ns, [{ name: 'owner' }]);
  if (!uid) throw new Error('owner not created');
  const owner = { name: 'owner', uid, blockOwnerDeletion: true };
  const midSpecs = Array.from({ length: middles }, (_, m) => ({ name: `mid-${m}`, owner }));
  const midUids = await createConfigMaps(env.client, ns, midSpecs);
  const leafSpecs = midUids.flatMap((muid, m) =>
    Array.from({ length: leaves }, (_, l) => ({
      name: `leaf-${m}-${l}`,
      owner: { name: `mid-${m}`, uid: muid, blockOwnerDeletion: true },
    })),
  );
  await createConfigMaps(env.client, ns, leafSpecs);
}

/**
 * Foreground cascade over three levels: DELETE the owner with Foreground,
 * seconds until the owner itself is gone (it goes last, after every middle
 * object and leaf, which the watch checks).
 */
export function foreground(
  env: Env,
  spec: ContenderSpec,
  middles: number,
  leaves: number,
): Promise<CascadeRun> {
  const expected = 1 + middles + middles * leaves;
  return timedWindow(
    env,
    'bench-foreground',
    spec,
    (ns) => foregroundTree(env, ns, middles, leaves),
    (ns, rv) => watchDeletes(env.client, ns, rv, (_gone, last) => last === 'owner'),
    (ns) => deleteConfigMap(env.client, ns, 'owner', 'Foreground').then(() => undefined),
    (watch) => {
      if (watch.deleted.size !== expected)
        throw new Error(
          `foreground: owner gone after ${watch.deleted.size - 1} of ${expected - 1} dependents`,
        );
    },
  );
}

/**
 * The live path, first shape: every dependent has a second owner that stays.
 * Deleting the first owner (Background) must leave each dependent in place
 * with only the second reference (kcm: a live read of the dependent and of
 * the remaining owner, then a PATCH, for every one). Seconds until the watch
 * has seen every dependent without the deleted owner's reference; a dependent
 * deleted instead fails the repetition (the GC would have deleted something
 * whose owner exists).
 */
export function liveSecondOwner(env: Env, spec: ContenderSpec, n: number): Promise<CascadeRun> {
  let uid = '';
  let wrong: string | undefined;
  const released = new Set<string>();
  return timedWindow(
    env,
    'bench-live-owner',
    spec,
    async (ns) => {
      const [ownerUid, keeperUid] = await createConfigMaps(env.client, ns, [
        { name: 'owner' },
        { name: 'keeper' },
      ]);
      if (!ownerUid || !keeperUid) throw new Error('owners not created');
      uid = ownerUid;
      const owner = { name: 'owner', uid, blockOwnerDeletion: false };
      const secondOwner = { name: 'keeper', uid: keeperUid, blockOwnerDeletion: false };
      const deps = Array.from({ length: n }, (_, i): ObjectSpec => ({
        name: depName(i),
        owner,
        secondOwner,
      }));
      await createConfigMaps(env.client, ns, deps);
    },
    (ns, rv) =>
      watchUntil(env.client, ns, rv, (ev) => {
        if (ev.type === 'DELETED' && ev.name !== 'owner') wrong ??= ev.name;
        if (ev.type === 'MODIFIED' && ev.name.startsWith('dep-') && !ev.ownerUids.includes(uid))
          released.add(ev.name);
        return released.size >= n || wrong !== undefined;
      }),
    (ns) => deleteConfigMap(env.client, ns, 'owner', 'Background').then(() => undefined),
    () => {
      if (wrong !== undefined)
        throw new Error(`${wrong} was DELETED although its second owner exists`);
    },
  );
}

/**
 * The live path, second shape: dependents change between the GC's copy and
 * its DELETE. The owner is deleted (Background) while `writers` concurrent
 * clients keep patching a label on the dependents, cycling through them in
 * creation order until all are gone, so a DELETE decided from an informer's
 * copy meets a newer resourceVersion (a 409 for kubegc's precondition, then
 * a live read). Seconds until the watch has seen every dependent DELETED.
 */
export function liveChurn(
  env: Env,
  spec: ContenderSpec,
  n: number,
  writers = 10,
): Promise<CascadeRun> {
  return timedWindow(
    env,
    'bench-live-churn',
    spec,
    (ns) => backgroundTree(env, ns, n),
    (ns, rv) => watchDeletes(env.client, ns, rv, (gone) => gone.size >= n + 1),
    async (ns) => {
      await deleteConfigMap(env.client, ns, 'owner', 'Background');
      const live = Array.from({ length: n }, (_, i) => depName(i));
      let patches = 0;
      let next = 0;
      let stop = false;
      const writer = async (): Promise<void> => {
        while (!stop && live.length > 0) {
          const name = live[next++ % live.length];
          if (name === undefined) continue;
          if (await patchConfigMapLabel(env.client, ns, name, String(patches++))) continue;
          const at = live.indexOf(name);
          if (at !== -1) live.splice(at, 1);
        }
      };
      const writing = Promise.all(Array.from({ length: writers }, writer));
      return {
        stop: async () => {
          stop = true;
          await writing.catch(() => undefined);
          return { writerPatchRequests: patches };
        },
      };
    },
  );
}

export const MEMORY_NAMESPACE = 'bench-memory';

/**
 * What the memory objects are: ConfigMaps without data (kcm caches built-in
 * kinds as full typed objects, kubegc as metadata: no payload keeps that
 * difference out), ConfigMaps with 300 bytes of data, or a custom resource
 * (which kcm also caches as metadata only).
 */
export type Payload = 'empty' | 'data300' | 'cr';

export const PAYLOAD_TEXT: Record<Payload, string> = {
  empty: 'ConfigMaps without data',
  data300: 'ConfigMaps with 300 bytes of data',
  cr: 'custom resources (Widget, metadata and an empty spec)',
};

/**
 * Grows the memory namespace to `total` objects of `payload`: half owners,
 * half dependents each owned by one owner. Owners are named so that lists
 * return them before their dependents, so neither GC starts with thousands of
 * unseen ("virtual") owners to verify.
 */
export async function growMemoryObjects(
  env: Env,
  payload: Payload,
  have: number,
  total: number,
): Promise<number> {
  if (have === 0)
    await createNamespace(env.client, MEMORY_NAMESPACE).catch((err: unknown) => {
      if ((err as { status?: number }).status !== 409) throw err;
    });
  const t0 = performance.now();
  const from = have / 2;
  const to = total / 2;
  const dataBytes = payload === 'data300' ? 300 : undefined;
  const create = payload === 'cr' ? createWidgets : createConfigMaps;
  const owners = Array.from({ length: to - from }, (_, k) => ({
    name: `a-owner-${String(from + k).padStart(6, '0')}`,
    dataBytes,
  }));
  const uids = await create(env.client, MEMORY_NAMESPACE, owners);
  const dependents = owners.map((o, k): ObjectSpec => ({
    name: `b-dep-${String(from + k).padStart(6, '0')}`,
    owner: { name: o.name, uid: uids[k] ?? '', blockOwnerDeletion: false },
    dataBytes,
  }));
  await create(env.client, MEMORY_NAMESPACE, dependents);
  return (performance.now() - t0) / 1000;
}

/** Removes the memory objects of `payload`, so the next payload is measured alone. */
export async function clearMemoryObjects(env: Env, payload: Payload): Promise<number> {
  const t0 = performance.now();
  await emptyCollection(env.client, MEMORY_NAMESPACE, payload === 'cr' ? 'widgets' : 'configmaps');
  return (performance.now() - t0) / 1000;
}

export interface StartupRun {
  /** Spawn → "every informer has listed" (kcm: the same line as syncSeconds); null if not logged. */
  listedSeconds: number | null;
  /** Spawn → graph built and workers started (kcm: "all resource monitors have synced"). */
  syncSeconds: number;
  rssBytes: number;
  /** Bytes read from spawn to sync (mostly the initial lists off the wire; see bytesRead). */
  readBytes: number;
  /** CPU seconds from spawn to sync. */
  syncCpuSeconds: number;
  /** kubegc only: V8 heap in use at the same moment (from its own metrics), to tell graph from runtime. */
  heapUsedBytes?: number;
}

/** Starts the contender on what the cluster holds now: seconds to initial sync, then settled RSS. */
export async function startup(env: Env, spec: ContenderSpec): Promise<StartupRun> {
  const gc = await start(env.cluster, spec, env.extras);
  try {
    const syncSeconds = await gc.synced;
    const [readBytes, syncCpuSeconds] = [await bytesRead(gc.pid), await cpuSeconds(gc.pid)];
    const listedSeconds = await gc.listed;
    const run: StartupRun = {
      listedSeconds,
      syncSeconds,
      readBytes,
      syncCpuSeconds,
      rssBytes: await settledRss(gc.pid),
    };
    if (gc.metricsUrl)
      run.heapUsedBytes = await scrapeGauge(gc.metricsUrl, 'nodejs_heap_size_used_bytes');
    if (spec.kind === 'kubegc' && env.extras.heapSnapshotDir)
      env.log(
        `heap snapshot: ${await heapSnapshot(gc.pid, env.extras.heapSnapshotDir, gc.metricsUrl)}`,
      );
    return run;
  } finally {
    await gc.stop();
  }
}
