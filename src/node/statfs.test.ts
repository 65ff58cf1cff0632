// What the image store check sees on a real filesystem (the decision itself is
// imageStoreProblem, tested through the image pass in image-gc.test.ts).
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageStoreProblem } from './image-gc-policy.ts';
import { viewImageStore } from './statfs.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kubegc-store-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test("a directory holding the runtime's files on its own device: the check passes", async () => {
  await writeFile(path.join(dir, 'metadata.db'), 'x');
  await mkdir(path.join(dir, 'snapshots'));
  const view = await viewImageStore(dir);
  expect(view.device).toBe((await stat(dir, { bigint: true })).dev);
  expect(view.entries.map((e) => e.name).sort()).toEqual(['metadata.db', 'snapshots']);
  expect(view.entries.every((e) => e.device === view.device)).toBe(true);
  expect(imageStoreProblem(dir, view)).toBeUndefined();
});

test('an empty directory (the host path not mounted there): no entries, and the check says so', async () => {
  const view = await viewImageStore(dir);
  expect(view.entries).toEqual([]);
  expect(imageStoreProblem(dir, view)).toContain('is empty as kubegc sees it');
});

test('a store of thousands of entries: only the first few are looked at', async () => {
  for (let i = 0; i < 50; i++) await writeFile(path.join(dir, `image-${i}`), '');
  expect((await viewImageStore(dir)).entries).toHaveLength(8);
});

test('a missing directory is an error naming it', async () => {
  await expect(viewImageStore(path.join(dir, 'nope'))).rejects.toThrow(/ENOENT.*nope/);
});
