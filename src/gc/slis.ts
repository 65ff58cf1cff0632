// Is collection keeping up, and what is stuck? The GC's service-level
// indicators, kept beside the graph by the one GarbageCollector that owns
// both:
//   - collection lag: from the moment the GC learnt that a dependent's last
//     owner is gone (or, for Foreground, that its owner started deleting) to
//     the dependent's deletion seen by the informers;
//   - pending collections: objects the GC asked the API server to delete that
//     still exist;
//   - blocked deletions: objects with a deletionTimestamp and a GC finalizer
//     (foregroundDeletion, orphan) that are not finishing, and why.
// Pending and lag move with the GC's own writes and the informers' deletes
// (O(1) each). Blocked deletions are recomputed by a sweep over the objects
// in foreground or orphan deletion and the failing writes only, never over
// the whole graph; scrapes read counts kept by the last sweep.
import { ApiError } from '../api/errors.ts';
import type { NodeAttributes, OwnershipGraph } from '../graph/graph.ts';
import { UnresolvableKindError } from './context.ts';

export type BlockedReason =
  /** A blocking dependent is being deleted but held by a finalizer of its own. */
  | 'dependent-finalizer'
  /** A blocking dependent the GC cannot delete (403, admission, an unresolvable kind). */
  | 'dependent-undeletable'
  /** Objects in foreground deletion block each other through blockOwnerDeletion. */
  | 'cycle'
  /** An Orphan deletion waits for watches (or lists) to show every dependent. */
  | 'orphan-waiting-for-watches'
  /** The GC's own write to finish the deletion (a finalizer removal, an orphaning PATCH) is refused. */
  | 'write-refused';

export const BLOCKED_REASONS: readonly BlockedReason[] = [
  'dependent-finalizer',
  'dependent-undeletable',
  'cycle',
  'orphan-waiting-for-watches',
  'write-refused',
];

export interface Blocker {
  reason: BlockedReason;
  /** What holds it, for the event and the logs (no object names in metrics). */
  detail: string;
  /** The dependent that holds it, when one does (the end of the chain). */
  dependent?: string;
}

export interface BlockedEntry extends Blocker {
  uid: string;
  /** First seen blocked (any reason), ms since epoch. */
  since: number;
  /** Since when it has been blocked for this reason. */
  reasonSince: number;
  /** When the last DeletionBlocked event was recorded for it. */
  lastEventAt?: number;
}

/** What the blocked-deletion sweep reads besides the graph. */
export interface SweepInputs {
  graph: OwnershipGraph;
  /** Owners deleted with Orphan that wait for watches: since when. */
  orphanWaits: ReadonlyMap<string, { since: number; unreadable?: readonly string[] }>;
}

/** Blocking dependents followed at most this deep when looking for a cycle or a chain. */
const MAX_CHAIN = 64;
/** Nodes visited at most when looking for a cycle from one dependent. */
const MAX_CYCLE_VISITS = 10_000;

export function describe(n: Pick<NodeAttributes, 'kind' | 'namespace' | 'name' | 'uid'>): string {
  return `${n.kind} ${n.namespace ? `${n.namespace}/` : ''}${n.name} (uid ${n.uid})`;
}

/**
 * Why an object in foreground deletion is not finishing, from the graph and
 * the refused writes; undefined while it is progressing (its blocking
 * dependents are being deleted, or deleting their own). Pure over its inputs.
 */
