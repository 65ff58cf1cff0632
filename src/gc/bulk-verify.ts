// Verifying owners the graph has not observed (virtual owners) in bulk.
//
// A dependent naming an owner no informer has shown makes a virtual owner
// that must be verified with a live read before its dependents can go. After
// a restart with N leaked dependents, each naming an owner of its own that
// is gone, that is N reads before anything is collected, and a user's
// cascade waits behind them. When many virtual owners of one resource await
// verification, one consistent paginated LIST of that resource is the same
// evidence as one read per owner (docs/how-it-decides.md says why), for a
// few requests instead of N.
//
// Only virtual owners come this way (the propagator hands them here rather
// than to the attempt-to-delete queue); nothing a user did waits for it.
// Before the workers start (the initial sync, a standby), owners gather
// here; once they start, each round takes what gathered in a short window.
// Each round: owners observed meanwhile need nothing (the informers showed
// them; their own references are the propagator's business); the others are
// grouped by resource; a group worth a LIST is listed (planVerification),
// the rest go to the attempt-to-delete queue for one live read each, as
// before. What a list shows absent becomes a virtualDelete, as a single read
// would make it, released in chunks as the queue drains, so that the
// absent-owner cache still holds each owner when its dependents are decided.
import { inLane } from '../api/lanes.ts';
import { groupResource, type ResourceInfo, type RestMapper } from '../api/resources.ts';
import type { Identity, OwnershipGraph } from '../graph/graph.ts';
import type { GraphEvent } from '../graph/propagator.ts';
import { compareResourceVersions } from '../informers/metadata-informer.ts';
import type { Logger } from '../log.ts';
import type { GcMetricsHooks } from './context.ts';
import { IncompleteListError, type GcApi, type ListSnapshot } from './operations.ts';

export interface BulkVerifyOptions {
  /** The fewest owners of one resource worth a LIST (fewer: one live read each). */
  minOwners: number;
  /** Once the workers run, how long owners gather before a round takes them. */
  windowMs: number;
  /** Items per page of a LIST. */
  pageSize: number;
  /** Owners found absent handed to the graph at a time... */
  releaseChunk: number;
  /** ...whenever the attempt-to-delete queue holds fewer keys than this. */
  releaseBelow: number;
  /** An owner a LIST showed present but the informers have not yet shown gets one live read this much later. */
  presentRecheckMs: number;
  /** A resource whose LIST was refused or came back incomplete is read one owner at a time this long. */
  refusedForMs: number;
}

export const DEFAULT_BULK_VERIFY_OPTIONS: BulkVerifyOptions = {
  minOwners: 20,
  windowMs: 100,
  pageSize: 500,
  // The absent-owner cache holds 4,096 owners: releasing at most 500 while
  // fewer than 1,000 keys wait keeps every released owner in it until its
  // dependents are decided (from the graph's copy, one DELETE each).
  releaseChunk: 500,
  releaseBelow: 1000,
  presentRecheckMs: 2000,
  refusedForMs: 5 * 60_000,
};

/** Below this many owners gathered before start(), none is pruned (see BulkVerifier.prune). */
const PRUNE_FLOOR = 10_000;

/** A virtual owner awaiting verification, as its dependents name it. */
export interface PendingOwner {
  /** What a read by name verifies: the reference's coordinates ('' namespace for a cluster-scoped kind). */
  identity: Identity;
  resource: ResourceInfo;
  /** The virtual node's own namespace (its first dependent's), to tell later whether it still claims this identity. */
  nodeNamespace: string;
  /** The highest resourceVersion among the dependents that name it ('' when none is known). */
  dependentsVersion: string;
}

/** Owners of one resource verified by one LIST. */
export interface BulkGroup {
  resource: ResourceInfo;
  /** The namespace listed; undefined: every namespace (or a cluster-scoped resource). */
  namespace: string | undefined;
  owners: PendingOwner[];
  /** Pages the LIST is expected to take (from the informers' count of the resource). */
  expectedPages: number;
}

export interface VerificationPlan {
  bulk: BulkGroup[];
  /** Owners read one at a time, as before. */
  single: PendingOwner[];
}

/** A resource's key: one version's server may serve what another's does not. */
function resourceKey(r: ResourceInfo): string {
  return `${r.group}/${r.version}/${r.resource}`;
}

/**
 * Which owners to verify with a LIST of their resource, and which one at a
 * time. A LIST pays when the resource is watched (its object count known,
 * and the informer will show an owner the LIST finds), can be listed, at
 * least `minOwners` of its owners wait, and its pages number at most half
 * the reads it saves. It covers one namespace when all its owners are in
 * one, else every namespace.
 */
