// The read side of `kubegc doctor`: discovery, then one paginated LIST per
// resource (metadata only), a few at a time, into a Snapshot. Namespaces and
// APIServices are read in full, because their status says why a namespace is
// stuck; they are few. GET and LIST only: doctor never writes.
import { type KubeClient } from '../api/client.ts';
import { ApiError } from '../api/errors.ts';
import { METADATA_LIST_ACCEPT } from '../api/request.ts';
import { discover } from '../api/discovery.ts';
import { collectionPath, groupResource, isDeletable, type ResourceInfo } from '../api/resources.ts';
import {
  Columns,
  Snapshot,
  toSeconds,
  type ApiServiceInfo,
  type ItemMeta,
  type NamespaceCondition,
  type NamespaceInfo,
} from './snapshot.ts';

/** Only `request` is used, so tests can hand in a fake. */
export type RequestClient = Pick<KubeClient, 'request'>;

/** The scan could not produce a picture worth analysing (exit status 3). */
export class ScanError extends Error {}

export interface ScanOptions {
  /** List namespaced resources in this namespace only (cluster-scoped ones are always listed whole). */
  namespace?: string;
  /** Lists in flight at once. */
  concurrency?: number;
  pageSize?: number;
  /** How often one resource's list may start again after its continue token expired. */
  maxRestarts?: number;
  now?: () => number;
}

/**
 * Never listed: events are the bulk of many clusters, are served twice
 * (core and events.k8s.io) and are no business of a garbage collector, as in
 * `kubegc controller`.
 */
const SKIPPED = new Set(['events', 'events.events.k8s.io']);
const NAMESPACES = 'namespaces';
const APISERVICES = 'apiservices.apiregistration.k8s.io';

interface ListPage<T> {
  metadata?: { continue?: string };
  items?: T[];
}

function shortError(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}

class ContinueExpired extends Error {}

/**
 * Every page of one collection. A 410 on a continue token (the list took
 * longer than etcd keeps that revision) means the pages read so far belong
 * to a revision that is gone: `restart` discards them and the list starts
 * over, up to `maxRestarts` times.
 */
async function listAll<T>(
  client: RequestClient,
  path: string,
  o: { accept?: string; pageSize: number; maxRestarts: number },
  onItems: (items: T[]) => void,
  restart: () => void,
): Promise<void> {
  for (let restarts = 0; ; restarts++) {
    let cont: string | undefined;
    try {
      do {
        let page: ListPage<T>;
        try {
          page = await client.request<ListPage<T>>('GET', path, {
            accept: o.accept,
            query: { limit: o.pageSize, continue: cont },
            verb: 'LIST',
          });
        } catch (err) {
          if (cont && err instanceof ApiError && err.status === 410) throw new ContinueExpired();
          throw err;
        }
        onItems(page.items ?? []);
        cont = page.metadata?.continue || undefined;
      } while (cont);
      return;
    } catch (err) {
      if (!(err instanceof ContinueExpired)) throw err;
      if (restarts >= o.maxRestarts)
        throw new Error(
          `the list's continue token expired ${restarts + 1} times (410 Expired): the resource is too large to list within etcd's compaction window`,
        );
      restart();
    }
  }
}

interface RawNamespace {
  metadata?: ItemMeta;
  spec?: { finalizers?: string[] };
  status?: { phase?: string; conditions?: NamespaceCondition[] };
}

interface RawApiService {
  metadata?: ItemMeta;
  spec?: { group?: string; version?: string; service?: { namespace?: string; name?: string } };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

function namespaceInfo(n: RawNamespace): NamespaceInfo | undefined {
  const m = n.metadata;
  if (!m?.name || !m.uid) return undefined;
  return {
    name: m.name,
    uid: m.uid,
    phase: n.status?.phase,
    deleted: toSeconds(m.deletionTimestamp),
    finalizers: m.finalizers ?? [],
    specFinalizers: n.spec?.finalizers ?? [],
    conditions: (n.status?.conditions ?? []).map((c) => ({
      type: c.type,
      status: c.status,
      reason: c.reason,
      message: c.message,
      lastTransitionTime: c.lastTransitionTime,
    })),
  };
}

function apiServiceInfo(a: RawApiService): ApiServiceInfo | undefined {
  const name = a.metadata?.name;
  if (!name) return undefined;
  const available = a.status?.conditions?.find((c) => c.type === 'Available');
  return {
    name,
    group: a.spec?.group ?? '',
    version: a.spec?.version ?? '',
    service: a.spec?.service ?? undefined,
    available: available?.status === 'True',
    reason: available?.reason,
    message: available?.message,
  };
}

/** Runs the tasks with at most `concurrency` in flight. */
async function pool(tasks: (() => Promise<void>)[], concurrency: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) await (tasks[next++] as () => Promise<void>)();
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker));
}

