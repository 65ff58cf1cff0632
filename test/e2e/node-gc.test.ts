// Image GC of `kubegc node` against a real containerd (its root on a 256 MiB
// tmpfs, so disk usage is real): LRU removal down to the low threshold with
// every protected image surviving, the minimum age and the shortfall report
// (exit code, log line, Node event), the maximum age with ages kept in the
// state file across restarts, and --dry-run.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { usagePercent } from '../../src/node/image-gc-policy.ts';
import { waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { nodeObject } from '../support/objects.ts';
import { fileContainerd } from '../support/containerd.ts';
import { runNodeOnce, startNode } from '../support/kubegc-node.ts';
import { randomLayer, type BuiltImage } from '../../cluster/oci-image.ts';

const MiB = 1024 * 1024;
const HOUR = 3_600_000;

const { cluster, c } = await e2e();
const h = await fileContainerd({ sizeMiB: 256, resetBeforeEach: true });

/** A state file as kubegc writes it: image ID → first detected / last used. */
function writeState(
  file: string,
  records: Record<string, { firstDetected: number; lastUsed?: number }>,
): void {
  const images: Record<string, { firstDetected: string; lastUsed?: string }> = {};
  for (const [id, r] of Object.entries(records))
    images[id] = {
      firstDetected: new Date(r.firstDetected).toISOString(),
      ...(r.lastUsed ? { lastUsed: new Date(r.lastUsed).toISOString() } : {}),
    };
  writeFileSync(file, JSON.stringify({ version: 1, images }));
}

function readState(file: string): Record<string, { firstDetected: string; lastUsed?: string }> {
  return (JSON.parse(readFileSync(file, 'utf8')) as { images: Record<string, never> }).images;
}

const unusedImages = (prefix: string, n: number, bytes: number) =>
  Array.from({ length: n }, (_, i) => ({
    name: `kubegc.test/${prefix}-${i + 1}:1`,
    layers: [randomLayer(bytes)],
  }));

/** Images a pod uses: one by a running container, one by an exited one. */
async function usedImages(): Promise<{ running: BuiltImage; exited: BuiltImage }> {
  const [running, exited] = await h.importImages([
    { name: 'kubegc.test/used-running:1', layers: [h.tools, randomLayer(4 * MiB)] },
    { name: 'kubegc.test/used-exited:1', layers: [h.tools, randomLayer(4 * MiB)] },
  ]);
  if (!running || !exited) throw new Error('images not built');
  const pod = await h.runPod({ name: 'users' });
  await h.runContainer(
    pod,
    { name: 'server', image: running.name, command: ['/bin/sleep', 'infinity'] },
    'running',
  );
  await h.runContainer(pod, { name: 'job', image: exited.name, command: ['/bin/true'] }, 'exited');
  return { running, exited };
}

test('above the high threshold: least recently used images go until usage is below the low threshold; used, pinned and pause images stay', async () => {
  const { running, exited } = await usedImages();
  const [pinned] = await h.importImages([
    { name: 'kubegc.test/critical/db:1', layers: [randomLayer(8 * MiB)] },
  ]);
  const unused = await h.importImages(unusedImages('unused', 6, 8 * MiB));
  if (!pinned) throw new Error('image not built');

  // Ages as a previous kubegc would have recorded them: the protected images
  // are the least recently used of all, so only protection keeps them.
  const now = Date.now();
  const stateFile = path.join(h.dir, 'lru-state.json');
  writeState(stateFile, {
    [h.pause.id]: { firstDetected: now - 10 * HOUR, lastUsed: now - 10 * HOUR },
    [pinned.id]: { firstDetected: now - 10 * HOUR, lastUsed: now - 9 * HOUR },
    [running.id]: { firstDetected: now - 10 * HOUR, lastUsed: now - 9 * HOUR },
    [exited.id]: { firstDetected: now - 10 * HOUR, lastUsed: now - 9 * HOUR },
    ...Object.fromEntries(
      unused.map((img, i) => [
        img.id,
        { firstDetected: now - 10 * HOUR, lastUsed: now - (8 - i) * HOUR },
      ]),
    ),
  });

  // Thresholds around today's usage: about 15% of the disk (~38 MiB) must go.
  const before = await h.fs();
  const usage = usagePercent(before);
  expect(usage).toBeGreaterThan(40);
  const high = usage - 3;
  const low = usage - 15;

  const run = await runNodeOnce(h, [
    '--state-file',
    stateFile,
    // The ages come from the state file written above; after a load the minimum
    // age counts again from the load (a pull while kubegc was down cannot be seen).
    '--image-minimum-gc-age',
    '0',
    '--image-gc-high-threshold',
    String(high),
    '--image-gc-low-threshold',
    String(low),
    '--pinned-images',
    'kubegc.test/critical/*',
  ]);
  expect(run.code).toBe(0);

  const after = await h.fs();
  expect(usagePercent(after)).toBeLessThanOrEqual(low);
  const ids = await h.imageIds();
  for (const kept of [h.pause, running, exited, pinned]) expect(ids).toContain(kept.id);

  // Removed: a prefix of the LRU order, and only as much as needed. Each
  // 8 MiB image frees ~16 MiB on the native snapshotter (blob + unpacked
  // copy), so three go; by the runtime's sizes (the kubelet's sum) five would.
  const removed = unused.filter((img) => !ids.has(img.id)).map((img) => img.name);
  expect(removed).toEqual(unused.slice(0, 3).map((img) => img.name));
  expect(run.removedImages().sort()).toEqual(
    unused
      .slice(0, 3)
      .map((img) => img.id)
      .sort(),
  );
  for (const l of run.logged('removed image')) {
    expect(l.reason).toBe('space');
    expect(l.freedBytes as number).toBeGreaterThan(8 * MiB);
  }

  const summary = run.imagePass();
  expect(summary.measuredFreedBytes).toBe(after.availableBytes - before.availableBytes);
  expect(summary.measuredFreedBytes as number).toBeGreaterThanOrEqual(
    summary.wantedBytes as number,
  );
  expect(summary.reportedFreedBytes as number).toBeLessThan(summary.wantedBytes as number);
  expect(summary.shortfallBytes).toBe(0);
  // The removed images are forgotten in the state file; the others keep their ages.
  const state = readState(stateFile);
  for (const img of unused.slice(0, 3)) expect(state[img.id]).toBeUndefined();
  expect(state[unused[3]?.id ?? '']?.lastUsed).toBe(new Date(now - 5 * HOUR).toISOString());
});

test('--max-removals-per-run caps the removals of one pass; the rest is a reported shortfall', async () => {
  const unused = await h.importImages(unusedImages('capped', 4, 8 * MiB));
  const now = Date.now();
  const stateFile = path.join(h.dir, 'cap-state.json');
  writeState(
    stateFile,
    Object.fromEntries(
      unused.map((img, i) => [
        img.id,
        { firstDetected: now - 10 * HOUR, lastUsed: now - (5 - i) * HOUR },
      ]),
    ),
  );
  const usage = usagePercent(await h.fs());
  const run = await runNodeOnce(h, [
    '--state-file',
    stateFile,
    // The ages come from the state file written above; after a load the minimum
    // age counts again from the load (a pull while kubegc was down cannot be seen).
    '--image-minimum-gc-age',
    '0',
    '--image-gc-high-threshold',
    String(usage - 3),
    '--image-gc-low-threshold',
    String(usage - 20),
    '--max-removals-per-run',
    '1',
  ]);
  expect(run.code).toBe(3);
  expect(run.removedImages()).toEqual([unused[0]?.id]);
  const ids = await h.imageIds();
  for (const img of unused.slice(1)) expect(ids).toContain(img.id);
  expect(run.imagePass()).toMatchObject({ capped: true });
  expect(run.imagePass().shortfallBytes as number).toBeGreaterThan(0);
});

describe('with API access', () => {
  const node = nodeObject(c, 'kubegc-e2e');

  test('images younger than the minimum age survive above the threshold; the shortfall is reported (exit code 3, log line, FreeDiskSpaceFailed event on the Node)', async () => {
    const young = await h.importImages(unusedImages('young', 4, 8 * MiB));
    const usage = usagePercent(await h.fs());
    const nodeName = node.name;

    const run = await runNodeOnce(h, [
      '--kubeconfig',
      cluster.kubeconfig,
      '--node-name',
      nodeName,
      '--image-gc-high-threshold',
      String(usage - 3),
      '--image-gc-low-threshold',
      String(usage - 15),
    ]);

    expect(run.code).toBe(3);
    const ids = await h.imageIds();
    for (const img of young) expect(ids).toContain(img.id);
    expect(run.removedImages()).toEqual([]);
    const [shortfall] = run.logged('image GC could not reach the low threshold');
    expect(shortfall).toMatchObject({ reason: 'FreeDiskSpaceFailed', measuredFreedBytes: 0 });
    expect(shortfall?.shortfallBytes).toBe(shortfall?.wantedBytes);
    expect((shortfall?.tooYoung as string[]).sort()).toEqual(young.map((i) => i.id).sort());

    const event = await waitFor('a FreeDiskSpaceFailed event on the Node', async () => {
      const list = (await c.objects.list('events.k8s.io/v1', 'Event', 'default')) as {
        items: {
          reason?: string;
          note?: string;
          regarding?: { kind?: string; name?: string; uid?: string };
        }[];
      };
      return list.items.find(
        (e) =>
          e.reason === 'FreeDiskSpaceFailed' &&
          e.regarding?.kind === 'Node' &&
          e.regarding.name === nodeName,
      );
    });
    expect(event.regarding?.uid).toBe(node.uid);
    expect(event.note).toMatch(
      /wanted to free \d+ bytes, but freed 0 bytes .*; left: .*younger than --image-minimum-gc-age [\d.]+ [kMG]?B in 4 images \(the first old enough at \d{4}-/,
    );
  });
});

test('maximum age removes images unused for longer, below the threshold; after a restart it counts from the start, with the recorded ages kept in the state file', async () => {
  const stateFile = path.join(h.dir, 'age-state.json');
  const [aged, agedToo] = await h.importImages(unusedImages('aged', 2, 1 * MiB));
  // An image used by an exited container is never unused, however old.
  const [inUse] = await h.importImages([
    { name: 'kubegc.test/aged-in-use:1', layers: [h.tools, randomLayer(1 * MiB)] },
  ]);
  if (!aged || !agedToo || !inUse) throw new Error('images not built');
  const pod = await h.runPod({ name: 'aged' });
  await h.runContainer(pod, { name: 'job', image: inUse.name, command: ['/bin/true'] }, 'exited');
  const ageFlags = ['--image-minimum-gc-age', '1s', '--image-maximum-gc-age', '3s'];

  // First kubegc: records the images as detected now, removes nothing.
  const first = await runNodeOnce(h, ['--state-file', stateFile, ...ageFlags]);
  expect(first.code).toBe(0);
  expect(first.removedImages()).toEqual([]);
  const recorded = readState(stateFile);
  const detectedAt = Date.parse(recorded[aged.id]?.firstDetected ?? '');
  expect(detectedAt).toBeGreaterThan(Date.now() - 60_000);

  const [later] = await h.importImages(unusedImages('later', 1, 1 * MiB));
  if (!later) throw new Error('image not built');
  await waitFor(
    'the maximum age to pass since detection',
    async () => Date.now() > detectedAt + 3_500,
    { intervalMs: 100 },
  );

  // A restarted kubegc does not know what used the images while it was down:
  // its first pass removes nothing for age, as the kubelet's (which waits
  // MaxAge after its start), but it keeps the recorded ages.
  const restarted = await runNodeOnce(h, ['--state-file', stateFile, ...ageFlags]);
  expect(restarted.code).toBe(0);
  expect(restarted.imagePass().usagePercentBefore as number).toBeLessThan(85);
  expect(restarted.removedImages()).toEqual([]);
  const kept = readState(stateFile);
  expect(kept[aged.id]?.firstDetected).toBe(recorded[aged.id]?.firstDetected);
  expect(Date.parse(kept[later.id]?.firstDetected ?? '')).toBeGreaterThan(detectedAt);

  // A running kubegc removes the unused images, for age, once the maximum age
  // has passed since its start, below the threshold; the image an exited
  // container uses and the sandbox image stay.
  const startedAt = Date.now();
  const running = startNode(h, ['--state-file', stateFile, ...ageFlags, '--image-gc-period', '1s']);
  try {
    await running.waitForLines(
      'the three unused images removed for age',
      (lines) => lines.filter((l) => l.msg === 'removed image').length >= 3,
      60_000,
    );
    const logged = running.lines.filter((l) => l.msg === 'removed image');
    expect(logged.map((l) => l.id as string).sort()).toEqual(
      [aged.id, agedToo.id, later.id].sort(),
    );
    for (const l of logged) {
      expect(l.reason).toBe('age');
      expect(Date.parse(l.ts as string)).toBeGreaterThanOrEqual(startedAt + 3_000);
    }
  } finally {
    await running.stop();
  }
  const ids = await h.imageIds();
  for (const gone of [aged, agedToo, later]) expect(ids).not.toContain(gone.id);
  for (const stays of [inUse, h.pause]) expect(ids).toContain(stays.id);
  const state = readState(stateFile);
  expect(Object.keys(state).sort()).toEqual([inUse.id, h.pause.id].sort());
});

test('--dry-run removes nothing and reports what it would remove', async () => {
  const unused = await h.importImages(unusedImages('dry', 5, 8 * MiB));
  const pod = await h.runPod({ name: 'dry' });
  const dead: string[] = [];
  for (let attempt = 0; attempt < 3; attempt++)
    dead.push(
      await h.runContainer(
        pod,
        { name: 'job', image: h.pause.name, command: ['/bin/true'], attempt },
        'exited',
      ),
    );
  const now = Date.now();
  const stateFile = path.join(h.dir, 'dry-state.json');
  writeState(
    stateFile,
    Object.fromEntries(
      unused.map((img, i) => [
        img.id,
        { firstDetected: now - 10 * HOUR, lastUsed: now - (5 - i) * HOUR },
      ]),
    ),
  );
  const stateBefore = readFileSync(stateFile, 'utf8');
  const usage = usagePercent(await h.fs());
  const flags = [
    '--state-file',
    stateFile,
    // The ages come from the state file written above; after a load the minimum
    // age counts again from the load (a pull while kubegc was down cannot be seen).
    '--image-minimum-gc-age',
    '0',
    '--image-gc-high-threshold',
    String(usage - 3),
    '--image-gc-low-threshold',
    String(usage - 10),
  ];
  const imagesBefore = await h.imageIds();
  const containersBefore = await h.containerIds();

  const dry = await runNodeOnce(h, ['--dry-run', ...flags]);
  expect(dry.code).toBe(0);
  expect(await h.imageIds()).toEqual(imagesBefore);
  expect(await h.containerIds()).toEqual(containersBefore);
  expect(readFileSync(stateFile, 'utf8')).toBe(stateBefore);
  expect(dry.logged('removed image')).toEqual([]);
  expect(dry.logged('removed container')).toEqual([]);
  // What it would do: the two older dead containers, and LRU images by their reported sizes.
  expect(dry.removedContainers().sort()).toEqual(dead.slice(0, 2).sort());
  const wouldRemove = dry.removedImages();
  expect(wouldRemove.length).toBeGreaterThan(0);
  expect(wouldRemove).toEqual(unused.slice(0, wouldRemove.length).map((i) => i.id));
  expect(dry.imagePass()).toMatchObject({ dryRun: true, measuredFreedBytes: 0 });

  // The real run removes what the dry run named (or fewer images: it measures the disk).
  const real = await runNodeOnce(h, flags);
  expect(real.code).toBe(0);
  expect(real.removedContainers().sort()).toEqual(dead.slice(0, 2).sort());
  expect(wouldRemove).toEqual(expect.arrayContaining(real.removedImages()));
  expect(existsSync(stateFile)).toBe(true);
});
