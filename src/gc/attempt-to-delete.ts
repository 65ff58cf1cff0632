// The attempt-to-delete worker, in upstream's attemptToDeleteItem shape:
//   gather    the object (the graph's copy, or a live read) and each of its
//             owners classified once (owners.ts);
//   decide    one call into decide.ts, where the decision is made;
//   carry out the writes, each outcome mapped onto the work queue in settle().
// The graph's copy saves the live reads where the graph can vouch for every
// owner; any write it carries is guarded by the copy's uid and
// resourceVersion, so a stale copy gets a 409 and is decided again live.
import { ApiError } from '../api/errors.ts';
import {
  groupResource,
  groupVersion,
  type ObjectMeta,
  type OwnerReference,
  type ResourceInfo,
} from '../api/resources.ts';
import type { NodeSnapshot } from '../graph/graph.ts';
import { done, failed, requeue, retryAfter, type ProcessResult } from '../queue/workqueue.ts';
import {
  decisionFields,
  resolveKind,
  UnresolvableKindError,
  warnOnce,
  type GcContext,
} from './context.ts';
import {
  decide,
  decideDeletingDependents,
  FOREGROUND_FINALIZER,
  onlyBlockOwnerDeletionChanged,
  removalByUidIsExact,
  sameOwnerReferences,
  type ClassifiedOwner,
  type Decision,
  type DeletionPropagation,
  type ForegroundDecision,
} from './decide.ts';
import { StaleDecisionError } from './operations.ts';
import { refusal } from './slis.ts';
import {
  classifyOwnerLive,
  knownAbsent,
  observedOwner,
  readWaitingOwner,
  switchedFromForeground,
} from './owners.ts';

/** Everything a decision is made on. */
interface Gathered {
  snap: NodeSnapshot;
  resource: ResourceInfo;
  /** The version of the object decided on. */
  meta: ObjectMeta;
  /** 'graph': the graph's copy, every owner vouched for by the graph; 'live': read from the API server. */
  source: 'graph' | 'live';
  /** The object is an owner in foreground deletion: decided on its dependents, not its owners. */
  deletingDependents: boolean;
  owners: ClassifiedOwner[];
}

/** What carrying a decision out came to; settle() maps each onto the work queue. */
type Outcome =
  | { kind: 'done' }
  /** The object decided on no longer exists (404 naming it, or its name holds another UID). */
  | { kind: 'gone' }
  /** The graph's copy cannot carry this decision (stale, or a write only a live read may make): decide again now, live. */
  | { kind: 'decideLive' }
  /** The object changed in a way the decision rests on: queue it to be decided again. */
  | { kind: 'decideAgain' }
  /** Conflicts on every attempt: try again with backoff. */
  | { kind: 'retry' };

const DONE: Outcome = { kind: 'done' };

