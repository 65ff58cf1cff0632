// The pressure monitor over a runtime in memory: when it reclaims, which
// passes it runs for each layout, and what it reports. The real-node proof
// (a size-limited imagefs beside a real kubelet) is in test/e2e.
import {
  FakeRuntime,
  quietLog,
  recordingEvents,
  testMetrics,
} from '../../test/support/fake-cri-runtime.ts';
import type { ContainerPassResult } from './container-gc.ts';
import { ImageGarbageCollector, type ImageGcOptions } from './image-gc.ts';
import type { NodePod } from './pods.ts';
import type { FsStats } from './image-gc-policy.ts';
import { PressureMonitor, type ReclaimPasses } from './pressure.ts';
import { DEFAULT_EVICTION_HARD, parseEvictionHard } from './pressure-policy.ts';

const MB = 1_000_000;
const NOW = 1_800_000_000_000;
const hex = (c: string): string => c.repeat(64).slice(0, 64);
const THRESHOLDS = parseEvictionHard(DEFAULT_EVICTION_HARD).thresholds;
const IMAGEFS = '/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs';

const containerResult = (n: number): ContainerPassResult => ({
  containers: Array.from({ length: n }, (_, i) => ({ id: `c${i}`, reason: 'pod-terminated' })),
  sandboxes: [],
  podLogDirectories: [],
  logSymlinks: [],
  podsKnown: true,
  kept: [],
  failures: 0,
  dryRun: false,
});

/**
 * A 100 MB disk (imagefs) whose "other" usage the container pass reduces by
 * `containerFrees`; images of 5 MB each, one pinned. `devices` gives the layout.
 */
async function node(o: {
  otherUsedMb: number;
  containerFrees?: number;
  images?: number;
  devices?: { nodefs: bigint; imagefs: bigint; containerfs: bigint };
  nodefs?: FsStats;
  inodes?: FakeRuntime['inodes'];
  /** --max-removals-per-run (0: no cap). */
  cap?: number;
  /** How long the image step waits for a slow container step. */
  headStartMs?: number;
  /** Images (by index) a CronJob's pod last used, and what says whether they are expected back. */
  lastUsedByCronJob?: number[];
  expectedBack?: ImageGcOptions['expectedBack'];
}) {
  const rt = new FakeRuntime(100 * MB, o.otherUsedMb * MB);
  if (o.inodes) rt.inodes = o.inodes;
  for (let i = 0; i < (o.images ?? 6); i++)
    rt.addImage({
      id: hex(String(i)),
      repoTags: [`docker.io/library/img${i}:1`],
      layers: { [`l${i}`]: 5 * MB },
    });
  rt.addImage({
    id: hex('p'),
    repoTags: ['registry.k8s.io/pause:3.10'],
    pinned: true,
    layers: { p: 1 * MB },
  });
  const devices = o.devices ?? { nodefs: 1n, imagefs: 1n, containerfs: 1n };
  if (devices.containerfs !== devices.imagefs)
    rt.containerFs = [{ mountpoint: '/var/lib/kubelet/containers' }];
  const events = recordingEvents();
  const { metrics, registry } = testMetrics();
  const clock = { t: NOW - 3_600_000 };
  let pods: NodePod[] = (o.lastUsedByCronJob ?? []).map((i) => ({
    uid: `pod-${i}`,
    namespace: 'shop',
    controller: { apiVersion: 'batch/v1', kind: 'Job', name: `nightly-2900000${i}`, uid: `j${i}` },
    phase: 'Running',
    evicted: false,
    images: [`img${i}:1`],
  }));
  const images = new ImageGarbageCollector(
    rt.connection(),
    rt.imageGcOptions({
      now: () => clock.t,
      maxRemovalsPerRun: o.cap ?? 0,
      pods: { nodePods: () => Promise.resolve(pods) },
      ...(o.expectedBack ? { expectedBack: o.expectedBack } : {}),
    }),
    quietLog,
    metrics,
    events,
  );
  await images.detectImages(await rt.connection().get());
  pods = [];
  clock.t = NOW;
  const calls: string[] = [];
  const passes: ReclaimPasses = {
    containers: () => {
      calls.push('containers');
      rt.otherUsedBytes -= (o.containerFrees ?? 0) * MB;
      return Promise.resolve(containerResult(o.containerFrees ? 3 : 0));
    },
    images: (reclaim) => {
      calls.push('images');
      return images.run({ reclaim });
    },
  };
  const deviceOf = (path: string): bigint =>
    path === '/var/lib/kubelet'
      ? devices.nodefs
      : path === IMAGEFS
        ? devices.imagefs
        : devices.containerfs;
  /** How many times the filesystems were located (each asks nodefs's device once). */
  const located = { n: 0 };
  const device = (path: string): Promise<bigint> => {
    if (path === '/var/lib/kubelet') located.n++;
    return Promise.resolve(deviceOf(path));
  };
  // nodefs (and whatever shares its device) has its own numbers when given.
  const statfs = (path: string): Promise<FsStats> =>
    o.nodefs && deviceOf(path) === devices.nodefs ? Promise.resolve(o.nodefs) : rt.statfs(path);
  rt.imageFs = [{ mountpoint: IMAGEFS }];
  const monitor = new PressureMonitor(
    rt.connection(),
    {
      thresholds: THRESHOLDS,
      margin: { percent: 5 },
      rootDir: '/var/lib/kubelet',
      dryRun: false,
      statfs,
      device,
      now: () => clock.t,
      ...(o.headStartMs !== undefined ? { containerHeadStartMs: o.headStartMs } : {}),
    },
    quietLog,
    metrics,
    events,
  );
  return { rt, monitor, passes, calls, events, registry, clock, located };
}

