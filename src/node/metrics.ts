// Prometheus metrics of `kubegc node`, registered on the registry passed in
// (the one the /metrics endpoint serves). Removal counters carry
// dry_run="true" for what --dry-run would have removed, as the controller's do.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type GcKind = 'image' | 'container' | 'pressure';

export type ErrorKind =
  /** The CRI runtime could not be reached or answered an unsupported API. */
  | 'runtime'
  /** One removal failed (the pass goes on with the next). */
  | 'remove'
  /** ImageFsInfo or statfs failed, or the capacity was 0. */
  | 'filesystem'
  /** Listing this node's pods from the API failed (deleted-pod checks skipped). */
  | 'api'
  | 'state-file'
  /** Any other failure of a whole pass. */
  | 'other';

export interface NodeMetrics {
  imagesRemoved: Counter<'reason' | 'dry_run'>;
  imageBytesFreed: Counter;
  imageBytesFreedReported: Counter;
  imageFsUsageRatio: Gauge;
  imageGcShortfallBytes: Gauge;
  imageKeptBytes: Gauge<'reason'>;
  expectedBackChecks: Counter<'result'>;
  containersRemoved: Counter<'reason' | 'dry_run'>;
  sandboxesRemoved: Counter<'reason' | 'dry_run'>;
  containersKept: Counter<'state'>;
  podsUnknown: Counter<'reason'>;
  lastRunTimestamp: Gauge<'gc'>;
  lastSuccessTimestamp: Gauge<'gc'>;
  runDuration: Histogram<'gc'>;
  errors: Counter<'gc' | 'kind'>;
  runtimeUp: Gauge;
  evictionSignalAvailable: Gauge<'signal'>;
  evictionSignalThreshold: Gauge<'signal'>;
  evictionSignalReclaimStart: Gauge<'signal'>;
  pressureReclaims: Counter<'signal' | 'result'>;
  pressureReclaimed: Counter<'signal'>;
}