export function foregroundBlocker(
  graph: OwnershipGraph,
  uid: string,
  failures: ReadonlyMap<string, { detail: string }>,
  memo = new Map<string, Blocker | undefined>(),
  depth = 0,
): Blocker | undefined {
  if (memo.has(uid)) return memo.get(uid);
  memo.set(uid, undefined); // a chain back to here is a cycle, found below
  const node = graph.node(uid);
  if (!node?.deletingDependents) return undefined;
  const own = failures.get(uid);
  if (own) {
    const b: Blocker = {
      reason: 'write-refused',
      detail: `removing its foregroundDeletion finalizer was refused: ${own.detail}`,
    };
    memo.set(uid, b);
    return b;
  }
  let undeletable: Blocker | undefined;
  let held: Blocker | undefined;
  let cycle: Blocker | undefined;
  let chained: Blocker | undefined;
  graph.g.forEachOutEdge(uid, (_e, attrs, _s, dep, _sa, d) => {
    if (!attrs.blockOwnerDeletion || d.virtual || undeletable) return;
    const failure = failures.get(dep);
    if (failure) {
      undeletable = {
        reason: 'dependent-undeletable',
        detail: `its blocking dependent ${describe(d)} cannot be deleted: ${failure.detail}`,
        dependent: dep,
      };
    } else if (d.beingDeleted && !d.deletingDependents) {
      held ??= {
        reason: 'dependent-finalizer',
        detail: `its blocking dependent ${describe(d)} is being deleted but is held by a finalizer of its own`,
        dependent: dep,
      };
    } else if (d.deletingDependents && !cycle && !chained) {
      if (reaches(graph, dep, uid))
        cycle = {
          reason: 'cycle',
          detail: `blockOwnerDeletion references form a cycle through ${describe(d)}`,
          dependent: dep,
        };
      else if (depth < MAX_CHAIN) {
        const below = foregroundBlocker(graph, dep, failures, memo, depth + 1);
        if (below)
          chained = {
            reason: below.reason,
            detail: `its blocking dependent ${describe(d)} is itself blocked: ${below.detail}`,
            dependent: below.dependent ?? dep,
          };
      }
    }
  });
  const b = undeletable ?? held ?? cycle ?? chained;
  memo.set(uid, b);
  return b;
}

/** Whether `target` is reachable from `start` along blocking edges through objects deleting their dependents. */
function reaches(graph: OwnershipGraph, start: string, target: string): boolean {
  const seen = new Set<string>([start]);
  const stack = [start];
  while (stack.length > 0 && seen.size < MAX_CYCLE_VISITS) {
    const uid = stack.pop() as string;
    let found = false;
    graph.g.forEachOutEdge(uid, (_e, attrs, _s, dep, _sa, d) => {
      if (found || !attrs.blockOwnerDeletion) return;
      if (dep === target) found = true;
      else if (d.deletingDependents && !seen.has(dep)) {
        seen.add(dep);
        stack.push(dep);
      }
    });
    if (found) return true;
  }
  return false;
}

/** Answers that refuse a write for good (RBAC, admission, an unknown kind), unlike a 5xx or a timeout. */
export function refusal(err: unknown): string | undefined {
  if (err instanceof UnresolvableKindError) return err.message;
  // The message names the request, the status and the server's reason.
  if (err instanceof ApiError && [400, 403, 422].includes(err.status)) return err.message;
  return undefined;
}

export interface SliHooks {
  /** One observation per collected object: seconds of collection lag. */
  collectionLag?(seconds: number): void;
}

export class CollectionSlis {
  /** Objects the GC asked to delete, still existing, in the order asked (oldest first). */
  private readonly pending = new Map<string, { since: number; askedAt: number }>();
  /** Objects seen deleting their dependents in the foreground: since when. */
  private readonly foreground = new Map<string, number>();
  /** Writes refused for an object (403, 422, an unresolvable kind), by its UID. */
  readonly failures = new Map<string, { detail: string; since: number }>();
  private blocked = new Map<string, BlockedEntry>();
  private readonly counts = new Map<BlockedReason, { n: number; oldest: number }>();
  private readonly hooks: SliHooks;
  private readonly now: () => number;
  /** An Orphan deletion counts as blocked once it has waited this long (the normal wait is about a second). */
  readonly orphanGraceMs: number;

  constructor(hooks: SliHooks = {}, opts: { now?: () => number; orphanGraceMs?: number } = {}) {
    this.hooks = hooks;
    this.now = opts.now ?? Date.now;
    this.orphanGraceMs = opts.orphanGraceMs ?? 5000;
  }

  // ---- pending collections and lag ----------------------------------------

  /**
   * The API server accepted the GC's DELETE of `uid`; `since`: when its last
   * owner was known gone. `alreadyGone`: the informers' DELETED event was
   * handled before the DELETE's answer (they race), so the lag ends now.
   */
  collecting(uid: string, since: number, alreadyGone = false): void {
    if (alreadyGone) {
      this.hooks.collectionLag?.(Math.max(0, this.now() - since) / 1000);
      return;
    }
    if (!this.pending.has(uid)) this.pending.set(uid, { since, askedAt: this.now() });
  }

  /** When `uid` was first seen deleting its dependents (undefined if never). */
  foregroundSince(uid: string): number | undefined {
    return this.foreground.get(uid);
  }

  /** `uid` is deleting its dependents in the foreground (idempotent: the first time counts). */
  foregroundStarted(uid: string): void {
    if (!this.foreground.has(uid)) this.foreground.set(uid, this.now());
  }

