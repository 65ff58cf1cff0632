// Wires the owner-reference GC together: periodic discovery → one metadata
// informer per deletable resource → the propagator (single graph writer) →
// the attempt-to-delete / attempt-to-orphan work queues → the workers.
import type { KubeClient } from '../api/client.ts';
import { currentLane, inLane } from '../api/lanes.ts';
import { discover, localGroupVersions, resourceVersionStorage } from '../api/discovery.ts';
import {
  RestMapper,
  groupResource,
  isDeletable,
  normaliseGroupResource,
  type ResourceInfo,
} from '../api/resources.ts';
import { AbsentOwnerCache } from '../graph/absent-owner-cache.ts';
import { OwnershipGraph } from '../graph/graph.ts';
import { Propagator, type GraphChangeMetrics } from '../graph/propagator.ts';
import {
  MetadataInformer,
  type InformerOptions,
  type KnownObjects,
} from '../informers/metadata-informer.ts';
import type { Logger } from '../log.ts';
import { WorkQueue, type WorkQueueMetrics } from '../queue/workqueue.ts';
import { attemptToDelete } from './attempt-to-delete.ts';
import { BulkVerifier, type BulkVerifyOptions } from './bulk-verify.ts';
import {
  UnresolvableKindError,
  WorkerState,
  type GcContext,
  type GcMetricsHooks,
} from './context.ts';
import { attemptToOrphan, DEFAULT_ORPHAN_WATCH_WAIT_MS } from './attempt-to-orphan.ts';
import { apiEventRecorder } from '../shared/events.ts';
import { NotLeaderError, type WriteTenure } from '../leader/lease.ts';
import { GcApi } from './operations.ts';
import { CollectionSlis, type BlockedEntry } from './slis.ts';

export const DEFAULT_IGNORED_RESOURCES = ['events', 'events.events.k8s.io'];

export interface GarbageCollectorOptions {
  workers: number;
  orphanWorkers: number;
  discoveryPeriodMs: number;
  /** group-resources (`resource.group`) never watched, added to the defaults. */
  ignoredResources: string[];
  dryRun: boolean;
  /** Workers start when every informer has listed once, or after this long. */
  initialSyncTimeoutMs: number;
  informer?: Partial<InformerOptions>;
  /** Consulted before every write (leader election); default: always. */
  allowWrites?: () => boolean;
  /** Bounds every PATCH/DELETE in time once on the wire (leader election): its signal and timeout. */
  writeTenure?: WriteTenure;
  /** How long an Orphan deletion waits for watches that are behind before it goes ahead. */
  orphanWatchWaitMs: number;
  /** A deletion blocked this long gets a DeletionBlocked event (0: none). */
  blockedDeletionEventAfterMs: number;
  /** How often blocked deletions are recomputed (the gauges' resolution). */
  blockedSweepMs: number;
  /** How owners the graph has not observed are verified in bulk (bulk-verify.ts). */
  bulkVerify?: Partial<BulkVerifyOptions>;
}

/** A DeletionBlocked event is repeated at most this often while the deletion stays blocked. */
export const BLOCKED_EVENT_REPEAT_MS = 30 * 60_000;

export const DEFAULT_GC_OPTIONS: GarbageCollectorOptions = {
  workers: 20,
  orphanWorkers: 20,
  discoveryPeriodMs: 30_000,
  ignoredResources: [],
  dryRun: false,
  initialSyncTimeoutMs: 30_000,
  orphanWatchWaitMs: DEFAULT_ORPHAN_WATCH_WAIT_MS,
  blockedDeletionEventAfterMs: 5 * 60_000,
  blockedSweepMs: 10_000,
};

export interface GarbageCollectorMetrics extends GcMetricsHooks {
  workqueue?: WorkQueueMetrics;
  graphChanges?: GraphChangeMetrics;
  discoveryError?(group: string): void;
  /** A watch line of this group-resource was not a JSON event. */
  malformedWatchEvent?(groupResource: string): void;
  /** Seconds from the last owner known gone to the dependent's deletion seen by the informers. */
  collectionLag?(seconds: number): void;
}

