// One image GC pass: look at the runtime (images, containers, image
// filesystem), update the ages, decide with image-gc-policy.ts, remove over
// CRI, and measure the file system again so the bytes reported are the bytes
// actually freed.
import type { Logger } from '../log.ts';
import type { CriClient, CriImage } from './cri/client.ts';
import { POD_UID_LABEL } from './container-gc-policy.ts';
import {
  bytesToFree,
  imagesInUse,
  imagesOfNodePods,
  notePresentImages,
  recordsLoaded,
  InvalidDiskCapacityError,
  isImageInUse,
  planImageGc,
  spaceGoalReached,
  takeUntilFreed,
  updateImageRecords,
  usagePercent,
  type Candidate,
  type FsStats,
  type ImageGcPolicy,
  type ImageRecords,
} from './image-gc-policy.ts';
import { globMatcher, imageRefNames } from './image-refs.ts';
import type { NodeMetrics } from './metrics.ts';
import type { NodePod, PodLister } from './pods.ts';
import type { NodeEvents } from './node-events.ts';
import type { RuntimeConnection } from './runtime.ts';
import { loadStateFile, saveStateFile } from './state-file.ts';
import { statFilesystem } from './statfs.ts';

/** The image filesystem could not be found or measured. */
export class FilesystemError extends Error {}

export interface ImageGcOptions {
  policy: ImageGcPolicy;
  /** Globs of image references never removed (--pinned-images). */
  pinnedImages: string[];
  /** --pod-infra-container-image; else what the runtime reports. */
  sandboxImage?: string;
  /** At most this many removals per pass (0: no cap). */
  maxRemovalsPerRun: number;
  /** Where image ages persist ('' or undefined: memory only, like the kubelet). */
  stateFile?: string;
  dryRun: boolean;
  /**
   * This node's pods from the API: the images of those not yet terminated
   * (their containers' and image volumes') are in use even before their
   * containers exist (imagesOfNodePods). Undefined without API access.
   */
  pods?: PodLister;
  /** How often, at most, containers are listed again before a removal (default 1 s). */
  inUseRecheckMs?: number;
  /** statfs of the image filesystem (replaceable in tests). */
  statfs?: (mountpoint: string) => Promise<FsStats>;
  now?: () => number;
}

/** A pressure reclaim's goal on the image filesystem. */
export interface ImageReclaim {
  /** Bytes it would take (for the logs and the shortfall). */
  wantedBytes: number;
  /** Whether the image filesystem, as just measured, is enough. */
  done: (fs: FsStats) => boolean;
}

export interface RemovedImage {
  id: string;
  tags: string[];
  reason: 'age' | 'space' | 'pressure';
  sizeBytes: number;
}

export interface ImagePassResult {
  mountpoint: string;
  capacityBytes: number;
  usagePercentBefore: number;
  usagePercentAfter: number;
  removed: RemovedImage[];
  /** Bytes the space pass had to free (0: usage below the high threshold). */
  wantedBytes: number;
  /** Sum of the runtime's sizes of the removed images. */
  reportedFreedBytes: number;
  /** Available bytes after minus before (0 in a dry run). */
  measuredFreedBytes: number;
  /** What the space pass still lacked (0: reached or not needed). */
  shortfallBytes: number;
  /** The pass stopped at --max-removals-per-run. */
  capped: boolean;
  dryRun: boolean;
}

export class ImageGarbageCollector {
  private readonly runtime: RuntimeConnection;
  private readonly opts: ImageGcOptions;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly events: NodeEvents;
  private readonly statfs: (mountpoint: string) => Promise<FsStats>;
  private readonly now: () => number;
  private records: ImageRecords = new Map();
  private stateLoaded = false;
  private inUse = new Set<string>();
  private podImagesInUse = new Set<string>();
  private warnedPinnedSandbox = false;

  constructor(
    runtime: RuntimeConnection,
    opts: ImageGcOptions,
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
    this.now = opts.now ?? Date.now;
  }

  /** The ages kubegc keeps (a copy). */
  imageRecords(): ImageRecords {
    return new Map(this.records);
  }

  private async loadState(): Promise<void> {
    if (this.stateLoaded) return;
    this.stateLoaded = true;
    const file = this.opts.stateFile;
    if (!file) return;
    const loaded = await loadStateFile(file);
    if (loaded.kind === 'loaded') {
      this.records = recordsLoaded(loaded.records, this.now());
      this.log.info('image ages loaded from the state file', {
        stateFile: file,
        images: loaded.records.size,
      });
    } else if (loaded.kind === 'invalid') {
      this.metrics.errors.inc({ gc: 'image', kind: 'state-file' });
      this.log.warn('ignoring an unreadable state file; image ages start over', {
        stateFile: file,
        error: loaded.error,
      });
    }
  }

