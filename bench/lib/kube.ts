// API helpers for the benchmarks: bulk creation, direct deletes and a watch
// that reports when the objects we wait for are gone. All through kubegc's own
// KubeClient (keep-alive agents), with no client-side rate limit.
import { KubeClient, loadKubeConfig } from '../../src/api/client.ts';
import type { OwnerReference } from '../../src/api/resources.ts';

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

export interface ConfigMapSpec {
  name: string;
  owner?: { name: string; uid: string; blockOwnerDeletion: boolean };
  /** Bytes of data (a string value), to make objects of realistic size. */
  dataBytes?: number;
}

function ownerRef(o: NonNullable<ConfigMapSpec['owner']>): OwnerReference {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: o.name,
    uid: o.uid,
    blockOwnerDeletion: o.blockOwnerDeletion,
  };
}

/** Creates ConfigMaps with `concurrency` requests in flight; returns their UIDs in order. */
export async function createConfigMaps(
  client: KubeClient,
  ns: string,
  specs: readonly ConfigMapSpec[],
  concurrency = 100,
): Promise<string[]> {
  return pool(specs, concurrency, async (s) => {
    const metadata: Record<string, unknown> = { name: s.name };
    if (s.owner) metadata.ownerReferences = [ownerRef(s.owner)];
    const data = s.dataBytes ? { payload: 'x'.repeat(s.dataBytes) } : undefined;
    const created = await client.request<{ metadata: { uid: string } }>('POST', configmaps(ns), {
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata, data },
    });
    return created.metadata.uid;
  });
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
  const abort = new AbortController();
  const deleted = new Set<string>();
  let resolve: (t: number) => void = () => undefined;
  let reject: (e: Error) => void = () => undefined;
  const finished = new Promise<number>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const onLine = (line: string): void => {
    const ev = JSON.parse(line) as { type: string; object?: { metadata?: { name?: string } } };
    const name = ev.object?.metadata?.name;
    if (ev.type !== 'DELETED' || name === undefined) return;
    deleted.add(name);
    if (done(deleted, name)) resolve(performance.now());
  };
  const query = { watch: true, resourceVersion: fromVersion, timeoutSeconds: 3600 };
  client
    .stream(configmaps(ns), { query, signal: abort.signal }, () => undefined, onLine)
    .then(() => reject(new Error(`watch on ${ns} ended before the deletes were seen`)))
    .catch((err: unknown) => reject(err instanceof Error ? err : new Error(String(err))));
  // A rejection after success (the stream aborted by stop()) is expected.
  finished.catch(() => undefined);
  return { finished, deleted, stop: () => abort.abort() };
}
