// What the e2e files on the local node (`upNode`) share: kubectl against
// their control plane, images put straight into the node's containerd (there
// is no registry), and the node GC DaemonSet's arguments extended for time.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';
import { CONTAINERD } from '../../cluster/node.ts';
import { ociArchive, type ImageSpec } from '../../cluster/oci-image.ts';

export const run = promisify(execFile);

/** `kubectl` with this control plane's kubeconfig; resolves to stdout. */
export function kubectlOf(cluster: () => Cluster): (...args: string[]) => Promise<string> {
  return async (...args) => {
    const c = cluster();
    const { stdout } = await run(c.kubectl, ['--kubeconfig', c.kubeconfig, ...args], {
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  };
}

/** Images in the node's containerd (k8s.io namespace), by name. */
export async function nodeImages(): Promise<string[]> {
  const { stdout } = await run('ctr', [
    '--address',
    CONTAINERD.socket,
    '-n',
    'k8s.io',
    'images',
    'ls',
    '-q',
  ]);
  return stdout.split('\n').filter(Boolean);
}

/** Builds the images as one OCI archive and imports it into the node's containerd. */
export async function importNodeImages(specs: ImageSpec[]): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-images-'));
  try {
    const file = path.join(dir, 'images.oci.tar');
    await fs.writeFile(file, ociArchive(specs).archive);
    await run('ctr', ['--address', CONTAINERD.socket, '-n', 'k8s.io', 'images', 'import', file]);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

export const podReady = (p: k8s.V1Pod): boolean =>
  p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false;

/** Appends arguments to the node GC DaemonSet's container (a rollout follows). */
export async function addNodeGcArgs(
  kubectl: (...args: string[]) => Promise<string>,
  namespace: string,
  args: string[],
): Promise<void> {
  await kubectl(
    'patch',
    'daemonset',
    'kubegc-node',
    '-n',
    namespace,
    '--type=json',
    '-p',
    JSON.stringify(
      args.map((value) => ({ op: 'add', path: '/spec/template/spec/containers/0/args/-', value })),
    ),
  );
}