export function planVerification(
  owners: readonly PendingOwner[],
  objectCount: (r: ResourceInfo) => number | undefined,
  opts: Pick<BulkVerifyOptions, 'minOwners' | 'pageSize'>,
): VerificationPlan {
  const byResource = new Map<string, PendingOwner[]>();
  for (const o of owners) {
    const key = resourceKey(o.resource);
    const group = byResource.get(key);
    if (group) group.push(o);
    else byResource.set(key, [o]);
  }
  const plan: VerificationPlan = { bulk: [], single: [] };
  for (const group of byResource.values()) {
    const first = group[0];
    if (!first) continue;
    const resource = first.resource;
    const count = objectCount(resource);
    const expectedPages = Math.floor((count ?? 0) / opts.pageSize) + 1;
    if (
      count === undefined ||
      !resource.verbs.includes('list') ||
      group.length < opts.minOwners ||
      expectedPages * 2 > group.length
    ) {
      plan.single.push(...group);
      continue;
    }
    const namespaces = new Set(group.map((o) => o.identity.namespace));
    const [only] = namespaces;
    plan.bulk.push({
      resource,
      namespace: resource.namespaced && namespaces.size === 1 ? only : undefined,
      owners: group,
      expectedPages,
    });
  }
  return plan;
}

/** Where a read by name looks: namespace and name (the namespace '' for cluster-scoped kinds). */
function lookupKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The lookup key of an owner awaiting verification. */
export function ownerKey(o: PendingOwner): string {
  return lookupKey(o.resource.namespaced ? o.identity.namespace : '', o.identity.name);
}

export interface SnapshotVerdicts {
  /** Nothing under the owner's name holds its UID: what a read by name finding nothing (or another UID) concludes. */
  absent: PendingOwner[];
  /** The owner exists: its name holds its UID. */
  present: PendingOwner[];
  /** The LIST is older than a dependent that names the owner: it proves nothing about it. */
  unproven: PendingOwner[];
}

/**
 * Each owner of `group` judged on a complete LIST of one snapshot, exactly
 * as a read by its name would judge it: absent unless the object under that
 * name (in that namespace) has its UID. Never from a list older than the
 * dependents that name the owner (compared when both resourceVersions are
 * decimal). A list holding one name twice throws: it is not what it claims.
 */
export function judgeOnSnapshot(
  group: BulkGroup,
  snapshot: Pick<ListSnapshot, 'resourceVersion' | 'items'>,
): SnapshotVerdicts {
  const uidByName = new Map<string, string>();
  for (const item of snapshot.items) {
    const key = lookupKey(group.resource.namespaced ? (item.namespace ?? '') : '', item.name);
    if (uidByName.has(key))
      throw new IncompleteListError(
        `LIST of ${groupResource(group.resource)}: two objects under ${key}`,
      );
    uidByName.set(key, item.uid);
  }
  const verdicts: SnapshotVerdicts = { absent: [], present: [], unproven: [] };
  for (const o of group.owners) {
    if (compareResourceVersions(snapshot.resourceVersion, o.dependentsVersion) < 0)
      verdicts.unproven.push(o);
    else if (uidByName.get(ownerKey(o)) === o.identity.uid) verdicts.present.push(o);
    else verdicts.absent.push(o);
  }
  return verdicts;
}

/** What the verifier works with: the workers' API, graph and mapper, and the collector's queues. */
export interface BulkVerifierDeps {
  api: Pick<GcApi, 'listSnapshot'>;
  graph: OwnershipGraph;
  mapper: () => RestMapper;
  /** Feeds verdicts to the single graph writer. */
  pushGraphEvent: (e: GraphEvent) => void;
  /** Resolves once the graph holds every event pushed so far. */
  graphFlushed: () => Promise<void>;
  log: Logger;
  metrics?: GcMetricsHooks;
  /** Hands an owner to the attempt-to-delete queue: one live read, as without bulk verification. */
  verifySingly(uid: string): void;
  /** How many objects the informers report of `r`; undefined when it is not watched. */
  objectCount(r: ResourceInfo): number | undefined;
  /** Keys waiting in the attempt-to-delete queue, where released owners' dependents go. */
  backlog(): number;
}

export class BulkVerifier {
  private readonly deps: BulkVerifierDeps;
  private readonly opts: BulkVerifyOptions;
  /** Virtual owners (UIDs) waiting for the next round. */
  private readonly pending = new Set<string>();
  /** Owners a LIST showed present: if still unobserved at their next round, one live read each. */
  private readonly recheck = new Set<string>();
  /** Owners found absent, waiting to be handed to the graph (see release()). */
  private absent: PendingOwner[] = [];
  /** resourceKey → until when (ms since epoch) its owners are read one at a time. */
  private readonly refusedUntil = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Ends release()'s wait for room in the queue at once (stop()). */
  private wake: (() => void) | undefined;
  private roundTimer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private releasing: Promise<void> | undefined;
  private started = false;
  private stopped = false;
  /** Before start(), the size at which `pending` is next cleared of owners observed since. */
  private pruneAt = PRUNE_FLOOR;

