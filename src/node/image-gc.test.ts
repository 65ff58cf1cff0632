// One image pass over a runtime in memory whose answers have CRI-O's shapes
// (image IDs without "sha256:", untagged repo@digest images, a pinned pause
// image, sizes that count a shared layer in every image that has it). The
// real-runtime proof is test/e2e/node-gc.test.ts (containerd).
import {
  FakeRuntime,
  quietLog,
  recordingEvents,
  testMetrics,
} from '../../test/support/fake-cri-runtime.ts';
import { FilesystemError, ImageGarbageCollector, type ImageGcOptions } from './image-gc.ts';
import { diskReport, renderDiskReport } from './disk-report.ts';
import { DEFAULT_IMAGE_GC_POLICY } from './image-gc-policy.ts';
import {
  ExpectedBackChecker,
  summarizeWorkload,
  type RawWorkload,
  type WorkloadReader,
} from './expected-back.ts';
import type { NodePod, PodLister } from './pods.ts';
import { saveStateFile } from './state-file.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const MB = 1_000_000;
const HOUR = 3_600_000;
const NOW = 1_800_000_000_000;

// CRI-O's IDs are bare hex digests.
const hex = (c: string): string => c.repeat(64).slice(0, 64);

function collector(rt: FakeRuntime, o: Partial<ImageGcOptions> = {}) {
  const events = recordingEvents();
  const { metrics, registry } = testMetrics();
  const clock = { t: NOW - HOUR };
  const gc = new ImageGarbageCollector(
    rt.connection(),
    rt.imageGcOptions({
      policy: { ...DEFAULT_IMAGE_GC_POLICY, highThresholdPercent: 85, lowThresholdPercent: 80 },
      now: () => clock.t,
      ...o,
    }),
    quietLog,
    metrics,
    events,
  );
  return { gc, events, registry, clock };
}

/** Every image first detected an hour ago: the minimum age no longer protects any. */
async function aged(c: { gc: ImageGarbageCollector; clock: { t: number } }, rt: FakeRuntime) {
  await c.gc.detectImages(await rt.connection().get());
  c.clock.t = NOW;
}

function podLister(pods: NodePod[]): PodLister {
  return { nodePods: () => Promise.resolve(pods) };
}

