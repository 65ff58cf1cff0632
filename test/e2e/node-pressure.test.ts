// Disk pressure reclaim of `kubegc node` against a real containerd (its root on
// a 256 MiB tmpfs, so the image filesystem is a filesystem of its own and its
// usage is real): with the periodic image pass off, a signal within the
// reclaim margin of its --eviction-hard threshold makes kubegc free, least
// recently used first, until two margins above it, keeping every protected
// image; and under pressure the dead containers of a pod that has terminated,
// whose Pod still exists in the API, go beyond the per-container cap.
import { existsSync } from 'node:fs';
import { e2e } from '../support/e2e.ts';
import { nodeObject } from '../support/objects.ts';
import { fileContainerd } from '../support/containerd.ts';
import { availablePercent, imagefsPressureFlags, runNodeOnce } from '../support/kubegc-node.ts';
import { randomLayer } from '../../cluster/oci-image.ts';

const MiB = 1024 * 1024;

const { cluster, c } = await e2e();
const h = await fileContainerd({ sizeMiB: 256, resetBeforeEach: true });

/**
 * Flags for one pressure check: only imagefs.available, its threshold 3% below
 * what is available now (so the kubelet would not evict yet) and a 5% margin,
 * so a reclaim is due and aims 7% above today's level. The periodic image
 * pass is off (high threshold 100, no maximum age: the kubelet's "off"), so
 * whatever goes, goes for pressure.
 */
function pressureFlags(available: number): string[] {
  return [
    '--image-gc-high-threshold',
    '100',
    '--image-gc-low-threshold',
    '99',
    '--image-minimum-gc-age',
    '0',
    ...imagefsPressureFlags(h, available),
  ];
}

test('imagefs.available within the margin of its threshold: unused images go, oldest first, until two margins above; images in use, pinned and the pause image stay', async () => {
  const [running, pinned] = await h.importImages([
    { name: 'kubegc.test/p-running:1', layers: [h.tools, randomLayer(4 * MiB)] },
    { name: 'kubegc.test/critical/p-db:1', layers: [randomLayer(8 * MiB)] },
  ]);
  if (!running || !pinned) throw new Error('images not built');
  const pod = await h.runPod({ name: 'users' });
  await h.runContainer(
    pod,
    { name: 'server', image: running.name, command: ['/bin/sleep', 'infinity'] },
    'running',
  );
  const unused = await h.importImages(
    Array.from({ length: 6 }, (_, i) => ({
      name: `kubegc.test/p-unused-${i + 1}:1`,
      layers: [randomLayer(8 * MiB)],
    })),
  );
  const available = await availablePercent(h);
  expect(available).toBeGreaterThan(10);
  expect(available).toBeLessThan(90);

  const run = await runNodeOnce(h, [
    ...pressureFlags(available),
    '--pinned-images',
    'kubegc.test/critical/*',
  ]);
  expect(run.code).toBe(0);
  expect(run.logged('image GC pass done')).toEqual([]); // the periodic pass is off

  const [done] = run.logged('disk pressure reclaim done');
  expect(done).toMatchObject({ signal: 'imagefs.available', result: 'recovered' });
  const fs = await h.fs();
  const target = Math.floor((fs.capacityBytes * (available - 3 + 10)) / 100);
  expect(fs.availableBytes).toBeGreaterThanOrEqual(target);

  const ids = await h.imageIds();
  for (const kept of [h.pause, running, pinned]) expect(ids).toContain(kept.id);
  const removed = unused.filter((img) => !ids.has(img.id));
  // A prefix of the LRU order (never used: first detected first, i.e. listed
  // first), and only as much as needed: each 8 MiB image frees ~16 MiB on the
  // native snapshotter, and about 18 MiB (7% of 256 MiB) had to go.
  expect(removed.length).toBeGreaterThan(0);
  expect(removed.length).toBeLessThan(unused.length);
  for (const l of run.logged('removed image')) expect(l.reason).toBe('pressure');
  expect(run.removedImages().sort()).toEqual(removed.map((i) => i.id).sort());
});

describe('with API access', () => {
  const node = nodeObject(c, 'kubegc-e2e-p');

  test('a Succeeded pod that still exists: its last dead container stays in a normal pass and goes under pressure; its log directory stays', async () => {
    const nodeName = node.name;
    const ns = 'default';
    const created = await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { generateName: 'kubegc-p-done-' },
        spec: {
          nodeName,
          restartPolicy: 'Never',
          containers: [{ name: 'job', image: 'kubegc.test/p-job:1' }],
        },
      },
    });
    const name = created.metadata?.name ?? '';
    const uid = created.metadata?.uid ?? '';
    await c.core.replaceNamespacedPodStatus({
      namespace: ns,
      name,
      body: { ...created, status: { phase: 'Succeeded' } },
    });
    const [job] = await h.importImages([
      { name: 'kubegc.test/p-job:1', layers: [h.tools, randomLayer(1 * MiB)] },
    ]);
    if (!job) throw new Error('image not built');
    const sandbox = await h.runPod({ name, uid, namespace: ns });
    const first = await h.runContainer(
      sandbox,
      { name: 'job', image: job.name, command: ['/bin/true'] },
      'exited',
    );
    await h.stopPod(sandbox);
    const api = ['--kubeconfig', cluster.kubeconfig, '--node-name', nodeName];

    // A normal pass: one dead container per (pod, container) is kept, as on the kubelet.
    const normal = await runNodeOnce(h, [...api, '--pressure-check-period', '0']);
    expect(normal.code).toBe(0);
    expect(normal.removedContainers()).toEqual([]);
    expect(await h.containerIds()).toContain(first);

    // Under pressure it goes, with its sandbox; its logs stay (the Pod exists).
    const pressure = await runNodeOnce(h, [...api, ...pressureFlags(await availablePercent(h))]);
    expect(pressure.code).toBe(0);
    expect(pressure.removedContainers()).toEqual([first]);
    expect(pressure.logged('removed container')[0]).toMatchObject({ reason: 'pod-terminated' });
    expect(await h.containerIds()).not.toContain(first);
    expect(await h.sandboxIds()).not.toContain(sandbox.id);
    expect(existsSync(sandbox.logDirectory)).toBe(true);
    await c.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
  });
});