  constructor(deps: BulkVerifierDeps, opts: Partial<BulkVerifyOptions> = {}) {
    this.deps = deps;
    this.opts = { ...DEFAULT_BULK_VERIFY_OPTIONS, ...opts };
  }

  /** A virtual owner to verify (the propagator's sink). */
  add(uid: string): void {
    if (this.stopped) return;
    this.pending.add(uid);
    if (this.started) this.schedule(this.opts.windowMs);
    else if (this.pending.size >= this.pruneAt) this.prune();
  }

  /**
   * A standby gathers owners until it leads, perhaps for weeks; most are
   * observed moments after (a dependent listed before its owner). Dropping
   * those whenever the set has doubled keeps it the size of what is still
   * unobserved, at a constant cost per owner added.
   */
  private prune(): void {
    for (const uid of this.pending)
      if (!this.deps.graph.node(uid)?.virtual) this.pending.delete(uid);
    this.pruneAt = Math.max(PRUNE_FLOOR, this.pending.size * 2);
  }

  /** The workers run: verify what gathered, and from now on each window's owners. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.schedule(0);
  }

  /** Owners waiting for a round. */
  get waiting(): number {
    return this.pending.size;
  }

  /** Nothing waits, is being listed, or waits to be handed to the graph. */
  get idle(): boolean {
    return (
      this.pending.size === 0 &&
      this.roundTimer === undefined &&
      this.round === undefined &&
      this.releasing === undefined
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.roundTimer);
    this.roundTimer = undefined;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wake?.();
    this.pending.clear();
    this.absent = [];
    await this.round;
    await this.releasing;
  }

  private schedule(delayMs: number): void {
    if (this.roundTimer !== undefined || this.round !== undefined || this.stopped) return;
    this.roundTimer = setTimeout(() => {
      this.roundTimer = undefined;
      this.round = this.verifyRound()
        .catch((err: unknown) =>
          this.deps.log.error('bulk verification of owners failed', {
            error: err instanceof Error ? err.message : String(err),
          }),
        )
        .finally(() => {
          this.round = undefined;
          if (this.pending.size > 0) this.schedule(this.opts.windowMs);
        });
    }, delayMs);
  }

  /** One round: what gathered, planned, listed or handed on one at a time. */
  private async verifyRound(): Promise<void> {
    const uids = [...this.pending];
    this.pending.clear();
    const owners: PendingOwner[] = [];
    const now = Date.now();
    for (const uid of uids) {
      const rechecked = this.recheck.delete(uid);
      const o = this.pendingOwner(uid);
      if (o === 'observed') continue;
      if (
        o === 'single' ||
        rechecked ||
        (this.refusedUntil.get(resourceKey(o.resource)) ?? 0) > now
      )
        this.deps.verifySingly(uid);
      else owners.push(o);
    }
    const plan = planVerification(owners, (r) => this.deps.objectCount(r), this.opts);
    for (const o of plan.single) this.deps.verifySingly(o.identity.uid);
    for (const group of plan.bulk) {
      if (this.stopped) return;
      await this.verifyGroup(group);
    }
  }

  /**
   * The owner as it awaits verification; 'observed' when there is nothing to
   * verify (the informers showed it, or no dependent names it any more);
   * 'single' for what only the single read handles (a kind that cannot be
   * resolved, which it reports and retries; a cluster-scoped dependent's
   * reference to a namespaced kind, which it hands back to each dependent).
   */
  private pendingOwner(uid: string): PendingOwner | 'observed' | 'single' {
    const { graph, mapper } = this.deps;
    const node = graph.node(uid);
    if (!node?.virtual) return 'observed';
    const resource = mapper().resolve(node.apiVersion, node.kind);
    if (!resource || (resource.namespaced && !node.namespace)) return 'single';
    let dependentsVersion = '';
    graph.someDependent(uid, (dep) => {
      const rv = graph.node(dep)?.resourceVersion ?? '';
      if (dependentsVersion === '' || compareResourceVersions(rv, dependentsVersion) > 0)
        dependentsVersion = rv;
      return false;
    });
    return {
      identity: {
        apiVersion: node.apiVersion,
        kind: node.kind,
        namespace: resource.namespaced ? node.namespace : '',
        name: node.name,
        uid,
      },
      resource,
      nodeNamespace: node.namespace,
      dependentsVersion,
    };
  }

