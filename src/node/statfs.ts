// Capacity and free space of the image filesystem, from statfs(2) of the
// mountpoint the runtime reports in ImageFsInfo — the kubelet's source too
// (via cAdvisor). "Available" is what unprivileged writers may use (f_bavail).
import { promises as fs } from 'node:fs';
import type { FsStats } from './image-gc-policy.ts';

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