test('a slow container step (a slow runtime): the image step starts beside it after a head start, and the reclaim waits for both', async () => {
  const n = await node({ otherUsedMb: 50, headStartMs: 20 }); // 19 MB available
  let release = (): void => undefined;
  const slow = new Promise<void>((r) => {
    release = r;
  });
  const passes: ReclaimPasses = {
    containers: async () => {
      n.calls.push('containers');
      await slow; // until the images are done: without the head start, never
      n.calls.push('containers done');
      return containerResult(3);
    },
    images: async (reclaim) => {
      const r = await n.passes.images(reclaim);
      release();
      return r;
    },
  };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'still waiting'>((r) => {
    timer = setTimeout(() => r('still waiting'), 5_000);
  });
  const r = await Promise.race([n.monitor.check(passes), deadline]);
  clearTimeout(timer);
  release();
  if (r === 'still waiting') throw new Error('the image step waited for the container step');
  expect(n.calls).toEqual(['containers', 'images', 'containers done']);
  expect(r.reclaims).toMatchObject([
    { result: 'recovered', containersRemoved: 3, imagesRemoved: 2, after: 29 * MB },
  ]);
});

// Images: 6 × 5 MB + 1 MB pinned = 31 MB of the 100 MB.
test('one filesystem, imagefs.available 19% (kubelet threshold 15%, margin 5%): dead containers, then LRU images until 25%; the pinned pause image stays', async () => {
  const n = await node({ otherUsedMb: 50 }); // 100 − 50 − 31 = 19 MB available
  const r = await n.monitor.check(n.passes);
  expect(r.layout).toBe('single');
  expect(r.reclaims).toHaveLength(1);
  const rec = r.reclaims[0];
  expect(rec).toMatchObject({
    signal: 'imagefs.available',
    before: 19 * MB,
    threshold: 15 * MB,
    start: 20 * MB,
    target: 25 * MB,
    steps: ['containers', 'images'],
    imagesRemoved: 2,
    after: 29 * MB,
    result: 'recovered',
  });
  expect(n.calls).toEqual(['containers', 'images']);
  expect(n.rt.images.has(hex('p'))).toBe(true);
  // Least recently used first: the first two listed (never used, detected together).
  expect(n.rt.removed).toEqual([hex('0'), hex('1')]);
  expect(n.events.seen).toEqual([]);
  expect(n.events.normals.map((e) => e.reason)).toEqual(['DiskPressureReclaimed']);
  expect(n.events.normals[0]?.note).toBe(
    'imagefs.available: 19.0 MB available, the kubelet evicts below 15.0 MB; removed 0 dead containers, 0 sandboxes and 2 images; 29.0 MB available after (reclaim starts below 20.0 MB, aims at 25.0 MB)',
  );
  const m = await n.registry.getSingleMetricAsString('kubegc_node_pressure_reclaims_total');
  expect(m).toContain(
    'kubegc_node_pressure_reclaims_total{signal="imagefs.available",result="recovered"} 1',
  );
  // The nodefs signal (10% + 5%) at 19% is not due; one reclaim for the filesystem.
  expect(r.levels.find((l) => l.signal === 'nodefs.available')?.available).toBe(19 * MB);
});

