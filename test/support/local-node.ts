// What the e2e files on the local node (`upNode`) share: kubectl against
// their control plane, images put straight into the node's containerd (there
// is no registry), and the node GC DaemonSet's arguments extended for time.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';

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
