// The kubelet's image GC decisions (pkg/kubelet/images/image_gc_manager.go) as
// pure functions: validation, disk usage arithmetic, what is protected, the
// age pass, and the least-recently-used order of the space pass. The CRI calls
// and disk measurements live in image-gc.ts.
import { imageNames, imageRefNames, type ImageMatcher } from './image-refs.ts';
import { isTerminated, type NodePod, type OwnerRef } from './pods.ts';

export interface ImageGcPolicy {
  /** Usage (percent of the image filesystem) at or above which the space pass runs. */
  highThresholdPercent: number;
  /** Usage the space pass frees down to. */
  lowThresholdPercent: number;
  /** Images detected more recently than this are never removed for space. */
  minAgeMs: number;
  /** Unused images older than this are removed whatever the usage (0: off). */
  maxAgeMs: number;
}

export const DEFAULT_IMAGE_GC_POLICY: ImageGcPolicy = {
  highThresholdPercent: 85,
  lowThresholdPercent: 80,
  minAgeMs: 2 * 60_000,
  maxAgeMs: 0,
};

/** The kubelet's checks (NewImageGCManager and the KubeletConfiguration validation). */
export function validateImageGcPolicy(p: ImageGcPolicy): string[] {
  const problems: string[] = [];
  const pct = (flag: string, v: number): void => {
    if (!Number.isInteger(v) || v < 0 || v > 100)
      problems.push(`--${flag} ${v} must be between 0 and 100, inclusive`);
  };
  pct('image-gc-high-threshold', p.highThresholdPercent);
  pct('image-gc-low-threshold', p.lowThresholdPercent);
  // The KubeletConfiguration validation (v1.35): low must be strictly below high.
  if (p.lowThresholdPercent >= p.highThresholdPercent)
    problems.push(
      `--image-gc-low-threshold ${p.lowThresholdPercent} must be less than --image-gc-high-threshold ${p.highThresholdPercent}`,
    );
  if (p.minAgeMs < 0) problems.push(`--image-minimum-gc-age must not be negative`);
  if (p.maxAgeMs < 0) problems.push(`--image-maximum-gc-age must not be negative`);
  if (p.maxAgeMs > 0 && p.maxAgeMs <= p.minAgeMs)
    problems.push(
      `--image-maximum-gc-age (${p.maxAgeMs / 1000}s) must be greater than --image-minimum-gc-age (${p.minAgeMs / 1000}s)`,
    );
  return problems;
}

/**
 * The kubelet stubs its image GC when the high threshold is 100 and there is
 * no maximum age (StartGarbageCollection): the periodic image pass is off.
 * Pressure reclaim still removes unused images, as the kubelet's eviction
 * manager does.
 */
export function imageGcDisabled(p: ImageGcPolicy): boolean {
  return p.highThresholdPercent === 100 && p.maxAgeMs === 0;
}

export interface FsStats {
  capacityBytes: number;
  availableBytes: number;
  /** Inodes in all and free, where statfs reports them (pressure signals on inodes). */
  inodes?: number;
  inodesFree?: number;
}

export class InvalidDiskCapacityError extends Error {}

/** What kubegc sees at the image filesystem's mountpoint (statfs.ts viewImageStore). */
export interface ImageStoreView {
  /** st_dev of the mountpoint: the filesystem statfs of it measures. */
  device: bigint;
  /** The first few entries in it (the runtime's own files: metadata.db, snapshots, images.json...) and their st_dev. */
  entries: { name: string; device: bigint }[];
}

/**
 * Why statfs of the mountpoint would not measure the runtime's image store,
 * or undefined if it would: the directory shows none of the runtime's files
 * (the host path is not mounted there), or they are on another device than
 * the directory statfs measures (a filesystem mounted below it).
 */