  private async saveState(): Promise<void> {
    const file = this.opts.stateFile;
    if (!file || this.opts.dryRun) return;
    try {
      await saveStateFile(file, this.records);
    } catch (err) {
      this.metrics.errors.inc({ gc: 'image', kind: 'state-file' });
      this.log.warn('cannot write the state file', {
        stateFile: file,
        error: (err as Error).message,
      });
    }
  }

  /** Records which images exist and which are in use now. */
  async detectImages(client: CriClient): Promise<CriImage[]> {
    await this.loadState();
    // Pods first: an image pulled for a pod listed here, whose container is
    // created after the runtime's list, is still seen in use.
    const pods = await this.nodePods();
    const [images, containers] = await Promise.all([client.listImages(), client.listContainers()]);
    this.podImagesInUse = imagesOfNodePods(
      pods,
      new Set(containers.flatMap((c) => c.labels[POD_UID_LABEL] ?? [])),
    );
    this.inUse = this.withPodImages(imagesInUse(containers));
    this.records = updateImageRecords(this.records, images, this.inUse, this.now());
    return images;
  }

  /**
   * Lists images only (cheap; NodeGc runs it every IMAGE_PRESENCE_PERIOD_MS
   * between passes, as the kubelet refreshes its image cache): an image
   * removed by someone else and pulled again under the same ID between two
   * passes is then seen gone and new, so the minimum age protects the fresh pull.
   */
  async notePresence(): Promise<void> {
    await this.loadState();
    const client = await this.runtime.get();
    let ids: string[];
    try {
      ids = (await client.listImages()).map((i) => i.id);
    } catch (err) {
      throw this.runtime.check(err);
    }
    const changed = ids.length !== this.records.size || ids.some((id) => !this.records.has(id));
    this.records = notePresentImages(this.records, ids, this.now());
    if (changed) await this.saveState();
  }

  private withPodImages(inUse: Set<string>): Set<string> {
    for (const ref of this.podImagesInUse) inUse.add(ref);
    return inUse;
  }

  /** This node's pods (none if unknown: their images are then protected by the minimum age only). */
  private async nodePods(): Promise<NodePod[]> {
    if (!this.opts.pods) return [];
    try {
      return await this.opts.pods.nodePods();
    } catch (err) {
      this.metrics.errors.inc({ gc: 'image', kind: 'api' });
      this.log.warn(
        "cannot list this node's pods; images of pods whose containers do not exist yet, and of their image volumes, are protected only by --image-minimum-gc-age this pass",
        { error: (err as Error).message },
      );
      return [];
    }
  }

  private sandboxImages(images: CriImage[]): Set<string> {
    const configured = this.opts.sandboxImage ?? this.runtime.info?.sandboxImage;
    if (configured) return new Set(imageRefNames(configured));
    // containerd ≥ 1.7 and CRI-O mark their sandbox image pinned; trust that.
    if (images.some((i) => i.pinned)) {
      if (!this.warnedPinnedSandbox) {
        this.warnedPinnedSandbox = true;
        this.log.info(
          'the runtime does not name its sandbox image; relying on its pinned images to protect it',
        );
      }
      return new Set();
    }
    throw new Error(
      'cannot tell which image is the sandbox (pause) image: the runtime does not report it and pins no image; set --pod-infra-container-image',
    );
  }

  private async measure(mountpoint: string): Promise<FsStats> {
    try {
      const fs = await this.statfs(mountpoint);
      usagePercent(fs); // throws InvalidDiskCapacityError on capacity 0
      return fs;
    } catch (err) {
      if (err instanceof InvalidDiskCapacityError) {
        this.events.warning('InvalidDiskCapacity', err.message);
        throw new FilesystemError(err.message);
      }
      throw new FilesystemError(
        `cannot measure the image filesystem ${mountpoint}: ${(err as Error).message}`,
      );
    }
  }

