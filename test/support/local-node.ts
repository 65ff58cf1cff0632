// What the e2e files on the local node (`upNode`) share: kubectl against
// their control plane, the kubegc image pushed to the node's registry (the
// user's path: the kubelet pulls it), the tests' made-up images put straight
// into the node's containerd, and the node GC DaemonSet's arguments extended
// for time.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';
import { buildKubegcImage, pushImage } from '../../cluster/image.ts';
import type { LocalNode } from '../../cluster/node.ts';

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

export { importNodeImages, nodeImages } from '../../cluster/node.ts';

/**
 * Builds the image from the Dockerfile (`npm run image`) and pushes it to the
 * node's registry as `HOST:PORT/kubegc:dev`, the name test/e2e/deploy-overlay
 * sets: the kubelet pulls it when the pods start. Returns that name, as the
 * node's containerd will list it.
 */
export async function pushKubegcImage(
  node: LocalNode,
  log: (line: string) => void,
): Promise<string> {
  const image = await buildKubegcImage({ log });
  const pushed = await pushImage(image.podmanRef, `${node.registry}/kubegc:dev`, node.registryCa);
  log(`image ${pushed.ref}@${pushed.digest} pushed to the node's registry`);
  return pushed.ref;
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