export function imageStoreProblem(mountpoint: string, view: ImageStoreView): string | undefined {
  if (view.entries.length === 0)
    return `the image filesystem ${mountpoint} (ImageFsInfo) is empty as kubegc sees it: the runtime's image store is not there, so statfs would measure another filesystem (in a pod, mount the host's directory at the same path)`;
  const elsewhere = view.entries.find((e) => e.device !== view.device);
  if (elsewhere)
    return `${mountpoint}/${elsewhere.name} is on device ${elsewhere.device}, but ${mountpoint} (ImageFsInfo), which statfs measures, is on device ${view.device}: the usage kubegc would see is not the image store's`;
  return undefined;
}

// BigInt: available×100 overflows 2^53 on file systems above ~90 TB.
const big = (n: number): bigint => BigInt(Math.floor(n));

/** 100 − available×100/capacity in integer math, available clamped to capacity (kubelet). */
export function usagePercent(fs: FsStats): number {
  if (fs.capacityBytes <= 0)
    throw new InvalidDiskCapacityError(`invalid capacity ${fs.capacityBytes} on image filesystem`);
  const available = Math.min(fs.availableBytes, fs.capacityBytes);
  return 100 - Number((big(available) * 100n) / big(fs.capacityBytes));
}

/** Bytes the space pass must free: 0 below the high threshold, else down to the low one. */
export function bytesToFree(fs: FsStats, policy: ImageGcPolicy): number {
  if (usagePercent(fs) < policy.highThresholdPercent) return 0;
  const available = Math.min(fs.availableBytes, fs.capacityBytes);
  const wanted =
    (big(fs.capacityBytes) * BigInt(100 - policy.lowThresholdPercent)) / 100n - big(available);
  return wanted > 0n ? Number(wanted) : 0;
}

export interface ImageInfo {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  sizeBytes: number;
  pinned: boolean;
}

/** What kubegc remembers about an image (persisted in the state file). */
export interface ImageRecord {
  /** When kubegc first saw the image (epoch ms). */
  firstDetectedMs: number;
  /** When a container last referenced it (epoch ms); never, if absent. */
  lastUsedMs?: number;
  /**
   * Where the maximum age counts from at the earliest (not persisted): the
   * time this process loaded the record from the state file, i.e. its GC's
   * start. What used the image while kubegc was down is not known, so the
   * maximum age waits a whole MaxAge from the start, as the kubelet's does
   * (its records live in memory: lastUsed is never before its GC began).
   *
   * The minimum age keeps counting from firstDetectedMs: it protects a fresh
   * pull about to be used, and a recorded image was on the node before the
   * restart. The kubelet goes further (images present at its start count as
   * detected "in the past", old enough at once); counting again from the
   * start instead made the disk unreclaimable for MinAge after every restart,
   * and the kubelet evicted pods with unused images on the node (node soak).
   * An image removed by someone else and pulled again under the same ID while
   * kubegc was down keeps its old record: that is the one case this misses.
   */
  maxAgeFromMs?: number;
  /**
   * The controller of the pod that last used the image on this node, as of
   * the last time a listed pod with a controller named it while it was in
   * use (persisted). What "expected back" reads (expected-back.ts).
   */
  lastUser?: LastUser;
}

/** A pod's namespace and controller: the workload that may bring an image back. */
export interface LastUser {
  namespace: string;
  owner: OwnerRef;
}

/**
 * The last user of an image by its names, from this node's pods: a pod with
 * a controller that names it (its containers' images or its image volumes'),
 * one that has not terminated first; null when only pods without a
 * controller name it (a bare pod was its last user: nothing brings it back);
 * undefined when no listed pod names it (the record keeps what it had).
 */
export type LastUserOf = (names: readonly string[]) => LastUser | null | undefined;

