// One image GC pass: look at the runtime (images, containers, image
// filesystem), check that the filesystem statfs measures holds the runtime's
// image store, update the ages, decide with image-gc-policy.ts, remove over
// CRI, and measure the file system again so the bytes reported are the bytes
// actually freed.
import type { Logger } from '../log.ts';
import type { CriClient, CriContainer, CriImage } from './cri/client.ts';
import { POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL } from './container-gc-policy.ts';
import {
  bytesToFree,
  imagesInUse,
  imagesOfNodePods,
  imageStoreProblem,
  notePresentImages,
  recordsLoaded,
  InvalidDiskCapacityError,
  isImageInUse,
  lastUsersIndex,
  mayBeExpectedBack,
  planImageGc,
  spaceGoalReached,
  takeUntilFreed,
  updateImageRecords,
  usagePercent,
  withExpectedBack,
  type Candidate,
  type FsStats,
  type ImageGcPlan,
  type ImageGcPolicy,
  type ImageRecords,
  type ImageStoreView,
  type LastUserOf,
} from './image-gc-policy.ts';
import { EXPECTED_BACK_URGENT_TIMEOUT_MS, type ExpectedBackCheck } from './expected-back.ts';
import { globMatcher, imageNames, imageRefNames } from './image-refs.ts';
import type { NodeMetrics } from './metrics.ts';
import { isTerminated, type NodePod, type PodLister } from './pods.ts';
import type { NodeEvents } from './node-events.ts';
import type { RuntimeConnection } from './runtime.ts';
import { loadStateFile, saveStateFile } from './state-file.ts';
import { statFilesystem, viewImageStore } from './statfs.ts';
import {
  imageUsersIndex,
  keptBreakdown,
  keptBytes,
  keptNote,
  removedExpectedBackNote,
  withSharedLayers,
  type ImageUsers,
  type KeptBreakdown,
} from './why-kept.ts';

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
  /**
   * Images expected back (expected-back.ts): those whose last user's
   * workload will use them again go last in the space pass and never for
   * the maximum age, while they were used within `maxUnusedMs` (0: no
   * bound). Undefined: off (--expected-back-images=false, or no API access).
   */
  expectedBack?: { check: ExpectedBackCheck; maxUnusedMs: number };
  /** How often, at most, containers are listed again before a removal (default 1 s). */
  inUseRecheckMs?: number;
  /** statfs of the image filesystem (replaceable in tests). */
  statfs?: (mountpoint: string) => Promise<FsStats>;
  /** The devices at the mountpoint and of the runtime's files in it (replaceable in tests). */
  imageStore?: (mountpoint: string) => Promise<ImageStoreView>;
  now?: () => number;
}

/** A pressure reclaim's goal on the image filesystem. */
export interface ImageReclaim {
  /**
   * Bytes it would take, for a signal on bytes (the logs, the shortfall, and
   * what a dry run goes by). Absent for an inode signal: the runtime reports
   * no inode count per image, so only the filesystem measured again tells.
   */
  wantedBytes?: number;
  /** Whether the image filesystem, as just measured, is enough. */
  done: (fs: FsStats) => boolean;
}

export interface RemovedImage {
  id: string;
  tags: string[];
  reason: 'age' | 'space' | 'pressure';
  sizeBytes: number;
  /** It was expected back (by this workload, "CronJob shop/nightly"): removed last, as nothing else freed enough. */
  expectedBack?: string;
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
  /**
   * What it left and why, with bytes and who keeps each group: the images it
   * could not remove (protected, younger than the minimum age), those
   * expected back it spared or did not reach, and the bytes
   * of removed images the disk did not give back (why-kept.ts).
   */
  kept: KeptBreakdown;
  dryRun: boolean;
}

/** An image a pass may remove now, in the order it would. */
export interface ReclaimableImage {
  id: string;
  tags: string[];
  sizeBytes: number;
  /** age: unused longer than --image-maximum-gc-age; space: removable once usage is past the high threshold. */
  why: 'age' | 'space';
  lastUsed: string | null;
}