export class GarbageCollector {
  readonly graph = new OwnershipGraph();
  readonly absent = new AbsentOwnerCache(4096);
  /** Collection lag, pending collections, blocked deletions. */
  readonly slis: CollectionSlis;
  private sweepTimer: NodeJS.Timeout | undefined;
  readonly propagator: Propagator;
  readonly deleteQueue: WorkQueue;
  readonly orphanQueue: WorkQueue;
  /** Verifies the owners the graph has not observed, in bulk where that is cheaper. */
  readonly bulkVerifier: BulkVerifier;
  readonly informers = new Map<string, MetadataInformer>();
  /**
   * Per group-resource, the UIDs its informers reported alive. It outlives
   * the informers: a replacement (new preferred version, a group missing from
   * discovery for a round) starts from it, so its first LIST reports the
   * deletions that happened while nobody watched instead of losing them.
   */
  private readonly known = new Map<string, KnownObjects>();
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly opts: GarbageCollectorOptions;
  private readonly ignored: Set<string>;
  private mapper = new RestMapper([]);
  private all: ResourceInfo[] = [];
  private preferred: ResourceInfo[] = [];
  /** What the last discovery wants watched, by group-resource (an informer may be being replaced). */
  private desired = new Map<string, ResourceInfo>();
  /**
   * The group-versions kube-apiserver serves from its own etcd (their
   * APIService is Local), from the last discovery round; undefined when that
   * round could not list the APIServices: then no resource counts as
   * kube-apiserver's own, and no resourceVersion of one resource vouches for
   * another's watch (resourceVersionStorage).
   */
  private local: Set<string> | undefined;
  private localError: string | undefined;
  private discoveryTimer: NodeJS.Timeout | undefined;
  private discovering: Promise<void> | undefined;
  private stopped = false;
  /** Initial sync finished (or timed out): the graph is warm. */
  synced = false;
  /** The workers run (this process decides and writes). */
  started = false;
  lastDiscoveryError: string | undefined;

  constructor(
    client: KubeClient,
    log: Logger,
    opts: Partial<GarbageCollectorOptions> = {},
    metrics: GarbageCollectorMetrics = {},
  ) {
    this.client = client;
    this.log = log;
    this.opts = { ...DEFAULT_GC_OPTIONS, ...opts };
    this.ignored = new Set(
      [...DEFAULT_IGNORED_RESOURCES, ...this.opts.ignoredResources].map(normaliseGroupResource),
    );
    this.metrics = metrics;
    this.slis = new CollectionSlis({ collectionLag: metrics.collectionLag });
    const onError = (queue: string) => (key: string, error: unknown, retries: number) => {
      const fields = {
        queue,
        uid: key,
        retries,
        error: error instanceof Error ? error.message : String(error),
      };
      if (error instanceof UnresolvableKindError) this.log.warn('cannot decide yet', fields);
      // Writes stopped (lease lost, or stopping): the elector has said so once.
      else if (error instanceof NotLeaderError)
        this.log.debug('write refused: not leading', fields);
      else this.log.error('processing failed; will retry with backoff', fields);
    };
    this.deleteQueue = new WorkQueue({
      name: 'garbage_collector_attempt_to_delete',
      concurrency: this.opts.workers,
      // Every request of the item waits in the client's rate limiter in its lane.
      process: (uid, lane) => inLane(lane, () => attemptToDelete(this.ctx, uid)),
      metrics: metrics.workqueue,
      onError: onError('attempt_to_delete'),
    });
    this.orphanQueue = new WorkQueue({
      name: 'garbage_collector_attempt_to_orphan',
      concurrency: this.opts.orphanWorkers,
      process: (uid, lane) => inLane(lane, () => attemptToOrphan(this.ctx, uid)),
      metrics: metrics.workqueue,
      onError: onError('attempt_to_orphan'),
    });
    this.propagator = new Propagator(
      this.graph,
      this.absent,
      {
        attemptToDelete: (uid, lane) => this.deleteQueue.add(uid, lane),
        attemptToDeleteRateLimited: (uid, lane) => this.deleteQueue.addRateLimited(uid, lane),
        attemptToOrphan: (uid, lane) => this.orphanQueue.add(uid, lane),
        verifyVirtualOwner: (uid) => this.bulkVerifier.add(uid),
        observedGone: (uid) => this.slis.gone(uid),
        forgotten: (uid) => this.slis.forget(uid),
        departedDependent: (owner, resource) => {
          let owners = this.departed.get(resource);
          if (!owners) this.departed.set(resource, (owners = new Set()));
          owners.add(owner);
        },
      },
      log,
      metrics.graphChanges,
    );
    this.ctx = {
      api: new GcApi(client, this.opts.allowWrites, this.opts.writeTenure, log),
      graph: this.graph,
      absent: this.absent,
      mapper: () => this.mapper,
      // A worker's follow-ups, and the dependents of an owner it verified
      // gone, go in the lane of the item it works on; outside any item (the
      // blocked-deletion sweep) in the user's.
      pushGraphEvent: (e) => this.propagator.push({ ...e, lane: currentLane() ?? 'user' }),
      enqueueDelete: (uid) => this.deleteQueue.add(uid, currentLane() ?? 'user'),
      log,
      dryRun: this.opts.dryRun,
      state: new WorkerState(),
      metrics,
      events: this.opts.dryRun
        ? undefined
        : apiEventRecorder(client, log, undefined, {
            beforeSend: () => this.writeGuard(),
            tenure: this.opts.writeTenure,
          }),
      watchesBehind: (namespaced, rv, owner) => this.watchesBehind(namespaced, rv, owner),
      discoveredSince: (since) => this.discoveredSince(since),
      departedHolding: (owner) => this.departedHolding(owner),
      graphFlushed: () => this.propagator.flushed(),
      orphanWatchWaitMs: this.opts.orphanWatchWaitMs,
      slis: this.slis,
    };
    this.bulkVerifier = new BulkVerifier(
      {
        ...this.ctx,
        pushGraphEvent: (e) => this.propagator.push(e),
        graphFlushed: () => this.propagator.flushed(),
        verifySingly: (uid) => this.deleteQueue.add(uid, 'housekeeping'),
        objectCount: (r) => {
          const key = groupResource(r);
          return this.informers.has(key) ? this.known.get(key)?.uids.size : undefined;
        },
        backlog: () => this.deleteQueue.depth,
      },
      this.opts.bulkVerify,
    );
  }