export function lastUsersIndex(pods: readonly NodePod[]): LastUserOf {
  // Rank: 0 a pod still running or to run, 1 a terminated one, 2 a pod without a controller.
  const byName = new Map<string, { user: LastUser | null; rank: number }>();
  for (const p of pods) {
    const user: LastUser | null =
      p.controller && p.namespace ? { namespace: p.namespace, owner: p.controller } : null;
    const rank = user ? (isTerminated(p) ? 1 : 0) : 2;
    for (const ref of [...p.images, ...(p.volumeImages ?? [])])
      for (const n of imageRefNames(ref)) {
        const had = byName.get(n);
        if (!had || rank < had.rank) byName.set(n, { user, rank });
      }
  }
  return (names) => {
    let best: { user: LastUser | null; rank: number } | undefined;
    for (const n of names) {
      const e = byName.get(n);
      if (e && (!best || e.rank < best.rank)) best = e;
    }
    return best ? best.user : undefined;
  };
}

export type ImageRecords = Map<string, ImageRecord>;

/**
 * Every reference by which containers (in any state: exited ones keep their
 * image, as on the kubelet) point at images: the image ID where the runtime
 * reports it, else the digested reference, and the name from the container spec.
 */
export function imagesInUse(
  containers: { image: string; imageRef: string; imageId: string }[],
): Set<string> {
  const used = new Set<string>();
  for (const c of containers) {
    for (const ref of [c.imageId, c.imageRef, c.image])
      if (ref) for (const name of imageRefNames(ref)) used.add(name);
  }
  return used;
}

/**
 * The image references pods bound to the node still need, as written and
 * normalised. Every image of a pod that may still start a container (not
 * Succeeded or Failed): an image pulled for it is in use before its container
 * exists. And the images of a pod's image volumes while it may still start a
 * container or has one on the node in any state (`podUidsWithContainers`, the
 * runtime's pod UID labels): the kubelet v1.35's image GC
 * (image_gc_manager.go, detectImages → handleImageVolumes, ImageVolume gate
 * beta and on by default) counts an image in use when the ContainerStatus of
 * a container the runtime lists, running or exited, has a mount of that
 * image; kubegc, which sees no mounts in ListContainers, reads them from the
 * pod. Unlike the kubelet, it also keeps them before the pod's first
 * container exists, as it does container images.
 */
export function imagesOfNodePods(
  pods: readonly NodePod[],
  podUidsWithContainers: ReadonlySet<string>,
): Set<string> {
  const out = new Set<string>();
  const add = (refs: readonly string[]): void => {
    for (const ref of refs) for (const name of imageRefNames(ref)) out.add(name);
  };
  for (const p of pods) {
    const runnable = !isTerminated(p);
    if (runnable) add(p.images);
    const hasContainers = [p.uid, p.mirrorOf].some(
      (uid) => uid !== undefined && podUidsWithContainers.has(uid),
    );
    if (runnable || hasContainers) add(p.volumeImages ?? []);
  }
  return out;
}

export function isImageInUse(image: ImageInfo, inUse: Set<string>): boolean {
  return imageNames(image).some((n) => inUse.has(n));
}

/**
 * The records after one look at the runtime: new images get firstDetected =
 * now, images in use get lastUsed = now (and their last user from this
 * node's pods, `lastUserOf`), records of images gone are dropped.
 */
export function updateImageRecords(
  previous: ReadonlyMap<string, ImageRecord>,
  images: ImageInfo[],
  inUse: Set<string>,
  nowMs: number,
  lastUserOf: LastUserOf = () => undefined,
): ImageRecords {
  const next: ImageRecords = new Map();
  for (const image of images) {
    const record: ImageRecord = { ...(previous.get(image.id) ?? { firstDetectedMs: nowMs }) };
    if (isImageInUse(image, inUse)) {
      record.lastUsedMs = nowMs;
      const user = lastUserOf(imageNames(image));
      if (user) record.lastUser = user;
      else if (user === null) delete record.lastUser;
    }
    next.set(image.id, record);
  }
  return next;
}

export type ProtectionReason = 'in-use' | 'pinned-by-runtime' | 'sandbox-image' | 'pinned-images';

