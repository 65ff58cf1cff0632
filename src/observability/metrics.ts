// Prometheus metrics of `kubegc controller` on a private registry: client-go's
// workqueue metrics (same names, label `name`), the upstream GC's
// resources_sync_error counter, and kubegc's own. Every metric is listed in
// docs/reference.md's metrics table.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LANES, type Lane } from '../api/lanes.ts';
import type { GarbageCollectorMetrics } from '../gc/garbage-collector.ts';
import { BLOCKED_REASONS, type CollectionSlis } from '../gc/slis.ts';
import type { WorkQueue, WorkQueueMetrics } from '../queue/workqueue.ts';

const LATENCY_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10];

export interface GcStateForMetrics {
  graphNodes(): number;
  virtualNodes(): number;
  /** group-resource → synced */
  monitoredResources(): Map<string, boolean>;
  /** group-resources whose watch is stalled (see GarbageCollector.stalledInformers). */
  stalledResources?(): string[];
  queues(): WorkQueue[];
  /** Requests of a lane waiting in the client-side rate limiter. */
  rateLimited?(lane: Lane): number;
  isLeader(): boolean;
  /** Pending collections and blocked deletions (read at scrape: counts, never a walk). */
  slis?(): CollectionSlis;
  /** Unobserved owners gathering for bulk verification (not yet in a queue). */
  ownersAwaitingVerification?(): number;
}

export interface ControllerMetrics {
  registry: Registry;
  gc: GarbageCollectorMetrics;
  /** For KubeClient's onRequest. */
  apiRequest(verb: string, status: number): void;
  /** Binds the gauges that are read at scrape time. */
  bind(state: GcStateForMetrics): void;
}

