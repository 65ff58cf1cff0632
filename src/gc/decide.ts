// WHERE THE DECISION TO DELETE IS MADE. Small pure functions over a snapshot
// of one object (its live metadata, what was learnt about each owner, and its
// dependents in the graph). No API calls here: attempt-to-delete.ts gathers the
// inputs and carries the decision out. The rules are upstream's
// (pkg/controller/garbagecollector attemptToDeleteItem / classifyReferences).
import type { ObjectMeta, OwnerReference } from '../api/resources.ts';
import type { DependentSnapshot } from '../graph/graph.ts';

/** The finalizers the API server adds for propagationPolicy Orphan and Foreground. */
export const ORPHAN_FINALIZER = 'orphan';
export const FOREGROUND_FINALIZER = 'foregroundDeletion';

export type DeletionPropagation = 'Background' | 'Foreground' | 'Orphan';

/** What a live read of an owner found. */
export type OwnerLookup =
  | { found: false }
  | { found: true; uid: string; deletionTimestamp?: string; finalizers?: string[] };

export type OwnerState =
  /** The owner exists: the dependent must stay. */
  | 'solid'
  /** The owner is gone (or replaced under the same name by another UID). */
  | 'dangling'
  /** The owner is in foreground deletion, waiting for its dependents. */
  | 'waiting'
  /** A cluster-scoped dependent names a namespaced owner kind: never collected. */
  | 'invalid';

export interface ClassifiedOwner {
  ref: OwnerReference;
  state: OwnerState;
  /** Why, for logs: 'absent-owner-cache', 'not-found', 'uid-mismatch', ... */
  detail: string;
  /** For dangling owners: when the owner was first known gone (ms since epoch). */
  goneSince?: number;
}

/** Classifies one owner reference from a live lookup (section 3.5 of the reference). */
export function classifyLookup(ref: OwnerReference, lookup: OwnerLookup): ClassifiedOwner {
  if (!lookup.found) return { ref, state: 'dangling', detail: 'not-found' };
  if (lookup.uid !== ref.uid) return { ref, state: 'dangling', detail: 'uid-mismatch' };
  if (lookup.deletionTimestamp && lookup.finalizers?.includes(FOREGROUND_FINALIZER)) {
    return { ref, state: 'waiting', detail: 'owner-deleting-dependents' };
  }
  return { ref, state: 'solid', detail: 'owner-exists' };
}

export type Decision =
  | { action: 'none'; reason: string }
  | {
      action: 'removeOwnerReferences';
      /**
       * Exactly the references to remove, each by its whole identity: two
       * references may share a UID (the API server accepts it), and one of
       * them naming a live owner keeps it.
       */
      refs: OwnerReference[];
      reason: string;
    }
  | {
      action: 'delete';
      policy: DeletionPropagation;
      /** First set the object's own references' blockOwnerDeletion to false (breaks cycles). */
      unblockOwnerReferences: boolean;
      reason: string;
    };

export interface DeleteDecisionInput {
  live: ObjectMeta;
  owners: ClassifiedOwner[];
  /** The object's dependents in the graph. */
  dependents: DependentSnapshot[];
}

/** Decides about one object whose owners have all been classified (section 3.6). */
export function decide({ live, owners, dependents }: DeleteDecisionInput): Decision {
  if (owners.length === 0) return { action: 'none', reason: 'no owner references' };
  const invalid = owners.filter((o) => o.state === 'invalid');
  if (invalid.length > 0) {
    return {
      action: 'none',
      reason: 'cluster-scoped object names a namespaced owner kind; never collected',
    };
  }
  const solid = owners.filter((o) => o.state === 'solid');
  const dangling = owners.filter((o) => o.state === 'dangling');
  const waiting = owners.filter((o) => o.state === 'waiting');
  if (solid.length > 0) {
    // A solid reference keeps the object, whatever another reference with
    // the same UID says (upstream classifies each reference on its own too).
    const remove = [...dangling, ...waiting].map((o) => o.ref);
    if (remove.length === 0) return { action: 'none', reason: 'all owners exist' };
    return {
      action: 'removeOwnerReferences',
      refs: remove,
      reason:
        'some owners exist; removing references to owners that are gone or deleting their dependents',
    };
  }
  if (waiting.length > 0 && dependents.length > 0) {
    return {
      action: 'delete',
      policy: 'Foreground',
      unblockOwnerReferences: dependents.some((d) => d.deletingDependents),
      reason:
        'an owner is deleting its dependents in the foreground and this object has dependents of its own',
    };
  }
  return {
    action: 'delete',
    policy: policyFromFinalizers(live.finalizers),
    unblockOwnerReferences: false,
    reason:
      waiting.length > 0 ? 'owners are gone or deleting their dependents' : 'all owners are gone',
  };
}