export interface ProtectionContext {
  inUse: Set<string>;
  /** The sandbox (pause) image's reference in every form (imageRefNames). */
  sandboxImages: Set<string>;
  pinnedImages: ImageMatcher;
}

export interface Protection {
  reason: ProtectionReason;
  /** The --pinned-images pattern that matched. */
  pattern?: string;
}

/** Why an image must never be removed, or undefined if it may be. */
export function protectionOf(image: ImageInfo, ctx: ProtectionContext): Protection | undefined {
  const names = imageNames(image);
  if (names.some((n) => ctx.inUse.has(n))) return { reason: 'in-use' };
  if (image.pinned) return { reason: 'pinned-by-runtime' };
  if (names.some((n) => ctx.sandboxImages.has(n))) return { reason: 'sandbox-image' };
  const pattern = ctx.pinnedImages.match(names);
  if (pattern !== undefined) return { reason: 'pinned-images', pattern };
  return undefined;
}

export interface Candidate {
  image: ImageInfo;
  record: ImageRecord;
}

/**
 * Least recently used first: lastUsed ascending (never used counts as the
 * oldest, as the kubelet's zero time does), then firstDetected ascending.
 */
export function evictionOrder(candidates: Candidate[]): Candidate[] {
  return [...candidates].sort(
    (a, b) =>
      (a.record.lastUsedMs ?? 0) - (b.record.lastUsedMs ?? 0) ||
      a.record.firstDetectedMs - b.record.firstDetectedMs,
  );
}

/**
 * Unused for longer than MaxAge; never-used images count from their
 * detection, and a record from the state file from no earlier than its load
 * (ImageRecord.maxAgeFromMs).
 */
export function isPastMaxAge(c: Candidate, nowMs: number, policy: ImageGcPolicy): boolean {
  if (policy.maxAgeMs <= 0) return false;
  const unusedSince = Math.max(
    c.record.lastUsedMs ?? c.record.firstDetectedMs,
    c.record.maxAgeFromMs ?? 0,
  );
  return nowMs - unusedSince > policy.maxAgeMs;
}

export function isYoungerThanMinAge(c: Candidate, nowMs: number, policy: ImageGcPolicy): boolean {
  return nowMs - c.record.firstDetectedMs < policy.minAgeMs;
}

/**
 * Records loaded from the state file: their times are kept (they order the
 * space pass and date the minimum age), but the maximum age counts again from
 * now (see ImageRecord.maxAgeFromMs).
 */
export function recordsLoaded(
  records: ReadonlyMap<string, ImageRecord>,
  nowMs: number,
): ImageRecords {
  const out: ImageRecords = new Map();
  for (const [id, r] of records) out.set(id, { ...r, maxAgeFromMs: nowMs });
  return out;
}

/**
 * The records after a listing of images alone (no containers): an image gone
 * loses its record, a new one (or one back under the same ID) starts afresh.
 */
export function notePresentImages(
  previous: ReadonlyMap<string, ImageRecord>,
  imageIds: readonly string[],
  nowMs: number,
): ImageRecords {
  const next: ImageRecords = new Map();
  for (const id of imageIds) next.set(id, previous.get(id) ?? { firstDetectedMs: nowMs });
  return next;
}

export interface ImageGcPlan {
  protected: { image: ImageInfo; protection: Protection }[];
  /** Removed by the age pass, least recently used first. */
  age: Candidate[];
  /** Eligible for the space pass in the order it walks them (age removals excluded). */
  space: Candidate[];
  /** Unused, but detected less than MinAge ago. */
  tooYoung: Candidate[];
  /**
   * Images expected back (withExpectedBack), least recently used first: out
   * of the age list, at the end of the space list. With the workload that
   * expects each, as "CronJob shop/nightly".
   */
  expectedBack?: { candidate: Candidate; workload: string }[];
}