test('the container pass alone frees enough: no image is removed', async () => {
  const n = await node({ otherUsedMb: 50, containerFrees: 7 });
  const r = await n.monitor.check(n.passes);
  expect(n.calls).toEqual(['containers']);
  expect(r.reclaims[0]).toMatchObject({ after: 26 * MB, imagesRemoved: 0, result: 'recovered' });
  expect(n.rt.removed).toEqual([]);
});

test('above threshold + margin: statfs only, no pass runs', async () => {
  const n = await node({ otherUsedMb: 40 }); // 29% available
  const r = await n.monitor.check(n.passes);
  expect(r.reclaims).toEqual([]);
  expect(n.calls).toEqual([]);
  expect(
    await n.registry.getSingleMetricAsString('kubegc_node_eviction_signal_threshold'),
  ).toContain(`kubegc_node_eviction_signal_threshold{signal="imagefs.available"} ${15 * MB}`);
});

test('nothing eligible left: short, and a DiskPressureReclaimFailed warning on the Node', async () => {
  const n = await node({ otherUsedMb: 80, images: 2 }); // 100 − 80 − 11 = 9 MB available
  const r = await n.monitor.check(n.passes);
  // One filesystem: nodefs (10% + 5%) is due too and comes first; it recovers, imagefs cannot.
  expect(r.reclaims.map((x) => [x.signal, x.result, x.after])).toEqual([
    ['nodefs.available', 'recovered', 19 * MB],
    ['imagefs.available', 'short', 19 * MB],
  ]);
  expect(n.rt.images.has(hex('p'))).toBe(true);
  expect(n.events.seen.map((e) => e.reason)).toEqual(['DiskPressureReclaimFailed']);
  expect(n.events.seen[0]?.note).toBe(
    'imagefs.available: 19.0 MB available, the kubelet evicts below 15.0 MB; removed 0 dead containers, 0 sandboxes and 0 images; 19.0 MB available after (reclaim starts below 20.0 MB, aims at 25.0 MB); images left: pinned by the runtime 1.0 MB in 1 image (registry.k8s.io/pause:3.10)',
  );
  expect(await n.registry.getSingleMetricAsString('kubegc_node_pressure_reclaims_total')).toContain(
    'kubegc_node_pressure_reclaims_total{signal="imagefs.available",result="short"} 1',
  );
});

test('short: the DiskPressureReclaimFailed note and the log line say why the images left were kept (in use, pinned, too young), with bytes and who keeps them', async () => {
  const n = await node({ otherUsedMb: 70, images: 3 }); // with fresh: 100 − 70 − 21 = 9 MB available
  // img0 is used by a dead container; fresh was pulled just now (younger than the 2m minimum).
  n.rt.addContainer('done', 'docker.io/library/img0:1', 'exited');
  n.rt.addImage({ id: hex('y'), repoTags: ['docker.io/library/fresh:1'], layers: { y: 5 * MB } });
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const monitor = new PressureMonitor(
    n.rt.connection(),
    {
      thresholds: THRESHOLDS,
      margin: { percent: 5 },
      rootDir: '/var/lib/kubelet',
      dryRun: false,
      statfs: n.rt.statfs,
      device: () => Promise.resolve(1n),
      now: () => n.clock.t,
    },
    { ...quietLog, warn: (msg, fields = {}) => void lines.push({ msg, fields }) },
    testMetrics().metrics,
    n.events,
  );
  const r = await monitor.check(n.passes);
  // nodefs (15 MB to start) recovers with img1 and img2 gone; imagefs (20 MB) cannot.
  expect(r.reclaims.map((x) => [x.signal, x.result, x.imagesRemoved])).toEqual([
    ['nodefs.available', 'recovered', 2],
    ['imagefs.available', 'short', 0],
  ]);
  expect(n.events.seen.map((e) => e.note)).toEqual([
    'imagefs.available: 19.0 MB available, the kubelet evicts below 15.0 MB; removed 0 dead containers, 0 sandboxes and 0 images; 19.0 MB available after (reclaim starts below 20.0 MB, aims at 25.0 MB); images left: in use 5.0 MB in 1 image (by container done); pinned by the runtime 1.0 MB in 1 image (registry.k8s.io/pause:3.10); younger than --image-minimum-gc-age 5.0 MB in 1 image (the first old enough at 2027-01-15T08:02:00.000Z)',
  ]);
  expect(lines.find((l) => l.msg === 'disk pressure reclaim done')?.fields).toMatchObject({
    signal: 'imagefs.available',
    result: 'short',
    imagesKept: {
      'in-use': { images: 1, bytes: 5 * MB, by: ['container done'] },
      'pinned-by-runtime': { images: 1, bytes: 1 * MB, by: ['registry.k8s.io/pause:3.10'] },
      'too-young': { images: 1, bytes: 5 * MB, by: ['2027-01-15T08:02:00.000Z'] },
    },
  });
});

