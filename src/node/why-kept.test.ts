import type { ImageGcPlan, ImageInfo } from './image-gc-policy.ts';
import { DEFAULT_IMAGE_GC_POLICY } from './image-gc-policy.ts';
import {
  imageUsersIndex,
  keptBreakdown,
  keptBytes,
  keptNote,
  removedExpectedBackNote,
  withSharedLayers,
  SHORT_REASONS,
} from './why-kept.ts';

const MB = 1_000_000;
const image = (id: string, tag: string, sizeBytes: number): ImageInfo => ({
  id,
  repoTags: [tag],
  repoDigests: [],
  sizeBytes,
  pinned: false,
});

const plan = (): ImageGcPlan => ({
  protected: [
    { image: image('u1', 'docker.io/library/web:1', 30 * MB), protection: { reason: 'in-use' } },
    { image: image('u2', 'docker.io/library/api:2', 20 * MB), protection: { reason: 'in-use' } },
    {
      image: image('p', 'registry.k8s.io/pause:3.10', 1 * MB),
      protection: { reason: 'sandbox-image' },
    },
    {
      image: image('k', 'docker.io/library/keep:1', 5 * MB),
      protection: { reason: 'pinned-images', pattern: 'docker.io/library/keep:*' },
    },
  ],
  age: [],
  space: [],
  tooYoung: [
    { image: image('y2', 'docker.io/library/new:2', 4 * MB), record: { firstDetectedMs: 2000 } },
    { image: image('y1', 'docker.io/library/new:1', 3 * MB), record: { firstDetectedMs: 1000 } },
  ],
});

const users = imageUsersIndex([
  { names: ['docker.io/library/web:1'], pod: 'shop/web-1' },
  { names: ['docker.io/library/web:1'], pod: 'shop/web-0' },
  { names: ['docker.io/library/api:2'], pod: 'shop/api-0' },
  { names: ['docker.io/library/web:1'], pod: 'shop/web-1' },
]);

test('each reason with its images, bytes and who keeps them; the minimum age ordered by when it ends', () => {
  const kept = keptBreakdown(plan(), { users, policy: DEFAULT_IMAGE_GC_POLICY });
  expect(kept).toEqual({
    'in-use': { images: 2, bytes: 50 * MB, by: ['shop/web-0', 'shop/web-1', 'shop/api-0'] },
    'sandbox-image': { images: 1, bytes: 1 * MB, by: ['registry.k8s.io/pause:3.10'] },
    'pinned-images': { images: 1, bytes: 5 * MB, by: ['docker.io/library/keep:*'] },
    'too-young': {
      images: 2,
      bytes: 7 * MB,
      by: [new Date(1000 + 120_000).toISOString(), new Date(2000 + 120_000).toISOString()],
    },
  });
  expect(keptNote(kept)).toBe(
    'in use 50.0 MB in 2 images (by shop/web-0, shop/web-1, shop/api-0); ' +
      'the sandbox image 1.0 MB in 1 image (registry.k8s.io/pause:3.10); ' +
      'matching --pinned-images 5.0 MB in 1 image (patterns docker.io/library/keep:*); ' +
      'younger than --image-minimum-gc-age 7.0 MB in 2 images (the first old enough at 1970-01-01T00:02:01.000Z)',
  );
});

test('a note names at most three who keep a group, and how many more', () => {
  const many = imageUsersIndex(
    ['a', 'b', 'c', 'd', 'e'].map((p) => ({ names: ['docker.io/library/web:1'], pod: `ns/${p}` })),
  );
  const kept = keptBreakdown(
    { ...plan(), protected: plan().protected.slice(0, 1), tooYoung: [] },
    { users: many, policy: DEFAULT_IMAGE_GC_POLICY },
  );
  expect(keptNote(kept)).toBe('in use 30.0 MB in 1 image (by ns/a, ns/b, ns/c, +2 more)');
});

test('shared layers: the reported bytes of removed images the disk did not give back; none for a dry run or when the disk gave it all', () => {
  expect(
    withSharedLayers(
      {},
      { removed: 2, reportedFreedBytes: 18 * MB, measuredFreedBytes: 2 * MB, dryRun: false },
    ),
  ).toEqual({ 'shared-layers': { images: 2, bytes: 16 * MB, by: [] } });
  expect(keptNote({ 'shared-layers': { images: 2, bytes: 16 * MB, by: [] } })).toBe(
    'removed but not freed on disk 16.0 MB of 2 removed images',
  );
  expect(
    withSharedLayers(
      {},
      { removed: 2, reportedFreedBytes: 18 * MB, measuredFreedBytes: 0, dryRun: true },
    ),
  ).toEqual({});
  expect(
    withSharedLayers(
      {},
      { removed: 1, reportedFreedBytes: 5 * MB, measuredFreedBytes: 6 * MB, dryRun: false },
    ),
  ).toEqual({});
  // The disk went down (another writer): all that was reported counts as not freed, no more.
  expect(
    withSharedLayers(
      {},
      { removed: 1, reportedFreedBytes: 5 * MB, measuredFreedBytes: -3 * MB, dryRun: false },
    )['shared-layers']?.bytes,
  ).toBe(5 * MB);
});

test('images expected back: kept unless the pass removed them, by their workload', () => {
  const back = (id: string, size: number, workload: string) => ({
    candidate: {
      image: image(id, `docker.io/library/${id}:1`, size),
      record: { firstDetectedMs: 0 },
    },
    workload,
  });
  const p: ImageGcPlan = {
    ...plan(),
    protected: [],
    tooYoung: [],
    expectedBack: [
      back('nightly', 10 * MB, 'CronJob shop/nightly'),
      back('report', 4 * MB, 'CronJob shop/nightly'),
      back('web', 2 * MB, 'Deployment shop/web'),
    ],
  };
  const kept = keptBreakdown(p, {
    users,
    policy: DEFAULT_IMAGE_GC_POLICY,
    removed: new Set(['web']),
  });
  expect(kept).toEqual({
    'expected-back': { images: 2, bytes: 14 * MB, by: ['CronJob shop/nightly'] },
  });
  expect(keptNote(kept)).toBe('expected back 14.0 MB in 2 images (by CronJob shop/nightly)');
  expect(keptBytes(kept)['expected-back']).toBe(14 * MB);
});

test('the images expected back a pass removed: named with their workloads', () => {
  expect(removedExpectedBackNote([{}, { expectedBack: 'CronJob shop/nightly' }], false)).toBe(
    'removed 1 expected-back image (CronJob shop/nightly): nothing else freed enough',
  );
  expect(
    removedExpectedBackNote(
      ['a', 'b', 'a', 'c', 'd'].map((n) => ({ expectedBack: `CronJob shop/${n}` })),
      true,
    ),
  ).toBe(
    'would remove 5 expected-back images (CronJob shop/a, CronJob shop/b, CronJob shop/c, +1 more): nothing else freed enough',
  );
  expect(removedExpectedBackNote([{}], false)).toBe('');
});

test('the metric values: every reason present, 0 where nothing is kept (a bounded label set)', () => {
  const bytes = keptBytes({ 'in-use': { images: 1, bytes: 7, by: [] } });
  expect(Object.keys(bytes)).toEqual([...SHORT_REASONS]);
  expect(bytes['in-use']).toBe(7);
  expect(bytes['too-young']).toBe(0);
  expect(keptNote({})).toBe('');
});