describe('a pass on CRI-O-shaped answers', () => {
  // 100 MB disk, 70 MB used by other things: 30 MB of images take it to 100%.
  // Three images share one 8 MB base layer: each reports 8 + its own 1 MB.
  const shared = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 70 * MB)
      .addImage({
        id: hex('a'),
        repoTags: ['docker.io/library/app-a:1'],
        layers: { base: 8 * MB, a: 1 * MB },
      })
      .addImage({
        id: hex('b'),
        repoTags: ['docker.io/library/app-b:1'],
        layers: { base: 8 * MB, b: 1 * MB },
      })
      .addImage({
        id: hex('c'),
        repoDigests: ['quay.io/team/app-c@sha256:' + hex('9')],
        layers: { base: 8 * MB, c: 1 * MB },
      })
      .addImage({
        id: hex('p'),
        repoTags: ['registry.k8s.io/pause:3.10'],
        pinned: true,
        layers: { pause: 1 * MB },
      })
      .addImage({
        id: hex('k'),
        repoTags: ['docker.io/library/hubkeep:1.0'],
        layers: { keep: 2 * MB },
      })
      .addImage({
        id: hex('r'),
        repoTags: ['docker.io/library/running:1'],
        layers: { run: 3 * MB },
      })
      .addContainer('ctr-run', 'docker.io/library/running:1');

  test('the sizes say "enough" after one image, the disk does not: it goes on by the sizes for what the disk still lacked, once, and reports the rest', async () => {
    const rt = shared();
    // Images: 8+1+1+1+1+2+3 = 17 MB on disk; used 87% ≥ 85; low 80% wants 7 MB back.
    expect(rt.imageDiskBytes()).toBe(17 * MB);
    const c = collector(rt, { pinnedImages: ['hubkeep:*'] });
    const { gc, events } = c;
    await aged(c, rt);
    const r = await gc.run();
    expect(r.usagePercentBefore).toBe(87);
    expect(r.wantedBytes).toBe(7 * MB);
    // app-a reports 9 MB (≥ 7 MB wanted, the kubelet's stop) but frees 1 MB;
    // the disk still lacks 6 MB: app-b (9 MB by its size) and no more.
    expect(rt.removed).toEqual([hex('a'), hex('b')]);
    expect(r.measuredFreedBytes).toBe(2 * MB);
    expect(r.shortfallBytes).toBe(5 * MB);
    expect(events.seen.map((e) => e.reason)).toEqual(['FreeDiskSpaceFailed']);
    expect(events.seen[0]?.note).toContain(
      "stopped where the runtime's sizes said enough and then once more by what the disk lacked, keeping 1 eligible images",
    );
    // Kept: the pinned pause image, a running container's image, a --pinned-images short name.
    expect([...rt.images.keys()].sort()).toEqual([hex('c'), hex('k'), hex('p'), hex('r')].sort());
    // The next pass measures again (85%: 5 MB wanted) and app-c takes the shared layer with it.
    const next = await gc.run();
    expect(next.wantedBytes).toBe(5 * MB);
    expect(rt.removed).toEqual([hex('a'), hex('b'), hex('c')]);
    expect(next.measuredFreedBytes).toBe(9 * MB);
    expect(next.shortfallBytes).toBe(0);
  });

  test('nothing eligible is left and the disk is short: the shortfall and FreeDiskSpaceFailed come from the disk, not the sizes', async () => {
    const rt = shared();
    rt.otherUsedBytes = 76 * MB; // 93% used: low 80% wants 13 MB, the sharers hold 11 MB
    const c = collector(rt, { pinnedImages: ['hubkeep:*'] });
    const { gc, events, registry } = c;
    await aged(c, rt);
    const r = await gc.run();
    // Reported sizes: 27 MB "freed" (≥ 13 MB wanted), disk: 11 MB.
    expect(r.reportedFreedBytes).toBe(27 * MB);
    expect(r.measuredFreedBytes).toBe(11 * MB);
    expect(r.shortfallBytes).toBe(2 * MB);
    expect(events.seen.map((e) => e.reason)).toEqual(['FreeDiskSpaceFailed']);
    expect(events.seen[0]?.note).toContain(
      'wanted to free 13000000 bytes, but freed 11000000 bytes',
    );
    expect(
      await registry.getSingleMetricAsString('kubegc_node_image_gc_shortfall_bytes'),
    ).toContain(`kubegc_node_image_gc_shortfall_bytes ${2 * MB}`);
  });

  test('a pass that ends short says why, per reason with bytes and who keeps them, in FreeDiskSpaceFailed and in kubegc_node_image_kept_bytes', async () => {
    const rt = shared();
    rt.otherUsedBytes = 76 * MB;
    const pods: NodePod[] = [
      { uid: 'u1', ref: 'shop/web-0', phase: 'Pending', evicted: false, images: ['hubkeep:1.0'] },
      { uid: 'u2', ref: 'shop/done', phase: 'Succeeded', evicted: false, images: ['app-a:1'] },
    ];
    const c = collector(rt, { pinnedImages: ['running:*'], pods: podLister(pods) });
    await aged(c, rt);
    // Pulled just now: younger than the 2-minute minimum age.
    rt.addImage({ id: hex('y'), repoTags: ['docker.io/library/fresh:1'], layers: { y: 4 * MB } });
    rt.otherUsedBytes = 72 * MB;
    const r = await c.gc.run();
    expect(r.shortfallBytes).toBeGreaterThan(0);
    const note = c.events.seen.find((e) => e.reason === 'FreeDiskSpaceFailed')?.note ?? '';
    const left = note.slice(note.indexOf('; left: ') + '; left: '.length).split('; ');
    expect(left).toEqual([
      // A Pending pod's image and a running container's; the Succeeded pod protects nothing.
      'in use 5.0 MB in 2 images (by shop/web-0, container ctr-run)',
      'pinned by the runtime 1.0 MB in 1 image (registry.k8s.io/pause:3.10)',
      'younger than --image-minimum-gc-age 4.0 MB in 1 image (the first old enough at ' +
        new Date(NOW + 120_000).toISOString() +
        ')',
      // app-a, app-b and app-c report 27 MB; the disk gave back 11 (their shared base layer counted three times).
      'removed but not freed on disk 16.0 MB of 3 removed images',
    ]);
    const metric = await c.registry.getSingleMetricAsString('kubegc_node_image_kept_bytes');
    for (const line of [
      `kubegc_node_image_kept_bytes{reason="in-use"} ${5 * MB}`,
      `kubegc_node_image_kept_bytes{reason="pinned-by-runtime"} ${1 * MB}`,
      `kubegc_node_image_kept_bytes{reason="too-young"} ${4 * MB}`,
      `kubegc_node_image_kept_bytes{reason="shared-layers"} ${16 * MB}`,
      'kubegc_node_image_kept_bytes{reason="pinned-images"} 0',
      'kubegc_node_image_kept_bytes{reason="sandbox-image"} 0',
    ])
      expect(metric).toContain(line);
  });

  test('explain: what a pass would find now (reclaimable in its order, kept and why), removing and recording nothing', async () => {
    const rt = shared();
    const c = collector(rt, { pinnedImages: ['hubkeep:*'] });
    await aged(c, rt);
    const recordsBefore = c.gc.imageRecords();
    c.clock.t = NOW + HOUR;
    const e = await c.gc.explain();
    expect(rt.removed).toEqual([]);
    expect(c.gc.imageRecords()).toEqual(recordsBefore);
    expect(e).toMatchObject({ usagePercent: 87, wantedBytes: 7 * MB, highThresholdPercent: 85 });
    expect(e.reclaimable.map((r) => [r.id, r.why, r.sizeBytes])).toEqual([
      [hex('a'), 'space', 9 * MB],
      [hex('b'), 'space', 9 * MB],
      [hex('c'), 'space', 9 * MB],
    ]);
    expect(e.kept).toEqual({
      'in-use': { images: 1, bytes: 3 * MB, by: ['container ctr-run'] },
      'pinned-by-runtime': { images: 1, bytes: 1 * MB, by: ['registry.k8s.io/pause:3.10'] },
      'pinned-images': { images: 1, bytes: 2 * MB, by: ['hubkeep:*'] },
    });
    // The text an operator reads (kubegc explain node/NAME) names each reason and who keeps it.
    const text = renderDiskReport(diskReport('worker-1', NOW, e, undefined));
    for (const line of [
      'Reclaimable: 27.0 MB in 3 images, in the order a pass removes them:',
      '  in use 3.0 MB in 1 image',
      '    container ctr-run',
      '  matching --pinned-images 2.0 MB in 1 image',
      '    hubkeep:*',
      'Eviction signals: pressure reclaim is off (--eviction-hard empty)',
    ])
      expect(text.split('\n')).toContain(line);
  });

  test('an untagged repo@digest image and a bare-hex ID are removed by that ID', async () => {
    const rt = new FakeRuntime(100 * MB, 85 * MB).addImage({
      id: hex('c'),
      repoDigests: ['quay.io/team/app-c@sha256:' + hex('9')],
      layers: { c: 10 * MB },
    });
    const c = collector(rt);
    const { gc } = c;
    await aged(c, rt);
    await gc.run();
    expect(rt.removed).toEqual([hex('c')]);
  });

  test('a failed RemoveImage is counted and logged; the pass goes on with the next image', async () => {
    const rt = shared();
    rt.failRemoval.set(hex('a'), 'image is in use by a container');
    const c = collector(rt, { pinnedImages: ['hubkeep:*'] });
    const { gc, registry } = c;
    await aged(c, rt);
    const r = await gc.run();
    expect(rt.removed).not.toContain(hex('a'));
    expect(rt.removed).toEqual(expect.arrayContaining([hex('b'), hex('c')]));
    expect(r.removed.map((x) => x.id)).not.toContain(hex('a'));
    expect(await registry.getSingleMetricAsString('kubegc_node_gc_errors_total')).toContain(
      'kubegc_node_gc_errors_total{gc="image",kind="remove"} 1',
    );
  });

  test('a container started on a candidate between the listing and its removal keeps it (the re-list before each removal)', async () => {
    const rt = new FakeRuntime(100 * MB, 80 * MB)
      .addImage({ id: hex('a'), repoTags: ['docker.io/library/app-a:1'], layers: { a: 5 * MB } })
      .addImage({ id: hex('b'), repoTags: ['docker.io/library/app-b:1'], layers: { b: 5 * MB } });
    const c = collector(rt, { inUseRecheckMs: 0 });
    await aged(c, rt);
    // app-a is first in LRU order (same ages, listed first); a container starts on it
    // after the pass has listed containers, before its removal.
    const client = await rt.connection().get();
    const listContainers = client.listContainers.bind(client);
    let calls = 0;
    client.listContainers = () => {
      if (++calls === 2) rt.addContainer('late', 'docker.io/library/app-a:1');
      return listContainers();
    };
    const gc = c.gc;
    const r = await gc.run();
    expect(rt.images.has(hex('a'))).toBe(true);
    expect(r.removed.map((x) => x.id)).toEqual([hex('b')]);
  });
});

