// What the GC workers share: the context they decide in (the API, the graph,
// the absent-owner cache, the queues' entry points) and the state they keep
// between items. The state belongs to one GarbageCollector: two collectors in
// a process (tests, a standby and a leader) never see each other's.
import {
  groupResource,
  type ObjectMeta,
  type ResourceInfo,
  type RestMapper,
} from '../api/resources.ts';
import type { AbsentOwnerCache } from '../graph/absent-owner-cache.ts';
import type { OwnershipGraph } from '../graph/graph.ts';
import type { VirtualDeleteEvent } from '../graph/propagator.ts';
import type { Logger } from '../log.ts';
import type { ClassifiedOwner, DeletionPropagation } from './decide.ts';
import type { EventRecorder } from '../shared/events.ts';
import type { GcApi } from './operations.ts';
import type { CollectionSlis } from './slis.ts';

export interface GcMetricsHooks {
  deletion?(resource: string, policy: DeletionPropagation, dryRun: boolean): void;
  /** Seconds from the owner known gone to the dependent's DELETE issued. */
  decisionLatency?(seconds: number): void;
  orphaning?(resource: string, dryRun: boolean): void;
  /**
   * A request sent to read owners of `resource`: 'single', a live read of one
   * owner (by name); 'bulk', one page of a LIST verifying many (bulk-verify.ts).
   */
  ownerRead?(resource: string, read: 'single' | 'bulk'): void;
  /** `n` owners of `resource` a bulk LIST showed absent or present. */
  ownersVerifiedInBulk?(resource: string, result: 'absent' | 'present', n: number): void;
}

export interface GcContext {
  api: GcApi;
  graph: OwnershipGraph;
  absent: AbsentOwnerCache;
  mapper: () => RestMapper;
  /**
   * Feeds verified facts back to the single graph writer, in the lane of
   * the item being worked on (the dependents left without an owner are
   * queued in it).
   */
  pushGraphEvent: (e: Omit<VirtualDeleteEvent, 'lane'>) => void;
  /** Queues a follow-up in the lane of the item being worked on. */
  enqueueDelete: (uid: string) => void;
  log: Logger;
  dryRun: boolean;
  /** What the workers remember between items (see WorkerState). */
  state: WorkerState;
  metrics?: GcMetricsHooks;
  events?: EventRecorder;
  /**
   * The watched resources that might hold unseen dependents of an owner
   * deleted with Orphan: those whose informer has not shown that it
   * delivered every event up to resourceVersion `rv` of the owner, an
   * object of resource `owner` (see attemptToOrphan), and those whose
   * resourceVersions do not compare with `owner`'s.
   */
  watchesBehind?: (ownerNamespaced: boolean, rv: string, owner: ResourceInfo) => ResourceInfo[];
  /**
   * Resolves once a discovery round that began at or after `since` (ms since
   * epoch) has finished, with what that round could not show: groups whose
   * discovery failed and of which nothing is known (their resources cannot
   * be watched nor listed), '*' for all of /apis. Empty when complete.
   */
  discoveredSince?: (since: number) => Promise<string[]>;
  /** How long the watches get to show delivery past an Orphan deletion before their resources are listed. */
  orphanCatchUpMs?: number;
  /** Resolves once the graph holds every event the informers delivered so far. */
  graphFlushed?: () => Promise<void>;
  /**
   * The resources that left discovery while holding a dependent of this
   * owner (group/resource), and have not come back: an Orphan deletion of
   * the owner waits for them, however long (see attemptToOrphan).
   */
  departedHolding?: (ownerUid: string) => string[];
  /** How long an Orphan deletion waits for resources it can neither watch nor list (default 2 min). */
  orphanWatchWaitMs?: number;
  /** Collection lag, pending collections and blocked deletions (see slis.ts). */
  slis?: CollectionSlis;
}

/** A live read of an owner, shared by the decisions it can serve (see owners.ts). */
export interface OwnerRead {
  sentAt: number;
  read: Promise<ClassifiedOwner>;
}

/** An Orphan deletion waiting for watches: when the wait began and the owner's resourceVersion then. */
export interface OrphanWait {
  since: number;
  rv: string;
  logged: boolean;
  /** What it last could neither watch nor list (for the blocked-deletion gauges and event). */
  unreadable?: string[];
}

const WARNED_CAPACITY = 10_000;

/** The workers' memory between items, owned by one GarbageCollector. */
export class WorkerState {
  /** Objects already told about a problem (`uid/reason`), oldest first: one event per object and reason, not one per retry. */
  readonly warned = new Set<string>();
  /** Live reads of owners, by owner UID and dependent namespace: the one in flight and the one queued after it. */
  readonly ownerReads = new Map<string, { current: OwnerRead; next?: Promise<ClassifiedOwner> }>();
  /** Owners deleted with Orphan that wait for watches to catch up, by UID. */
  readonly orphanWaits = new Map<string, OrphanWait>();

  /** Records `key`; false if it was recorded already. Bounded: the oldest is forgotten first. */
  firstWarning(key: string): boolean {
    if (this.warned.has(key)) return false;
    this.warned.add(key);
    if (this.warned.size > WARNED_CAPACITY) {
      const oldest = this.warned.values().next().value;
      if (oldest !== undefined) this.warned.delete(oldest);
    }
    return true;
  }
}

export class UnresolvableKindError extends Error {}

/** The served resource of an apiVersion and kind; never decides on an unknown kind. */
export function resolveKind(ctx: GcContext, apiVersion: string, kind: string): ResourceInfo {
  const r = ctx.mapper().resolve(apiVersion, kind);
  if (!r) throw unresolvableKind(apiVersion, kind);
  return r;
}

export function unresolvableKind(apiVersion: string, kind: string): UnresolvableKindError {
  return new UnresolvableKindError(
    `cannot resolve ${apiVersion}, Kind=${kind} to a served resource; not deciding on this basis (retrying)`,
  );
}

/** A Warning event on an object, for a reason a user can fix; at most once per object and reason. */
export function warnOnce(ctx: GcContext, uid: string, reason: string, note: string): void {
  if (!ctx.events || !ctx.state.firstWarning(`${uid}/${reason}`)) return;
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

/** The fields every log line about a decision carries. */
export function decisionFields(
  resource: ResourceInfo,
  meta: ObjectMeta,
  reason: string,
  owners: readonly ClassifiedOwner[],
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
