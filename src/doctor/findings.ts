// The findings of `kubegc doctor`: their types (the JSON schema of
// docs/doctor.md, SCHEMA_VERSION) and the words they are described in. The
// rules that make them are in rules/, one module per kind, over the index of
// a snapshot (index.ts); analyze.ts runs them.
import type { NamespaceCondition, NotScanned } from './snapshot.ts';
import type { GcView } from './gc-metrics.ts';

export const SCHEMA_VERSION = 1;

/** In the order the report groups them. */
export const FINDING_KINDS = [
  'stuck-deletion',
  'terminating-namespace',
  'leaked-dependent',
  'cross-namespace-reference',
  'unresolvable-owner-kind',
  'blocking-cycle',
] as const;
export type FindingKind = (typeof FINDING_KINDS)[number];

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
}

interface FindingBase {
  kind: FindingKind;
  object: ObjectRef;
  /** When the condition began, or the earliest it can have begun (see sinceBasis). */
  since: string;
  ageSeconds: number;
  /**
   * deletionTimestamp: since is when the deletion began. creationTimestamp:
   * the object's (for a cycle, its youngest member's) creation, the earliest
   * the condition can have begun: a leak begins when the last owner goes,
   * which no object records.
   */
  sinceBasis: 'deletionTimestamp' | 'creationTimestamp';
  /** A stable code. */
  reason: string;
  /** The same in plain words. */
  detail: string;
}

export interface Holder {
  object: ObjectRef;
  /** Its finalizers other than the garbage collector's (orphan, foregroundDeletion). */
  finalizers: string[];
  /** It has a deletionTimestamp: the finalizers are what keeps it. */
  deleting: boolean;
  /** Its deletionTimestamp; null when it is not being deleted. */
  deletingSince: string | null;
}

export type BlockerState =
  /** The end of the chain carries a finalizer that is not the garbage collector's. */
  | 'foreign-finalizer'
  /** A blocking dependent nobody has deleted yet: the garbage collector's job. */
  | 'not-deleted'
  /** A dependent in foreground deletion with no blocking dependent left: the garbage collector's job. */
  | 'awaiting-gc'
  /** A dependent being deleted with Orphan: the garbage collector's job. */
  | 'orphaning'
  /** Being deleted, no finalizers (a Pod waiting for its kubelet). */
  | 'graceful'
  /** The chain came back to an object already on it. */
  | 'cycle'
  /** The chain is longer than doctor follows. */
  | 'too-deep';

export interface Blocker {
  /** From the stuck object (first) down to the object that holds it (last). */
  chain: ObjectRef[];
  state: BlockerState;
  heldBy: Holder | null;
}

export interface StuckDeletion extends FindingBase {
  kind: 'stuck-deletion';
  finalizers: string[];
  gcFinalizers: string[];
  foreignFinalizers: string[];
  /** Dependents whose reference to this object has blockOwnerDeletion. */
  blockingDependents: number;
  /** Every dependent (what an orphan deletion waits to orphan). */
  dependents: number;
  /** Where each blocking chain ends, the ones held by foreign finalizers first (at most 20). */
  blockers: Blocker[];
  blockersTotal: number;
  /** blockers[0]'s, or [object] and its own foreign finalizers when nothing blocks it from below. */
  chain: ObjectRef[];
  heldBy: Holder | null;
}

export interface RemainingResource {
  resource: string;
  apiVersion: string;
  kind: string;
  count: number;
  deleting: number;
  /** Finalizer → how many of these objects carry it. */
  finalizers: Record<string, number>;
  /** A few names, those with finalizers first. */
  examples: string[];
}

export interface ApiServiceRef {
  name: string;
  service: string | null;
  reason: string | null;
  message: string | null;
}

export interface TerminatingNamespace extends FindingBase {
  kind: 'terminating-namespace';
  phase: string | null;
  finalizers: string[];
  specFinalizers: string[];
  /** The namespace controller's conditions that are True, as it wrote them. */
  conditions: NamespaceCondition[];
  remaining: RemainingResource[];
  remainingTotal: number;
  /** Every unavailable APIService (they stop every namespace's deletion); null: not readable. */
  unavailableAPIServices: ApiServiceRef[] | null;
}