describe('the space pass when the disk does not follow the removals', () => {
  // 100 MB, 70 MB used by other things, eight unused 2 MB images: 86% used, the
  // low threshold (80%) wants 6 MB back, three images by their sizes (the kubelet's stop).
  const eight = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 70 * MB).addApps(8, 2 * MB, (i) => hex(String(i)));

  test.each([
    // Writes as much as each removal frees: the disk never moves, so nothing
    // tells by how much the sizes overstate; the kubelet's three, and no more.
    [2 * MB, 3, 6 * MB],
    // Writes half: 3 MB freed after three, 3 MB still lacking, two more by
    // their sizes (4 MB), then stop: five.
    [1 * MB, 5, 1 * MB],
  ])(
    'another writer filling the disk (%d bytes per removal): it stops after the sizes and one more measure (%d of 8 removed), and reports the shortfall',
    async (written, removed, shortfall) => {
      const rt = eight();
      rt.beforeRemove = () => {
        rt.otherUsedBytes += written;
      };
      const c = collector(rt);
      await aged(c, rt);
      const r = await c.gc.run();
      expect(r.wantedBytes).toBe(6 * MB);
      expect(rt.removed).toHaveLength(removed);
      expect(rt.images.size).toBe(8 - removed);
      expect(r.shortfallBytes).toBe(shortfall);
      expect(c.events.seen.map((e) => e.reason)).toEqual(['FreeDiskSpaceFailed']);
      expect(c.events.seen[0]?.note).toContain(`keeping ${8 - removed} eligible images`);
      expect(
        await c.registry.getSingleMetricAsString('kubegc_node_image_gc_shortfall_bytes'),
      ).toContain(`kubegc_node_image_gc_shortfall_bytes ${shortfall}`);
    },
  );

  test("statfs of a filesystem the images are not on (the same device, so the start check cannot tell): the kubelet's three, then a shortfall that says the disk did not move", async () => {
    const rt = eight();
    const c = collector(rt, {
      statfs: () => Promise.resolve({ capacityBytes: 100 * MB, availableBytes: 14 * MB }),
    });
    await aged(c, rt);
    const r = await c.gc.run();
    expect(r.wantedBytes).toBe(6 * MB);
    expect(rt.removed).toEqual([hex('0'), hex('1'), hex('2')]);
    expect(r.shortfallBytes).toBe(6 * MB);
    expect(c.events.seen[0]?.note).toContain(
      'the disk did not move while images the runtime sizes at 6000000 bytes went: another writer may be filling it, or /var/lib/containers/storage is not where the images are',
    );
  });

  test.each([
    [
      'empty (the host directory not mounted there)',
      { device: 7n, entries: [] },
      "the image filesystem /var/lib/containers/storage (ImageFsInfo) is empty as kubegc sees it: the runtime's image store is not there",
    ],
    [
      'holding files of another device (a filesystem mounted below it)',
      { device: 7n, entries: [{ name: 'overlay-images', device: 9n }] },
      '/var/lib/containers/storage/overlay-images is on device 9, but /var/lib/containers/storage (ImageFsInfo), which statfs measures, is on device 7',
    ],
  ])(
    'the mountpoint ImageFsInfo names is %s: the pass is refused with a filesystem error saying so, nothing removed',
    async (_what, view, message) => {
      const rt = eight();
      rt.storeView = view;
      const c = collector(rt);
      await aged(c, rt);
      const err = await c.gc.run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FilesystemError);
      expect(err instanceof Error ? err.message : '').toContain(message);
      expect(rt.removed).toEqual([]);
    },
  );
});

