// Classifying a dependent's owners, the input decide() needs about each: from
// what the graph can vouch for (the absent-owner cache, owners the informers
// observe), or from a live read of the owner. Every way an owner is classified
// is here, so a reader sees in one place what each answer rests on.
import {
  groupResource,
  type ObjectMeta,
  type OwnerReference,
  type ResourceInfo,
  type RestMapper,
} from '../api/resources.ts';
import { coordinatesKey, refNamesOwner } from '../graph/graph.ts';
import { unresolvableKind, type GcContext, type OwnerRead } from './context.ts';
import { classifyLookup, type ClassifiedOwner } from './decide.ts';
import type { GcApi } from './operations.ts';

/** An owner reference the absent-owner cache knows to be gone, as upstream checks it first. */
export function knownAbsent(
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
export function observedOwner(
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

/**
 * Why a DELETE decided on owners read as 'waiting' must not be sent after
 * all: the graph, checked right before the request goes on the wire, shows
 * one of them being deleted without the foregroundDeletion finalizer (a
 * second DELETE switched it to Orphan after it was read). The read and the
 * DELETE are two requests with no precondition across objects, so no GC can
 * close this window (upstream's is its one GET); this narrows it to the
 * informer's delivery of the switch. A graph that merely lags the read (the
 * owner not yet seen deleting, or seen Orphan before a switch to
 * Foreground) only sends the object round once more.
 */
export function switchedFromForeground(
  ctx: GcContext,
  dependent: Pick<ObjectMeta, 'namespace'>,
  owners: readonly ClassifiedOwner[],
): string | undefined {
  for (const o of owners) {
    if (o.state !== 'waiting') continue;
    const node = ctx.graph.get(o.ref.uid);
    if (!node || node.virtual || !refNamesOwner(o.ref, node, dependent.namespace ?? '')) continue;
    if (node.beingDeleted && !node.hasForegroundFinalizer)
      return `owner ${node.kind} ${node.name} (uid ${o.ref.uid}) is no longer deleting its dependents in the foreground${node.hasOrphanFinalizer ? ' (switched to Orphan)' : ''}`;
  }
  return undefined;
}

/** An owner reference read live: how it classifies, and what was read. */
export interface OwnerReadLive {
  owner: ClassifiedOwner;
  /** The owner's resource; undefined only for an invalid reference (nothing was read). */
  resource?: ResourceInfo;
  /** Where it was looked up: the dependent's namespace for a namespaced kind, '' otherwise. */
  namespace: string;
  /** The object found under the reference's name, if any (its UID may differ). */
  meta?: ObjectMeta;
}

/**
 * THE live classification of one owner reference, shared by the workers
 * (classifyOwnerLive), `kubegc explain` and anything else that tells what
 * kubegc would decide: resolve the kind (never decide on an unknown one:
 * UnresolvableKindError), refuse a cluster-scoped dependent of a namespaced
 * owner kind ('invalid', nothing read), read the owner in the dependent's
 * namespace (or cluster-wide), classify what the read found.
 */
export async function readOwnerLive(
  mapper: RestMapper,
  api: Pick<GcApi, 'getMeta'>,
  dependent: Pick<ObjectMeta, 'namespace'>,
  ref: OwnerReference,
): Promise<OwnerReadLive> {
  const dependentNamespace = dependent.namespace ?? '';
  const resource = mapper.resolve(ref.apiVersion, ref.kind);
  if (!resource) throw unresolvableKind(ref.apiVersion, ref.kind);
  if (resource.namespaced && !dependentNamespace) {
    return {
      owner: {
        ref,
        state: 'invalid',
        detail: 'cluster-scoped dependent of a namespaced owner kind',
      },
      namespace: '',
    };
  }
  const namespace = resource.namespaced ? dependentNamespace : '';
  const meta = await api.getMeta(resource, namespace, ref.name);
  const owner = classifyLookup(
    ref,
    meta
      ? {
          found: true,
          uid: meta.uid,
          deletionTimestamp: meta.deletionTimestamp,
          finalizers: meta.finalizers,
        }
      : { found: false },
  );
  return { owner, resource, namespace, ...(meta ? { meta } : {}) };
}

/**
 * An owner classified from a live read (after the absent-owner cache, as
 * upstream does). A gone owner is recorded in the cache; an owner found in
 * another namespace is reported as an invalid reference.
 */
export async function classifyOwnerLive(
  ctx: GcContext,
  dependent: ObjectMeta,
  ref: OwnerReference,
): Promise<ClassifiedOwner> {
  const gone = knownAbsent(ctx, dependent.namespace ?? '', ref);
  if (gone) return gone;
  const { owner: classified, namespace: ownerNamespace } = await readOwnerLive(
    ctx.mapper(),
    {
      getMeta: (r, namespace, name) => {
        ctx.metrics?.ownerRead?.(groupResource(r), 'single');
        return ctx.api.getMeta(r, namespace, name);
      },
    },
    dependent,
    ref,
  );
  if (classified.state === 'dangling') {
    classified.goneSince = Date.now();
    ctx.absent.add(
      coordinatesKey(ref.apiVersion, ref.kind, ownerNamespace, ref.name, ref.uid),
      classified.goneSince,
    );
    reportInvalidNamespace(ctx, dependent, ref, ownerNamespace);
  }
  return classified;
}

/**
 * A live classification of an owner the graph shows waiting. In a foreground
 * cascade many dependents of one owner are decided at once. A read sent after
 * a dependent's decision began shows the API server as of then or later,
 * which is all the guarantee asks; so a decision joins the read in flight if
 * it was sent after the decision began, else the one read queued to be sent
 * when that one returns. One read per owner at a time serves every worker.
 */
export function readWaitingOwner(
  ctx: GcContext,
  dependent: ObjectMeta,
  ref: OwnerReference,
  decidedAt: number,
): Promise<ClassifiedOwner> {
  const reads = ctx.state.ownerReads;
  // The reference's whole identity: two references may share a UID and name
  // different objects, and one read answers for one name only.
  const key = `${coordinatesKey(ref.apiVersion, ref.kind, dependent.namespace ?? '', ref.name, ref.uid)}`;
  const withRef = (o: ClassifiedOwner): ClassifiedOwner => ({ ...o, ref });
  const send = (): OwnerRead => {
    const r: OwnerRead = {
      sentAt: performance.now(),
      read: classifyOwnerLive(ctx, dependent, ref),
    };
    const settle = (): void => {
      const slot = reads.get(key);
      if (slot?.current === r && !slot.next) reads.delete(key);
    };
    r.read.then(settle, settle);
    return r;
  };
  const slot = reads.get(key);
  if (!slot) {
    const r = send();
    reads.set(key, { current: r });
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

/**
 * The owner's UID exists, but in another namespace: owner references cannot
 * cross namespaces, so the reference counts as absent and the dependent gets
 * a Warning event saying so (as upstream's reportInvalidNamespaceOwnerRef).
 */
function reportInvalidNamespace(
  ctx: GcContext,
  dependent: ObjectMeta,
  ref: OwnerReference,
  lookedIn: string,
): void {
  const observed = ctx.graph.get(ref.uid);
  if (!observed || observed.virtual || !lookedIn || observed.namespace === lookedIn) return;
  const note = `ownerRef [${ref.apiVersion}/${ref.kind}, namespace: ${lookedIn}, name: ${ref.name}, uid: ${ref.uid}] does not exist in namespace "${lookedIn}"`;
  ctx.log.warn('invalid cross-namespace owner reference', {
    namespace: dependent.namespace ?? '',
    name: dependent.name,
    uid: dependent.uid,
    owner: ref.uid,
    ownerNamespace: observed.namespace,
  });
  const self = ctx.graph.get(dependent.uid);
  ctx.events?.warning(
    {
      apiVersion: self?.apiVersion ?? 'v1',
      kind: self?.kind ?? '',
      namespace: dependent.namespace,
      name: dependent.name,
      uid: dependent.uid,
    },
    'OwnerRefInvalidNamespace',
    'GarbageCollect',
    note,
  );
}
