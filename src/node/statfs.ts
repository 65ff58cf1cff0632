// Capacity and free space of the image filesystem, from statfs(2) of the
// mountpoint the runtime reports in ImageFsInfo — the kubelet's source too
// (via cAdvisor). "Available" is what unprivileged writers may use (f_bavail).
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { FsStats, ImageStoreView } from './image-gc-policy.ts';

export async function statFilesystem(mountpoint: string): Promise<FsStats> {
  const s = await fs.statfs(mountpoint, { bigint: true });
  return {
    capacityBytes: Number(s.blocks * s.bsize),
    availableBytes: Number(s.bavail * s.bsize),
    inodes: Number(s.files),
    inodesFree: Number(s.ffree),
  };
}

/** The device a path is on (as the kubelet compares devices to tell the filesystem layout). */
export async function deviceOf(path: string): Promise<bigint> {
  return (await fs.stat(path, { bigint: true })).dev;
}

/** How many of the runtime's entries the image store check looks at (a store may hold thousands). */
const STORE_ENTRIES = 8;

/** The device of `mountpoint` and of the first few entries in it (not following symlinks). */
export async function viewImageStore(mountpoint: string): Promise<ImageStoreView> {
  const device = await deviceOf(mountpoint);
  const names: string[] = [];
  const dir = await fs.opendir(mountpoint);
  try {
    for (let e = await dir.read(); e !== null && names.length < STORE_ENTRIES; e = await dir.read())
      names.push(e.name);
  } finally {
    await dir.close();
  }
  const entries = await Promise.all(
    names.map(async (name) => ({
      name,
      device: (await fs.lstat(path.join(mountpoint, name), { bigint: true })).dev,
    })),
  );
  return { device, entries };
}