  /**
   * One pass. With `reclaim` (disk pressure, pressure.ts) the age pass is
   * skipped and the space pass frees, least recently used first, until
   * `reclaim.done` says the measured image filesystem is enough, whatever the
   * thresholds say (the kubelet's DeleteUnusedImages, which frees every
   * unused image, done gentler); the minimum age and every protection hold.
   */
  async run(opts: { reclaim?: ImageReclaim } = {}): Promise<ImagePassResult> {
    const reclaim = opts.reclaim;
    const client = await this.runtime.get();
    let images: CriImage[];
    let mountpoint: string;
    try {
      images = await this.detectImages(client);
      const filesystems = await client.imageFilesystems();
      mountpoint = filesystems.find((f) => f.mountpoint)?.mountpoint ?? '';
    } catch (err) {
      throw this.runtime.check(err);
    }
    await this.saveState();
    if (!mountpoint)
      throw new FilesystemError('the runtime reports no image filesystem (ImageFsInfo)');
    const sandboxImages = this.sandboxImages(images);

    const before = await this.measure(mountpoint);
    const nowMs = this.now();
    const plan = planImageGc({
      images,
      records: this.records,
      protection: {
        inUse: this.inUse,
        sandboxImages,
        pinnedImages: globMatcher(this.opts.pinnedImages),
      },
      nowMs,
      policy: this.opts.policy,
    });
    const cap = this.opts.maxRemovalsPerRun > 0 ? this.opts.maxRemovalsPerRun : Infinity;
    const result: ImagePassResult = {
      mountpoint,
      capacityBytes: before.capacityBytes,
      usagePercentBefore: usagePercent(before),
      usagePercentAfter: usagePercent(before),
      removed: [],
      wantedBytes: 0,
      reportedFreedBytes: 0,
      measuredFreedBytes: 0,
      shortfallBytes: 0,
      capped: false,
      dryRun: this.opts.dryRun,
    };
    const pass: Pass = {
      client,
      mountpoint,
      nowMs,
      result,
      lastFs: before,
      inUseListedAt: Date.now(),
    };
    this.log.debug('image GC plan', {
      images: images.length,
      protected: plan.protected.map((p) => ({ id: p.image.id, ...p.protection })),
      age: plan.age.length,
      space: plan.space.length,
      tooYoung: plan.tooYoung.length,
    });

    // Age pass: unused longer than --image-maximum-gc-age, whatever the usage.
    for (const c of reclaim ? [] : plan.age) {
      if (result.removed.length >= cap) {
        result.capped = true;
        break;
      }
      await this.remove(pass, c, 'age');
    }

    // Space pass, on the usage after the age pass (the kubelet's order).
    const spaceStart = pass.lastFs;
    const wanted = reclaim ? reclaim.wantedBytes : bytesToFree(spaceStart, this.opts.policy);
    const reason: RemovedImage['reason'] = reclaim ? 'pressure' : 'space';
    // Under pressure, images past the maximum age are as good to remove as any, oldest first.
    const space = reclaim ? [...plan.age, ...plan.space] : plan.space;
    result.wantedBytes = wanted;
    if (wanted > 0) {
      const reportedBefore = result.reportedFreedBytes;
      const reported = (): number => result.reportedFreedBytes - reportedBefore;
      const measured = (): number => pass.lastFs.availableBytes - spaceStart.availableBytes;
      if (this.opts.dryRun) {
        const { take } = takeUntilFreed(space, wanted, cap - result.removed.length);
        for (const c of take) await this.remove(pass, c, reason);
        if (take.length < space.length && reported() < wanted) result.capped = true;
      } else {
        let i = 0;
        const walk = async (done: () => boolean): Promise<void> => {
          for (; i < space.length; i++) {
            if (done()) return;
            if (result.removed.length >= cap) {
              result.capped = true;
              return;
            }
            await this.remove(pass, space[i] as Candidate, reason);
          }
        };
        // The kubelet's stop: the runtime's sizes (or the disk) say enough.
        // Under pressure only the disk counts.
        if (reclaim) await walk(() => reclaim.done(pass.lastFs));
        else await walk(() => spaceGoalReached(wanted, reported(), measured()));
        // The sizes can say enough when the disk does not (CRI-O counts a
        // shared layer in every image that has it): go on by the disk while
        // eligible images remain.
        await walk(() => measured() >= wanted);
      }
      // The verdict comes from the disk measured after the pass (a dry run
      // removes nothing, so it can only go by the sizes).
      const freed = this.opts.dryRun ? reported() : measured();
      if (reclaim) {
        // pressure.ts reports the outcome on the signal it reclaims for.
        if (!this.opts.dryRun && !reclaim.done(pass.lastFs))
          result.shortfallBytes = Math.max(0, wanted - Math.max(freed, 0));
      } else if (freed < wanted) {
        result.shortfallBytes = wanted - Math.max(freed, 0);
        const note =
          `wanted to free ${wanted} bytes, but freed ${Math.max(measured(), 0)} bytes ` +
          `(${reported()} by the runtime's image sizes)` +
          (plan.tooYoung.length
            ? `; ${plan.tooYoung.length} unused images are younger than --image-minimum-gc-age`
            : '') +
          (result.capped ? '; stopped at --max-removals-per-run' : '') +
          (this.opts.dryRun ? ' (dry run: nothing was removed)' : '');
        this.log.warn('image GC could not reach the low threshold', {
          reason: 'FreeDiskSpaceFailed',
          wantedBytes: wanted,
          measuredFreedBytes: measured(),
          reportedFreedBytes: reported(),
          shortfallBytes: result.shortfallBytes,
          tooYoung: plan.tooYoung.map((c) => c.image.id),
          capped: result.capped,
          dryRun: this.opts.dryRun,
        });
        this.events.warning('FreeDiskSpaceFailed', note);
      }
    }

    const after = this.opts.dryRun ? before : await this.measure(mountpoint);
    result.measuredFreedBytes = after.availableBytes - before.availableBytes;
    result.usagePercentAfter = usagePercent(after);
    this.metrics.imageFsUsageRatio.set(
      (after.capacityBytes - Math.min(after.availableBytes, after.capacityBytes)) /
        after.capacityBytes,
    );
    if (!reclaim) this.metrics.imageGcShortfallBytes.set(result.shortfallBytes);
    if (!this.opts.dryRun) {
      this.metrics.imageBytesFreed.inc(Math.max(0, result.measuredFreedBytes));
      for (const r of result.removed) this.records.delete(r.id);
      if (result.removed.length) await this.saveState();
    }
    return result;
  }