  /** The informers saw `uid` deleted. */
  gone(uid: string): void {
    const p = this.pending.get(uid);
    if (p) {
      this.pending.delete(uid);
      this.hooks.collectionLag?.(Math.max(0, this.now() - p.since) / 1000);
    }
    this.forget(uid);
  }

  /** Nothing more will be heard of `uid` (its resource is no longer watched): no lag observed. */
  forget(uid: string): void {
    this.pending.delete(uid);
    this.foreground.delete(uid);
    this.failures.delete(uid);
    const b = this.blocked.get(uid);
    if (b) {
      this.blocked.delete(uid);
      this.recount();
    }
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  oldestPendingSeconds(): number {
    const first = this.pending.values().next().value;
    return first ? Math.max(0, this.now() - first.askedAt) / 1000 : 0;
  }

  // ---- refused writes --------------------------------------------------------

  failed(uid: string, detail: string): void {
    const f = this.failures.get(uid);
    if (f) f.detail = detail;
    else this.failures.set(uid, { detail, since: this.now() });
  }

  succeeded(uid: string): void {
    this.failures.delete(uid);
  }

  // ---- blocked deletions -----------------------------------------------------

  /**
   * Recomputes the blocked deletions from the objects in foreground and
   * orphan deletion and the refused writes. Returns the entries due a
   * DeletionBlocked event: blocked for `eventAfterMs` or more, and not told
   * within `repeatMs` (0 `eventAfterMs`: none).
   */
  sweep(inputs: SweepInputs, eventAfterMs: number, repeatMs: number): BlockedEntry[] {
    const now = this.now();
    const { graph } = inputs;
    const next = new Map<string, BlockedEntry>();
    const put = (uid: string, b: Blocker, since = now): void => {
      const prev = this.blocked.get(uid);
      next.set(uid, {
        ...b,
        uid,
        since: prev?.since ?? since,
        reasonSince: prev && prev.reason === b.reason ? prev.reasonSince : since,
        lastEventAt: prev?.lastEventAt,
      });
    };
    const memo = new Map<string, Blocker | undefined>();
    for (const uid of [...this.foreground.keys()]) {
      const node = graph.node(uid);
      if (!node) {
        this.foreground.delete(uid);
        continue;
      }
      if (!node.deletingDependents) continue;
      const b = foregroundBlocker(graph, uid, this.failures, memo);
      if (b) put(uid, b);
    }
    for (const [uid, wait] of inputs.orphanWaits) {
      const node = graph.node(uid);
      if (!node?.beingDeleted || !node.hasOrphanFinalizer || next.has(uid)) continue;
      const failure = this.failures.get(uid);
      if (failure)
        put(uid, {
          reason: 'write-refused',
          detail: `orphaning its dependents or removing its orphan finalizer was refused: ${failure.detail}`,
        });
      else if (now - wait.since >= this.orphanGraceMs)
        put(
          uid,
          {
            reason: 'orphan-waiting-for-watches',
            detail: wait.unreadable?.length
              ? `its Orphan deletion waits for resources kubegc can neither watch nor list: ${wait.unreadable.join(', ')}`
              : 'its Orphan deletion waits until every watch that could hold a dependent has caught up, or its resource has been listed',
          },
          wait.since,
        );
    }
    this.blocked = next;
    this.recount();
    if (eventAfterMs <= 0) return [];
    const due: BlockedEntry[] = [];
    for (const e of next.values()) {
      if (now - e.since < eventAfterMs) continue;
      if (e.lastEventAt !== undefined && now - e.lastEventAt < repeatMs) continue;
      e.lastEventAt = now;
      due.push(e);
    }
    return due;
  }

  private recount(): void {
    this.counts.clear();
    for (const e of this.blocked.values()) {
      const c = this.counts.get(e.reason);
      if (c) {
        c.n++;
        c.oldest = Math.min(c.oldest, e.reasonSince);
      } else this.counts.set(e.reason, { n: 1, oldest: e.reasonSince });
    }
  }

  blockedCount(reason: BlockedReason): number {
    return this.counts.get(reason)?.n ?? 0;
  }

  oldestBlockedSeconds(reason: BlockedReason): number {
    const c = this.counts.get(reason);
    return c ? Math.max(0, this.now() - c.oldest) / 1000 : 0;
  }

  blockedEntries(): IterableIterator<BlockedEntry> {
    return this.blocked.values();
  }
}
