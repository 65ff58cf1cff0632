// The attempt-to-delete worker: gathers the inputs of a decision (graph
// snapshot, live reads of the object and its owners), asks decide.ts, and
// carries the decision out with guarded API calls.
import { ApiError } from '../api/client.ts';
import {
  groupResource,
  groupVersion,
  type ObjectMeta,
  type OwnerReference,
  type ResourceInfo,
  type RestMapper,
} from '../api/resources.ts';
import type { AbsentOwnerCache } from '../graph/absent-owner-cache.ts';
import {
  coordinatesKey,
  refNamesOwner,
  type NodeSnapshot,
  type OwnershipGraph,
} from '../graph/graph.ts';
import type { GraphEvent } from '../graph/propagator.ts';
import type { Logger } from '../log.ts';
import { done, failed, requeue, retryAfter, type ProcessResult } from '../queue/workqueue.ts';
import {
  classifyLookup,
  decide,
  decideDeletingDependents,
  FOREGROUND_FINALIZER,
  onlyBlockOwnerDeletionChanged,
  sameOwnerReferences,
  type ClassifiedOwner,
  type DeletionPropagation,
} from './decide.ts';
import type { EventRecorder } from './events.ts';
import type { GcApi } from './operations.ts';

export interface GcMetricsHooks {
  deletion?(resource: string, policy: DeletionPropagation, dryRun: boolean): void;
  /** Seconds from the owner known gone to the dependent's DELETE issued. */
  decisionLatency?(seconds: number): void;
  orphaning?(resource: string, dryRun: boolean): void;
}

export interface GcContext {
  api: GcApi;
  graph: OwnershipGraph;
  absent: AbsentOwnerCache;
  mapper: () => RestMapper;
  /** Feeds verified facts back to the single graph writer. */
  pushGraphEvent: (e: GraphEvent) => void;
  enqueueDelete: (uid: string) => void;
  log: Logger;
  dryRun: boolean;
  metrics?: GcMetricsHooks;
  events?: EventRecorder;
  /**
   * The watched resources that might hold unseen dependents of an owner
   * deleted with Orphan: those whose informer may not have reported every
   * object that exists, or existed at resourceVersion `rv` (see attemptToOrphan).
   */
  watchesBehind?: (ownerNamespaced: boolean, rv: string) => string[];
  /** Resolves once the graph holds every event the informers delivered so far. */
  graphFlushed?: () => Promise<void>;
  /** How long an Orphan deletion waits for watches that are behind (default 2 min). */
  orphanWatchWaitMs?: number;
}

export class UnresolvableKindError extends Error {}

function resolve(ctx: GcContext, apiVersion: string, kind: string): ResourceInfo {
  const r = ctx.mapper().resolve(apiVersion, kind);
  if (!r) {
    throw new UnresolvableKindError(
      `cannot resolve ${apiVersion}, Kind=${kind} to a served resource; not deciding on this basis (retrying)`,
    );
  }
  return r;
}

/** Objects already told about a problem, so a retried failure records one event, not one per retry. */
const reported = new Map<string, true>();
const REPORTED_CAPACITY = 10_000;

/** A Warning event on an object, for a reason a user can fix; at most once per object and reason. */
export function warnOnce(ctx: GcContext, uid: string, reason: string, note: string): void {
  const key = `${uid}/${reason}`;
  if (reported.has(key) || !ctx.events) return;
  reported.set(key, true);
  if (reported.size > REPORTED_CAPACITY) {
    const oldest = reported.keys().next().value;
    if (oldest !== undefined) reported.delete(oldest);
  }
  const n = ctx.graph.get(uid);
  if (!n || n.virtual) return;
  ctx.events.warning(
    {
      apiVersion: n.apiVersion,
      kind: n.kind,
      namespace: n.namespace || undefined,
      name: n.name,
      uid,
    },
    reason,
    'GarbageCollect',
    note,
  );
}

export async function attemptToDelete(ctx: GcContext, uid: string): Promise<ProcessResult> {
  try {
    return await attemptToDeleteItem(ctx, uid);
  } catch (err) {
    // Throttled (a write is never re-sent on an old decision): decide again
    // once the server's Retry-After has passed, as it asked.
    if (err instanceof ApiError && err.status === 429) {
      ctx.log.debug('throttled; deciding again after Retry-After', {
        uid,
        retryAfterMs: err.retryAfterMs ?? 1000,
        error: err.message,
      });
      return retryAfter(err.retryAfterMs ?? 1000);
    }
    if (err instanceof ApiError && err.status === 403) {
      warnOnce(
        ctx,
        uid,
        'GarbageCollectionForbidden',
        `kubegc may not collect this object: ${err.message}`,
      );
    }
    throw err;
  }
}