/** The object's own pending policy wins: keep an orphan or foreground deletion already asked for. */
export function policyFromFinalizers(
  finalizers: readonly string[] | undefined,
): DeletionPropagation {
  if (finalizers?.includes(ORPHAN_FINALIZER)) return 'Orphan';
  if (finalizers?.includes(FOREGROUND_FINALIZER)) return 'Foreground';
  return 'Background';
}

export type ForegroundDecision =
  | { action: 'removeForegroundFinalizer' }
  | { action: 'waitForDependents'; queue: string[]; blocking: number };

/**
 * An owner in foreground deletion (deletingDependents): it may finish once no
 * dependent with blockOwnerDeletion remains; until then its blocking
 * dependents that are not themselves deleting dependents get (re)queued.
 */
export function decideDeletingDependents(dependents: DependentSnapshot[]): ForegroundDecision {
  const blocking = dependents.filter((d) => d.blockOwnerDeletion);
  if (blocking.length === 0) return { action: 'removeForegroundFinalizer' };
  return {
    action: 'waitForDependents',
    queue: blocking.filter((d) => !d.deletingDependents).map((d) => d.uid),
    blocking: blocking.length,
  };
}

/** The same reference: one owner named the same way (flags aside). */
export function sameReferent(a: OwnerReference, b: OwnerReference): boolean {
  return a.uid === b.uid && a.name === b.name && a.kind === b.kind && a.apiVersion === b.apiVersion;
}

/** `refs` without every reference that names an owner named in `remove`. */
export function withoutReferences(
  refs: readonly OwnerReference[],
  remove: readonly OwnerReference[],
): OwnerReference[] {
  return refs.filter((r) => !remove.some((x) => sameReferent(r, x)));
}

/**
 * Whether removing by UID (a strategic merge patch's `$patch: delete`, keyed
 * by uid) removes exactly `remove` from `refs`: not when another reference
 * with one of those UIDs names something else, which must stay.
 */
export function removalByUidIsExact(
  refs: readonly OwnerReference[],
  remove: readonly OwnerReference[],
): boolean {
  return refs.every(
    (r) => !remove.some((x) => x.uid === r.uid) || remove.some((x) => sameReferent(r, x)),
  );
}

/** Two ownerReferences lists are the same for the purpose of a retried DELETE. */
export function sameOwnerReferences(
  a: readonly OwnerReference[] = [],
  b: readonly OwnerReference[] = [],
): boolean {
  if (a.length !== b.length) return false;
  const key = (r: OwnerReference): string =>
    `${r.apiVersion}|${r.kind}|${r.name}|${r.uid}|${r.controller === true}|${r.blockOwnerDeletion === true}`;
  const ka = a.map(key).sort();
  const kb = b.map(key).sort();
  return ka.every((k, i) => k === kb[i]);
}

/**
 * Whether `after` differs from `before` in nothing a delete decision rests
 * on: the same owner references (blockOwnerDeletion aside), the same
 * deletion state and finalizers. Then the cycle breaker's decision stands
 * and its PATCH may be retried on the fresh version.
 */
export function onlyBlockOwnerDeletionChanged(before: ObjectMeta, after: ObjectMeta): boolean {
  const unblocked = (refs: readonly OwnerReference[] = []): OwnerReference[] =>
    refs.map((r) => ({ ...r, blockOwnerDeletion: false }));
  const finalizers = (m: ObjectMeta): string => [...(m.finalizers ?? [])].sort().join(',');
  return (
    sameOwnerReferences(unblocked(before.ownerReferences), unblocked(after.ownerReferences)) &&
    (before.deletionTimestamp === undefined) === (after.deletionTimestamp === undefined) &&
    finalizers(before) === finalizers(after)
  );
}