  /**
   * The kubelet may start a container on an old image while a pass runs:
   * containers are listed again (at most once a second) before removals.
   */
  private async nowInUse(pass: Pass, c: Candidate): Promise<boolean> {
    if (Date.now() - pass.inUseListedAt >= (this.opts.inUseRecheckMs ?? IN_USE_RECHECK_MS)) {
      try {
        this.inUse = this.withPodImages(imagesInUse(await pass.client.listContainers()));
      } catch (err) {
        throw this.runtime.check(err);
      }
      pass.inUseListedAt = Date.now();
    }
    return isImageInUse(c.image, this.inUse);
  }

  /**
   * Removes one image (or says it would), then measures the file system to
   * log the bytes that removal actually freed. Skips images whose removal failed.
   */
  private async remove(pass: Pass, c: Candidate, reason: RemovedImage['reason']): Promise<void> {
    const fields = {
      id: c.image.id,
      tags: c.image.repoTags,
      reason,
      sizeBytes: c.image.sizeBytes,
      firstDetected: new Date(c.record.firstDetectedMs).toISOString(),
      lastUsed:
        c.record.lastUsedMs !== undefined ? new Date(c.record.lastUsedMs).toISOString() : 'never',
      unusedSeconds: Math.round(
        (pass.nowMs - (c.record.lastUsedMs ?? c.record.firstDetectedMs)) / 1000,
      ),
    };
    if (this.opts.dryRun) {
      this.metrics.imagesRemoved.inc({ reason, dry_run: 'true' });
      this.log.info('would remove image (dry run)', fields);
    } else {
      if (await this.nowInUse(pass, c)) {
        this.log.info('image came into use; keeping it', {
          id: c.image.id,
          tags: c.image.repoTags,
        });
        return;
      }
      try {
        await pass.client.removeImage(c.image.id);
      } catch (err) {
        const checked = this.runtime.check(err);
        if (checked !== err) throw checked;
        this.metrics.errors.inc({ gc: 'image', kind: 'remove' });
        this.log.error('could not remove image', { ...fields, error: (err as Error).message });
        return;
      }
      const now = await this.measure(pass.mountpoint);
      const freedBytes = now.availableBytes - pass.lastFs.availableBytes;
      pass.lastFs = now;
      this.metrics.imagesRemoved.inc({ reason, dry_run: 'false' });
      this.metrics.imageBytesFreedReported.inc(c.image.sizeBytes);
      this.log.info('removed image', { ...fields, freedBytes });
    }
    pass.result.removed.push({
      id: c.image.id,
      tags: c.image.repoTags,
      reason,
      sizeBytes: c.image.sizeBytes,
    });
    pass.result.reportedFreedBytes += c.image.sizeBytes;
  }
}

interface Pass {
  client: CriClient;
  mountpoint: string;
  nowMs: number;
  result: ImagePassResult;
  /** The last measurement of the image filesystem. */
  lastFs: FsStats;
  /** When containers were last listed for the in-use set. */
  inUseListedAt: number;
}

const IN_USE_RECHECK_MS = 1000;

/** How often images are listed between passes (the kubelet refreshes its image cache every 30 s). */
export const IMAGE_PRESENCE_PERIOD_MS = 30_000;