async function attemptToDeleteItem(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const snap = ctx.graph.snapshot(uid);
  if (!snap) return done;
  if (snap.beingDeleted && !snap.deletingDependents) return done;
  // Observed with no owner references and not deleting its dependents: there
  // is nothing to decide. Typically an owner first known from a dependent
  // listed before it (queued then, as a virtual node) and observed since:
  // after start-up there can be tens of thousands of such keys, and a live
  // read each would only confirm that. If the graph is late to show a new
  // reference, that update event queues what needs deciding.
  if (!snap.virtual && !snap.deletingDependents && snap.ownerReferences.length === 0) return done;
  let resource: ResourceInfo;
  try {
    resource = resolve(ctx, snap.apiVersion, snap.kind);
  } catch (err) {
    // An owner of an unknown kind: its dependents are kept, and told why.
    if (snap.virtual) {
      for (const dep of snap.dependents)
        warnOnce(ctx, dep.uid, 'OwnerRefUnresolvable', `${(err as Error).message}; kept`);
    }
    return failed(err);
  }
  if (resource.namespaced && !snap.namespace) {
    // A virtual owner of a namespaced kind known only from cluster-scoped
    // dependents: such references are invalid and cannot be looked up. Each
    // dependent is decided on its own (and never collected for it).
    for (const dep of snap.dependents) ctx.enqueueDelete(dep.uid);
    return done;
  }
  const namespace = resource.namespaced ? snap.namespace : '';
  const fromGraph = await deleteFromGraphCopy(ctx, snap, resource, namespace);
  if (fromGraph) return fromGraph;
  const live = await ctx.api.getMeta(resource, namespace, snap.name);
  if (!live || live.uid !== uid) {
    // Nothing with these coordinates and UID exists: the graph must learn it.
    ctx.pushGraphEvent({
      type: 'virtualDelete',
      identity: { apiVersion: snap.apiVersion, kind: snap.kind, namespace, name: snap.name, uid },
    });
    return done;
  }
  const result = await decideAndAct(ctx, snap, resource, live);
  // A node we know only as an owner, yet it exists: check again until its informer reports it.
  if (result.result === 'done' && snap.virtual && ctx.graph.get(uid)?.virtual) return requeue();
  return result;
}

/**
 * The cascade's fast path. When every owner is already known gone (the
 * absent-owner cache, filled only by observed deletes and live reads) or seen
 * by the informers in foreground deletion (irreversible: it ends with the
 * owner gone), the graph's copy of the object is enough to decide on: the
 * DELETE carries {uid, resourceVersion} preconditions, so the API server
 * applies it only to exactly the version decided on, and a 409 sends the
 * object the usual way (a live read, then a decision). One request per
 * dependent instead of two or three. Anything but a plain delete is left to
 * the live path, and so is every owner the graph cannot vouch for.
 */