describe('pressure reclaim on an inode signal (no byte figure)', () => {
  test('removes least recently used images until the filesystem says enough; a dry run names every eligible image, as DeleteUnusedImages would remove', async () => {
    const build = (): FakeRuntime => {
      const rt = new FakeRuntime(100 * MB, 10 * MB).addApps(4, 1 * MB, (i) => hex(String(i)));
      rt.inodes = { capacity: 1000, otherUsed: 800, perLayer: 30 };
      return rt;
    };
    const done = (fs: { inodesFree?: number }): boolean => (fs.inodesFree ?? 0) >= 150;
    const rt = build(); // 4 × 30 inodes: 80 free; 150 wanted → three images
    const c = collector(rt);
    await aged(c, rt);
    const r = await c.gc.run({ reclaim: { done } });
    expect(rt.removed).toEqual([hex('0'), hex('1'), hex('2')]);
    expect(r.removed.map((x) => x.reason)).toEqual(['pressure', 'pressure', 'pressure']);

    const dry = build();
    const d = collector(dry, { dryRun: true });
    await aged(d, dry);
    const dr = await d.gc.run({ reclaim: { done } });
    expect(dry.removed).toEqual([]);
    expect(dr.removed).toHaveLength(4);
  });
});

describe('images of pods bound to this node', () => {
  const rt = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 85 * MB)
      .addImage({ id: hex('n'), repoTags: ['docker.io/library/next:2'], layers: { n: 5 * MB } })
      .addImage({ id: hex('o'), repoTags: ['docker.io/library/old:1'], layers: { o: 5 * MB } });

  test('a Pending pod whose container does not exist yet: its image (named short) is in use; a Succeeded pod protects nothing', async () => {
    const r = rt();
    const pods: NodePod[] = [
      { uid: 'p1', phase: 'Pending', evicted: false, images: ['next:2'] },
      { uid: 'p2', phase: 'Succeeded', evicted: false, images: ['old:1'] },
    ];
    const c = collector(r, { pods: podLister(pods) });
    const { gc } = c;
    await aged(c, r);
    const res = await gc.run();
    expect(r.images.has(hex('n'))).toBe(true);
    expect(res.removed.map((x) => x.id)).toEqual([hex('o')]);
  });

  // As containerd reports an image pulled by tag (with its digest) and one
  // pulled by tag+digest (digest only: ParseDockerRef drops the tag).
  const digest = (c: string): string => `sha256:${hex(c)}`;
  const spelled = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 85 * MB)
      .addImage({
        id: hex('t'),
        repoTags: ['docker.io/library/nginx:1.25'],
        repoDigests: [`docker.io/library/nginx@${digest('1')}`],
        layers: { t: 5 * MB },
      })
      .addImage({
        id: hex('d'),
        repoDigests: [`docker.io/library/redis@${digest('2')}`],
        layers: { d: 5 * MB },
      })
      .addImage({ id: hex('o'), repoTags: ['docker.io/library/old:1'], layers: { o: 5 * MB } });

  test.each([
    ['docker.io/nginx:1.25', `redis:7@${digest('2')}`],
    ['index.docker.io/library/nginx:1.25', `docker.io/redis@${digest('2')}`],
    [`nginx:1.25@${digest('1')}`, `index.docker.io/redis:7@${digest('2')}`],
  ])(
    'a Pending pod naming %s and %s protects the images the runtime reports under the normalised names',
    async (...refs) => {
      const r = spelled();
      const c = collector(r, {
        pods: podLister([{ uid: 'p1', phase: 'Pending', evicted: false, images: refs }]),
      });
      await aged(c, r);
      const res = await c.gc.run();
      expect(res.removed.map((x) => x.id)).toEqual([hex('o')]);
      expect([...r.images.keys()].sort()).toEqual([hex('d'), hex('t')]);
    },
  );

  test.each([
    ['docker.io/nginx:*', `docker.io/redis@${digest('2')}`],
    ['docker.io/nginx:1.25', 'index.docker.io/redis@sha256:*'],
    ['docker.io/library/nginx:1.*', `redis:7@${digest('2')}`],
    [`nginx@${digest('1')}`, 'docker.io/redis*'],
  ])('--pinned-images=%s,%s pins the images reported as docker.io/library/…', async (...pins) => {
    const r = spelled();
    const c = collector(r, { pinnedImages: pins });
    await aged(c, r);
    const res = await c.gc.run();
    expect(res.removed.map((x) => x.id)).toEqual([hex('o')]);
    expect([...r.images.keys()].sort()).toEqual([hex('d'), hex('t')]);
  });

  test('--pinned-images=docker.io/nginx pins docker.io/library/nginx:latest, not other tags', async () => {
    const r = spelled().addImage({
      id: hex('l'),
      repoTags: ['docker.io/library/nginx:latest'],
      layers: { l: 5 * MB },
    });
    r.otherUsedBytes = 80 * MB; // full: every unprotected image must go
    const c = collector(r, { pinnedImages: ['docker.io/nginx'] });
    await aged(c, r);
    const res = await c.gc.run();
    expect(res.removed.map((x) => x.id).sort()).toEqual([hex('d'), hex('o'), hex('t')]);
    expect([...r.images.keys()]).toEqual([hex('l')]);
  });

  test('a list that fails after one that worked: the pods listed last still protect their images (the API server unreachable)', async () => {
    const r = rt();
    let calls = 0;
    const pods: NodePod[] = [{ uid: 'p1', phase: 'Pending', evicted: false, images: ['next:2'] }];
    const c = collector(r, {
      pods: {
        nodePods: () =>
          ++calls === 1 ? Promise.resolve(pods) : Promise.reject(new Error('timed out')),
      },
    });
    await aged(c, r); // the list works here
    const res = await c.gc.run(); // and fails here: 85% used, both images old enough
    expect(calls).toBe(2);
    expect(r.images.has(hex('n'))).toBe(true);
    expect(res.removed.map((x) => x.id)).toEqual([hex('o')]);
  });

  test('without the pod list the pass goes on, protected by the minimum age only (and says so)', async () => {
    const r = rt();
    const c = collector(r, {
      pods: { nodePods: () => Promise.reject(new Error('503 Service Unavailable')) },
    });
    const { gc, registry } = c;
    await aged(c, r);
    await gc.run();
    expect(await registry.getSingleMetricAsString('kubegc_node_gc_errors_total')).toContain(
      'kubegc_node_gc_errors_total{gc="image",kind="api"}',
    );
  });
});

