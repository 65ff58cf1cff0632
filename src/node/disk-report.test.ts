import { diskReport, renderDiskReport } from './disk-report.ts';
import type { ImageExplanation } from './image-gc.ts';

const MB = 1_000_000;
const images: ImageExplanation = {
  mountpoint: '/var/lib/containerd',
  capacityBytes: 1000 * MB,
  availableBytes: 120 * MB,
  usagePercent: 88,
  highThresholdPercent: 85,
  lowThresholdPercent: 80,
  wantedBytes: 80 * MB,
  reclaimable: [
    {
      id: 'sha256:a',
      tags: ['docker.io/library/old:1'],
      sizeBytes: 30 * MB,
      why: 'age',
      lastUsed: null,
    },
  ],
  kept: {
    'too-young': {
      images: 2,
      bytes: 40 * MB,
      by: ['2026-12-07T10:02:00.000Z', '2026-12-07T10:05:00.000Z'],
    },
  },
};

test('each eviction signal with how far the kubelet is from evicting (past it: by how much)', () => {
  const r = diskReport('worker-1', Date.parse('2026-12-07T10:00:00Z'), images, {
    layout: 'imagefs',
    levels: [
      {
        signal: 'imagefs.available',
        available: 120 * MB,
        threshold: 150 * MB,
        start: 200 * MB,
        target: 250 * MB,
      },
      { signal: 'nodefs.inodesFree', available: 5000, threshold: 1000, start: 2000, target: 3000 },
    ],
  });
  expect(r.schemaVersion).toBe(1);
  expect(r.pressure?.signals.map((s) => [s.signal, s.toEviction])).toEqual([
    ['imagefs.available', -30 * MB],
    ['nodefs.inodesFree', 4000],
  ]);
  const lines = renderDiskReport(r).split('\n');
  expect(lines).toContain(
    '  imagefs.available: 120.0 MB available; the kubelet evicts below 150.0 MB (past it by 30.0 MB); kubegc reclaims below 200.0 MB',
  );
  expect(lines).toContain(
    '  nodefs.inodesFree: 5000 inodes available; the kubelet evicts below 1000 inodes (4000 inodes away); kubegc reclaims below 2000 inodes',
  );
  expect(lines).toContain(
    '  docker.io/library/old:1  30.0 MB  past --image-maximum-gc-age, last used never',
  );
  expect(lines).toContain('  younger than --image-minimum-gc-age 40.0 MB in 2 images');
  expect(lines).toContain('    old enough at 2026-12-07T10:02:00.000Z');
});
