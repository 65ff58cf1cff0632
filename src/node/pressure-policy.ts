// Disk pressure as the kubelet's eviction manager sees it
// (pkg/kubelet/eviction: helpers.go, eviction_manager.go), as pure functions:
// the --eviction-hard syntax and defaults, the containerfs thresholds derived
// from nodefs or imagefs, the filesystem layout, the signals observed from
// statfs, which of them call for a reclaim (a margin above the kubelet's
// threshold, so the kubelet never sees it crossed), and the reclaim steps the
// kubelet takes for that layout and signal. The statfs calls and the passes
// live in pressure.ts.

export type DiskSignal =
  | 'nodefs.available'
  | 'nodefs.inodesFree'
  | 'imagefs.available'
  | 'imagefs.inodesFree'
  | 'containerfs.available'
  | 'containerfs.inodesFree';

/** Signals the kubelet accepts that kubegc does not act on (it reclaims disk only). */
const OTHER_SIGNALS = new Set(['memory.available', 'allocatableMemory.available', 'pid.available']);

const DISK_SIGNALS: readonly DiskSignal[] = [
  'nodefs.available',
  'nodefs.inodesFree',
  'imagefs.available',
  'imagefs.inodesFree',
  'containerfs.available',
  'containerfs.inodesFree',
];

/** A threshold value: a fraction of the capacity, or an absolute quantity (bytes or inodes). */
export type ThresholdValue = { percent: number } | { quantity: number };

export interface DiskThreshold {
  signal: DiskSignal;
  value: ThresholdValue;
}

/** The kubelet's DefaultEvictionHard (Linux, v1.35), its disk entries. */
export const DEFAULT_EVICTION_HARD =
  'memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%';

