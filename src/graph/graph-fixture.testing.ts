// For unit tests: an ownership graph fed by a real Propagator, with the
// work it queues recorded, and the ConfigMaps most of these tests build it
// from. Shared so that every graph a unit test builds is wired the way the
// GarbageCollector wires it (one absent-owner cache, one writer).
import type { Lane } from '../api/lanes.ts';
import type { ObjectMeta, OwnerReference, ResourceInfo } from '../api/resources.ts';
import { silentLogger, type Logger } from '../log.ts';
import { AbsentOwnerCache } from './absent-owner-cache.ts';
import { coordinatesKey, OwnershipGraph, type Identity } from './graph.ts';
import { Propagator, type GraphEvent, type PropagatorSinks } from './propagator.ts';

export const CONFIGMAPS: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
};

/** ConfigMap `cm-<uid>` in namespace `ns`, with no resourceVersion unless `extra` gives one. */
export function cmMeta(uid: string, extra: Partial<ObjectMeta> = {}): ObjectMeta {
  return { uid, name: `cm-${uid}`, namespace: 'ns', ...extra };
}

/** A reference to the ConfigMap `cmMeta(uid)` describes. */
export function cmRef(uid: string, extra: Partial<OwnerReference> = {}): OwnerReference {
  return { apiVersion: 'v1', kind: 'ConfigMap', name: `cm-${uid}`, uid, ...extra };
}

/** The identity of the ConfigMap `cmMeta(uid)` describes. */
export function cmIdentity(uid: string, extra: Partial<Identity> = {}): Identity {
  return { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: `cm-${uid}`, uid, ...extra };
}

/** The graph's coordinates key of that ConfigMap. */
export function cmKey(uid: string, namespace = 'ns', name = `cm-${uid}`): string {
  return coordinatesKey('v1', 'ConfigMap', namespace, name, uid);
}

/** An informer's add or update. */
export function upsert(meta: ObjectMeta, resource: ResourceInfo = CONFIGMAPS): GraphEvent {
  return { type: 'upsert', resource, meta };
}

/** An informer's delete. */
export function del(meta: ObjectMeta, resource: ResourceInfo = CONFIGMAPS): GraphEvent {
  return { type: 'delete', resource, meta };
}

/** A worker's verdict that no object with this identity exists, reached in `lane` (the user's unless said). */
export function virtualDelete(identity: Identity, lane: Lane = 'user'): GraphEvent {
  return { type: 'virtualDelete', identity, lane };
}

export interface GraphFixtureOptions {
  /** The absent-owner cache's capacity (AbsentOwnerCache's default when not given). */
  absentCapacity?: number;
  /** Sinks that replace the recording ones, or add observedGone / forgotten. */
  sinks?: Partial<PropagatorSinks>;
  log?: Logger;
}

export interface GraphFixture {
  graph: OwnershipGraph;
  absent: AbsentOwnerCache;
  propagator: Propagator;
  /** The uids the propagator queued, by queue, in order (unless `sinks` replaced a recorder). */
  queued: { del: string[]; rateLimited: string[]; orphan: string[] };
  /** The same, `uid@lane`: in which lane each was queued. */
  queuedIn: { del: string[]; rateLimited: string[]; orphan: string[] };
  /** Applies events at once, in order (what the single graph writer does with each). */
  apply(...events: GraphEvent[]): void;
  /** Applies an informer's add or update. */
  observe(meta: ObjectMeta, resource?: ResourceInfo): void;
  /** Applies an informer's delete. */
  observeDelete(meta: ObjectMeta, resource?: ResourceInfo): void;
  /** Forgets what was queued so far. */
  clear(): void;
}

export function graphFixture(opts: GraphFixtureOptions = {}): GraphFixture {
  const graph = new OwnershipGraph();
  const absent = new AbsentOwnerCache(opts.absentCapacity);
  const queued = { del: [] as string[], rateLimited: [] as string[], orphan: [] as string[] };
  const queuedIn = { del: [] as string[], rateLimited: [] as string[], orphan: [] as string[] };
  const record =
    (q: keyof typeof queued) =>
    (uid: string, lane: Lane): void => {
      queued[q].push(uid);
      queuedIn[q].push(`${uid}@${lane}`);
    };
  const propagator = new Propagator(
    graph,
    absent,
    {
      attemptToDelete: record('del'),
      attemptToDeleteRateLimited: record('rateLimited'),
      attemptToOrphan: record('orphan'),
      ...opts.sinks,
    },
    opts.log ?? silentLogger,
  );
  const apply = (...events: GraphEvent[]): void => {
    for (const e of events) propagator.apply(e);
  };
  return {
    graph,
    absent,
    propagator,
    queued,
    queuedIn,
    apply,
    observe: (meta, resource) => apply(upsert(meta, resource)),
    observeDelete: (meta, resource) => apply(del(meta, resource)),
    clear: () => {
      queued.del.length = 0;
      queued.rateLimited.length = 0;
      queued.orphan.length = 0;
      for (const q of Object.values(queuedIn)) q.length = 0;
    },
  };
}