export function createNodeMetrics(registry: Registry): NodeMetrics {
  const registers = [registry];
  return {
    imagesRemoved: new Counter({
      name: 'kubegc_node_images_removed_total',
      help: 'Images removed, by reason: age (unused longer than --image-maximum-gc-age), space (usage above --image-gc-high-threshold) or pressure (an eviction signal within --eviction-reclaim-margin of --eviction-hard)',
      labelNames: ['reason', 'dry_run'],
      registers,
    }),
    imageBytesFreed: new Counter({
      name: 'kubegc_node_image_bytes_freed_total',
      help: 'Bytes freed on the image filesystem by image removals, measured with statfs before and after',
      registers,
    }),
    imageBytesFreedReported: new Counter({
      name: 'kubegc_node_image_bytes_freed_reported_total',
      help: 'Sum of the runtime-reported sizes of removed images (what the kubelet counts; compressed on containerd)',
      registers,
    }),
    imageFsUsageRatio: new Gauge({
      name: 'kubegc_node_image_fs_usage_ratio',
      help: 'Used fraction (0-1) of the image filesystem after the last image GC pass',
      registers,
    }),
    imageGcShortfallBytes: new Gauge({
      name: 'kubegc_node_image_gc_shortfall_bytes',
      help: 'Bytes the last space pass still needed to free to reach --image-gc-low-threshold (0: reached or not needed)',
      registers,
    }),
    imageKeptBytes: new Gauge({
      name: 'kubegc_node_image_kept_bytes',
      help: "What the last image pass (periodic or a pressure reclaim) left on the image filesystem, by reason: in-use, pinned-by-runtime, sandbox-image, pinned-images, too-young, expected-back (the runtime's sizes of the images kept), shared-layers (sizes of removed images the disk did not give back)",
      labelNames: ['reason'],
      registers,
    }),
    expectedBackChecks: new Counter({
      name: 'kubegc_node_expected_back_checks_total',
      help: "Checks of whether an image about to be removed is expected back (its last user's workload still exists and names it), by result: expected-back (removed last, never for age), not-expected-back (suspended, finished, deleting, or no longer naming it), gone (an object of the owner chain no longer exists), unsupported-kind (a controller kubegc does not follow), unreadable (RBAC, a kind not served, no answer: counts as not expected back)",
      labelNames: ['result'],
      registers,
    }),
    containersRemoved: new Counter({
      name: 'kubegc_node_containers_removed_total',
      help: 'Dead containers removed, by reason: unidentified, pod-deleted, pod-evicted, pod-terminated (under disk pressure), max-per-pod-container, max-containers',
      labelNames: ['reason', 'dry_run'],
      registers,
    }),
    sandboxesRemoved: new Counter({
      name: 'kubegc_node_sandboxes_removed_total',
      help: 'Inactive pod sandboxes removed, by reason: pod-deleted, pod-evicted, pod-terminated (under disk pressure), superseded',
      labelNames: ['reason', 'dry_run'],
      registers,
    }),
    containersKept: new Counter({
      name: 'kubegc_node_containers_kept_total',
      help: 'Dead containers planned for removal and kept because their status just before the removal was no longer exited (started since the listing), by that state: created, running, unknown',
      labelNames: ['state'],
      registers,
    }),
    podsUnknown: new Counter({
      name: 'kubegc_node_pods_unknown_total',
      help: "Container passes that removed nothing for a pod reason (deleted, evicted, terminated) because this node's pods were not known, by reason: node-not-found (no Node of the node name: fix --node-name or NODE_NAME), ready-pods-unlisted (the list names none of the pods running here: the same), list-failed (the API did not answer)",
      labelNames: ['reason'],
      registers,
    }),
    lastRunTimestamp: new Gauge({
      name: 'kubegc_node_gc_last_run_timestamp_seconds',
      help: 'When the last pass of the image or container GC ended (Unix time)',
      labelNames: ['gc'],
      registers,
    }),
    lastSuccessTimestamp: new Gauge({
      name: 'kubegc_node_gc_last_success_timestamp_seconds',
      help: 'When the last pass without errors of the image or container GC ended (Unix time)',
      labelNames: ['gc'],
      registers,
    }),
    runDuration: new Histogram({
      name: 'kubegc_node_gc_duration_seconds',
      help: 'Duration of image and container GC passes',
      labelNames: ['gc'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
    errors: new Counter({
      name: 'kubegc_node_gc_errors_total',
      help: 'Errors of image and container GC passes, by kind: runtime, remove, filesystem, api, state-file, other',
      labelNames: ['gc', 'kind'],
      registers,
    }),
    runtimeUp: new Gauge({
      name: 'kubegc_node_runtime_up',
      help: '1 if the last CRI call reached the runtime, else 0',
      registers,
    }),
    evictionSignalAvailable: new Gauge({
      name: 'kubegc_node_eviction_signal_available',
      help: 'An eviction signal as the kubelet computes it (bytes, or inodes for *.inodesFree), at the last pressure check',
      labelNames: ['signal'],
      registers,
    }),
    evictionSignalThreshold: new Gauge({
      name: 'kubegc_node_eviction_signal_threshold',
      help: "The kubelet's hard eviction threshold for the signal (--eviction-hard): below it the kubelet evicts pods",
      labelNames: ['signal'],
      registers,
    }),
    evictionSignalReclaimStart: new Gauge({
      name: 'kubegc_node_eviction_signal_reclaim_start',
      help: 'Below this (threshold + --eviction-reclaim-margin) kubegc reclaims for the signal',
      labelNames: ['signal'],
      registers,
    }),
    pressureReclaims: new Counter({
      name: 'kubegc_node_pressure_reclaims_total',
      help: 'Pressure reclaims, by signal and result: recovered (back above the reclaim start), short (not), nothing-to-reclaim (no step frees this signal on this layout)',
      labelNames: ['signal', 'result'],
      registers,
    }),
    pressureReclaimed: new Counter({
      name: 'kubegc_node_pressure_reclaimed_total',
      help: 'What pressure reclaims freed on the signal, measured before and after (bytes, or inodes for *.inodesFree)',
      labelNames: ['signal'],
      registers,
    }),
  };
}