export type OwnerState =
  | 'present'
  /** No object of the owner's kind has its UID with its name (in the right namespace). */
  | 'absent'
  /** Absent, and another object (another UID) now has its name. */
  | 'replaced'
  /** Found, but in another namespace: invalid, the garbage collector treats it as absent. */
  | 'other-namespace'
  /** A cluster-scoped dependent names a namespaced owner kind: invalid, never collected. */
  | 'namespaced-owner-of-cluster-scoped'
  /** No API serves the owner's apiVersion/kind. */
  | 'unresolvable'
  /** Its resource was not (or not completely) listed: no conclusion. */
  | 'not-scanned';

export interface OwnerInfo {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
  blockOwnerDeletion: boolean;
  state: OwnerState;
  /** Where an other-namespace owner was found. */
  foundInNamespace?: string;
  detail: string;
}

export interface LeakedDependent extends FindingBase {
  kind: 'leaked-dependent';
  owners: OwnerInfo[];
}
export interface CrossNamespaceReference extends FindingBase {
  kind: 'cross-namespace-reference';
  owners: OwnerInfo[];
}
export interface UnresolvableOwnerKind extends FindingBase {
  kind: 'unresolvable-owner-kind';
  owners: OwnerInfo[];
}
export interface BlockingCycle extends FindingBase {
  kind: 'blocking-cycle';
  /** Each member has a blocking reference to the next; the last to the first. */
  chain: ObjectRef[];
  /** Objects in the strongly connected component (may exceed the one cycle shown). */
  members: number;
}

export type Finding =
  | StuckDeletion
  | TerminatingNamespace
  | LeakedDependent
  | CrossNamespaceReference
  | UnresolvableOwnerKind
  | BlockingCycle;

export interface Report {
  schemaVersion: typeof SCHEMA_VERSION;
  scannedAt: string;
  durationSeconds: number;
  scope: { namespace: string | null; olderThanSeconds: number | null };
  findings: Finding[];
  notScanned: NotScanned[];
  unavailableAPIServices: ApiServiceRef[] | null;
  /** With --gc-metrics: the running controller's work queues by lane (gc-metrics.ts). */
  gc?: GcView;
  summary: {
    findings: number;
    byKind: Record<FindingKind, number>;
    /** Findings younger than --older-than, left out. */
    hiddenByOlderThan: number;
    notScanned: number;
    objects: number;
    resources: number;
  };
}

/** The longest chain of blocking dependents doctor follows below one stuck object. */
export const MAX_CHAIN = 50;

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** 3d4h, 5m12s, 40s: kubectl's style, two units at most. */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d > 0) return h ? `${d}d${h}h` : `${d}d`;
  if (h > 0) return m ? `${h}h${m}m` : `${h}h`;
  if (m > 0) return sec ? `${m}m${sec}s` : `${m}m`;
  return `${sec}s`;
}

export function describeObject(r: ObjectRef): string {
  return `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
}

export function describeBlocker(b: Blocker): string {
  const path = b.chain.slice(1).map(describeObject).join(' → ');
  const last = b.chain[b.chain.length - 1] as ObjectRef;
  const held = b.heldBy
    ? `finalizer${b.heldBy.finalizers.length === 1 ? '' : 's'} ${b.heldBy.finalizers.join(', ')}`
    : '';
  switch (b.state) {
    case 'foreign-finalizer':
      return `${path}: held by ${held}${b.heldBy?.deletingSince ? ` (deleting since ${b.heldBy.deletingSince})` : ''}`;
    case 'not-deleted':
      return `${path}: not being deleted yet; the garbage collector deletes it first (is one running?)${held ? `, then its ${held} will hold it` : ''}`;
    case 'awaiting-gc':
      return `${path}: in foreground deletion with no blocking dependent left; the garbage collector removes its foregroundDeletion (is one running?)`;
    case 'orphaning':
      return `${path}: being deleted with Orphan; the garbage collector removes its orphan finalizer (is one running?)`;
    case 'graceful':
      return `${path}: being deleted gracefully (a Pod waits for its kubelet)`;
    case 'cycle':
      return `${path}: a cycle of blocking references back to ${describeObject(last)} (the garbage collector breaks it by unblocking a reference; is one running?)`;
    case 'too-deep':
      return `${path}: the chain goes deeper than ${MAX_CHAIN} objects`;
  }
}

export function compareObjects(a: ObjectRef, b: ObjectRef): number {
  return (
    (a.namespace ?? '').localeCompare(b.namespace ?? '') ||
    a.kind.localeCompare(b.kind) ||
    a.name.localeCompare(b.name) ||
    a.uid.localeCompare(b.uid)
  );
}