  private async verifyGroup(group: BulkGroup): Promise<void> {
    const { api, log, metrics } = this.deps;
    const resource = groupResource(group.resource);
    const wanted = new Set(group.owners.map(ownerKey));
    let verdicts: SnapshotVerdicts;
    try {
      // Verifying what was there at start is housekeeping: its pages wait
      // behind the user's requests in the client's rate limiter.
      const snapshot = await inLane('housekeeping', () =>
        api.listSnapshot(
          group.resource,
          group.namespace,
          (m) =>
            wanted.has(lookupKey(group.resource.namespaced ? (m.namespace ?? '') : '', m.name)),
          {
            pageSize: this.opts.pageSize,
            // Twice what the informers' count predicts, and then some: objects come and go.
            maxPages: group.expectedPages * 2 + 10,
            onPage: () => metrics?.ownerRead?.(resource, 'bulk'),
          },
        ),
      );
      verdicts = judgeOnSnapshot(group, snapshot);
    } catch (err) {
      // Whatever went wrong, nothing is concluded from this LIST: each owner is read on its own.
      this.refuse(group.resource, err);
      for (const o of group.owners) this.deps.verifySingly(o.identity.uid);
      return;
    }
    log.debug('owners verified in bulk', {
      resource,
      namespace: group.namespace ?? '',
      owners: group.owners.length,
      absent: verdicts.absent.length,
      present: verdicts.present.length,
      unproven: verdicts.unproven.length,
    });
    for (const o of verdicts.unproven) this.deps.verifySingly(o.identity.uid);
    metrics?.ownersVerifiedInBulk?.(resource, 'present', verdicts.present.length);
    metrics?.ownersVerifiedInBulk?.(resource, 'absent', verdicts.absent.length);
    this.recheckLater(verdicts.present);
    this.absent.push(...verdicts.absent);
    this.releasing ??= this.release().finally(() => {
      this.releasing = undefined;
    });
  }

  /**
   * The LIST failed or could not be shown complete: that resource's owners
   * are read one at a time for a while (a refusal, a 4xx, or an odd answer
   * would come again; a 5xx or a lost connection may not).
   */
  private refuse(r: ResourceInfo, err: unknown): void {
    const status = (err as { status?: unknown }).status;
    const lasting =
      err instanceof IncompleteListError ||
      (typeof status === 'number' && status >= 400 && status < 500 && status !== 429);
    if (lasting) this.refusedUntil.set(resourceKey(r), Date.now() + this.opts.refusedForMs);
    this.deps.log.warn('owners of this resource could not be verified in bulk; reading each', {
      resource: groupResource(r),
      version: r.version,
      error: err instanceof Error ? err.message.slice(0, 300) : String(err),
      ...(lasting ? { readEachForMs: this.opts.refusedForMs } : {}),
    });
  }

  /**
   * The LIST showed these owners: the informers will show them too. Those
   * still unobserved a little later are read live, one at a time, and from
   * then on handled as before (requeued until their informer shows them).
   */
  private recheckLater(present: readonly PendingOwner[]): void {
    if (present.length === 0) return;
    for (const o of present) this.recheck.add(o.identity.uid);
    const t = setTimeout(() => {
      this.timers.delete(t);
      for (const o of present) this.add(o.identity.uid);
    }, this.opts.presentRecheckMs);
    t.unref();
    this.timers.add(t);
  }

  /**
   * Hands the owners found absent to the graph (a virtualDelete each, as a
   * single read would push) in chunks, each once the attempt-to-delete
   * queue has room: their dependents are queued as each is applied, and
   * are decided from the absent-owner cache only while it still holds the
   * owner. An owner the informers have shown since, or no longer claimed
   * under the identity listed, is left alone (observed beats listed).
   */
  private async release(): Promise<void> {
    const { graph, pushGraphEvent, graphFlushed } = this.deps;
    while (this.absent.length > 0 && !this.stopped) {
      if (this.deps.backlog() >= this.opts.releaseBelow) {
        await this.pause(50);
        continue;
      }
      const chunk = this.absent.splice(0, this.opts.releaseChunk);
      for (const o of chunk) {
        const node = graph.node(o.identity.uid);
        if (
          !node?.virtual ||
          node.apiVersion !== o.identity.apiVersion ||
          node.kind !== o.identity.kind ||
          node.name !== o.identity.name ||
          node.namespace !== o.nodeNamespace
        )
          continue;
        pushGraphEvent({ type: 'virtualDelete', identity: o.identity, lane: 'housekeeping' });
      }
      // The dependents are in the queue once the graph has applied the chunk.
      await graphFlushed();
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => this.wake?.(), ms);
      this.timers.add(t);
      this.wake = () => {
        clearTimeout(t);
        this.timers.delete(t);
        this.wake = undefined;
        resolve();
      };
    });
  }
}
