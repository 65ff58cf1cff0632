// A local node started where an earlier one was left mounted: a session
// killed with its node up leaves the node's tmpfs on /var/lib/containerd (its
// processes die, its mounts stay), full of that node's images. A node started
// on it began with its disk nearly full, and every node test after it saw
// DiskPressure in its first minute (CI, 2026-12-06). upNode takes the stale
// tmpfs down (no containerd serves it) and mounts a fresh one of its own size.
// Its own control plane and node (.cluster-e2e-stale), taken down at the end.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, down, up, type Cluster } from '../../cluster/controlplane.ts';
import { CONTAINERD, downNode, upNode } from '../../cluster/node.ts';
import { statFilesystem } from '../../src/node/statfs.ts';

const DIR = path.join(REPO_ROOT, '.cluster-e2e-stale');
const STALE_FILE = path.join(CONTAINERD.root, 'left-by-a-killed-node');
const MiB = 1 << 20;
const log = (l: string): void => void process.stderr.write(`\nnode-stale: ${l}`);

let cluster: Cluster | undefined;

const rootMounts = (): string[] =>
  readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.split(' ')[1] === CONTAINERD.root);

afterAll(async () => {
  await downNode(DIR, log).catch((err: unknown) => log(`node teardown: ${String(err)}`));
  if (cluster) await down(DIR);
}, 300_000);

test("a node's tmpfs left mounted by a killed session is replaced, not reused", async () => {
  // What a killed node leaves: its tmpfs (the local node's source name), 200 of its 256 MiB used.
  expect(rootMounts()).toEqual([]);
  mkdirSync(CONTAINERD.root, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256m', 'kubegc-local-node', CONTAINERD.root]);
  writeFileSync(STALE_FILE, Buffer.alloc(200 * MiB, 1));

  cluster = await up({ dir: DIR, log });
  await upNode(cluster, { log, diskMiB: 512 });

  expect(existsSync(STALE_FILE)).toBe(false);
  expect(rootMounts()).toHaveLength(1);
  const fs = await statFilesystem(CONTAINERD.root);
  expect(fs.capacityBytes).toBe(512 * MiB);
  expect(fs.availableBytes).toBeGreaterThan(400 * MiB);
});
