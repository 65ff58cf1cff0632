// Disk pressure reclaim: every --pressure-check-period, statfs of the
// kubelet's root (nodefs) and of the runtime's image and container
// filesystems (ImageFsInfo, asked again at most once a minute); when a signal
// comes within --eviction-reclaim-margin of the kubelet's --eviction-hard
// threshold, the kubelet's node-level reclaim for that layout (dead
// containers and sandboxes of terminated and evicted pods, then unused
// images least recently used first) until the signal is two margins above
// the threshold. The kubelet reclaims only once the threshold is crossed and
// then evicts pods; done earlier, it never has to. Decisions are in
// pressure-policy.ts.
import { stat } from 'node:fs/promises';
import type { Logger } from '../log.ts';
import type { ContainerPassResult } from './container-gc.ts';
import type { FsStats } from './image-gc-policy.ts';
import type { ImagePassResult, ImageReclaim } from './image-gc.ts';
import type { NodeMetrics } from './metrics.ts';
import type { NodeEvents } from './node-events.ts';
import {
  deriveContainerFsThresholds,
  filesystemOf,
  isInodeSignal,
  layoutOf,
  observe,
  pressureNeeds,
  reclaimSteps,
  type DiskThreshold,
  type Filesystem,
  type FsLayout,
  type FsObservation,
  type PressureNeed,
  type ReclaimStep,
  type ThresholdValue,
} from './pressure-policy.ts';
import type { RuntimeConnection } from './runtime.ts';
import { deviceOf, statFilesystem } from './statfs.ts';
import { keptNote, removedExpectedBackNote, type KeptBreakdown } from './why-kept.ts';

export interface PressureOptions {
  /** nodefs and imagefs thresholds (--eviction-hard); containerfs ones are derived per layout. */
  thresholds: DiskThreshold[];
  margin: ThresholdValue;
  /** A path on the kubelet's root filesystem (--root-dir). */
  rootDir: string;
  dryRun: boolean;
  statfs?: (path: string) => Promise<FsStats>;
  device?: (path: string) => Promise<bigint>;
  /** How long a reclaim's image step waits for a slow container step (default CONTAINER_HEAD_START_MS). */
  containerHeadStartMs?: number;
  /** How long the runtime's filesystem paths and the devices are reused (default 60 s). */
  filesystemsTtlMs?: number;
  now?: () => number;
}

/** The passes a reclaim runs, serialised with the periodic ones by NodeGc. */
export interface ReclaimPasses {
  containers(): Promise<ContainerPassResult>;
  images(reclaim: ImageReclaim): Promise<ImagePassResult>;
}

export interface ReclaimReport {
  signal: PressureNeed['signal'];
  threshold: number;
  start: number;
  target: number;
  before: number;
  after: number;
  steps: ReclaimStep[];
  containersRemoved: number;
  sandboxesRemoved: number;
  imagesRemoved: number;
  /** What the image step left, by why, with bytes and who keeps it (undefined: it did not run). */
  imagesKept?: KeptBreakdown;
  /** The image step stopped at --max-removals-per-run. */
  imagesCapped?: boolean;
  /** The workload of each image expected back the image step removed (last: nothing else freed enough). */
  imagesExpectedBackRemoved?: string[];
  result: 'recovered' | 'short' | 'nothing-to-reclaim';
}

export interface PressureCheck {
  layout: FsLayout;
  levels: PressureNeed[];
  reclaims: ReclaimReport[];
}

interface Filesystems {
  paths: Record<Filesystem, string>;
  layout: FsLayout;
  at: number;
}

/** A reclaim uses paths and devices located at most this long ago (see check). */
export const RECLAIM_PATHS_FRESH_MS = 15_000;
/** Checks that reclaim nothing locate the filesystems again once they are this old. */
export const REFRESH_PATHS_MS = 10_000;

/** A reclaim's image step waits at most this long for its container step (see reclaim). */
export const CONTAINER_HEAD_START_MS = 2_000;