  private readonly metrics: GarbageCollectorMetrics;
  private readonly ctx: GcContext;

  /** The leader-election write guard for the Event POSTs (GcApi has its own for PATCH/DELETE). */
  private writeGuard(): void {
    if (this.opts.allowWrites && !this.opts.allowWrites())
      throw new NotLeaderError('not the leader: writes are stopped');
  }

  /** sync() then startWorkers(): for a process that needs no leader election. */
  async start(): Promise<void> {
    await this.sync();
    this.startWorkers();
  }

  /**
   * Discovers, starts the informers and waits (bounded) for their first lists.
   * The graph is then warm: a standby replica stops here until it leads.
   */
  async sync(): Promise<void> {
    // Never start from an empty discovery: retry until the server tells us something.
    for (let delay = 1000; !this.stopped; delay = Math.min(delay * 2, 30_000)) {
      await this.runDiscovery();
      if (this.informers.size > 0) break;
      this.log.warn('discovery found no deletable resources yet; retrying', {
        retryInMs: delay,
        error: this.lastDiscoveryError,
      });
      await new Promise((r) => setTimeout(r, delay));
    }
    if (this.stopped) return;
    this.discoveryTimer = setInterval(() => void this.runDiscovery(), this.opts.discoveryPeriodMs);
    this.discoveryTimer.unref();

    const synced = Promise.all([...this.informers.values()].map((i) => i.waitForSync()));
    // Registered before the race below, so that on time it is logged before
    // the graph settles; late, it still marks when the last list came in.
    const listed = synced.then(() => {
      let objects = 0;
      for (const k of this.known.values()) objects += k.uids.size;
      this.log.info('informers listed', {
        resources: this.informers.size,
        objects,
        // performance.now() counts from the start of the process.
        sinceStartMs: Math.round(performance.now()),
      });
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), this.opts.initialSyncTimeoutMs);
    });
    const late = await Promise.race([synced.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      const unsynced = [...this.informers.values()]
        .filter((i) => !i.synced)
        .map((i) => groupResource(i.resource));
      this.log.warn(
        'starting before every informer synced; decisions use live reads, so this is safe',
        { unsynced },
      );
    } else await listed;
    await this.propagator.onIdle();
    this.synced = true;
  }

  /** Starts deciding and writing. Only the leader calls this. */
  startWorkers(): void {
    if (this.stopped || this.started) return;
    this.deleteQueue.start();
    this.orphanQueue.start();
    this.bulkVerifier.start();
    this.started = true;
    this.sweepTimer = setInterval(() => this.sweepBlocked(), this.opts.blockedSweepMs);
    this.sweepTimer.unref();
    this.log.info('garbage collector started', {
      resources: this.informers.size,
      objects: this.graph.order,
      workers: this.opts.workers,
      dryRun: this.opts.dryRun,
    });
  }

  /** One discovery round; concurrent calls share it. */
  runDiscovery(): Promise<void> {
    this.discovering ??= this.discoverOnce().finally(() => {
      this.discovering = undefined;
    });
    return this.discovering;
  }

  private async discoverOnce(): Promise<void> {
    const began = Date.now();
    try {
      await this.discoverResources();
    } finally {
      this.discoveryStartedAt = began;
      this.reportStalled();
    }
  }

  /**
   * Which group-versions kube-apiserver serves itself, for the comparison of
   * resourceVersions across resources (MetadataInformer.caughtUp). Listed
   * before discovery, so that a group discovered this round and registered
   * after the list counts as another server's (the safe side) until the next.
   */
  private async readLocalGroupVersions(): Promise<void> {
    try {
      this.local = await localGroupVersions(this.client);
      if (this.localError !== undefined) this.log.info('APIServices listed again');
      this.localError = undefined;
    } catch (err) {
      this.local = undefined;
      const error = (err as Error).message;
      // Once per failure streak: it can last (RBAC without list on apiservices).
      if (this.localError === undefined)
        this.log.warn(
          "cannot list APIServices: no resource counts as served from kube-apiserver's etcd, so Orphan deletions read every resource that could hold a dependent with a consistent LIST until they can be listed",
          { error },
        );
      this.localError = error;
    }
  }

  /** The storage whose counter `r`'s resourceVersions are (see resourceVersionStorage). */
  private storageOf(r: ResourceInfo): string {
    return resourceVersionStorage(r, this.local);
  }

  private async discoverResources(): Promise<void> {
    await this.readLocalGroupVersions();
    let res;
    try {
      res = await discover(this.client);
    } catch (err) {
      this.undiscovered = ['*'];
      this.lastDiscoveryError = (err as Error).message;
      this.log.warn('discovery failed; keeping the current resources', {
        error: this.lastDiscoveryError,
      });
      this.metrics.discoveryError?.('*');
      return;
    }
    if (res.all.length === 0) {
      this.undiscovered = ['*'];
      this.lastDiscoveryError = 'discovery returned no resources';
      this.log.warn('discovery returned nothing; keeping the current resources');
      return;
    }
    const failed = new Set(res.failedGroups);
    for (const g of failed) this.metrics.discoveryError?.(g);
    if (failed.size > 0)
      this.log.warn('discovery failed for some groups; keeping what was known of them', {
        groups: [...failed],
      });
    // Keep what we knew of groups that failed this round.
    const keep = (r: ResourceInfo): boolean =>
      failed.has(r.group) || (failed.has('*') && r.group !== '');
    this.all = [...res.all, ...this.all.filter(keep)];
    this.preferred = [...res.preferred, ...this.preferred.filter(keep)];
    this.mapper = new RestMapper(this.all);
    this.lastDiscoveryError = undefined;
    const knownGroups = new Set(this.all.map((r) => r.group));
    this.undiscovered = [...failed].filter((g) => g === '*' || !knownGroups.has(g));

    const desired = new Map<string, ResourceInfo>();
    for (const r of this.preferred) {
      const key = groupResource(r);
      if (isDeletable(r) && !this.ignored.has(key) && !desired.has(key)) desired.set(key, r);
    }
    this.desired = desired;
    for (const [key, informer] of this.informers) {
      const want = desired.get(key);
      if (!want || want.version !== informer.resource.version) {
        this.informers.delete(key);
        await informer.stop();
        this.log.info('stopped watching', { resource: key, version: informer.resource.version });
        if (!want) this.unobserve(key);
      }
    }
    for (const [key, r] of desired) {
      if (this.informers.has(key) || this.stopped) continue;
      // Back in discovery: its new informer is behind until it has listed,
      // and watchesBehind holds Orphan deletions until then (or lists it).
      this.departed.delete(key);
      let known = this.known.get(key);
      if (!known) {
        known = { uids: new Set() };
        this.known.set(key, known);
      }
      const informer = new MetadataInformer(
        this.client,
        r,
        (e) => this.propagator.push(e),
        this.log,
        {
          ...this.opts.informer,
          onMalformedWatchEvent: (gr) => {
            this.opts.informer?.onMalformedWatchEvent?.(gr);
            this.metrics.malformedWatchEvent?.(gr);
          },
          storage: () => this.storageOf(r),
        },
        known,
      );
      this.informers.set(key, informer);
      informer.start();
      if (this.started) this.log.info('started watching', { resource: key, version: r.version });
    }
  }

  /**
   * A resource left discovery: what its informers reported is no longer
   * watched, so the graph must not go on vouching for it as alive (phantoms).
   * Each object becomes unobserved (see Propagator.unobserve); if the
   * resource comes back, a new informer lists it afresh.
   */
  private unobserve(key: string): void {
    const known = this.known.get(key);
    if (!known) return;
    this.known.delete(key);
    for (const uid of known.uids) this.propagator.push({ type: 'unobserved', uid, resource: key });
    this.log.info('no longer watched: its objects are read live from now on', {
      resource: key,
      objects: known.uids.size,
    });
  }

  /**
   * Resources that left discovery (group/resource) → the owners that had a
   * dependent of theirs then. Upstream keeps such objects in its graph (its
   * informers stop, its nodes stay), so an Orphan deletion of their owner
   * fails to patch them and keeps its finalizer until they are back; kubegc
   * unobserves them (the graph does not vouch for what it cannot watch), and
   * remembers here what they held, for the same wait.
   */
  private readonly departed = new Map<string, Set<string>>();

  /** The resources gone from discovery that held a dependent of `owner` when they left. */
  departedHolding(owner: string): string[] {
    const held: string[] = [];
    for (const [key, owners] of this.departed) if (owners.has(owner)) held.push(key);
    return held;
  }

  /** Stalled resources already reported, so each stall is logged and evented once. */
  private readonly stallReported = new Set<string>();

  /**
   * Reports watches that became stalled (a warning and a Warning event on the
   * resource's APIService, where an operator looks for a broken webhook or
   * aggregated API) and those that recovered. Never a reason to restart.
   */
  private reportStalled(): void {
    const stalled = new Set(this.stalledInformers());
    for (const key of stalled) {
      if (this.stallReported.has(key)) continue;
      this.stallReported.add(key);
      const informer = this.informers.get(key);
      if (!informer) continue;
      const r = informer.resource;
      const note = informer.forbidden
        ? `kubegc may not list or watch ${key} (${informer.lastError ?? 'forbidden'}): grant list and watch to its service account; until then its objects are not collected and Orphan deletions wait --orphan-watch-timeout`
        : `kubegc cannot watch ${key} (${informer.lastError ?? 'no answer'}); its objects are decided by live reads until it recovers`;
      this.log.warn(informer.forbidden ? 'watch forbidden' : 'watch stalled', {
        resource: key,
        error: informer.lastError,
      });
      this.ctx.events?.warning(
        {
          apiVersion: 'apiregistration.k8s.io/v1',
          kind: 'APIService',
          name: `${r.version}.${r.group}`,
          uid: '',
        },
        informer.forbidden ? 'WatchForbidden' : 'WatchStalled',
        'Watch',
        note,
      );
    }
    for (const key of [...this.stallReported]) {
      if (stalled.has(key)) continue;
      this.stallReported.delete(key);
      if (this.informers.has(key)) this.log.info('watch recovered', { resource: key });
    }
  }

  /**
   * The resources that could hold a dependent of an owner (a namespaced owner's
   * dependents are namespaced) whose informer may not have reported everything
   * that exists (or existed at `rv`, the owner's resourceVersion in the storage
   * of its resource `owner`), or that has none right now (being replaced). A
   * resource of another storage than the owner's (an aggregated API's, or any
   * when the APIServices could not be listed) is always among them: its
   * resourceVersions say nothing about `rv`.
   */
  watchesBehind(ownerNamespaced: boolean, rv: string, owner: ResourceInfo): ResourceInfo[] {
    const ownerStorage = this.storageOf(owner);
    const behind: ResourceInfo[] = [];
    for (const [key, r] of this.desired) {
      if (ownerNamespaced && !r.namespaced) continue;
      const informer = this.informers.get(key);
      if (!informer?.caughtUp(rv, ownerStorage)) behind.push(r);
    }
    return behind;
  }

  /** When the last discovery round that finished began (ms since epoch). */
  private discoveryStartedAt = 0;

  /**
   * Resolves once a discovery round that began at or after `since` has
   * finished (one is started if need be): what the orphan worker waits for,
   * so that a resource created just before an Orphan deletion is known.
   */
  async discoveredSince(since: number): Promise<string[]> {
    for (let i = 0; i < 2 && this.discoveryStartedAt < since && !this.stopped; i++)
      await this.runDiscovery();
    return this.discoveryStartedAt >= since ? [...this.undiscovered] : ['*'];
  }

  /**
   * What the last discovery round could not show: groups that failed and of
   * which nothing is known ('*': /apis as a whole, or all of discovery).
   */
  private undiscovered: string[] = [];

  /** Informers unable to watch for longer than the watchdog can repair. */
  stalledInformers(): string[] {
    const now = Date.now();
    return [...this.informers.entries()].filter(([, i]) => i.stalled(now)).map(([k]) => k);
  }

  monitoredResources(): Map<string, boolean> {
    return new Map([...this.informers.entries()].map(([k, i]) => [k, i.synced]));
  }

  /**
   * Recomputes the blocked deletions (the gauges read its counts) and records
   * a DeletionBlocked event on each one blocked for longer than
   * --blocked-deletion-event-after, at most every 30 minutes per object.
   */
  sweepBlocked(): void {
    const due = this.slis.sweep(
      { graph: this.graph, orphanWaits: this.ctx.state.orphanWaits },
      this.opts.dryRun ? 0 : this.opts.blockedDeletionEventAfterMs,
      BLOCKED_EVENT_REPEAT_MS,
    );
    for (const e of due) void this.recordBlocked(e);
  }

  private async recordBlocked(e: BlockedEntry): Promise<void> {
    const n = this.graph.get(e.uid);
    if (!n || n.virtual || !this.ctx.events) return;
    const finalizer = n.deletingDependents ? 'foregroundDeletion' : 'orphan';
    let detail = e.detail;
    // The finalizers that hold the dependent: one live read, only when an event is due.
    if (e.reason === 'dependent-finalizer' && e.dependent) {
      const d = this.graph.get(e.dependent);
      const r = d && this.mapper.resolve(d.apiVersion, d.kind);
      const live =
        d && r
          ? await this.ctx.api
              .getMeta(r, r.namespaced ? d.namespace : '', d.name)
              .catch(() => undefined)
          : undefined;
      if (live && live.uid === e.dependent && live.finalizers?.length)
        detail += `: ${live.finalizers.join(', ')}`;
    }
    const minutes = Math.max(1, Math.round((Date.now() - e.since) / 60_000));
    const note = `deletion (${finalizer}) blocked for ${minutes}m (${e.reason}): ${detail}`;
    this.log.warn('deletion blocked', {
      uid: e.uid,
      kind: n.kind,
      namespace: n.namespace,
      name: n.name,
      reason: e.reason,
      detail,
    });
    this.ctx.events.warning(
      {
        apiVersion: n.apiVersion,
        kind: n.kind,
        namespace: n.namespace || undefined,
        name: n.name,
        uid: e.uid,
      },
      'DeletionBlocked',
      'GarbageCollect',
      note.slice(0, 1000),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    if (this.discoveryTimer) clearInterval(this.discoveryTimer);
    await this.discovering;
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
    await this.bulkVerifier.stop();
    await Promise.all([this.deleteQueue.shutDown(), this.orphanQueue.shutDown()]);
    // Event POSTs are not awaited by the workers: drain them too.
    await this.ctx.events?.drain?.();
  }
}