async function deleteFromGraphCopy(
  ctx: GcContext,
  snap: NodeSnapshot,
  resource: ResourceInfo,
  namespace: string,
): Promise<ProcessResult | undefined> {
  if (
    ctx.dryRun ||
    snap.virtual ||
    snap.beingDeleted ||
    snap.deletingDependents ||
    snap.hasGcFinalizer ||
    snap.resourceVersion === '' ||
    snap.ownerReferences.length === 0
  )
    return undefined;
  const decidedAt = performance.now();
  const copy: ObjectMeta = {
    uid: snap.uid,
    name: snap.name,
    resourceVersion: snap.resourceVersion,
    ownerReferences: [...snap.ownerReferences],
  };
  if (namespace) copy.namespace = namespace;
  const owners: ClassifiedOwner[] = [];
  for (const ref of snap.ownerReferences) {
    const known = knownAbsent(ctx, namespace, ref) ?? observedOwner(ctx, namespace, ref);
    if (!known) return undefined;
    owners.push(known);
  }
  // Nothing known gone: nothing to collect here (the live path checks why it was queued).
  if (!owners.some((o) => o.state === 'dangling' || o.state === 'waiting')) return undefined;
  // The graph shows an owner as the informers last saw it, which can lag the
  // API server by seconds: an owner switched from Foreground to Orphan (a
  // second DELETE) still looks "waiting" here. Upstream's window is one GET;
  // ours would be the informer's lag. So an owner the graph shows waiting is
  // read live before its dependent is deleted (a dangling one needs no read:
  // the cache holds only observed deletes and live 404s, and a gone owner
  // does not come back under its UID).
  for (let i = 0; i < owners.length; i++) {
    const o = owners[i];
    if (o?.state !== 'waiting') continue;
    let fresh: ClassifiedOwner;
    try {
      fresh = await readWaitingOwner(ctx, copy, o.ref, decidedAt);
    } catch {
      return undefined; // the live path reports what went wrong
    }
    if (fresh.state !== 'waiting' && fresh.state !== 'dangling') return undefined;
    owners[i] = fresh;
  }
  const decision = decide({ live: copy, owners, dependents: snap.dependents });
  if (decision.action === 'removeOwnerReferences') {
    // An owner the graph shows alive keeps the object; only references to
    // owners known gone go, from exactly the copy decided on (a 409 sends it
    // the live way). The graph may be late to show that owner gone too: then
    // its delete event queues the object again, and keeping is the safe error.
    const patched = await ctx.api.removeOwnerReferencesAt(resource, copy, decision.uids);
    if (patched === 'conflict') return undefined;
    if (patched === 'gone') return learnGone(ctx, resource, copy);
    ctx.log.info('removed owner references', {
      ...decisionFields(resource, copy, decision.reason, owners),
      removed: decision.uids,
      fromGraph: true,
    });
    return done;
  }
  if (decision.action !== 'delete' || decision.unblockOwnerReferences) return undefined;
  const outcome = await ctx.api.delete(resource, copy, decision.policy, true);
  if (outcome === 'conflict') return undefined;
  if (outcome === 'gone') return learnGone(ctx, resource, copy);
  reportDeleted(ctx, resource, decisionFields(resource, copy, decision.reason, owners), {
    policy: decision.policy,
    owners,
    fromGraph: true,
  });
  return done;
}

interface OwnerRead {
  sentAt: number;
  read: Promise<ClassifiedOwner>;
}
/** Live reads of owners, by owner UID and dependent namespace: the one in flight and the one queued after it. */
const ownerReads = new Map<string, { current: OwnerRead; next?: Promise<ClassifiedOwner> }>();

/**
 * A live classification of an owner the graph shows waiting. In a foreground
 * cascade many dependents of one owner are decided at once. A read sent after
 * a dependent's decision began shows the API server as of then or later,
 * which is all the guarantee asks; so a decision joins the read in flight if
 * it was sent after the decision began, else the one read queued to be sent
 * when that one returns. One read per owner at a time serves every worker.
 */
function readWaitingOwner(
  ctx: GcContext,
  dependent: ObjectMeta,
  ref: OwnerReference,
  decidedAt: number,
): Promise<ClassifiedOwner> {
  const key = `${ref.uid}|${dependent.namespace ?? ''}`;
  const withRef = (o: ClassifiedOwner): ClassifiedOwner => ({ ...o, ref });
  const send = (): OwnerRead => {
    const r: OwnerRead = { sentAt: performance.now(), read: classifyOwner(ctx, dependent, ref) };
    const settle = (): void => {
      const slot = ownerReads.get(key);
      if (slot?.current === r && !slot.next) ownerReads.delete(key);
    };
    r.read.then(settle, settle);
    return r;
  };
  const slot = ownerReads.get(key);
  if (!slot) {
    const r = send();
    ownerReads.set(key, { current: r });
    return r.read;
  }
  if (slot.current.sentAt >= decidedAt) return slot.current.read.then(withRef);
  slot.next ??= slot.current.read
    .catch(() => undefined)
    .then(() => {
      const r = send();
      slot.current = r;
      slot.next = undefined;
      return r.read;
    });
  return slot.next.then(withRef);
}