export async function scan(client: RequestClient, o: ScanOptions = {}): Promise<Snapshot> {
  const now = o.now ?? Date.now;
  const pageSize = o.pageSize ?? 500;
  const maxRestarts = o.maxRestarts ?? 3;
  const s = new Snapshot();
  s.namespace = o.namespace;
  s.startedAt = now();

  // discover() swallows its errors into failedGroups; one plain request first
  // gives the operator the real reason (refused connection, 401, bad CA...).
  try {
    await client.request('GET', '/api', { verb: 'DISCOVERY' });
  } catch (err) {
    throw new ScanError(`cannot reach the API server: ${shortError(err)}`);
  }
  // discover() reads only `request`.
  const d = await discover(client as KubeClient);
  if (d.all.length === 0) throw new ScanError('discovery returned no resources');
  if (d.failedGroups.includes('') || d.failedGroups.includes('*'))
    throw new ScanError(
      `discovery failed for ${d.failedGroups.includes('') ? 'the core group (/api)' : 'every API group (/apis)'}: nothing could be judged absent`,
    );
  s.served = d.all;
  s.failedGroups = [...d.failedGroups].sort();
  for (const g of s.failedGroups)
    s.notScanned.push({
      resource: `*.${g}`,
      error: `discovery of group ${g} failed (an APIService that does not answer?)`,
    });

  const tasks: (() => Promise<void>)[] = [];
  const resources = d.preferred.filter(isDeletable).filter((r) => !SKIPPED.has(groupResource(r)));
  const opts = { pageSize, maxRestarts };

  const listMeta = (r: ResourceInfo, res: number): (() => Promise<void>) => {
    return async () => {
      let cols = new Columns();
      const path = collectionPath(r, r.namespaced ? o.namespace : undefined);
      try {
        await listAll<{ metadata?: ItemMeta }>(
          client,
          path,
          { ...opts, accept: METADATA_LIST_ACCEPT },
          (items) => {
            for (const it of items) cols.add(s.interner, res, it.metadata);
          },
          () => {
            cols = new Columns();
          },
        );
        s.commit(res, cols);
      } catch (err) {
        s.fail(res, shortError(err), groupResource(r));
      }
    };
  };

  /** One resource read in full: its metadata into the snapshot, and `info` of each item kept whole. */
  const listFull =
    <T extends { metadata?: ItemMeta }, I>(
      r: ResourceInfo,
      res: number,
      info: (item: T) => I | undefined,
      done: (infos: I[]) => void,
    ): (() => Promise<void>) =>
    async () => {
      let cols = new Columns();
      let infos: I[] = [];
      try {
        await listAll<T>(
          client,
          collectionPath(r),
          opts,
          (items) => {
            for (const it of items) {
              cols.add(s.interner, res, it.metadata);
              const i = info(it);
              if (i) infos.push(i);
            }
          },
          () => {
            cols = new Columns();
            infos = [];
          },
        );
        s.commit(res, cols);
        done(infos);
      } catch (err) {
        s.fail(res, shortError(err), groupResource(r));
      }
    };

  for (const r of resources) {
    const gr = groupResource(r);
    const res = s.addResource(r);
    // In full, for their status (namespace conditions, APIService availability);
    // always cluster-wide (they are few), and first.
    if (gr === NAMESPACES)
      tasks.unshift(
        listFull(r, res, namespaceInfo, (infos) => {
          s.namespaces = infos;
        }),
      );
    else if (gr === APISERVICES)
      tasks.unshift(
        listFull(r, res, apiServiceInfo, (infos) => {
          s.apiServices = infos;
        }),
      );
    else tasks.push(listMeta(r, res));
  }
  await pool(tasks, Math.max(1, o.concurrency ?? 6));
  s.finish();
  s.finishedAt = now();
  return s;
}
