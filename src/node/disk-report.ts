// What `kubegc explain node/NAME` prints: the node agent's answer on its
// metrics port (/debug/disk) and its rendering. The agent computes it as a
// pass would (ImageGarbageCollector.explain, PressureMonitor.levels) without
// removing or recording anything; the CLI fetches it through the API
// server's pod proxy (src/explain/node.ts).
import type { ImageExplanation } from './image-gc.ts';
import type { FsLayout, PressureNeed } from './pressure-policy.ts';
import { formatBytes, keptNote, SHORT_REASONS, type KeptBreakdown } from './why-kept.ts';

/** Bumped when a field changes meaning or goes; new fields do not bump it. */
export const DISK_REPORT_SCHEMA_VERSION = 1;

/** The route on the node agent's metrics port (authorised like /metrics). */
export const DISK_REPORT_PATH = '/debug/disk';

export interface SignalLevel {
  signal: string;
  /** Bytes, or inodes for *.inodesFree. */
  available: number;
  /** The kubelet's --eviction-hard threshold: below it the kubelet evicts pods. */
  threshold: number;
  /** kubegc reclaims below this (threshold + --eviction-reclaim-margin). */
  reclaimStart: number;
  /** available − threshold: how far the kubelet's eviction is (negative: past it). */
  toEviction: number;
}

export interface DiskReport {
  schemaVersion: number;
  node: string;
  at: string;
  images: ImageExplanation;
  /** The filesystem layout and each eviction signal; null with pressure reclaim off. */
  pressure: { layout: FsLayout; signals: SignalLevel[] } | null;
}

export function diskReport(
  node: string,
  nowMs: number,
  images: ImageExplanation,
  pressure: { layout: FsLayout; levels: PressureNeed[] } | undefined,
): DiskReport {
  return {
    schemaVersion: DISK_REPORT_SCHEMA_VERSION,
    node,
    at: new Date(nowMs).toISOString(),
    images,
    pressure: pressure
      ? {
          layout: pressure.layout,
          signals: pressure.levels.map((l) => ({
            signal: l.signal,
            available: l.available,
            threshold: l.threshold,
            reclaimStart: l.start,
            toEviction: l.available - l.threshold,
          })),
        }
      : null,
  };
}

const amount = (signal: string, n: number): string =>
  signal.endsWith('inodesFree') ? `${Math.round(n)} inodes` : formatBytes(n);

function keptLines(kept: KeptBreakdown): string[] {
  const lines: string[] = [];
  for (const reason of SHORT_REASONS) {
    const g = kept[reason];
    if (!g || g.images === 0) continue;
    // One line per reason as the Event says it, then everyone who keeps it.
    lines.push(`  ${keptNote({ [reason]: { ...g, by: [] } })}`);
    for (const b of g.by) lines.push(`    ${reason === 'too-young' ? `old enough at ${b}` : b}`);
  }
  return lines;
}

/** The text form: the image filesystem, what is reclaimable, what is not and why, the signals. */
export function renderDiskReport(r: DiskReport): string {
  const i = r.images;
  const reclaimable = i.reclaimable.reduce((n, c) => n + c.sizeBytes, 0);
  const out = [
    `Node:        ${r.node} (as of ${r.at})`,
    `Image filesystem: ${i.mountpoint}: ${i.usagePercent}% used, ${formatBytes(i.availableBytes)} of ${formatBytes(i.capacityBytes)} available (image GC from ${i.highThresholdPercent}% down to ${i.lowThresholdPercent}%${i.wantedBytes > 0 ? `; it wants ${formatBytes(i.wantedBytes)} freed now` : ''})`,
    `Reclaimable: ${formatBytes(reclaimable)} in ${i.reclaimable.length} images, in the order a pass removes them:`,
    ...i.reclaimable.map(
      (c) =>
        `  ${c.tags[0] ?? c.id}  ${formatBytes(c.sizeBytes)}  ${c.why === 'age' ? 'past --image-maximum-gc-age' : 'unused'}, last used ${c.lastUsed ?? 'never'}`,
    ),
  ];
  const kept = keptLines(i.kept);
  out.push(kept.length ? 'Not reclaimable, and why:' : 'Not reclaimable: nothing kept.', ...kept);
  if (r.pressure) {
    out.push(`Eviction signals (${r.pressure.layout}):`);
    for (const s of r.pressure.signals)
      out.push(
        `  ${s.signal}: ${amount(s.signal, s.available)} available; the kubelet evicts below ${amount(s.signal, s.threshold)} (${s.toEviction >= 0 ? `${amount(s.signal, s.toEviction)} away` : `past it by ${amount(s.signal, -s.toEviction)}`}); kubegc reclaims below ${amount(s.signal, s.reclaimStart)}`,
      );
  } else out.push('Eviction signals: pressure reclaim is off (--eviction-hard empty)');
  return `${out.join('\n')}\n`;
}