// Long (about 270 lines) on purpose: one declaration per metric, each with its
// help text and labels, read as a list; split, a reader would look in several
// places for the controller's metrics.
export function createControllerMetrics(registry = new Registry()): ControllerMetrics {
  collectDefaultMetrics({ register: registry });
  const r = [registry];

  const depth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue',
    labelNames: ['name'],
    registers: r,
  });
  const adds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    labelNames: ['name'],
    registers: r,
  });
  const queueDuration = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames: ['name'],
    buckets: LATENCY_BUCKETS,
    registers: r,
  });
  const workDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes',
    labelNames: ['name'],
    buckets: LATENCY_BUCKETS,
    registers: r,
  });
  const retries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue',
    labelNames: ['name'],
    registers: r,
  });
  let state: GcStateForMetrics | undefined;
  new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads.",
    labelNames: ['name'],
    registers: r,
    collect() {
      for (const q of state?.queues() ?? []) this.set({ name: q.name }, q.unfinishedWorkSeconds());
    },
  });
  new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running.',
    labelNames: ['name'],
    registers: r,
    collect() {
      for (const q of state?.queues() ?? [])
        this.set({ name: q.name }, q.longestRunningProcessorSeconds());
    },
  });
  // One series per queue and lane, read at scrape time.
  const laneGauges: [string, string, (q: WorkQueue, lane: Lane) => number][] = [
    [
      'kubegc_workqueue_lane_depth',
      'Keys waiting for a worker in one lane of a work queue (user: caused by an observed change; housekeeping: verifying what was already there)',
      (q, lane) => q.laneDepth(lane),
    ],
    [
      'kubegc_workqueue_lane_oldest_seconds',
      'How long the key waiting longest in one lane of a work queue has waited there, 0 when none waits',
      (q, lane) => q.oldestWaitingSeconds(lane),
    ],
  ];
  for (const [name, help, read] of laneGauges)
    new Gauge({
      name,
      help,
      labelNames: ['name', 'lane'],
      registers: r,
      collect() {
        for (const q of state?.queues() ?? [])
          for (const lane of LANES) this.set({ name: q.name, lane }, read(q, lane));
      },
    });
  new Gauge({
    name: 'kubegc_api_rate_limited_requests',
    help: "Requests waiting for a token of the client-side rate limiter, by the lane of the work that issued them (informers' and discovery's count as user)",
    labelNames: ['lane'],
    registers: r,
    collect() {
      for (const lane of LANES) this.set({ lane }, state?.rateLimited?.(lane) ?? 0);
    },
  });
  const syncErrors = new Counter({
    name: 'garbagecollector_controller_resources_sync_error_total',
    help: 'Number of garbage collector resources sync errors (failed discovery of a group)',
    registers: r,
  });
  new Gauge({
    name: 'kubegc_graph_nodes',
    help: 'Objects in the ownership graph, virtual nodes included',
    registers: r,
    collect() {
      this.set(state?.graphNodes() ?? 0);
    },
  });
  new Gauge({
    name: 'kubegc_graph_virtual_nodes',
    help: 'Owners known only from references, not observed yet',
    registers: r,
    collect() {
      this.set(state?.virtualNodes() ?? 0);
    },
  });
  new Gauge({
    name: 'kubegc_monitored_resource_synced',
    help: 'One series per watched resource: 1 once its informer has listed, else 0',
    labelNames: ['resource'],
    registers: r,
    collect() {
      this.reset();
      for (const [resource, synced] of state?.monitoredResources() ?? [])
        this.set({ resource }, synced ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kubegc_watch_stalled',
    help: 'One series per watched resource: 1 while its watch is stalled beyond what the watchdog repairs (reported here and by a Warning event, never by liveness)',
    labelNames: ['resource'],
    registers: r,
    collect() {
      this.reset();
      const stalled = new Set(state?.stalledResources?.() ?? []);
      for (const [resource] of state?.monitoredResources() ?? [])
        this.set({ resource }, stalled.has(resource) ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kubegc_leader',
    help: '1 while this process holds the leader lease (or runs without leader election), else 0',
    registers: r,
    collect() {
      this.set(state?.isLeader() ? 1 : 0);
    },
  });
  const deletions = new Counter({
    name: 'kubegc_deletions_total',
    help: 'Objects deleted by the garbage collector (dry_run="true": decided, not issued)',
    labelNames: ['resource', 'policy', 'dry_run'],
    registers: r,
  });
  const orphanings = new Counter({
    name: 'kubegc_orphanings_total',
    help: 'Dependents whose reference to an owner deleted with Orphan was removed',
    labelNames: ['resource', 'dry_run'],
    registers: r,
  });
  const apiRequests = new Counter({
    name: 'kubegc_api_requests_total',
    help: 'Requests to the API server by verb and HTTP status code (0: no response)',
    labelNames: ['verb', 'code'],
    registers: r,
  });
  const counter = <L extends string>(name: string, help: string, labelNames: L[]): Counter<L> =>
    new Counter({ name, help, labelNames, registers: r });
  const ownerReads = counter(
    'kubegc_owner_reads_total',
    'Requests sent to read owners: read="single", a live read of one owner by name; read="bulk", one page of a LIST verifying many unobserved owners at once',
    ['resource', 'read'],
  );
  const ownersVerifiedInBulk = counter(
    'kubegc_owners_verified_in_bulk_total',
    'Unobserved owners judged on a bulk LIST of their resource, by result (absent, present)',
    ['resource', 'result'],
  );
  new Gauge({
    name: 'kubegc_owners_awaiting_verification',
    help: 'Unobserved owners gathering for bulk verification, not yet listed nor queued',
    registers: r,
    collect() {
      this.set(state?.ownersAwaitingVerification?.() ?? 0);
    },
  });
  const malformedWatchEvents = new Counter({
    name: 'kubegc_watch_malformed_events_total',
    help: 'Watch stream lines that were not a JSON event (each restarts that watch)',
    labelNames: ['resource'],
    registers: r,
  });
  const decisionLatency = new Histogram({
    name: 'kubegc_decision_latency_seconds',
    help: 'From the moment the graph learnt an owner is gone to the DELETE of a dependent being issued',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: r,
  });

  const collectionLag = new Histogram({
    name: 'kubegc_collection_lag_seconds',
    help: "From the moment the GC learnt that a dependent's last owner is gone (or, for Foreground, that its owner started deleting) to the dependent's deletion seen by the informers",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: r,
  });
  new Gauge({
    name: 'kubegc_pending_collections',
    help: 'Objects the GC asked the API server to delete that still exist',
    registers: r,
    collect() {
      this.set(state?.slis?.().pendingCount ?? 0);
    },
  });
  new Gauge({
    name: 'kubegc_oldest_pending_collection_seconds',
    help: 'Age of the oldest pending collection (since its DELETE), 0 when none',
    registers: r,
    collect() {
      this.set(state?.slis?.().oldestPendingSeconds() ?? 0);
    },
  });
  new Gauge({
    name: 'kubegc_blocked_deletions',
    help: 'Objects with a deletionTimestamp and a GC finalizer (foregroundDeletion, orphan) that are not finishing, by why',
    labelNames: ['reason'],
    registers: r,
    collect() {
      const s = state?.slis?.();
      for (const reason of BLOCKED_REASONS) this.set({ reason }, s?.blockedCount(reason) ?? 0);
    },
  });
  new Gauge({
    name: 'kubegc_oldest_blocked_deletion_seconds',
    help: 'How long the oldest deletion blocked for this reason has been, 0 when none',
    labelNames: ['reason'],
    registers: r,
    collect() {
      const s = state?.slis?.();
      for (const reason of BLOCKED_REASONS)
        this.set({ reason }, s?.oldestBlockedSeconds(reason) ?? 0);
    },
  });

  const workqueue: WorkQueueMetrics = {
    add: (name) => adds.inc({ name }),
    depth: (name, d) => depth.set({ name }, d),
    queueLatency: (name, s) => queueDuration.observe({ name }, s),
    workDuration: (name, s) => workDuration.observe({ name }, s),
    retry: (name) => retries.inc({ name }),
  };
  const graphName = { name: 'garbage_collector_graph_changes' };
  return {
    registry,
    gc: {
      workqueue,
      graphChanges: {
        add: () => adds.inc(graphName),
        depth: (d) => depth.set(graphName, d),
        queueLatency: (s) => queueDuration.observe(graphName, s),
        workDuration: (s) => workDuration.observe(graphName, s),
      },
      deletion: (resource, policy, dryRun) =>
        deletions.inc({ resource, policy, dry_run: String(dryRun) }),
      orphaning: (resource, dryRun) => orphanings.inc({ resource, dry_run: String(dryRun) }),
      ownerRead: (resource, read) => ownerReads.inc({ resource, read }),
      ownersVerifiedInBulk: (resource, result, n) =>
        ownersVerifiedInBulk.inc({ resource, result }, n),
      decisionLatency: (seconds) => decisionLatency.observe(seconds),
      discoveryError: () => syncErrors.inc(),
      malformedWatchEvent: (resource) => malformedWatchEvents.inc({ resource }),
      collectionLag: (seconds) => collectionLag.observe(seconds),
    },
    apiRequest: (verb, status) => apiRequests.inc({ verb, code: String(status) }),
    bind(s) {
      state = s;
    },
  };
}
