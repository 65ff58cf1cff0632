// Why an image pass could not free what it wanted: the images it left, by
// reason, with their bytes and who keeps them (which pods, which
// --pinned-images pattern, until when), and the bytes it removed that the
// disk did not give back. Pure functions over a plan: the image pass, the
// pressure reclaim's Event, the metrics and `kubegc explain node/NAME` all
// read the same breakdown.
import type { ImageGcPlan, ImageGcPolicy, KeptReason } from './image-gc-policy.ts';
import { imageNames } from './image-refs.ts';

/**
 * Every reason bytes stay on the image filesystem after a pass: a kept
 * image's reason, or `shared-layers` for removed images whose reported size
 * the disk did not give back. A closed set: it is the metric's label.
 */
export type ShortReason = KeptReason | 'shared-layers';

export const SHORT_REASONS: readonly ShortReason[] = [
  'in-use',
  'pinned-by-runtime',
  'sandbox-image',
  'pinned-images',
  'too-young',
  'expected-back',
  'shared-layers',
];

export interface KeptGroup {
  images: number;
  /** The runtime's sizes of those images (for shared-layers: reported minus measured). */
  bytes: number;
  /**
   * Who or what keeps them, deduplicated, in the order met: pods as
   * namespace/name, --pinned-images patterns, image references, or the time
   * the minimum age ends. All of them; a note shows the first few.
   */
  by: string[];
}

export type KeptBreakdown = Partial<Record<ShortReason, KeptGroup>>;

/** The pods (namespace/name) that use an image, by any of its names. */
export type ImageUsers = (names: readonly string[]) => readonly string[];

function add(out: KeptBreakdown, reason: ShortReason, bytes: number, by: readonly string[]): void {
  const g = (out[reason] ??= { images: 0, bytes: 0, by: [] });
  g.images += 1;
  g.bytes += bytes;
  for (const b of by) if (!g.by.includes(b)) g.by.push(b);
}

/**
 * What a plan leaves and why, with bytes (the runtime's sizes) and who keeps
 * each group. Images expected back count unless `removed` (image IDs the
 * pass removed) has them: the pass reaches them last.
 */
export function keptBreakdown(
  plan: ImageGcPlan,
  ctx: { users: ImageUsers; policy: ImageGcPolicy; removed?: ReadonlySet<string> },
): KeptBreakdown {
  const out: KeptBreakdown = {};
  for (const { image, protection } of plan.protected) {
    const names = imageNames(image);
    const by =
      protection.reason === 'in-use'
        ? ctx.users(names)
        : protection.reason === 'pinned-images'
          ? [protection.pattern ?? '']
          : [image.repoTags[0] ?? image.repoDigests[0] ?? image.id];
    add(out, protection.reason, image.sizeBytes, by);
  }
  const young = [...plan.tooYoung].sort(
    (a, b) => a.record.firstDetectedMs - b.record.firstDetectedMs,
  );
  for (const c of young)
    add(out, 'too-young', c.image.sizeBytes, [
      new Date(c.record.firstDetectedMs + ctx.policy.minAgeMs).toISOString(),
    ]);
  for (const { candidate, workload } of plan.expectedBack ?? [])
    if (!ctx.removed?.has(candidate.image.id))
      add(out, 'expected-back', candidate.image.sizeBytes, [workload]);
  return out;
}

/**
 * Removed images whose reported size the disk did not give back: their
 * layers are shared with images kept (containerd counts a shared layer in
 * each image), or the runtime reports compressed sizes. Nothing for a dry run
 * (nothing was removed) or when the disk gave back at least what was reported.
 */
export function withSharedLayers(
  kept: KeptBreakdown,
  pass: {
    removed: number;
    reportedFreedBytes: number;
    measuredFreedBytes: number;
    dryRun: boolean;
  },
): KeptBreakdown {
  const notFreed = pass.reportedFreedBytes - Math.max(pass.measuredFreedBytes, 0);
  if (pass.dryRun || pass.removed === 0 || notFreed <= 0) return kept;
  return { ...kept, 'shared-layers': { images: pass.removed, bytes: notFreed, by: [] } };
}