/** An owner reference the absent-owner cache knows to be gone, as upstream checks it first. */
function knownAbsent(
  ctx: GcContext,
  dependentNamespace: string,
  ref: OwnerReference,
): ClassifiedOwner | undefined {
  // An owner the informers observe alive wins over the cache: a UID recorded
  // absent can come back (an etcd restore, an aggregated API that answered
  // 404 for a while). Its entries are dropped and the owner is read live.
  const observed = ctx.graph.get(ref.uid);
  if (observed && !observed.virtual && refNamesOwner(ref, observed, dependentNamespace)) {
    for (const ns of ['', dependentNamespace])
      ctx.absent.delete(coordinatesKey(ref.apiVersion, ref.kind, ns, ref.name, ref.uid));
    return undefined;
  }
  // A cluster-scoped key, then one in the dependent's namespace.
  for (const ns of ['', dependentNamespace]) {
    const since = ctx.absent.goneSince(
      coordinatesKey(ref.apiVersion, ref.kind, ns, ref.name, ref.uid),
    );
    if (since !== undefined)
      return { ref, state: 'dangling', detail: 'absent-owner-cache', goneSince: since };
  }
  return undefined;
}

/**
 * An owner as the informers observe it, under exactly the coordinates the
 * reference names: 'waiting' when seen with a deletionTimestamp and the
 * foregroundDeletion finalizer (irreversible: it ends with the owner gone);
 * 'solid' when not being deleted: it exists as far as the graph knows, which
 * only ever keeps the dependent (the one decision it can lead to is removing
 * references to other owners that are known gone). Anything else (virtual,
 * being deleted another way, other coordinates): undefined, for a live read.
 */
function observedOwner(
  ctx: GcContext,
  dependentNamespace: string,
  ref: OwnerReference,
): ClassifiedOwner | undefined {
  const owner = ctx.graph.get(ref.uid);
  if (!owner || owner.virtual || !refNamesOwner(ref, owner, dependentNamespace)) return undefined;
  if (!owner.beingDeleted) return { ref, state: 'solid', detail: 'graph: owner-observed' };
  if (owner.hasForegroundFinalizer)
    return { ref, state: 'waiting', detail: 'graph: owner-deleting-dependents' };
  return undefined;
}

function decisionFields(
  resource: ResourceInfo,
  meta: ObjectMeta,
  reason: string,
  owners: ClassifiedOwner[],
): Record<string, unknown> {
  return {
    resource: groupResource(resource),
    namespace: meta.namespace ?? '',
    name: meta.name,
    uid: meta.uid,
    reason,
    owners: owners.map((o) => ({
      kind: o.ref.kind,
      name: o.ref.name,
      uid: o.ref.uid,
      state: o.state,
      detail: o.detail,
    })),
  };
}

function reportDeleted(
  ctx: GcContext,
  resource: ResourceInfo,
  fields: Record<string, unknown>,
  how: { policy: DeletionPropagation; owners: ClassifiedOwner[]; fromGraph: boolean },
): void {
  ctx.log.info('deleted', { ...fields, propagationPolicy: how.policy, fromGraph: how.fromGraph });
  ctx.metrics?.deletion?.(groupResource(resource), how.policy, false);
  // Owner gone → this DELETE: from the moment the last of its owners was known gone.
  let lastGone: number | undefined;
  for (const o of how.owners) {
    if (o.goneSince !== undefined && (lastGone === undefined || o.goneSince > lastGone))
      lastGone = o.goneSince;
  }
  if (lastGone !== undefined) ctx.metrics?.decisionLatency?.((Date.now() - lastGone) / 1000);
}

async function decideAndAct(
  ctx: GcContext,
  snap: NodeSnapshot,
  resource: ResourceInfo,
  live: ObjectMeta,
): Promise<ProcessResult> {
  if (snap.deletingDependents) return processDeletingDependents(ctx, snap, resource, live);
  // Already being deleted (the graph has not seen it yet): its own finalizers
  // carry the delete on, and the update event will queue it if needed.
  if (live.deletionTimestamp) return done;
  const refs = live.ownerReferences ?? [];
  if (refs.length === 0) return done;

  const owners: ClassifiedOwner[] = [];
  for (const ref of refs) {
    try {
      owners.push(await classifyOwner(ctx, live, ref));
    } catch (err) {
      if (err instanceof UnresolvableKindError)
        warnOnce(ctx, live.uid, 'OwnerRefUnresolvable', `${err.message}; kept`);
      return failed(err);
    }
  }
  const decision = decide({ live, owners, dependents: snap.dependents });
  const fields = decisionFields(resource, live, decision.reason, owners);
  switch (decision.action) {
    case 'none':
      if (owners.some((o) => o.state === 'invalid')) ctx.log.warn('not collecting object', fields);
      else ctx.log.debug('keeping object', fields);
      return done;
    case 'removeOwnerReferences': {
      if (ctx.dryRun) {
        ctx.log.info('dry run: would remove owner references', {
          ...fields,
          remove: decision.uids,
        });
        return done;
      }
      await ctx.api.removeOwnerReferences(resource, live, decision.uids);
      ctx.log.info('removed owner references', { ...fields, removed: decision.uids });
      return done;
    }
    case 'delete':
      return deleteObject(
        ctx,
        resource,
        live,
        decision.policy,
        decision.unblockOwnerReferences,
        fields,
        owners,
      );
  }
}