test('an image expected back removed because nothing else freed enough: the note says so', async () => {
  // 100 − 70 − 11 = 19 MB available; the target (25 MB) needs img1 and then img0, a CronJob's.
  const n = await node({
    otherUsedMb: 70,
    images: 2,
    lastUsedByCronJob: [0],
    expectedBack: {
      check: {
        check: () =>
          Promise.resolve({
            result: 'expected-back',
            workload: 'CronJob shop/nightly',
            why: 'its pod template names the image',
          }),
      },
      maxUnusedMs: 0,
    },
  });
  const r = await n.monitor.check(n.passes);
  expect(r.reclaims).toMatchObject([
    {
      signal: 'imagefs.available',
      result: 'recovered',
      imagesRemoved: 2,
      imagesExpectedBackRemoved: ['CronJob shop/nightly'],
    },
  ]);
  expect(n.rt.removed).toEqual([hex('1'), hex('0')]);
  expect(n.events.normals.map((e) => e.note)).toEqual([
    'imagefs.available: 19.0 MB available, the kubelet evicts below 15.0 MB; removed 0 dead containers, 0 sandboxes and 2 images; 29.0 MB available after (reclaim starts below 20.0 MB, aims at 25.0 MB); removed 1 expected-back image (CronJob shop/nightly): nothing else freed enough',
  ]);
});

test('short at --max-removals-per-run: the note says where the image step stopped', async () => {
  const n = await node({ otherUsedMb: 60, cap: 1 }); // 100 − 60 − 31 = 9 MB available
  const r = await n.monitor.check(n.passes);
  expect(r.reclaims.map((x) => [x.signal, x.result, x.imagesRemoved])).toEqual([
    ['nodefs.available', 'short', 1],
    ['imagefs.available', 'short', 1],
  ]);
  expect(n.events.seen.map((e) => e.note.split('; ').slice(-2))).toEqual([
    [
      'images left: pinned by the runtime 1.0 MB in 1 image (registry.k8s.io/pause:3.10)',
      'stopped at --max-removals-per-run',
    ],
    [
      'images left: pinned by the runtime 1.0 MB in 1 image (registry.k8s.io/pause:3.10)',
      'stopped at --max-removals-per-run',
    ],
  ]);
});

test('a dedicated imagefs (one device for images and layers): nodefs pressure has nothing kubegc can reclaim; imagefs pressure runs both', async () => {
  const n = await node({
    otherUsedMb: 40,
    devices: { nodefs: 1n, imagefs: 2n, containerfs: 2n },
    nodefs: { capacityBytes: 100 * MB, availableBytes: 12 * MB, inodes: 1000, inodesFree: 900 },
  });
  const r = await n.monitor.check(n.passes);
  expect(r.layout).toBe('imagefs');
  expect(r.reclaims.map((x) => [x.signal, x.result])).toEqual([
    ['nodefs.available', 'nothing-to-reclaim'],
  ]);
  expect(n.calls).toEqual([]);
});

test('split (writable layers on the root): imagefs pressure removes images only, nodefs pressure runs the container pass only', async () => {
  const n = await node({
    otherUsedMb: 50,
    devices: { nodefs: 1n, imagefs: 2n, containerfs: 1n },
    nodefs: { capacityBytes: 100 * MB, availableBytes: 12 * MB, inodes: 1000, inodesFree: 900 },
  });
  const r = await n.monitor.check(n.passes);
  expect(r.layout).toBe('split');
  expect(r.reclaims.map((x) => [x.signal, x.steps])).toEqual([
    ['nodefs.available', ['containers']],
    ['imagefs.available', ['images']],
    ['containerfs.available', ['containers']],
  ]);
  expect(n.calls).toEqual(['containers', 'images', 'containers']);
});