describe('images of image volumes (KEP-4639): mounted, named by no container', () => {
  // The app image is used by the containers; the volume images by no container.
  const rt = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 80 * MB)
      .addImage({ id: hex('a'), repoTags: ['docker.io/library/app:1'], layers: { a: 5 * MB } })
      .addImage({ id: hex('v'), repoTags: ['docker.io/team/data:1'], layers: { v: 5 * MB } })
      .addImage({ id: hex('j'), repoTags: ['docker.io/library/job-data:1'], layers: { j: 5 * MB } })
      .addImage({
        id: hex('g'),
        repoTags: ['docker.io/library/gone-data:1'],
        layers: { g: 5 * MB },
      });
  const pods: NodePod[] = [
    {
      uid: 'web',
      phase: 'Running',
      evicted: false,
      images: ['app:1'],
      volumeImages: ['team/data:1'],
    },
    // A finished Job whose exited container is still on the node: the kubelet
    // sees the mount in its ContainerStatus and keeps the image.
    {
      uid: 'job',
      phase: 'Succeeded',
      evicted: false,
      images: ['app:1'],
      volumeImages: ['docker.io/job-data:1'],
    },
    // A finished pod whose containers are gone: nothing mounts its volume image.
    {
      uid: 'done',
      phase: 'Failed',
      evicted: false,
      images: ['app:1'],
      volumeImages: ['gone-data:1'],
    },
  ];

  test('the image volumes of a running pod and of a terminated pod whose exited container remains are kept; that of a terminated pod without containers goes', async () => {
    const r = rt()
      .addPodContainer('web-1', 'web', 'app', 'running', NOW - HOUR)
      .addPodContainer('job-1', 'job', 'app', 'exited', NOW - HOUR);
    const c = collector(r, { pods: podLister(pods) });
    await aged(c, r);
    const res = await c.gc.run();
    // Full disk: every image not in use goes, least recently used first.
    expect(res.removed.map((x) => x.id)).toEqual([hex('g')]);
    expect([...r.images.keys()].sort()).toEqual([hex('a'), hex('j'), hex('v')].sort());
  });

  test('a Pending pod before its first container: its image volume is kept', async () => {
    const r = rt();
    const c = collector(r, {
      pods: podLister([
        {
          uid: 'p',
          phase: 'Pending',
          evicted: false,
          images: [],
          volumeImages: ['index.docker.io/team/data:1'],
        },
      ]),
    });
    await aged(c, r);
    const res = await c.gc.run();
    expect(res.removed.map((x) => x.id).sort()).toEqual([hex('a'), hex('g'), hex('j')].sort());
    expect([...r.images.keys()]).toEqual([hex('v')]);
  });
});