export async function attemptToDelete(ctx: GcContext, uid: string): Promise<ProcessResult> {
  try {
    const r = await attemptToDeleteItem(ctx, uid);
    if (r.result === 'done') ctx.slis?.succeeded(uid);
    else if (r.result === 'error') {
      const refused = refusal(r.error);
      if (refused) ctx.slis?.failed(uid, refused);
    }
    return r;
  } catch (err) {
    const refused = refusal(err);
    if (refused) ctx.slis?.failed(uid, refused);
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
  let source: Gathered['source'] = 'graph';
  for (;;) {
    const gathered = await gather(ctx, uid, source);
    if ('result' in gathered) return gathered;
    if (gathered.deletingDependents) ctx.slis?.foregroundStarted(uid);
    const decision = gathered.deletingDependents
      ? decideDeletingDependents(gathered.snap.dependents)
      : decide({
          live: gathered.meta,
          owners: gathered.owners,
          dependents: gathered.snap.dependents,
        });
    let outcome = await carryOut(ctx, gathered, decision);
    if (outcome.kind === 'gone' && !(await confirmedGone(ctx, gathered))) {
      ctx.log.warn('a write was answered 404 for an object that exists; deciding again', {
        resource: groupResource(gathered.resource),
        namespace: gathered.meta.namespace ?? '',
        name: gathered.meta.name,
        uid,
      });
      outcome = { kind: 'retry' };
    }
    if (outcome.kind === 'decideLive' && source === 'graph') {
      source = 'live';
      continue;
    }
    return settle(ctx, gathered, outcome);
  }
}

// ---- gather ---------------------------------------------------------------

async function gather(
  ctx: GcContext,
  uid: string,
  source: Gathered['source'],
): Promise<Gathered | ProcessResult> {
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
    resource = resolveKind(ctx, snap.apiVersion, snap.kind);
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
  if (source === 'graph') {
    const fromGraph = await gatherFromGraph(ctx, snap, resource);
    if (fromGraph) return fromGraph;
  }
  return gatherLive(ctx, snap, resource);
}

/**
 * The cascade's fast path. When every owner is already known gone (the
 * absent-owner cache, filled only by observed deletes and live reads), seen
 * by the informers in foreground deletion (irreversible: it ends with the
 * owner gone), or seen alive (which only ever keeps the object), the graph's
 * copy of the object is enough to decide on: one request per dependent
 * instead of two or three. Undefined when the graph cannot vouch for every
 * owner, or there is nothing to collect: then the object is read live.
 */
async function gatherFromGraph(
  ctx: GcContext,
  snap: NodeSnapshot,
  resource: ResourceInfo,
): Promise<Gathered | undefined> {
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
  const namespace = resource.namespaced ? snap.namespace : '';
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
  return { snap, resource, meta: copy, source: 'graph', deletingDependents: false, owners };
}

/** The object read live, then each of its owners (the absent-owner cache first, as upstream). */
async function gatherLive(
  ctx: GcContext,
  snap: NodeSnapshot,
  resource: ResourceInfo,
): Promise<Gathered | ProcessResult> {
  const namespace = resource.namespaced ? snap.namespace : '';
  // A virtual node is an owner known only from its dependents: this read verifies it.
  if (snap.virtual) ctx.metrics?.ownerRead?.(groupResource(resource), 'single');
  const live = await ctx.api.getMeta(resource, namespace, snap.name);
  if (!live || live.uid !== snap.uid) {
    // Nothing with these coordinates and UID exists: the graph must learn it.
    ctx.pushGraphEvent({
      type: 'virtualDelete',
      identity: {
        apiVersion: snap.apiVersion,
        kind: snap.kind,
        namespace,
        name: snap.name,
        uid: snap.uid,
      },
    });
    return done;
  }
  const gathered: Gathered = {
    snap,
    resource,
    meta: live,
    source: 'live',
    deletingDependents: snap.deletingDependents,
    owners: [],
  };
  if (snap.deletingDependents) return gathered;
  // Already being deleted (the graph has not seen it yet): its own finalizers
  // carry the delete on, and the update event will queue it if needed.
  if (live.deletionTimestamp) return existsLive(ctx, snap);
  for (const ref of live.ownerReferences ?? []) {
    try {
      gathered.owners.push(await classifyOwnerLive(ctx, live, ref));
    } catch (err) {
      if (err instanceof UnresolvableKindError) {
        warnOnce(ctx, live.uid, 'OwnerRefUnresolvable', `${err.message}; kept`);
        return failed(err);
      }
      throw err;
    }
  }
  return gathered;
}

// ---- carry out ------------------------------------------------------------

async function carryOut(
  ctx: GcContext,
  g: Gathered,
  decision: Decision | ForegroundDecision,
): Promise<Outcome> {
  const { resource, meta, owners } = g;
  const fromGraph = g.source === 'graph';
  switch (decision.action) {
    case 'waitForDependents':
      for (const dep of decision.queue) ctx.enqueueDelete(dep);
      return DONE;
    case 'removeForegroundFinalizer':
      return finishForeground(ctx, resource, meta);
    case 'none': {
      // The graph vouches only for owners that lead to a write; anything else is read live.
      if (fromGraph) return { kind: 'decideLive' };
      const fields = decisionFields(resource, meta, decision.reason, owners);
      if (owners.some((o) => o.state === 'invalid')) ctx.log.warn('not collecting object', fields);
      else ctx.log.debug('keeping object', fields);
      return DONE;
    }
    case 'removeOwnerReferences': {
      const fields = decisionFields(resource, meta, decision.reason, owners);
      const removed = decision.refs.map(describeReference);
      if (ctx.dryRun) {
        ctx.log.info('dry run: would remove owner references', { ...fields, remove: removed });
        return DONE;
      }
      // From the graph's copy: only references to owners known gone go, from
      // exactly the version decided on (a 409 sends it the live way). The
      // graph may be late to show the live owner gone too: then its delete
      // event queues the object again, and keeping is the safe error. After a
      // live read, by UID (the references of those UIDs all go: unguarded by
      // resourceVersion, as upstream), unless a reference to keep shares one
      // of the UIDs: then exactly those references, from the version read.
      const byUid = !fromGraph && removalByUidIsExact(meta.ownerReferences ?? [], decision.refs);
      const written = byUid
        ? await ctx.api.removeOwnerReferences(resource, meta, [
            ...new Set(decision.refs.map((r) => r.uid)),
          ])
        : await ctx.api.removeOwnerReferencesAt(resource, meta, decision.refs);
      if (written.outcome === 'conflict')
        return fromGraph ? { kind: 'decideLive' } : { kind: 'decideAgain' };
      if (written.outcome === 'gone') return { kind: 'gone' };
      ctx.log.info('removed owner references', {
        ...fields,
        removed,
        ...(fromGraph ? { fromGraph } : {}),
      });
      return DONE;
    }
    case 'delete': {
      const fields = decisionFields(resource, meta, decision.reason, owners);
      if (ctx.dryRun) {
        ctx.log.info('dry run: would delete', { ...fields, propagationPolicy: decision.policy });
        ctx.metrics?.deletion?.(groupResource(resource), decision.policy, true);
        return DONE;
      }
      let outcome: Outcome;
      // The cycle breaker works from a live read only.
      if (decision.unblockOwnerReferences)
        outcome = fromGraph
          ? { kind: 'decideLive' }
          : await unlessStale(ctx, g, () =>
              unblockThenDelete(ctx, resource, meta, decision.policy, owners),
            );
      else outcome = await deleteObject(ctx, g, decision.policy);
      if (outcome.kind === 'done')
        reportDeleted(ctx, resource, meta.uid, fields, {
          policy: decision.policy,
          owners,
          fromGraph,
        });
      return outcome;
    }
  }
}

/**
 * DELETE guarded by uid and the resourceVersion decided on. From the graph's
 * copy a 409 means the copy was stale: decide again live. After a live read it
 * is retried without resourceVersion if the owner references are unchanged
 * (upstream #114603); otherwise the object is decided again.
 */
async function deleteObject(
  ctx: GcContext,
  g: Gathered,
  policy: DeletionPropagation,
): Promise<Outcome> {
  const { resource, meta } = g;
  const stillValid = (): string | undefined => switchedFromForeground(ctx, g.meta, g.owners);
  return unlessStale(ctx, g, async () => {
    const first = await ctx.api.delete(resource, meta, policy, 'uidAndResourceVersion', stillValid);
    if (first.outcome === 'gone') return { kind: 'gone' };
    if (first.outcome === 'done') return DONE;
    if (g.source === 'graph') return { kind: 'decideLive' };
    const fresh = await ctx.api.getMeta(resource, meta.namespace, meta.name);
    if (!fresh || fresh.uid !== meta.uid) return { kind: 'gone' };
    if (!sameOwnerReferences(fresh.ownerReferences, meta.ownerReferences))
      return { kind: 'decideAgain' };
    const second = await ctx.api.delete(resource, fresh, policy, 'uid', stillValid);
    if (second.outcome === 'conflict') return { kind: 'retry' };
    return second.outcome === 'gone' ? { kind: 'gone' } : DONE;
  });
}

/**
 * Carries out a DELETE whose decision is checked once more right before it
 * goes on the wire: found stale there (an owner read as waiting that the
 * graph now shows switched to Orphan), nothing was sent and the object is
 * decided again, live.
 */
async function unlessStale(
  ctx: GcContext,
  g: Gathered,
  write: () => Promise<Outcome>,
): Promise<Outcome> {
  try {
    return await write();
  } catch (err) {
    if (!(err instanceof StaleDecisionError)) throw err;
    ctx.log.info('decision no longer holds; DELETE not sent, deciding again', {
      resource: groupResource(g.resource),
      namespace: g.meta.namespace ?? '',
      name: g.meta.name,
      uid: g.meta.uid,
      why: err.message,
    });
    return g.source === 'graph' ? { kind: 'decideLive' } : { kind: 'decideAgain' };
  }
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
  owners: readonly ClassifiedOwner[],
): Promise<Outcome> {
  let current = live;
  for (let attempt = 0; ; attempt++) {
    const u = await ctx.api.unblockOwnerReferences(resource, current);
    if (u.outcome === 'gone') return { kind: 'gone' };
    if (u.outcome === 'done') {
      current = u.meta;
      break;
    }
    const fresh = await ctx.api.getMeta(resource, live.namespace, live.name);
    if (!fresh || fresh.uid !== live.uid) return { kind: 'gone' };
    if (attempt >= 4 || !onlyBlockOwnerDeletionChanged(live, fresh)) {
      ctx.log.debug('object changed while breaking a cycle; deciding again', {
        uid: live.uid,
        name: live.name,
      });
      return { kind: 'decideAgain' };
    }
    current = fresh;
  }
  const deleted = await ctx.api.delete(resource, current, policy, 'uidAndResourceVersion', () =>
    switchedFromForeground(ctx, live, owners),
  );
  if (deleted.outcome === 'conflict') return { kind: 'decideAgain' };
  return deleted.outcome === 'gone' ? { kind: 'gone' } : DONE;
}

/** An owner in foreground deletion with no blocking dependent left: let it go. */
async function finishForeground(
  ctx: GcContext,
  resource: ResourceInfo,
  live: ObjectMeta,
): Promise<Outcome> {
  const fields = {
    resource: groupResource(resource),
    namespace: live.namespace ?? '',
    name: live.name,
    uid: live.uid,
  };
  if (ctx.dryRun) {
    ctx.log.info('dry run: would remove the foregroundDeletion finalizer', fields);
    return DONE;
  }
  // 'done' also when the finalizer was already removed; 'gone' only from a
  // live read (a 404 on the PATCH alone is read again); anything else throws
  // and the owner is retried with backoff.
  const written = await ctx.api.removeFinalizer(
    resource,
    live.namespace,
    live.name,
    live.uid,
    FOREGROUND_FINALIZER,
  );
  if (written.outcome === 'gone') return { kind: 'gone' };
  if (written.outcome === 'conflict') return { kind: 'retry' };
  ctx.log.info('foreground deletion finished: removed the foregroundDeletion finalizer', fields);
  return DONE;
}

function reportDeleted(
  ctx: GcContext,
  resource: ResourceInfo,
  uid: string,
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
  // Collection lag runs until the informers see it gone, from the last owner
  // known gone or, for an owner deleting its dependents, from when that began.
  let since = lastGone;
  for (const o of how.owners) {
    const started = o.state === 'waiting' ? ctx.slis?.foregroundSince(o.ref.uid) : undefined;
    if (started !== undefined && (since === undefined || started > since)) since = started;
  }
  // The watch's DELETED event may have been handled before this answer came:
  // the object then has left the graph, or stays only as a virtual owner.
  const present = ctx.graph.has(uid) && ctx.graph.get(uid)?.virtual !== true;
  ctx.slis?.collecting(uid, since ?? Date.now(), !present);
}

/** A reference for logs: which owner it names, UID and all (two may share a UID). */
function describeReference(r: OwnerReference): string {
  return `${r.apiVersion}/${r.kind} ${r.name} (uid ${r.uid})`;
}

// ---- settle ---------------------------------------------------------------

/** The one place an outcome becomes a work-queue result. */
function settle(ctx: GcContext, g: Gathered, outcome: Outcome): ProcessResult {
  switch (outcome.kind) {
    case 'gone':
      learnGone(ctx, g.resource, g.meta);
      return done;
    case 'decideAgain':
      ctx.enqueueDelete(g.meta.uid);
      return done;
    case 'retry':
      return requeue();
    case 'decideLive':
    case 'done':
      return g.source === 'live' ? existsLive(ctx, g.snap) : done;
  }
}

/**
 * A write answered 404 naming the object: an admission webhook may deny a
 * write with that code and name, so the graph learns "gone" only once a live
 * read agrees (nothing under that name, or another UID).
 */
async function confirmedGone(ctx: GcContext, g: Gathered): Promise<boolean> {
  const live = await ctx.api.getMeta(g.resource, g.meta.namespace, g.meta.name);
  return !live || live.uid !== g.meta.uid;
}

/** A node known only as an owner, yet it exists: look again until its informer reports it. */
function existsLive(ctx: GcContext, snap: NodeSnapshot): ProcessResult {
  return snap.virtual && ctx.graph.get(snap.uid)?.virtual ? requeue() : done;
}

/**
 * A write answered 404 (or the name now holds another UID): the object
 * decided on no longer exists. The graph must learn it even if its informer
 * missed the event (a replaced informer, a compacted watch), or its
 * dependents would wait for a delete event that never comes.
 */
function learnGone(ctx: GcContext, resource: ResourceInfo, meta: ObjectMeta): void {
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
}
