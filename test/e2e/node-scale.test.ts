// One image GC pass over 200 unused images on the test containerd: how long
// it takes, and the bytes it reports freed (the runtime's sizes, the kubelet's
// sum) against the bytes statfs measures. Prints both for docs/node-gc.md.
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { fileContainerd } from '../support/containerd.ts';
import { EVERY_UNPROTECTED_IMAGE, runNodeOnce } from '../support/kubegc-node.ts';
import { randomLayer } from '../../cluster/oci-image.ts';

const IMAGES = 200;
const LAYER_BYTES = 256 * 1024;

const h = await fileContainerd({ sizeMiB: 256 });

test(`one image GC pass removes ${IMAGES} unused images; reported vs measured bytes`, async () => {
  const images = await h.importImages(
    Array.from({ length: IMAGES }, (_, i) => ({
      name: `kubegc.test/scale-${i}:1`,
      layers: [randomLayer(LAYER_BYTES)],
    })),
  );
  // Ages from an earlier run, as a state file says.
  const stateFile = path.join(h.dir, 'scale-state.json');
  const detected = new Date(Date.now() - 3_600_000).toISOString();
  writeFileSync(
    stateFile,
    JSON.stringify({
      version: 1,
      images: Object.fromEntries(images.map((i) => [i.id, { firstDetected: detected }])),
    }),
  );
  const before = await h.fs();

  // High 1 / low 0 (low must be below high, as on the kubelet): the pass wants
  // every used byte back, so it walks all 200.
  const started = Date.now();
  const run = await runNodeOnce(h, [
    '--state-file',
    stateFile,
    // After a load the minimum age counts again from the load: off here.
    ...EVERY_UNPROTECTED_IMAGE,
  ]);
  const wallMs = Date.now() - started;
  const after = await h.fs();

  expect(run.code).toBe(3); // the pause image and containerd's metadata stay: 0% is out of reach
  const left = await h.imageIds();
  expect(left).toEqual(new Set([h.pause.id]));
  expect(run.removedImages()).toHaveLength(IMAGES);
  const pass = run.imagePass();
  const measured = after.availableBytes - before.availableBytes;
  expect(pass.measuredFreedBytes).toBe(measured);
  expect(pass.reportedFreedBytes).toBe(images.reduce((n, i) => n + i.contentBytes, 0));
  // The native snapshotter keeps an unpacked copy beside every blob.
  expect(measured).toBeGreaterThan(1.5 * (pass.reportedFreedBytes as number));
  const line =
    `image GC pass over ${IMAGES} images (${LAYER_BYTES / 1024} KiB layer each): ` +
    `pass ${String(pass.durationMs)} ms, kubegc --once wall ${wallMs} ms; ` +
    `reported freed ${String(pass.reportedFreedBytes)} B, measured freed ${measured} B ` +
    `(${(measured / (pass.reportedFreedBytes as number)).toFixed(2)}×)`;
  process.stderr.write(`\n${line}\n`);
  expect(pass.durationMs as number).toBeLessThan(60_000);
});