describe('image ages and a fresh pull under a known ID', () => {
  const one = (): FakeRuntime =>
    new FakeRuntime(100 * MB, 85 * MB).addImage({
      id: hex('a'),
      repoTags: ['docker.io/library/app-a:1'],
      layers: { a: 10 * MB },
    });

  test('ages loaded from the state file keep their order and date the minimum age: under pressure right after a restart a recorded image can go, an image new since cannot', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kubegc-state-'));
    const stateFile = path.join(dir, 'state.json');
    // An hour-old record of the image, from before a restart.
    await saveStateFile(stateFile, new Map([[hex('a'), { firstDetectedMs: NOW - HOUR }]]));
    // Above the high threshold: the space pass wants 5 MB; b is new since the restart.
    const rt = one().addImage({
      id: hex('b'),
      repoTags: ['docker.io/library/app-b:1'],
      layers: { b: 10 * MB },
    });
    const c = collector(rt, { stateFile });
    c.clock.t = NOW;
    const pass = await c.gc.run();
    // The recorded age (an hour, past the 2-minute minimum) is kept: the
    // restart does not make the image young again.
    expect(pass.removed).toEqual([expect.objectContaining({ id: hex('a'), reason: 'space' })]);
    expect(rt.removed).toEqual([hex('a')]);
    expect(c.gc.imageRecords().get(hex('b'))?.firstDetectedMs).toBe(NOW);
    await rm(dir, { recursive: true, force: true });
  });

  test('after a restart with --state-file, an image unused for 10 days is not removed for age until --image-maximum-gc-age after the start', async () => {
    const DAY = 24 * HOUR;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kubegc-state-'));
    const stateFile = path.join(dir, 'state.json');
    await saveStateFile(
      stateFile,
      new Map([[hex('a'), { firstDetectedMs: NOW - 20 * DAY, lastUsedMs: NOW - 10 * DAY }]]),
    );
    // Usage below the high threshold: only the age pass could remove it.
    const rt = new FakeRuntime(100 * MB, 10 * MB).addImage({
      id: hex('a'),
      repoTags: ['docker.io/library/app-a:1'],
      layers: { a: 10 * MB },
    });
    const c = collector(rt, {
      stateFile,
      policy: { ...DEFAULT_IMAGE_GC_POLICY, maxAgeMs: DAY },
    });
    c.clock.t = NOW;
    const first = await c.gc.run();
    expect(first.removed).toEqual([]);
    expect(rt.removed).toEqual([]);
    c.clock.t = NOW + DAY;
    await c.gc.run();
    expect(rt.removed).toEqual([]);
    c.clock.t = NOW + DAY + 1;
    const due = await c.gc.run();
    expect(due.removed).toEqual([expect.objectContaining({ id: hex('a'), reason: 'age' })]);
    await rm(dir, { recursive: true, force: true });
  });

  test('removed by someone else and pulled again between two passes: the listing between passes sees it gone and new', async () => {
    const rt = one();
    const c = collector(rt);
    await aged(c, rt); // detected an hour ago
    const image = rt.images.get(hex('a'));
    rt.images.delete(hex('a'));
    await c.gc.notePresence(); // gone
    if (image) rt.addImage(image); // pulled again, same ID
    await c.gc.notePresence(); // new: detected now
    expect(c.gc.imageRecords().get(hex('a'))?.firstDetectedMs).toBe(NOW);
    await c.gc.run();
    expect(rt.removed).toEqual([]); // younger than the minimum age
  });
});

test('an image filesystem of capacity 0: an InvalidDiskCapacity warning on the Node and a filesystem error, nothing removed', async () => {
  const rt = new FakeRuntime(100 * MB, 90 * MB).addImage({
    id: hex('a'),
    repoTags: ['docker.io/library/app-a:1'],
    layers: { a: 5 * MB },
  });
  const c = collector(rt, {
    statfs: () => Promise.resolve({ capacityBytes: 0, availableBytes: 0 }),
  });
  await aged(c, rt);
  await expect(c.gc.run()).rejects.toThrow(FilesystemError);
  expect(c.events.seen.map((e) => e.reason)).toEqual(['InvalidDiskCapacity']);
  expect(c.events.seen[0]?.note).toContain('invalid capacity 0 on image filesystem');
  expect(rt.removed).toEqual([]);
});