/** Bytes per reason, every reason present (0 where none): the metric's values. */
export function keptBytes(kept: KeptBreakdown): Record<ShortReason, number> {
  const out = {} as Record<ShortReason, number>;
  for (const r of SHORT_REASONS) out[r] = kept[r]?.bytes ?? 0;
  return out;
}

/** How a note names each reason, in the order it lists them. */
const WORDS: Record<ShortReason, string> = {
  'in-use': 'in use',
  'pinned-by-runtime': 'pinned by the runtime',
  'sandbox-image': 'the sandbox image',
  'pinned-images': 'matching --pinned-images',
  'too-young': 'younger than --image-minimum-gc-age',
  'expected-back': 'expected back',
  'shared-layers': 'removed but not freed on disk',
};

/** What each reason's `by` names, for the note. */
const BY_WORDS: Record<ShortReason, string> = {
  'in-use': 'by',
  'pinned-by-runtime': '',
  'sandbox-image': '',
  'pinned-images': 'patterns',
  'too-young': '',
  'expected-back': 'by',
  'shared-layers': '',
};

/** A note lists at most this many of a group's `by` (an Event's note is at most 1 kB). */
export const NOTE_BY_LIMIT = 3;

export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

function groupNote(reason: ShortReason, g: KeptGroup): string {
  const count = reason === 'shared-layers' ? `of ${g.images} removed` : `in ${g.images}`;
  const head = `${WORDS[reason]} ${formatBytes(g.bytes)} ${count} image${g.images === 1 ? '' : 's'}`;
  if (g.by.length === 0) return head;
  // The minimum age ends first for the first of them: when the next pass may take one.
  if (reason === 'too-young' && g.by.length > 0)
    return `${head} (the first old enough at ${g.by[0]})`;
  const shown = g.by.slice(0, NOTE_BY_LIMIT);
  const more = g.by.length > shown.length;
  const label = BY_WORDS[reason];
  return `${head} (${label ? `${label} ` : ''}${shown.join(', ')}${more ? `, +${g.by.length - shown.length} more` : ''})`;
}

/**
 * One line for an Event or a log: every reason with its bytes, image count and
 * the first few that keep them, in a fixed order; empty when nothing is kept.
 */
export function keptNote(kept: KeptBreakdown): string {
  return SHORT_REASONS.flatMap((r) => {
    const g = kept[r];
    return g && (g.images > 0 || g.bytes > 0) ? [groupNote(r, g)] : [];
  }).join('; ');
}

/**
 * For a note: the images expected back that a pass removed (or would, in a
 * dry run), which it reaches only when nothing else freed enough; '' if none.
 */
export function removedExpectedBackNote(
  removed: readonly { expectedBack?: string }[],
  dryRun: boolean,
): string {
  const workloads: string[] = [];
  let n = 0;
  for (const r of removed)
    if (r.expectedBack !== undefined) {
      n += 1;
      if (!workloads.includes(r.expectedBack)) workloads.push(r.expectedBack);
    }
  if (n === 0) return '';
  const shown = workloads.slice(0, NOTE_BY_LIMIT);
  const more = workloads.length > shown.length ? `, +${workloads.length - shown.length} more` : '';
  return `${dryRun ? 'would remove' : 'removed'} ${n} expected-back image${n === 1 ? '' : 's'} (${shown.join(', ')}${more}): nothing else freed enough`;
}

/** The pods that use each image name, from the runtime's container labels and this node's pods. */
export function imageUsersIndex(
  entries: readonly { names: readonly string[]; pod: string }[],
): ImageUsers {
  const byName = new Map<string, string[]>();
  for (const { names, pod } of entries)
    for (const n of names) {
      const list = byName.get(n);
      if (!list) byName.set(n, [pod]);
      else if (!list.includes(pod)) list.push(pod);
    }
  return (names) => {
    const out: string[] = [];
    for (const n of names) for (const p of byName.get(n) ?? []) if (!out.includes(p)) out.push(p);
    return out.sort();
  };
}