test('short: not tried again for a minute, and DiskPressureReclaimFailed at most every 5 minutes while it stays short', async () => {
  const n = await node({ otherUsedMb: 80, images: 2 });
  await n.monitor.check(n.passes);
  expect(n.calls).toEqual(['containers', 'images', 'containers', 'images']); // nodefs, then imagefs
  n.calls.length = 0;
  n.clock.t += 30_000;
  await n.monitor.check(n.passes);
  expect(n.calls).toEqual([]); // imagefs waits; nodefs recovered
  n.clock.t += 31_000;
  await n.monitor.check(n.passes);
  expect(n.calls).toEqual(['containers', 'images']);
  expect(n.events.seen.map((e) => e.reason)).toEqual(['DiskPressureReclaimFailed']);
  n.clock.t += 5 * 60_000;
  await n.monitor.check(n.passes);
  expect(n.events.seen.map((e) => e.reason)).toEqual([
    'DiskPressureReclaimFailed',
    'DiskPressureReclaimFailed',
  ]);
});

test("short, then past the kubelet's threshold: tried again at the next check (the kubelet evicts at its own), with what has become removable since", async () => {
  // A dedicated imagefs; the root is fine.
  const n = await node({
    otherUsedMb: 80,
    images: 2,
    devices: { nodefs: 1n, imagefs: 2n, containerfs: 2n },
    nodefs: { capacityBytes: 100 * MB, availableBytes: 50 * MB, inodes: 1000, inodesFree: 900 },
  });
  const first = await n.monitor.check(n.passes);
  expect(first.reclaims.find((x) => x.signal === 'imagefs.available')?.result).toBe('short');
  // 10 s later a writer takes 6 MB: 13 MB available, below the kubelet's 15%.
  // Meanwhile containers exited whose removal frees 10 MB.
  n.rt.otherUsedBytes += 6 * MB;
  n.passes.containers = () => {
    n.calls.push('containers');
    n.rt.otherUsedBytes -= 10 * MB;
    return Promise.resolve(containerResult(3));
  };
  n.calls.length = 0;
  n.clock.t += 10_000;
  const again = await n.monitor.check(n.passes);
  expect(n.calls[0]).toBe('containers');
  expect(again.reclaims.find((x) => x.signal === 'imagefs.available')).toMatchObject({
    before: 13 * MB,
    result: 'recovered',
  });
});

test('imagefs.inodesFree (a default signal) at 8%: unused images go, least recently used first, until the inodes are at the target', async () => {
  // A dedicated imagefs whose bytes are fine (29% available) and whose inodes
  // are not: 1000 inodes, 780 used by other things, 20 per image layer (7
  // layers: 140): 80 free, the kubelet evicts below 50 (5%), reclaim starts
  // below 100 and aims at 150: four of the six eligible images.
  const n = await node({
    otherUsedMb: 40,
    devices: { nodefs: 1n, imagefs: 2n, containerfs: 2n },
    nodefs: { capacityBytes: 100 * MB, availableBytes: 90 * MB, inodes: 1000, inodesFree: 900 },
    inodes: { capacity: 1000, otherUsed: 780, perLayer: 20 },
  });
  const r = await n.monitor.check(n.passes);
  expect(r.reclaims[0]).toMatchObject({
    signal: 'imagefs.inodesFree',
    before: 80,
    threshold: 50,
    start: 100,
    target: 150,
    imagesRemoved: 4,
    after: 160,
    result: 'recovered',
  });
  expect(n.rt.removed).toEqual([hex('0'), hex('1'), hex('2'), hex('3')]);
  expect(n.rt.images.has(hex('p'))).toBe(true);
  expect(n.events.normals.map((e) => e.reason)).toEqual(['DiskPressureReclaimed']);
});

test('a reclaim uses the filesystems located by recent checks, asked again between reclaims in the background: no ImageFsInfo round trip of its own', async () => {
  const n = await node({ otherUsedMb: 10 }); // well below the reclaim start: checks only
  await n.monitor.check(n.passes);
  expect(n.located.n).toBe(1);
  // 12 s on: a check that reclaims nothing locates them again, without waiting.
  n.clock.t += 12_000;
  await n.monitor.check(n.passes);
  await new Promise((r) => setImmediate(r));
  expect(n.located.n).toBe(2);
  // 5 s later the disk fills: the reclaim acts on those paths, located 5 s ago.
  n.clock.t += 5_000;
  n.rt.otherUsedBytes = 50 * MB;
  const r = await n.monitor.check(n.passes);
  expect(r.reclaims).toHaveLength(1);
  expect(n.located.n).toBe(2);
  // Paths older than 15 s are not used by a reclaim: it locates them first.
  n.clock.t += 20_000;
  n.rt.otherUsedBytes = 60 * MB;
  const again = await n.monitor.check(n.passes);
  expect(again.reclaims).toHaveLength(1);
  expect(n.located.n).toBe(3);
});
