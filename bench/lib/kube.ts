// API helpers for the benchmarks: bulk creation, direct deletes and a watch
// that reports when the objects we wait for are gone. All through kubegc's own
// KubeClient (keep-alive agents), with no client-side rate limit.
import { KubeClient, loadKubeConfig } from '../../src/api/client.ts';
import type { OwnerReference } from '../../src/api/resources.ts';
import { crdManifest } from '../../test/support/crd.ts';

/** A client without a client-side limit: the benchmark must never be its own bottleneck. */
export async function benchClient(kubeconfig: string): Promise<KubeClient> {
  return KubeClient.create(await loadKubeConfig(kubeconfig), {
    qps: 0,
    burst: 1,
    userAgent: 'kubegc-bench',
    requestTimeoutMs: 120_000,
  });
}

/** Runs `fn` over `items` with at most `concurrency` calls in flight; results in input order. */
export async function pool<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}

const configmaps = (ns: string): string => `/api/v1/namespaces/${ns}/configmaps`;

export async function createNamespace(client: KubeClient, name: string): Promise<void> {
  await client.request('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
  });
}

/** Starts the namespace's deletion; the namespace controller finishes it in the background. */
export async function deleteNamespace(client: KubeClient, name: string): Promise<void> {
  await client.request('DELETE', `/api/v1/namespaces/${name}`).catch(() => undefined);
}

export interface OwnerSpec {
  name: string;
  uid: string;
  blockOwnerDeletion: boolean;
}

export interface ObjectSpec {
  name: string;
  owner?: OwnerSpec;
  /** A second owner (the live-path scenario: a dependent that outlives one of its owners). */
  secondOwner?: OwnerSpec;
  /** Bytes of data (a string value), to make objects of realistic size. */
  dataBytes?: number;
}

/** The kinds the benchmarks create: core ConfigMaps and the Widget custom resource. */
interface Kind {
  apiVersion: string;
  kind: string;
  path: (ns: string) => string;
}

const CONFIGMAP: Kind = { apiVersion: 'v1', kind: 'ConfigMap', path: (ns) => configmaps(ns) };

function ownerRef(k: Kind, o: OwnerSpec): OwnerReference {
  return {
    apiVersion: k.apiVersion,
    kind: k.kind,
    name: o.name,
    uid: o.uid,
    blockOwnerDeletion: o.blockOwnerDeletion,
  };
}

/** Creates objects of `k`, each owned by objects of the same kind, `concurrency` requests in flight; their UIDs in order. */
async function createObjects(
  client: KubeClient,
  k: Kind,
  ns: string,
  specs: readonly ObjectSpec[],
  concurrency: number,
  body: (s: ObjectSpec) => Record<string, unknown>,
): Promise<string[]> {
  return pool(specs, concurrency, async (s) => {
    const metadata: Record<string, unknown> = { name: s.name };
    if (s.owner)
      metadata.ownerReferences = [
        ownerRef(k, s.owner),
        ...(s.secondOwner ? [ownerRef(k, s.secondOwner)] : []),
      ];
    const created = await client.request<{ metadata: { uid: string } }>('POST', k.path(ns), {
      body: { apiVersion: k.apiVersion, kind: k.kind, metadata, ...body(s) },
    });
    return created.metadata.uid;
  });
}

/** Creates ConfigMaps with `concurrency` requests in flight; returns their UIDs in order. */
export function createConfigMaps(
  client: KubeClient,
  ns: string,
  specs: readonly ObjectSpec[],
  concurrency = 100,
): Promise<string[]> {
  return createObjects(client, CONFIGMAP, ns, specs, concurrency, (s) =>
    s.dataBytes ? { data: { payload: 'x'.repeat(s.dataBytes) } } : {},
  );
}

export async function deleteConfigMap(
  client: KubeClient,
  ns: string,
  name: string,
  propagationPolicy: 'Background' | 'Foreground' | 'Orphan',
): Promise<void> {
  await client.request('DELETE', `${configmaps(ns)}/${name}`, {
    body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy },
  });
}

/** The resourceVersion of the namespace's ConfigMap collection, now. */
export async function collectionVersion(client: KubeClient, ns: string): Promise<string> {
  const list = await client.request<{ metadata: { resourceVersion: string } }>(
    'GET',
    configmaps(ns),
    { query: { limit: 1 } },
  );
  return list.metadata.resourceVersion;
}

export interface DeleteWatch {
  /** Resolves with performance.now() at the moment `done(deleted)` first held. */
  finished: Promise<number>;
  /** Names seen DELETED so far. */
  deleted: Set<string>;
  stop(): void;
}

/**
 * Watches the namespace's ConfigMaps from `fromVersion` (so nothing between
 * that version and the stream's start is missed) and resolves `finished` when
 * `done(deleted names)` holds. A watch, not polling: the instant is the one at
 * which the API server reported the last delete.
 */
export function watchDeletes(
  client: KubeClient,
  ns: string,
  fromVersion: string,
  done: (deleted: ReadonlySet<string>, last: string) => boolean,
): DeleteWatch {
  const deleted = new Set<string>();
  const w = watchUntil(client, ns, fromVersion, (ev) => {
    if (ev.type !== 'DELETED') return false;
    deleted.add(ev.name);
    return done(deleted, ev.name);
  });
  return { ...w, deleted };
}