async function classifyOwner(
  ctx: GcContext,
  live: ObjectMeta,
  ref: OwnerReference,
): Promise<ClassifiedOwner> {
  const dependentNamespace = live.namespace ?? '';
  // The absent-owner cache is checked before resolving the kind, as upstream does.
  const gone = knownAbsent(ctx, dependentNamespace, ref);
  if (gone) return gone;
  const ownerResource = resolve(ctx, ref.apiVersion, ref.kind);
  if (ownerResource.namespaced && !dependentNamespace) {
    return { ref, state: 'invalid', detail: 'cluster-scoped dependent of a namespaced owner kind' };
  }
  const ownerNamespace = ownerResource.namespaced ? dependentNamespace : '';
  const owner = await ctx.api.getMeta(ownerResource, ownerNamespace, ref.name);
  const classified = classifyLookup(
    ref,
    owner
      ? {
          found: true,
          uid: owner.uid,
          deletionTimestamp: owner.deletionTimestamp,
          finalizers: owner.finalizers,
        }
      : { found: false },
  );
  if (classified.state === 'dangling') {
    classified.goneSince = Date.now();
    ctx.absent.add(
      coordinatesKey(ref.apiVersion, ref.kind, ownerNamespace, ref.name, ref.uid),
      classified.goneSince,
    );
    reportInvalidNamespace(ctx, live, ref, ownerNamespace);
  }
  return classified;
}

/**
 * The owner's UID exists, but in another namespace: owner references cannot
 * cross namespaces, so the reference counts as absent and the dependent gets
 * a Warning event saying so (as upstream's reportInvalidNamespaceOwnerRef).
 */
function reportInvalidNamespace(
  ctx: GcContext,
  live: ObjectMeta,
  ref: OwnerReference,
  lookedIn: string,
): void {
  const observed = ctx.graph.get(ref.uid);
  if (!observed || observed.virtual || !lookedIn || observed.namespace === lookedIn) return;
  const note = `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: ${lookedIn}, name: ${ref.name}, uid: ${ref.uid}] does not exist in namespace "${lookedIn}"`;
  ctx.log.warn('invalid cross-namespace owner reference', {
    namespace: live.namespace ?? '',
    name: live.name,
    uid: live.uid,
    owner: ref.uid,
    ownerNamespace: observed.namespace,
  });
  const self = ctx.graph.get(live.uid);
  ctx.events?.warning(
    {
      apiVersion: self?.apiVersion ?? 'v1',
      kind: self?.kind ?? '',
      namespace: live.namespace,
      name: live.name,
      uid: live.uid,
    },
    'OwnerRefInvalidNamespace',
    'GarbageCollect',
    note,
  );
}

async function deleteObject(
  ctx: GcContext,
  resource: ResourceInfo,
  live: ObjectMeta,
  policy: DeletionPropagation,
  unblock: boolean,
  fields: Record<string, unknown>,
  owners: ClassifiedOwner[],
): Promise<ProcessResult> {
  if (ctx.dryRun) {
    ctx.log.info('dry run: would delete', { ...fields, propagationPolicy: policy });
    ctx.metrics?.deletion?.(groupResource(resource), policy, true);
    return done;
  }
  if (unblock) return unblockThenDelete(ctx, resource, live, policy, fields, owners);
  let outcome = await ctx.api.delete(resource, live, policy, true);
  if (outcome === 'conflict') {
    // Changed since the read. Retry without resourceVersion only if the owner
    // references are unchanged (upstream #114603); otherwise decide again.
    const fresh = await ctx.api.getMeta(resource, live.namespace, live.name);
    if (!fresh || fresh.uid !== live.uid) return learnGone(ctx, resource, live);
    if (!sameOwnerReferences(fresh.ownerReferences, live.ownerReferences)) {
      ctx.enqueueDelete(live.uid);
      return done;
    }
    outcome = await ctx.api.delete(resource, fresh, policy, false);
    if (outcome === 'conflict') return requeue();
  }
  if (outcome === 'gone') return learnGone(ctx, resource, live);
  reportDeleted(ctx, resource, fields, { policy, owners, fromGraph: false });
  return done;
}