export function planImageGc(input: {
  images: ImageInfo[];
  records: ReadonlyMap<string, ImageRecord>;
  protection: ProtectionContext;
  nowMs: number;
  policy: ImageGcPolicy;
}): ImageGcPlan {
  const plan: ImageGcPlan = { protected: [], age: [], space: [], tooYoung: [] };
  const candidates: Candidate[] = [];
  for (const image of input.images) {
    const protection = protectionOf(image, input.protection);
    if (protection) {
      plan.protected.push({ image, protection });
      continue;
    }
    candidates.push({
      image,
      record: input.records.get(image.id) ?? { firstDetectedMs: input.nowMs },
    });
  }
  for (const c of evictionOrder(candidates)) {
    if (isPastMaxAge(c, input.nowMs, input.policy)) plan.age.push(c);
    else if (isYoungerThanMinAge(c, input.nowMs, input.policy)) plan.tooYoung.push(c);
    else plan.space.push(c);
  }
  return plan;
}

/**
 * Whether "expected back" may protect an image: it has a last user, and was
 * used within `maxUnusedMs` (--expected-back-max-unused; 0: no bound). An
 * image unused for longer is an ordinary candidate, whatever its workload.
 */
export function mayBeExpectedBack(c: Candidate, nowMs: number, maxUnusedMs: number): boolean {
  if (!c.record.lastUser || c.record.lastUsedMs === undefined) return false;
  return maxUnusedMs <= 0 || nowMs - c.record.lastUsedMs <= maxUnusedMs;
}

/**
 * The plan with the images expected back (`expected`: image ID → the
 * workload, from expected-back.ts) out of the age pass (never removed for
 * the maximum age while they stay expected back) and at the end of the space
 * pass's order (removed last, least recently used first among themselves),
 * as long as `mayBeExpectedBack` says the bound allows it.
 */
export function withExpectedBack(
  plan: ImageGcPlan,
  expected: ReadonlyMap<string, string>,
  nowMs: number,
  maxUnusedMs: number,
): ImageGcPlan {
  const isExpected = (c: Candidate): boolean =>
    expected.has(c.image.id) && mayBeExpectedBack(c, nowMs, maxUnusedMs);
  const back = evictionOrder([...plan.age, ...plan.space].filter(isExpected));
  if (back.length === 0) return plan;
  return {
    ...plan,
    age: plan.age.filter((c) => !isExpected(c)),
    space: [...plan.space.filter((c) => !isExpected(c)), ...back],
    expectedBack: back.map((candidate) => ({
      candidate,
      workload: expected.get(candidate.image.id) ?? '',
    })),
  };
}

/**
 * Why a pass leaves an image: its protection, younger than
 * --image-minimum-gc-age, or expected back (a workload will use it again)
 * and not reached.
 */
export type KeptReason = ProtectionReason | 'too-young' | 'expected-back';

/**
 * The space pass stops once it has freed what was needed, by the runtime's
 * sizes (the kubelet's measure) or by the file system measured again
 * (honest when sizes are compressed or layers shared), whichever comes first.
 */
export function spaceGoalReached(
  wantedBytes: number,
  reportedFreedBytes: number,
  measuredFreedBytes: number,
): boolean {
  return reportedFreedBytes >= wantedBytes || measuredFreedBytes >= wantedBytes;
}

/**
 * The space pass without removing anything (dry run; the first cut of a real
 * run): candidates taken in order until their reported sizes reach the goal.
 */
export function takeUntilFreed(
  ordered: Candidate[],
  wantedBytes: number,
  maxRemovals = Infinity,
): { take: Candidate[]; reportedBytes: number } {
  const take: Candidate[] = [];
  let reportedBytes = 0;
  for (const c of ordered) {
    if (reportedBytes >= wantedBytes || take.length >= maxRemovals) break;
    take.push(c);
    reportedBytes += c.image.sizeBytes;
  }
  return { take, reportedBytes };
}