/** A merge patch of one label (the live-path scenario's concurrent writer); false if the object is gone. */
export async function patchConfigMapLabel(
  client: KubeClient,
  ns: string,
  name: string,
  value: string,
): Promise<boolean> {
  try {
    await client.request('PATCH', `${configmaps(ns)}/${name}`, {
      body: { metadata: { labels: { 'bench-touch': value } } },
      contentType: 'application/merge-patch+json',
    });
    return true;
  } catch (err) {
    if ((err as { status?: number }).status === 404) return false;
    throw err;
  }
}

/** One event of a watch on the namespace's ConfigMaps. */
export interface WatchEvent {
  type: string;
  name: string;
  ownerUids: string[];
}

/**
 * Like watchDeletes, for any condition over the events: resolves `finished`
 * with performance.now() at the first event after which `done` holds.
 */
export function watchUntil(
  client: KubeClient,
  ns: string,
  fromVersion: string,
  done: (ev: WatchEvent) => boolean,
): { finished: Promise<number>; stop(): void } {
  const abort = new AbortController();
  let resolve: (t: number) => void = () => undefined;
  let reject: (e: Error) => void = () => undefined;
  const finished = new Promise<number>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  let lastVersion = fromVersion;
  let held = false;
  let failed = false;
  const onLine = (line: string): void => {
    const ev = JSON.parse(line) as {
      type: string;
      object?: {
        metadata?: { name?: string; resourceVersion?: string; ownerReferences?: { uid: string }[] };
      };
    };
    const version = ev.object?.metadata?.resourceVersion;
    if (version) lastVersion = version;
    if (ev.type === 'ERROR') {
      failed = true;
      reject(new Error(`watch on ${ns}: ${line.slice(0, 300)}`));
      return;
    }
    const name = ev.object?.metadata?.name;
    if (name === undefined || ev.type === 'BOOKMARK') return;
    const ownerUids = (ev.object?.metadata?.ownerReferences ?? []).map((r) => r.uid);
    // done() sees every event, also after it held (callers keep counting).
    if (done({ type: ev.type, name, ownerUids }) && !held) {
      held = true;
      resolve(performance.now());
    }
  };
  // The server may end a watch early (its own timeout, or a watcher it
  // judges too slow on a loaded machine): resume from the last version seen,
  // so no event is missed or seen twice; a version too old answers ERROR 410.
  const MAX_RESUMES = 100;
  const open = async (): Promise<void> => {
    for (let resumes = 0; !held && !failed && !abort.signal.aborted; resumes++) {
      if (resumes > MAX_RESUMES)
        throw new Error(`watch on ${ns} ended ${MAX_RESUMES} times before its condition held`);
      const query = {
        watch: true,
        resourceVersion: lastVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: 3600,
      };
      await client.stream(configmaps(ns), { query, signal: abort.signal }, () => undefined, onLine);
    }
    if (!held) throw new Error(`watch on ${ns} ended before its condition held`);
  };
  open().catch((err: unknown) => reject(err instanceof Error ? err : new Error(String(err))));
  finished.catch(() => undefined);
  return { finished, stop: () => abort.abort() };
}

// A custom resource for the memory measurements: kcm caches it as metadata
// only, as kubegc caches everything, so the two are compared on equal terms.
export const WIDGET_GROUP = 'bench.kubegc.io';
const WIDGET_CRD = `widgets.${WIDGET_GROUP}`;
const widgets = (ns: string): string => `/apis/${WIDGET_GROUP}/v1/namespaces/${ns}/widgets`;

/** Creates the Widget CRD (if missing) and waits until it is served. */
export async function ensureWidgetCrd(client: KubeClient): Promise<void> {
  const path = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  try {
    await client.request('POST', path, {
      body: crdManifest({ group: WIDGET_GROUP, plural: 'widgets', kind: 'Widget' }),
    });
  } catch (err) {
    if ((err as { status?: number }).status !== 409) throw err;
  }
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const crd = await client.request<{
      status?: { conditions?: { type: string; status: string }[] };
    }>('GET', `${path}/${WIDGET_CRD}`);
    const established = crd.status?.conditions?.some(
      (c) => c.type === 'Established' && c.status === 'True',
    );
    if (established) {
      // Served once the group shows in discovery, not only once Established.
      const ok = await client
        .request('GET', `/apis/${WIDGET_GROUP}/v1`)
        .then(() => true)
        .catch(() => false);
      if (ok) return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`CRD ${WIDGET_CRD} not served within 60 s`);
}

const WIDGET: Kind = {
  apiVersion: `${WIDGET_GROUP}/v1`,
  kind: 'Widget',
  path: (ns) => widgets(ns),
};

/** Creates Widgets (metadata only, an empty spec); returns their UIDs in order. */
export function createWidgets(
  client: KubeClient,
  ns: string,
  specs: readonly ObjectSpec[],
  concurrency = 100,
): Promise<string[]> {
  return createObjects(client, WIDGET, ns, specs, concurrency, () => ({ spec: {} }));
}

/**
 * Deletes every ConfigMap or Widget of the namespace (one DELETE of the
 * collection) and waits until a list finds none, so the next measurement
 * starts from an empty namespace.
 */
export async function emptyCollection(
  client: KubeClient,
  ns: string,
  kind: 'configmaps' | 'widgets',
  timeoutMs = 900_000,
): Promise<void> {
  const path = kind === 'configmaps' ? configmaps(ns) : widgets(ns);
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    const list = await client.request<{ items: unknown[] }>('GET', path, { query: { limit: 1 } });
    if (list.items.length === 0) return;
    await client.request('DELETE', path, { timeoutMs: 600_000 }).catch(() => undefined);
  }
  throw new Error(`${kind} in ${ns} not gone within ${timeoutMs / 1000} s`);
}