/** Whether `p` is still pending after `ms` (it settles, fulfilled or not, within: false). */
async function outlasts(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((r) => {
    timer = setTimeout(() => r(true), ms);
  });
  try {
    return await Promise.race([
      p.then(
        () => false,
        () => false,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** After a reclaim fell short, the next for that signal waits this long. */
export const SHORT_RETRY_MS = 60_000;
/** DiskPressureReclaimFailed at most this often per signal while it stays short. */
export const FAILED_EVENT_EVERY_MS = 5 * 60_000;

const toObservation = (fs: FsStats): FsObservation => ({
  capacityBytes: fs.capacityBytes,
  availableBytes: fs.availableBytes,
  inodes: fs.inodes ?? 0,
  inodesFree: fs.inodesFree ?? 0,
});

/** Bytes (or inodes) shown in notes: 1.5 GB, 12.0 MB, 42 inodes. */
function amount(signal: PressureNeed['signal'], n: number): string {
  if (isInodeSignal(signal)) return `${Math.round(n)} inodes`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  return `${(n / 1e6).toFixed(1)} MB`;
}

/**
 * Why a short reclaim's image step left what it left, with bytes: the
 * operator's first question (the kubelet will remove all of it, protected or
 * not, before it evicts). No image kept means what fills the disk is not images.
 */
function keptImagesNote(report: ReclaimReport): string {
  const kept = report.imagesKept;
  if (!kept) return '';
  const capped = report.imagesCapped ? '; stopped at --max-removals-per-run' : '';
  const note = keptNote(kept);
  if (!note)
    return `; no image is protected or too young, so what is left is not images (writable layers, logs, volumes)${capped}`;
  return `; images left: ${note}${capped}`;
}

/**
 * Why --root-dir cannot serve as nodefs, or undefined if it can. Every
 * pressure check measures the kubelet's root filesystem there and compares
 * its device with the image filesystem's to tell the layout; on a host
 * without it (the default is /var/lib/kubelet) each check would fail.
 */
export async function rootDirProblem(rootDir: string): Promise<string | undefined> {
  const fix = `pass --root-dir=<the kubelet's --root-dir, or a directory on its filesystem>, or --eviction-hard='' to turn pressure reclaim off`;
  try {
    if ((await stat(rootDir)).isDirectory()) return undefined;
    return `--root-dir ${rootDir} is not a directory: pressure reclaim measures the kubelet's root filesystem (nodefs) there; ${fix}`;
  } catch (err) {
    // By its code, not instanceof: an fs error may come from another realm (Jest's VM).
    const missing =
      typeof err === 'object' && err !== null && 'code' in err && err.code === 'ENOENT';
    const reason = missing ? 'no such directory' : String(err);
    return `--root-dir ${rootDir}: ${reason}: pressure reclaim measures the kubelet's root filesystem (nodefs) there; ${fix}`;
  }
}

export class PressureMonitor {
  private readonly runtime: RuntimeConnection;
  private readonly opts: PressureOptions;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly events: NodeEvents;
  private readonly statfs: (path: string) => Promise<FsStats>;
  private readonly device: (path: string) => Promise<bigint>;
  private readonly now: () => number;
  private filesystems: Filesystems | undefined;
  /** A background refresh of the filesystems in flight (refreshFilesystems). */
  private refreshing: Promise<unknown> | undefined;
  /** Signals whose last reclaim fell short: not tried again before this time. */
  private readonly retryAt = new Map<string, number>();
  /** When the last DiskPressureReclaimFailed was recorded, per signal. */
  private readonly failedEventAt = new Map<string, number>();

  constructor(
    runtime: RuntimeConnection,
    opts: PressureOptions,
    log: Logger,
    metrics: NodeMetrics,
    events: NodeEvents,
  ) {
    this.runtime = runtime;
    this.opts = opts;
    this.log = log;
    this.metrics = metrics;
    this.events = events;
    this.statfs = opts.statfs ?? statFilesystem;
    this.device = opts.device ?? deviceOf;
    this.now = opts.now ?? Date.now;
  }

  /**
   * Between reclaims: locates the filesystems again, without waiting, once
   * they are REFRESH_PATHS_MS old, so that a reclaim finds them fresh. A
   * failure is left to the next locate that waits (it reports it).
   */
  private refreshFilesystems(): void {
    const at = this.filesystems?.at ?? 0;
    if (this.refreshing || this.now() - at < REFRESH_PATHS_MS) return;
    this.refreshing = this.locate(true)
      .catch(() => undefined)
      .finally(() => {
        this.refreshing = undefined;
      });
  }

  /** The filesystems' paths and layout, from ImageFsInfo and the devices (cached a while). */
  private async locate(fresh: boolean): Promise<Filesystems> {
    const ttl = this.opts.filesystemsTtlMs ?? 60_000;
    if (!fresh && this.filesystems && this.now() - this.filesystems.at < ttl)
      return this.filesystems;
    const client = await this.runtime.get();
    let reported: Awaited<ReturnType<typeof client.filesystems>>;
    try {
      reported = await client.filesystems();
    } catch (err) {
      throw this.runtime.check(err);
    }
    const imagefs = reported.image.find((f) => f.mountpoint)?.mountpoint;
    if (!imagefs) throw new Error('the runtime reports no image filesystem (ImageFsInfo)');
    const containerfs = reported.container.find((f) => f.mountpoint)?.mountpoint ?? imagefs;
    const paths = { nodefs: this.opts.rootDir, imagefs, containerfs };
    const [nodefsDev, imagefsDev, containerfsDev] = await Promise.all(
      [paths.nodefs, paths.imagefs, paths.containerfs].map((p) => this.device(p)),
    );
    const layout = layoutOf({
      nodefs: nodefsDev as bigint,
      imagefs: imagefsDev as bigint,
      containerfs: containerfsDev as bigint,
    });
    if (this.filesystems?.layout !== layout)
      this.log.info('filesystem layout', { layout, ...paths });
    this.filesystems = { paths, layout, at: this.now() };
    return this.filesystems;
  }

  private async observeAll(
    paths: Record<Filesystem, string>,
  ): Promise<Record<Filesystem, FsObservation>> {
    const [nodefs, imagefs, containerfs] = await Promise.all(
      (['nodefs', 'imagefs', 'containerfs'] as const).map(async (f) =>
        toObservation(await this.statfs(paths[f])),
      ),
    );
    return {
      nodefs: nodefs as FsObservation,
      imagefs: imagefs as FsObservation,
      containerfs: containerfs as FsObservation,
    };
  }

  /**
   * Each eviction signal now, as a check sees it, without reclaiming (for
   * `kubegc explain node/NAME`): available, the kubelet's threshold, where
   * kubegc's reclaim starts and what it aims at.
   */
  async levels(): Promise<{ layout: FsLayout; levels: PressureNeed[] }> {
    const fsys = await this.locate(false);
    const { levels } = pressureNeeds({
      thresholds: deriveContainerFsThresholds(this.opts.thresholds, fsys.layout),
      observations: await this.observeAll(fsys.paths),
      margin: this.opts.margin,
    });
    return { layout: fsys.layout, levels };
  }

  /** One check: observe, and reclaim for every signal within the margin of its threshold. */
  async check(passes: ReclaimPasses): Promise<PressureCheck> {
    const fsys = await this.locate(false);
    const thresholds = deriveContainerFsThresholds(this.opts.thresholds, fsys.layout);
    const observations = await this.observeAll(fsys.paths);
    const { needs, levels } = pressureNeeds({
      thresholds,
      observations,
      margin: this.opts.margin,
    });
    for (const l of levels) {
      this.metrics.evictionSignalAvailable.set({ signal: l.signal }, l.available);
      this.metrics.evictionSignalThreshold.set({ signal: l.signal }, l.threshold);
      this.metrics.evictionSignalReclaimStart.set({ signal: l.signal }, l.start);
    }
    const out: PressureCheck = { layout: fsys.layout, levels, reclaims: [] };
    // A reclaim that fell short is not run again at once: it lists every
    // container and image, and the next one would find the same. Unless the
    // signal is now past the kubelet's threshold: its eviction manager will
    // reclaim (and evict) at its next check, every 10 s, so kubegc tries
    // again at each of its checks too, with whatever has become removable
    // since (images past the minimum age, containers that exited). Waiting out
    // the minute let the kubelet evict pods beside unused images (node soak).
    const due = needs.filter(
      (n) => n.available < n.threshold || this.now() >= (this.retryAt.get(n.signal) ?? 0),
    );
    if (due.length === 0) {
      this.refreshFilesystems();
      return out;
    }
    // A reclaim acts on what is there now: paths and devices located within
    // RECLAIM_PATHS_FRESH_MS (kept so between checks by refreshFilesystems),
    // else asked again. Asking at the reclaim cost a CRI round trip of the
    // reclaim's own time: 3 s under the node soak's cri-slow.
    const cached = this.filesystems;
    const fresh =
      cached && this.now() - cached.at < RECLAIM_PATHS_FRESH_MS ? cached : await this.locate(true);
    for (const need of due) {
      const report = await this.reclaim(need, fresh, passes);
      if (report) out.reclaims.push(report);
    }
    return out;
  }

  private async level(need: PressureNeed, paths: Record<Filesystem, string>): Promise<number> {
    const fs = await this.statfs(paths[filesystemOf(need.signal)]);
    return observe(need.signal, toObservation(fs)).available;
  }

  private async reclaim(
    need: PressureNeed,
    fsys: Filesystems,
    passes: ReclaimPasses,
  ): Promise<ReclaimReport | undefined> {
    const steps = reclaimSteps(fsys.layout, need.signal);
    const before = await this.level(need, fsys.paths);
    const report: ReclaimReport = {
      signal: need.signal,
      threshold: need.threshold,
      start: need.start,
      target: need.target,
      before,
      after: before,
      steps,
      containersRemoved: 0,
      sandboxesRemoved: 0,
      imagesRemoved: 0,
      result: 'short',
    };
    // An earlier reclaim of this check (same filesystem) may have done it already.
    if (before >= need.start) return undefined;
    const fields = {
      signal: need.signal,
      layout: fsys.layout,
      available: before,
      threshold: need.threshold,
      reclaimStart: need.start,
      target: need.target,
      steps,
      dryRun: this.opts.dryRun,
    };
    if (steps.length === 0) {
      report.result = 'nothing-to-reclaim';
      this.metrics.pressureReclaims.inc({ signal: need.signal, result: report.result });
      this.log.warn(
        'disk pressure kubegc cannot relieve: on a dedicated image filesystem the root holds logs and volumes, not images or writable layers',
        fields,
      );
      return report;
    }
    this.log.info('disk pressure: reclaiming', fields);
    // Dead containers first, images if still short: the kubelet's order. But
    // when the container step is slow (a slow runtime: each container costs a
    // status, a removal and its logs), the images do not wait for it: their
    // step starts after a head start, on the disk as it is then. The node
    // soak saw a 16 s container step under a 1.5 s CRI latency, and the
    // kubelet evicting meanwhile. What it may free beyond the target is at
    // most what the dead containers freed, far less than the kubelet's own
    // reclaim, which frees every unused image.
    let containerStep: Promise<void> | undefined;
    if (steps.includes('containers')) {
      containerStep = passes.containers().then((r) => {
        report.containersRemoved = r.containers.length;
        report.sandboxesRemoved = r.sandboxes.length;
      });
      const headStart = this.opts.containerHeadStartMs ?? CONTAINER_HEAD_START_MS;
      if (!(await outlasts(containerStep, headStart))) {
        await containerStep;
        containerStep = undefined;
      } else
        this.log.info('disk pressure: the container step is slow; images start beside it', fields);
      report.after = await this.level(need, fsys.paths);
    }
    if (steps.includes('images') && report.after < need.target) {
      const done = (fs: FsStats): boolean =>
        observe(need.signal, toObservation(fs)).available >= need.target;
      // An inode signal has no byte figure: the image pass goes by the filesystem alone.
      const r = await passes.images(
        isInodeSignal(need.signal) ? { done } : { wantedBytes: need.target - report.after, done },
      );
      report.imagesRemoved = r.removed.length;
      report.imagesKept = r.kept;
      report.imagesCapped = r.capped;
      report.imagesExpectedBackRemoved = r.removed.flatMap((x) =>
        x.expectedBack !== undefined ? [x.expectedBack] : [],
      );
      report.after = await this.level(need, fsys.paths);
    }
    if (containerStep) {
      await containerStep;
      report.after = await this.level(need, fsys.paths);
    }
    report.result = report.after >= need.start ? 'recovered' : 'short';
    this.metrics.pressureReclaims.inc({ signal: need.signal, result: report.result });
    if (!this.opts.dryRun)
      this.metrics.pressureReclaimed.inc(
        { signal: need.signal },
        Math.max(0, report.after - before),
      );
    const expectedBack = removedExpectedBackNote(
      (report.imagesExpectedBackRemoved ?? []).map((w) => ({ expectedBack: w })),
      this.opts.dryRun,
    );
    const note =
      `${need.signal}: ${amount(need.signal, before)} available, the kubelet evicts below ${amount(need.signal, need.threshold)}; ` +
      `${this.opts.dryRun ? 'would remove' : 'removed'} ${report.containersRemoved} dead containers, ${report.sandboxesRemoved} sandboxes and ${report.imagesRemoved} images; ` +
      `${amount(need.signal, report.after)} available after (reclaim starts below ${amount(need.signal, need.start)}, aims at ${amount(need.signal, need.target)})` +
      (expectedBack ? `; ${expectedBack}` : '') +
      (report.result === 'short' ? keptImagesNote(report) : '');
    this.log[report.result === 'recovered' ? 'info' : 'warn']('disk pressure reclaim done', {
      ...fields,
      after: report.after,
      result: report.result,
      containersRemoved: report.containersRemoved,
      sandboxesRemoved: report.sandboxesRemoved,
      imagesRemoved: report.imagesRemoved,
      ...(report.imagesKept ? { imagesKept: report.imagesKept } : {}),
      ...(report.imagesExpectedBackRemoved?.length
        ? { imagesExpectedBackRemoved: report.imagesExpectedBackRemoved }
        : {}),
    });
    if (report.result === 'recovered') {
      this.retryAt.delete(need.signal);
      this.failedEventAt.delete(need.signal);
      this.events.normal?.('DiskPressureReclaimed', note);
    } else {
      this.retryAt.set(need.signal, this.now() + SHORT_RETRY_MS);
      const last = this.failedEventAt.get(need.signal);
      if (last === undefined || this.now() - last >= FAILED_EVENT_EVERY_MS) {
        this.failedEventAt.set(need.signal, this.now());
        this.events.warning('DiskPressureReclaimFailed', note);
      }
    }
    return report;
  }
}