/**
 * The cycle breaker: set the object's own references' blockOwnerDeletion to
 * false, then DELETE it (Foreground). Both writes are guarded by the version
 * decided on: the PATCH by the resourceVersion read, the DELETE by the one the
 * PATCH returned. A 409 on the PATCH is retried only when nothing but
 * blockOwnerDeletion changed (nothing the decision rests on); any other
 * change, or a 409 on the DELETE, means the object must be decided again (a
 * controller may have given it a live owner meanwhile).
 */
async function unblockThenDelete(
  ctx: GcContext,
  resource: ResourceInfo,
  live: ObjectMeta,
  policy: DeletionPropagation,
  fields: Record<string, unknown>,
  owners: ClassifiedOwner[],
): Promise<ProcessResult> {
  let current = live;
  for (let attempt = 0; ; attempt++) {
    const u = await ctx.api.unblockOwnerReferences(resource, current);
    if (u.outcome === 'gone') return learnGone(ctx, resource, live);
    if (u.outcome === 'patched') {
      current = u.meta;
      break;
    }
    const fresh = await ctx.api.getMeta(resource, live.namespace, live.name);
    if (!fresh || fresh.uid !== live.uid) return learnGone(ctx, resource, live);
    if (attempt >= 4 || !onlyBlockOwnerDeletionChanged(live, fresh)) {
      ctx.log.debug('object changed while breaking a cycle; deciding again', {
        uid: live.uid,
        name: live.name,
      });
      ctx.enqueueDelete(live.uid);
      return done;
    }
    current = fresh;
  }
  const outcome = await ctx.api.delete(resource, current, policy, true);
  if (outcome === 'conflict') {
    ctx.enqueueDelete(live.uid);
    return done;
  }
  if (outcome === 'gone') return learnGone(ctx, resource, live);
  reportDeleted(ctx, resource, fields, { policy, owners, fromGraph: false });
  return done;
}

/**
 * A DELETE or PATCH answered 404 (or the name now holds another UID): the
 * object decided on no longer exists. The graph must learn it even if its
 * informer missed the event (a replaced informer, a compacted watch), or
 * its dependents would wait for a delete event that never comes.
 */
function learnGone(ctx: GcContext, resource: ResourceInfo, meta: ObjectMeta): ProcessResult {
  const node = ctx.graph.get(meta.uid);
  ctx.pushGraphEvent({
    type: 'virtualDelete',
    identity: {
      apiVersion: node?.apiVersion ?? groupVersion(resource),
      kind: node?.kind ?? resource.kind,
      namespace: resource.namespaced ? (meta.namespace ?? '') : '',
      name: meta.name,
      uid: meta.uid,
    },
  });
  return done;
}

/** An owner in foreground deletion: finish it when no blocking dependent is left. */
async function processDeletingDependents(
  ctx: GcContext,
  snap: NodeSnapshot,
  resource: ResourceInfo,
  live: ObjectMeta,
): Promise<ProcessResult> {
  const d = decideDeletingDependents(snap.dependents);
  if (d.action === 'waitForDependents') {
    for (const dep of d.queue) ctx.enqueueDelete(dep);
    return done;
  }
  if (ctx.dryRun) {
    ctx.log.info('dry run: would remove the foregroundDeletion finalizer', {
      resource: groupResource(resource),
      namespace: live.namespace ?? '',
      name: live.name,
      uid: live.uid,
    });
    return done;
  }
  await ctx.api.removeFinalizer(
    resource,
    live.namespace,
    live.name,
    live.uid,
    FOREGROUND_FINALIZER,
  );
  ctx.log.info('foreground deletion finished: removed the foregroundDeletion finalizer', {
    resource: groupResource(resource),
    namespace: live.namespace ?? '',
    name: live.name,
    uid: live.uid,
  });
  return done;
}