/** The image filesystem as a pass would find it now (ImageGarbageCollector.explain). */
export interface ImageExplanation {
  mountpoint: string;
  capacityBytes: number;
  availableBytes: number;
  usagePercent: number;
  highThresholdPercent: number;
  lowThresholdPercent: number;
  /** What the space pass would want to free now (0: below the high threshold). */
  wantedBytes: number;
  reclaimable: ReclaimableImage[];
  kept: KeptBreakdown;
}

export class ImageGarbageCollector {
  private readonly runtime: RuntimeConnection;
  private readonly opts: ImageGcOptions;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly events: NodeEvents;
  private readonly statfs: (mountpoint: string) => Promise<FsStats>;
  private readonly imageStore: (mountpoint: string) => Promise<ImageStoreView>;
  private readonly now: () => number;
  private records: ImageRecords = new Map();
  private stateLoaded = false;
  private inUse = new Set<string>();
  private podImagesInUse = new Set<string>();
  /** Which pods use each image name, as of the last detection (for why an image is kept). */
  private users: ImageUsers = () => [];
  /** The last complete list of this node's pods, kept for when the API cannot answer. */
  private lastPods: { pods: NodePod[]; at: number } | undefined;
  private warnedPinnedSandbox = false;
  /** The mountpoint last found to hold the runtime's files (said once in the log). */
  private storeChecked: string | undefined;
  /** The expected-back checks a periodic pass is waiting on (cutShortChecks). */
  private checking: AbortController | undefined;

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
    this.imageStore = opts.imageStore ?? viewImageStore;
    this.now = opts.now ?? Date.now;
  }

  /**
   * Ends the wait of a periodic pass on its expected-back checks (a pressure
   * reclaim needs the pass's lock and does not wait on the API server, as
   * for the pod lists: PodListGate.cutShort); those not answered are not
   * expected back this pass. How many waits were cut (0 or 1).
   */
  cutShortChecks(): number {
    const c = this.checking;
    if (!c) return 0;
    this.checking = undefined;
    c.abort(new Error('cut short: a pressure reclaim does not wait for these reads'));
    return 1;
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
  async detectImages(client: CriClient, urgent = false): Promise<CriImage[]> {
    await this.loadState();
    const seen = await this.look(client, urgent);
    this.podImagesInUse = seen.podImagesInUse;
    this.inUse = seen.inUse;
    this.users = seen.users;
    this.records = updateImageRecords(
      this.records,
      seen.images,
      this.inUse,
      this.now(),
      seen.lastUserOf,
    );
    return seen.images;
  }

  /**
   * One look at the runtime and this node's pods, changing nothing: the
   * images, which names are in use (by containers in any state, and by the
   * pods that may still start one), and who uses each name.
   */
  private async look(client: CriClient, urgent: boolean): Promise<Look> {
    // Pods first: an image pulled for a pod listed here, whose container is
    // created after the runtime's list, is still seen in use.
    const pods = await this.nodePods(urgent);
    const [images, containers] = await Promise.all([client.listImages(), client.listContainers()]);
    const podImagesInUse = imagesOfNodePods(
      pods,
      new Set(containers.flatMap((c) => c.labels[POD_UID_LABEL] ?? [])),
    );
    const inUse = imagesInUse(containers);
    for (const ref of podImagesInUse) inUse.add(ref);
    const users = imageUsersIndex([
      ...containers.map((c) => ({
        names: [c.imageId, c.imageRef, c.image].flatMap((r) => (r ? imageRefNames(r) : [])),
        pod: podRef(c),
      })),
      // Terminated pods keep an image only through their containers, listed above.
      ...pods
        .filter((p) => !isTerminated(p))
        .map((p) => ({
          names: [...p.images, ...(p.volumeImages ?? [])].flatMap((r) => imageRefNames(r)),
          pod: p.ref ?? p.uid,
        })),
    ]);
    return { images, podImagesInUse, inUse, users, lastUserOf: lastUsersIndex(pods) };
  }

  /**
   * What a pass would find now, without removing or recording anything (for
   * `kubegc explain node/NAME`): the image filesystem, what the space pass
   * would want, what is reclaimable (the age and space candidates, in the
   * order a pass takes them) and what is not, and why.
   */
  async explain(): Promise<ImageExplanation> {
    await this.loadState();
    const client = await this.runtime.get();
    let seen: Look;
    let mountpoint: string;
    try {
      const asked = client.imageFilesystems();
      asked.catch(() => undefined);
      seen = await this.look(client, false);
      mountpoint = (await asked).find((f) => f.mountpoint)?.mountpoint ?? '';
    } catch (err) {
      throw this.runtime.check(err);
    }
    if (!mountpoint)
      throw new FilesystemError('the runtime reports no image filesystem (ImageFsInfo)');
    const fs = await this.measure(mountpoint);
    const nowMs = this.now();
    const planned = planImageGc({
      images: seen.images,
      records: updateImageRecords(this.records, seen.images, seen.inUse, nowMs, seen.lastUserOf),
      protection: {
        inUse: seen.inUse,
        sandboxImages: this.sandboxImages(seen.images),
        pinnedImages: globMatcher(this.opts.pinnedImages),
      },
      nowMs,
      policy: this.opts.policy,
    });
    // As a reclaim asks (at most a few seconds, never the periodic pass's cut-short handle).
    const plan = await this.expectedBackPlan(planned, fs, nowMs, true);
    const back = new Set((plan.expectedBack ?? []).map((e) => e.candidate.image.id));
    const candidate = (c: Candidate, why: 'age' | 'space'): ReclaimableImage => ({
      id: c.image.id,
      tags: c.image.repoTags,
      sizeBytes: c.image.sizeBytes,
      why,
      lastUsed:
        c.record.lastUsedMs !== undefined ? new Date(c.record.lastUsedMs).toISOString() : null,
    });
    return {
      mountpoint,
      capacityBytes: fs.capacityBytes,
      availableBytes: fs.availableBytes,
      usagePercent: usagePercent(fs),
      highThresholdPercent: this.opts.policy.highThresholdPercent,
      lowThresholdPercent: this.opts.policy.lowThresholdPercent,
      wantedBytes: bytesToFree(fs, this.opts.policy),
      reclaimable: [
        ...plan.age.map((c) => candidate(c, 'age')),
        ...plan.space.filter((c) => !back.has(c.image.id)).map((c) => candidate(c, 'space')),
      ],
      kept: keptBreakdown(plan, { users: seen.users, policy: this.opts.policy }),
    };
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

  /**
   * This node's pods. If they cannot be listed, the last complete list's:
   * stale, it can only protect more (pods gone since, or terminated), and it
   * still protects the pods that were waiting for their containers; pods
   * bound since are protected by the minimum age only.
   */
  private async nodePods(urgent: boolean): Promise<NodePod[]> {
    if (!this.opts.pods) return [];
    try {
      const pods = await this.opts.pods.nodePods({ urgent });
      this.lastPods = { pods, at: this.now() };
      return pods;
    } catch (err) {
      this.metrics.errors.inc({ gc: 'image', kind: 'api' });
      const last = this.lastPods;
      this.log.warn(
        last
          ? "cannot list this node's pods; the images of the pods listed last are kept, and those of pods bound since are protected only by --image-minimum-gc-age this pass"
          : "cannot list this node's pods; images of pods whose containers do not exist yet, and of their image volumes, are protected only by --image-minimum-gc-age this pass",
        {
          error: (err as Error).message,
          ...(last ? { lastListed: new Date(last.at).toISOString() } : {}),
        },
      );
      return last?.pods ?? [];
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
   * unused image for any signal, inodes included, done gentler); the minimum
   * age and every protection hold.
   */
  async run(opts: { reclaim?: ImageReclaim } = {}): Promise<ImagePassResult> {
    const reclaim = opts.reclaim;
    const client = await this.runtime.get();
    let images: CriImage[];
    let mountpoint: string;
    try {
      // Asked beside the image list: on a slow runtime every round trip
      // waited on in turn is time a pressure reclaim does not have (the node
      // soak's cri-slow). Its failure is thrown only once detectImages is
      // done, so that no detection outlives the pass and writes its older
      // answer over the next pass's.
      const asked = client.imageFilesystems();
      asked.catch(() => undefined);
      images = await this.detectImages(client, reclaim !== undefined);
      const filesystems = await asked;
      mountpoint = filesystems.find((f) => f.mountpoint)?.mountpoint ?? '';
    } catch (err) {
      throw this.runtime.check(err);
    }
    await this.saveState();
    if (!mountpoint)
      throw new FilesystemError('the runtime reports no image filesystem (ImageFsInfo)');
    await this.checkImageStore(mountpoint);
    const sandboxImages = this.sandboxImages(images);

    const before = await this.measure(mountpoint);
    const nowMs = this.now();
    const planned = planImageGc({
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
    // When the containers were listed, as far as the re-list before each
    // removal knows: before the workload reads, which may take a while.
    const inUseListedAt = Date.now();
    const plan = await this.expectedBackPlan(planned, before, nowMs, reclaim !== undefined);
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
      kept: keptBreakdown(plan, { users: this.users, policy: this.opts.policy }),
      dryRun: this.opts.dryRun,
    };
    const pass: Pass = {
      client,
      mountpoint,
      nowMs,
      result,
      lastFs: before,
      inUseListedAt,
      expectedBack: new Map(
        (plan.expectedBack ?? []).map((e) => [e.candidate.image.id, e.workload]),
      ),
    };
    this.log.debug('image GC plan', {
      images: images.length,
      protected: plan.protected.map((p) => ({ id: p.image.id, ...p.protection })),
      age: plan.age.length,
      space: plan.space.length,
      tooYoung: plan.tooYoung.length,
      expectedBack: (plan.expectedBack ?? []).map((e) => ({
        id: e.candidate.image.id,
        workload: e.workload,
      })),
    });

    // Age pass: unused longer than --image-maximum-gc-age, whatever the usage.
    for (const c of reclaim ? [] : plan.age) {
      if (result.removed.length >= cap) {
        result.capped = true;
        break;
      }
      await this.remove(pass, c, 'age');
    }

    if (reclaim) await this.reclaimImages(pass, reclaim, [...plan.age, ...plan.space], cap);
    else await this.freeSpace(pass, plan, cap);
    const after = this.opts.dryRun ? before : await this.measure(mountpoint);
    result.measuredFreedBytes = after.availableBytes - before.availableBytes;
    result.usagePercentAfter = usagePercent(after);
    result.kept = withSharedLayers(this.keptAfter(plan, result), {
      removed: result.removed.length,
      reportedFreedBytes: result.reportedFreedBytes,
      measuredFreedBytes: result.measuredFreedBytes,
      dryRun: this.opts.dryRun,
    });
    for (const [reason, bytes] of Object.entries(keptBytes(result.kept)))
      this.metrics.imageKeptBytes.set({ reason }, bytes);
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
   * The plan with the images expected back moved (withExpectedBack): asked
   * only for what this pass may remove, the images past the maximum age and,
   * when the space pass has bytes to free or for a pressure reclaim, its
   * candidates; only those with a last user used within the bound. Nothing
   * is read when the pass will remove nothing. A check never fails the pass:
   * whatever cannot be told is not expected back.
   */
  private async expectedBackPlan(
    plan: ImageGcPlan,
    fs: FsStats,
    nowMs: number,
    reclaim: boolean,
  ): Promise<ImageGcPlan> {
    const eb = this.opts.expectedBack;
    if (!eb) return plan;
    const wantsSpace = reclaim || bytesToFree(fs, this.opts.policy) > 0;
    const asked = [...plan.age, ...(wantsSpace ? plan.space : [])].filter((c) =>
      mayBeExpectedBack(c, nowMs, eb.maxUnusedMs),
    );
    if (asked.length === 0) return plan;
    const expected = new Map<string, string>();
    // A reclaim waits at most EXPECTED_BACK_URGENT_TIMEOUT_MS for all of
    // them; a periodic pass until a reclaim cuts it short (cutShortChecks).
    const waiting = new AbortController();
    const timer = reclaim
      ? setTimeout(
          () =>
            waiting.abort(
              new Error(
                `a pressure reclaim waits at most ${EXPECTED_BACK_URGENT_TIMEOUT_MS} ms for these reads`,
              ),
            ),
          EXPECTED_BACK_URGENT_TIMEOUT_MS,
        )
      : undefined;
    if (!reclaim) this.checking = waiting;
    let answered = 0;
    try {
      await forEachLimited(asked, EXPECTED_BACK_CONCURRENCY, async (c) => {
        if (waiting.signal.aborted) return;
        await this.checkExpectedBack(eb.check, c, reclaim, waiting.signal, expected);
        if (!waiting.signal.aborted) answered += 1;
      });
    } finally {
      clearTimeout(timer);
      if (this.checking === waiting) this.checking = undefined;
    }
    if (waiting.signal.aborted)
      this.log.info(
        'expected-back checks not answered in time: those images are not expected back this pass',
        {
          asked: asked.length,
          answered,
          reason: String((waiting.signal.reason as Error | undefined)?.message),
        },
      );
    return withExpectedBack(plan, expected, nowMs, eb.maxUnusedMs);
  }

  /** One candidate's check; `expected` gets it if it is expected back. */
  private async checkExpectedBack(
    check: ExpectedBackCheck,
    c: Candidate,
    urgent: boolean,
    signal: AbortSignal,
    expected: Map<string, string>,
  ): Promise<void> {
    const user = c.record.lastUser;
    if (!user) return;
    try {
      const v = await check.check(user, imageNames(c.image), { urgent, signal });
      this.log.debug('expected back?', {
        id: c.image.id,
        tags: c.image.repoTags,
        result: v.result,
        workload: v.workload,
        why: v.why,
      });
      if (v.result === 'expected-back') expected.set(c.image.id, v.workload);
    } catch (err) {
      this.log.warn('cannot tell whether an image is expected back; it is not', {
        id: c.image.id,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  /** What the pass left, as it stands: the expected-back images it removed are not kept. */
  private keptAfter(plan: ImageGcPlan, result: ImagePassResult): KeptBreakdown {
    return keptBreakdown(plan, {
      users: this.users,
      policy: this.opts.policy,
      removed: new Set(result.removed.map((r) => r.id)),
    });
  }

  /**
   * Every usage figure, and what each removal frees, comes from statfs of
   * the mountpoint ImageFsInfo names, as kubegc sees that path. If the
   * runtime's files are not on the filesystem found there (in a pod: the host
   * directory not mounted at the same path, or a disk mounted over it after
   * kubegc started), every figure is another disk's: images would go for a
   * disk they are not on, and that disk would never show them gone. So the
   * pass is refused (ImageGCFailed on the Node, naming both devices).
   */
  private async checkImageStore(mountpoint: string): Promise<void> {
    let view: ImageStoreView;
    try {
      view = await this.imageStore(mountpoint);
    } catch (err) {
      throw new FilesystemError(
        `cannot look into the image filesystem ${mountpoint} (ImageFsInfo): ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const problem = imageStoreProblem(mountpoint, view);
    if (problem) throw new FilesystemError(problem);
    if (this.storeChecked !== mountpoint) {
      this.storeChecked = mountpoint;
      this.log.info("the image filesystem statfs measures holds the runtime's files", {
        mountpoint,
        device: String(view.device),
        entries: view.entries.map((e) => e.name),
      });
    }
  }

  /** Removes `candidates` in order while `done()` says no, at most `cap` removals in the pass. */
  private walker(
    pass: Pass,
    candidates: readonly Candidate[],
    reason: RemovedImage['reason'],
    cap: number,
  ): { walk(done: () => boolean): Promise<void>; left(): number } {
    let i = 0;
    return {
      walk: async (done) => {
        for (let c = candidates[i]; c !== undefined && !done(); c = candidates[++i]) {
          if (pass.result.removed.length >= cap) {
            pass.result.capped = true;
            return;
          }
          await this.remove(pass, c, reason);
        }
      },
      left: () => candidates.length - i,
    };
  }

  /**
   * The space pass, on the usage after the age pass (the kubelet's order):
   * least recently used first, down to the low threshold. It stops as the
   * kubelet's does, once the runtime's sizes (or the disk, measured after
   * each removal) say enough. The sizes can say enough when the disk does not
   * (CRI-O counts a layer shared by several images in each of them): then, if
   * the disk moved at all, it goes on by the sizes for at most what the disk
   * still lacked at that point (measured once, and never more than was wanted).
   * Not further: when the disk does not follow the removals (another writer
   * fills it meanwhile, or it is not where the images are), following it
   * would empty the image store and gain nothing. What is still missing is
   * reported (FreeDiskSpaceFailed, the shortfall metric, --once exit 3); the
   * next pass starts again from the disk as it is then.
   */
  private async freeSpace(pass: Pass, plan: ImageGcPlan, cap: number): Promise<void> {
    const { result } = pass;
    const start = pass.lastFs;
    const wanted = bytesToFree(start, this.opts.policy);
    result.wantedBytes = wanted;
    if (wanted <= 0) return;
    const reportedBefore = result.reportedFreedBytes;
    const reported = (): number => result.reportedFreedBytes - reportedBefore;
    const measured = (): number => pass.lastFs.availableBytes - start.availableBytes;
    const candidates = this.walker(pass, plan.space, 'space', cap);
    let bounded = false;
    if (this.opts.dryRun) {
      const { take } = takeUntilFreed(plan.space, wanted, cap - result.removed.length);
      for (const c of take) await this.remove(pass, c, 'space');
      if (take.length < plan.space.length && reported() < wanted) result.capped = true;
    } else {
      await candidates.walk(() => spaceGoalReached(wanted, reported(), measured()));
      const stillMissing = Math.min(wanted, wanted - measured());
      if (stillMissing > 0 && measured() > 0) {
        const reportedAt = reported();
        await candidates.walk(
          () => measured() >= wanted || reported() - reportedAt >= stillMissing,
        );
      }
      bounded = !result.capped && candidates.left() > 0 && measured() < wanted;
    }
    // The verdict comes from the disk measured after the pass (a dry run
    // removes nothing, so it can only go by the sizes).
    const freed = this.opts.dryRun ? reported() : measured();
    if (freed >= wanted) return;
    result.shortfallBytes = wanted - Math.max(freed, 0);
    result.kept = this.keptAfter(plan, result);
    const diskStill = !this.opts.dryRun && reported() > 0 && measured() <= 0;
    const left = keptNote(
      withSharedLayers(result.kept, {
        removed: result.removed.filter((r) => r.reason === 'space').length,
        reportedFreedBytes: reported(),
        measuredFreedBytes: measured(),
        dryRun: this.opts.dryRun,
      }),
    );
    const expectedBackNote = removedExpectedBackNote(
      result.removed.filter((r) => r.reason === 'space'),
      this.opts.dryRun,
    );
    const note =
      `wanted to free ${wanted} bytes, but freed ${Math.max(measured(), 0)} bytes ` +
      `(${reported()} by the runtime's image sizes)` +
      (diskStill
        ? `; the disk did not move while images the runtime sizes at ${reported()} bytes went: another writer may be filling it, or ${pass.mountpoint} is not where the images are`
        : '') +
      (bounded
        ? `; stopped where the runtime's sizes said enough${diskStill ? '' : ' and then once more by what the disk lacked'}, keeping ${candidates.left()} eligible images (the next pass measures again)`
        : '') +
      (result.capped ? '; stopped at --max-removals-per-run' : '') +
      (expectedBackNote ? `; ${expectedBackNote}` : '') +
      (left ? `; left: ${left}` : '; no image is protected or too young') +
      (this.opts.dryRun ? ' (dry run: nothing was removed)' : '');
    this.log.warn('image GC could not reach the low threshold', {
      reason: 'FreeDiskSpaceFailed',
      wantedBytes: wanted,
      measuredFreedBytes: measured(),
      reportedFreedBytes: reported(),
      shortfallBytes: result.shortfallBytes,
      eligibleKept: bounded ? candidates.left() : 0,
      tooYoung: plan.tooYoung.map((c) => c.image.id),
      left,
      capped: result.capped,
      dryRun: this.opts.dryRun,
    });
    this.events.warning('FreeDiskSpaceFailed', note);
  }

  /**
   * Pressure reclaim (pressure.ts): least recently used first, images past
   * the maximum age as good as any, until the signal measured again is at
   * its target (`reclaim.done`): the kubelet's DeleteUnusedImages, which
   * frees every unused image for any signal, stopped once it is enough. Only
   * the disk counts here: an inode signal has no per-image figure at all,
   * and the eviction it heads off follows the disk. pressure.ts reports the
   * outcome on the signal.
   */
  private async reclaimImages(
    pass: Pass,
    reclaim: ImageReclaim,
    candidates: readonly Candidate[],
    cap: number,
  ): Promise<void> {
    const { result } = pass;
    const start = pass.lastFs;
    const wanted = reclaim.wantedBytes;
    result.wantedBytes = wanted ?? 0;
    if (this.opts.dryRun) {
      // Nothing is removed, so the disk cannot tell: by the sizes for bytes;
      // for inodes every eligible image, as DeleteUnusedImages would.
      const limit = cap - result.removed.length;
      const take =
        wanted === undefined
          ? candidates.slice(0, limit)
          : takeUntilFreed([...candidates], wanted, limit).take;
      for (const c of take) await this.remove(pass, c, 'pressure');
      const reached = wanted !== undefined && result.reportedFreedBytes >= wanted;
      if (take.length < candidates.length && !reached) result.capped = true;
      return;
    }
    await this.walker(pass, candidates, 'pressure', cap).walk(() => reclaim.done(pass.lastFs));
    if (wanted !== undefined && !reclaim.done(pass.lastFs))
      result.shortfallBytes = Math.max(
        0,
        wanted - Math.max(pass.lastFs.availableBytes - start.availableBytes, 0),
      );
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
    const expectedBack = pass.expectedBack.get(c.image.id);
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
      ...(expectedBack !== undefined ? { expectedBack } : {}),
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
      ...(expectedBack !== undefined ? { expectedBack } : {}),
    });
    pass.result.reportedFreedBytes += c.image.sizeBytes;
  }
}

/** Who a container is for an operator: its pod as namespace/name from the kubelet's labels, else its own name. */
function podRef(c: CriContainer): string {
  const name = c.labels[POD_NAME_LABEL];
  const ns = c.labels[POD_NAMESPACE_LABEL];
  if (name) return ns ? `${ns}/${name}` : name;
  const uid = c.labels[POD_UID_LABEL];
  return uid ? `pod UID ${uid}` : `container ${c.name || c.id}`;
}

/** One look at the runtime and this node's pods (ImageGarbageCollector.look). */
interface Look {
  images: CriImage[];
  podImagesInUse: Set<string>;
  inUse: Set<string>;
  users: ImageUsers;
  /** The last user (a pod's workload) of each image name, from this node's pods. */
  lastUserOf: LastUserOf;
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
  /** The images expected back in this pass's plan, and the workload of each. */
  expectedBack: ReadonlyMap<string, string>;
}

/** At most this many workload checks at once (each is one or two GETs, most answered by the cache). */
const EXPECTED_BACK_CONCURRENCY = 4;

/** Runs `f` on every item, at most `limit` at once. */
async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  f: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await f(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

const IN_USE_RECHECK_MS = 1000;

/** How often images are listed between passes (the kubelet refreshes its image cache every 30 s). */
export const IMAGE_PRESENCE_PERIOD_MS = 30_000;