const SUFFIX: Record<string, number> = {
  '': 1,
  k: 1e3,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

/** A Kubernetes quantity (`100Mi`, `2G`, `1.5Gi`, `5000`), or undefined if it is not one. */
export function parseQuantity(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$/.exec(text);
  if (!m) return undefined;
  return Number(m[1]) * (SUFFIX[m[2] ?? ''] as number);
}

/** A percentage (`10%`, `7.5%`) or a quantity; the kubelet's rules for each. */
export function parseThresholdValue(flag: string, signal: string, text: string): ThresholdValue {
  if (text.endsWith('%')) {
    const n = Number(text.slice(0, -1));
    if (text.length === 1 || !Number.isFinite(n))
      throw new Error(`${flag}: ${signal}: "${text}" is not a percentage`);
    if (n < 0) throw new Error(`${flag}: ${signal} must be >= 0%: ${text}`);
    if (n > 100) throw new Error(`${flag}: ${signal} must be <= 100%: ${text}`);
    return { percent: n };
  }
  const q = parseQuantity(text);
  if (q === undefined)
    throw new Error(`${flag}: ${signal}: "${text}" is not a quantity (e.g. 10%, 2Gi)`);
  if (q <= 0) throw new Error(`${flag}: ${signal} must be positive: ${text}`);
  return { quantity: q };
}

/**
 * The largest --eviction-reclaim-margin given as a percentage. Reclaim starts
 * at the kubelet's threshold + the margin and frees until threshold + twice
 * the margin: the margin is a head start on eviction, not a second image GC.
 * At 10% over the default imagefs.available<15%, reclaim starts below 25%
 * free and frees to 35%, already well before the kubelet's image GC (85%
 * used). At 50% (a typo for 5%) it would start on a disk 40% full and remove
 * every eligible image there at each check. (The kubelet's own
 * --eviction-minimum-reclaim, a quantity or percentage per signal, is what
 * it frees beyond the threshold once crossed; it has no such head start.)
 * A quantity (2Gi) is taken as given, as the kubelet takes one: whether it
 * is large depends on a disk not known here.
 */
export const MAX_RECLAIM_MARGIN_PERCENT = 10;

/** --eviction-reclaim-margin: a percentage (at most MAX_RECLAIM_MARGIN_PERCENT) or a quantity. */
export function parseReclaimMargin(
  text: string,
  flag = '--eviction-reclaim-margin',
): ThresholdValue {
  const v = parseThresholdValue(flag, 'margin', text);
  if ('percent' in v && v.percent > MAX_RECLAIM_MARGIN_PERCENT)
    throw new Error(
      `${flag}: ${text} is more than ${MAX_RECLAIM_MARGIN_PERCENT}%: reclaim starts at the kubelet's threshold + the margin and frees to twice the margin above it, so over the default imagefs.available<15% it would start below ${15 + v.percent}% free and remove every eligible image from disks far from eviction (freeing space early is --image-gc-high-threshold's job)`,
    );
  return v;
}

export interface ParsedEvictionHard {
  thresholds: DiskThreshold[];
  /** Signals given that kubegc does not act on (memory, pid) or ignores as the kubelet does. */
  ignored: string[];
}

/**
 * The kubelet's --eviction-hard syntax: `signal<value` joined by commas. As
 * the kubelet (mergeDefaultEvictionSettings: false), the flag given replaces
 * the defaults; `0%` and `100%` turn a signal off; containerfs thresholds are
 * derived (deriveContainerFsThresholds) and any given are ignored.
 */
export function parseEvictionHard(text: string, flag = '--eviction-hard'): ParsedEvictionHard {
  const thresholds: DiskThreshold[] = [];
  const ignored: string[] = [];
  const seen = new Set<string>();
  for (const raw of text.split(',')) {
    const statement = raw.trim();
    if (!statement) continue;
    const m = /^([A-Za-z.]+)\s*<\s*(\S+)$/.exec(statement);
    if (!m)
      throw new Error(
        `${flag}: "${statement}" is not of the form signal<value (e.g. imagefs.available<15%)`,
      );
    const signal = m[1] as string;
    const value = m[2] as string;
    if (seen.has(signal)) throw new Error(`${flag}: ${signal} given twice`);
    seen.add(signal);
    if (OTHER_SIGNALS.has(signal)) {
      parseThresholdValue(flag, signal, value); // still a valid statement, or an error
      ignored.push(signal);
      continue;
    }
    if (!(DISK_SIGNALS as readonly string[]).includes(signal))
      throw new Error(`${flag}: unsupported eviction signal ${signal}`);
    const v = parseThresholdValue(flag, signal, value);
    if (signal.startsWith('containerfs.')) {
      ignored.push(signal);
      continue;
    }
    if ('percent' in v && (v.percent === 0 || v.percent === 100)) continue;
    thresholds.push({ signal: signal as DiskSignal, value: v });
  }
  return { thresholds, ignored };
}

/** Where the node's disks are: the kubelet's three layouts. */
export type FsLayout =
  /** One filesystem for the kubelet's root, images and writable layers. */
  | 'single'
  /** Images and writable layers on a dedicated filesystem (imagefs). */
  | 'imagefs'
  /** Images on imagefs, writable layers on the root's (KEP-4191 split). */
  | 'split';

export function layoutOf(devices: {
  nodefs: bigint;
  imagefs: bigint;
  containerfs: bigint;
}): FsLayout {
  if (devices.containerfs !== devices.imagefs) return 'split';
  if (devices.imagefs !== devices.nodefs) return 'imagefs';
  return 'single';
}

/**
 * The kubelet's UpdateContainerFsThresholds: containerfs takes nodefs's
 * thresholds on one filesystem or a split layout, imagefs's on a dedicated imagefs.
 */
export function deriveContainerFsThresholds(
  thresholds: readonly DiskThreshold[],
  layout: FsLayout,
): DiskThreshold[] {
  const from = layout === 'imagefs' ? 'imagefs' : 'nodefs';
  const out = thresholds.filter((t) => !t.signal.startsWith('containerfs.'));
  for (const t of thresholds) {
    if (t.signal === `${from}.available`)
      out.push({ signal: 'containerfs.available', value: t.value });
    if (t.signal === `${from}.inodesFree`)
      out.push({ signal: 'containerfs.inodesFree', value: t.value });
  }
  return out;
}

/** statfs of one filesystem. */
export interface FsObservation {
  capacityBytes: number;
  availableBytes: number;
  inodes: number;
  inodesFree: number;
}

export type Filesystem = 'nodefs' | 'imagefs' | 'containerfs';

export function filesystemOf(signal: DiskSignal): Filesystem {
  return signal.slice(0, signal.indexOf('.')) as Filesystem;
}

export const isInodeSignal = (s: DiskSignal): boolean => s.endsWith('.inodesFree');

/** The signal's value (bytes or inodes available) and what it is measured against. */
export function observe(
  signal: DiskSignal,
  fs: FsObservation,
): { available: number; capacity: number } {
  return isInodeSignal(signal)
    ? { available: fs.inodesFree, capacity: fs.inodes }
    : { available: Math.min(fs.availableBytes, fs.capacityBytes), capacity: fs.capacityBytes };
}

/** A threshold as a quantity on this filesystem (the kubelet's GetThresholdQuantity: int64(capacity × fraction)). */
export function thresholdQuantity(value: ThresholdValue, capacity: number): number {
  return 'percent' in value ? Math.floor((capacity * value.percent) / 100) : value.quantity;
}

export interface PressureNeed {
  signal: DiskSignal;
  /** Bytes (or inodes) available now. */
  available: number;
  /** The kubelet's threshold: below this it evicts pods. */
  threshold: number;
  /** Reclaim starts below this (threshold + margin)... */
  start: number;
  /** ...and frees until this much is available (threshold + 2 × margin). */
  target: number;
}

/**
 * The signals that call for a reclaim now: available below the kubelet's
 * threshold plus the margin. The margin applies to byte signals as given (a
 * percentage of the capacity or a quantity) and to inode signals as a
 * percentage (a byte quantity means nothing for inodes: then the threshold's
 * own value is the margin).
 */
export function pressureNeeds(input: {
  thresholds: readonly DiskThreshold[];
  observations: Partial<Record<Filesystem, FsObservation>>;
  margin: ThresholdValue;
}): { needs: PressureNeed[]; levels: PressureNeed[] } {
  const levels: PressureNeed[] = [];
  for (const t of input.thresholds) {
    const fs = input.observations[filesystemOf(t.signal)];
    if (!fs) continue;
    const { available, capacity } = observe(t.signal, fs);
    const threshold = thresholdQuantity(t.value, capacity);
    const margin =
      isInodeSignal(t.signal) && 'quantity' in input.margin
        ? threshold
        : thresholdQuantity(input.margin, capacity);
    levels.push({
      signal: t.signal,
      available,
      threshold,
      start: threshold + margin,
      target: Math.min(capacity, threshold + 2 * margin),
    });
  }
  return { needs: levels.filter((l) => l.available < l.start), levels };
}

export type ReclaimStep = 'containers' | 'images';

/** The kubelet's buildSignalToNodeReclaimFuncs: what frees a signal on a layout. */
export function reclaimSteps(layout: FsLayout, signal: DiskSignal): ReclaimStep[] {
  const fs = filesystemOf(signal);
  switch (layout) {
    case 'single':
      return ['containers', 'images'];
    case 'imagefs':
      // The root holds logs and volumes only: nothing a GC of the runtime frees.
      return fs === 'nodefs' ? [] : ['containers', 'images'];
    case 'split':
      return fs === 'imagefs' ? ['images'] : ['containers'];
  }
}