test('a pass asks the image list and the image filesystem at once (one round trip, not two, on a slow runtime)', async () => {
  const rt = new FakeRuntime(100 * MB, 10 * MB);
  rt.addImage({ id: hex('a'), repoTags: ['docker.io/library/a:1'], layers: { a: 5 * MB } });
  const c = collector(rt);
  await aged(c, rt);
  // Each call answers only once both are in flight; asked one after the other, the first never does.
  const arrived = new Set<string>();
  let bothArrived = (): void => undefined;
  const both = new Promise<void>((resolve) => {
    bothArrived = resolve;
  });
  rt.gate = (call) => {
    arrived.add(call);
    if (arrived.size === 2) bothArrived();
    return Promise.race([
      both,
      new Promise<void>((_, reject) =>
        setTimeout(() => reject(new Error(`${call} answered alone`)), 2000).unref(),
      ),
    ]);
  };
  await expect(c.gc.run()).resolves.toBeDefined();
  expect([...arrived].sort()).toEqual(['imageFilesystems', 'listImages']);
});

describe('images expected back (a workload that still names them will pull them again)', () => {
  // 100 MB disk. nightly-tool (10 MB) was last used 3 hours ago by a pod of a
  // CronJob's Job; three fillers (5 MB each) by bare pods' containers 30 minutes ago.
  // In least-recently-used order nightly-tool goes first.
  const NIGHTLY = hex('n');
  const FILLERS = [hex('0'), hex('1'), hex('2')];
  const JOB = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    name: 'nightly-29000000',
    uid: 'job-uid',
  };

  async function node(
    o: {
      otherUsedMb?: number;
      maxAgeMs?: number;
      expectedBack?: boolean;
      maxUnusedMs?: number;
      cronJob?: Record<string, unknown>;
      /** Instead of the one that answers from the CronJob above. */
      reader?: WorkloadReader;
    } = {},
  ) {
    const rt = new FakeRuntime(100 * MB, (o.otherUsedMb ?? 40) * MB)
      .addImage({
        id: NIGHTLY,
        repoTags: ['docker.io/library/nightly-tool:1'],
        layers: { n: 10 * MB },
      })
      .addApps(3, 5 * MB, (i) => FILLERS[i] as string)
      .addContainer('job', 'nightly-tool:1', 'exited');
    let pods: NodePod[] = [
      {
        uid: 'job-pod',
        ref: 'shop/nightly-29000000-x',
        namespace: 'shop',
        controller: JOB,
        phase: 'Succeeded',
        evicted: false,
        images: ['nightly-tool:1'],
      },
    ];
    /** Every workload read, by kind/name. */
    const reads: string[] = [];
    const { metrics, registry } = testMetrics();
    const reader: WorkloadReader = (kind, _ns, name) => {
      reads.push(`${kind}/${name}`);
      const raw: RawWorkload =
        kind === 'Job'
          ? {
              metadata: {
                uid: 'job-uid',
                ownerReferences: [
                  {
                    apiVersion: 'batch/v1',
                    kind: 'CronJob',
                    name: 'nightly',
                    uid: 'cron-uid',
                    controller: true,
                  },
                ],
              },
              spec: { template: { spec: { containers: [{ image: 'nightly-tool:1' }] } } },
              status: { conditions: [{ type: 'Complete', status: 'True' }] },
            }
          : {
              metadata: { uid: 'cron-uid' },
              spec: {
                jobTemplate: {
                  spec: { template: { spec: { containers: [{ image: 'nightly-tool:1' }] } } },
                },
              },
              ...o.cronJob,
            };
      return Promise.resolve({ kind: 'found', summary: summarizeWorkload(kind, raw) });
    };
    const events = recordingEvents();
    const clock = { t: NOW - 3 * HOUR };
    const gc = new ImageGarbageCollector(
      rt.connection(),
      rt.imageGcOptions({
        policy: { ...DEFAULT_IMAGE_GC_POLICY, maxAgeMs: o.maxAgeMs ?? 0 },
        now: () => clock.t,
        pods: { nodePods: () => Promise.resolve(pods) },
        ...(o.expectedBack === false
          ? {}
          : {
              expectedBack: {
                check: new ExpectedBackChecker(o.reader ?? reader, quietLog, metrics, {
                  now: () => clock.t,
                }),
                maxUnusedMs: o.maxUnusedMs ?? 168 * HOUR,
              },
            }),
      }),
      quietLog,
      metrics,
      events,
    );
    // 3 h ago: the Job's pod has just run (its exited container holds the image).
    await gc.detectImages(await rt.connection().get());
    // 30 min ago: the Job and its pod are gone (its history limit), bare pods use the fillers.
    rt.containers = [];
    pods = [];
    for (const i of FILLERS.keys()) rt.addContainer(`bare-${i}`, `app${i}:1`, 'exited');
    clock.t = NOW - 30 * 60_000;
    await gc.detectImages(await rt.connection().get());
    rt.containers = [];
    clock.t = NOW;
    return { rt, gc, reads, registry, events };
  }

  test('the record names the Job that last used it', async () => {
    const n = await node();
    expect(n.gc.imageRecords().get(NIGHTLY)?.lastUser).toEqual({ namespace: 'shop', owner: JOB });
    expect(n.gc.imageRecords().get(FILLERS[0] as string)?.lastUser).toBeUndefined();
  });

  test('the space pass removes the fillers and keeps the CronJob image, though least recently used; its CronJob is read once', async () => {
    const n = await node({ otherUsedMb: 62 }); // 87% used: 7 MB to free
    const r = await n.gc.run();
    expect(n.rt.removed).toEqual([FILLERS[0], FILLERS[1]]);
    expect(n.rt.images.has(NIGHTLY)).toBe(true);
    expect(n.reads).toEqual(['Job/nightly-29000000', 'CronJob/nightly']);
    expect(r.kept['expected-back']).toEqual({
      images: 1,
      bytes: 10 * MB,
      by: ['CronJob shop/nightly'],
    });
    expect(
      await n.registry.getSingleMetricAsString('kubegc_node_expected_back_checks_total'),
    ).toContain('kubegc_node_expected_back_checks_total{result="expected-back"} 1');
  });

  test('when nothing else frees enough it goes too, last, and says it was expected back', async () => {
    const n = await node({ otherUsedMb: 72 }); // 97% used: 17 MB to free, the fillers hold 15
    const r = await n.gc.run();
    expect(n.rt.removed).toEqual([...FILLERS, NIGHTLY]);
    expect(r.removed.map((x) => x.expectedBack)).toEqual([
      undefined,
      undefined,
      undefined,
      'CronJob shop/nightly',
    ]);
    expect(r.kept['expected-back']).toBeUndefined();
  });

  test('under a pressure reclaim too: last, and the removal says so', async () => {
    const n = await node({ otherUsedMb: 72 });
    const r = await n.gc.run({ reclaim: { wantedBytes: 17 * MB, done: () => false } });
    expect(n.rt.removed).toEqual([...FILLERS, NIGHTLY]);
    expect(r.removed.at(-1)).toMatchObject({
      reason: 'pressure',
      expectedBack: 'CronJob shop/nightly',
    });
  });

  test('the age pass never removes it while it is expected back; with --expected-back-images=false it does', async () => {
    const on = await node({ maxAgeMs: 2 * HOUR }); // 40 + 25 MB: below the high threshold
    const r = await on.gc.run();
    expect(on.rt.removed).toEqual([]);
    expect(r.kept['expected-back']?.bytes).toBe(10 * MB);
    expect(await on.registry.getSingleMetricAsString('kubegc_node_image_kept_bytes')).toContain(
      `kubegc_node_image_kept_bytes{reason="expected-back"} ${10 * MB}`,
    );

    const off = await node({ maxAgeMs: 2 * HOUR, expectedBack: false });
    const r2 = await off.gc.run();
    expect(off.rt.removed).toEqual([NIGHTLY]);
    expect(r2.removed).toEqual([expect.objectContaining({ id: NIGHTLY, reason: 'age' })]);
    expect(off.reads).toEqual([]);
  });

  test('a suspended CronJob does not expect it back: the age pass removes it', async () => {
    const n = await node({ maxAgeMs: 2 * HOUR, cronJob: { spec: { suspend: true } } });
    await n.gc.run();
    expect(n.rt.removed).toEqual([NIGHTLY]);
    expect(
      await n.registry.getSingleMetricAsString('kubegc_node_expected_back_checks_total'),
    ).toContain('kubegc_node_expected_back_checks_total{result="not-expected-back"} 1');
  });

  test('--expected-back-max-unused: unused for longer, it is an ordinary candidate, and nothing is read', async () => {
    const n = await node({ maxAgeMs: 2 * HOUR, maxUnusedMs: 150 * 60_000 });
    await n.gc.run();
    expect(n.rt.removed).toEqual([NIGHTLY]);
    expect(n.reads).toEqual([]);
  });

  /** A reader of an API server that never answers; `asked` settles at the first read. */
  function silentApi() {
    let asked = (): void => undefined;
    const first = new Promise<void>((r) => (asked = r));
    const reader: WorkloadReader = () => {
      asked();
      return new Promise(() => undefined);
    };
    return { reader, first };
  }

  test('a pressure reclaim waits at most 2 s for the reads: unanswered, the image is not expected back and goes in its usual order', async () => {
    const api = silentApi();
    const n = await node({ otherUsedMb: 62, reader: api.reader });
    const started = Date.now();
    await n.gc.run({ reclaim: { wantedBytes: 7 * MB, done: () => false } });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(n.rt.removed[0]).toBe(NIGHTLY);
    expect(
      await n.registry.getSingleMetricAsString('kubegc_node_expected_back_checks_total'),
    ).toContain('kubegc_node_expected_back_checks_total{result="unreadable"} 1');
  });

  test('a periodic pass waiting on the reads is cut short for a pressure reclaim (cutShortChecks)', async () => {
    const api = silentApi();
    const n = await node({ otherUsedMb: 62, reader: api.reader });
    expect(n.gc.cutShortChecks()).toBe(0);
    const pass = n.gc.run();
    await api.first;
    expect(n.gc.cutShortChecks()).toBe(1);
    const r = await pass;
    // LRU order: the CronJob's image first, enough on its own.
    expect(n.rt.removed).toEqual([NIGHTLY]);
    expect(r.removed[0]?.expectedBack).toBeUndefined();
  });

  test('a pass that will remove nothing reads nothing', async () => {
    const n = await node(); // below the high threshold, no maximum age
    const r = await n.gc.run();
    expect(r.removed).toEqual([]);
    expect(n.reads).toEqual([]);
  });
});
