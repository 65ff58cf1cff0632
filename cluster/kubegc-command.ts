// How the repository's own tools (tests, demo, benchmarks) start kubegc from
// source against a local control plane: one place for the Node.js flags, the
// entry point and the controller's loopback-only listeners.
import path from 'node:path';
import { RUNTIME_FLAGS } from '../src/runtime-flags.ts';
import { REPO_ROOT } from './controlplane.ts';

export const KUBEGC_CLI = path.join(REPO_ROOT, 'src', 'cli.ts');
/** The built CLI (`npm run build`), as the image and the `kubegc` bin run it. */
export const KUBEGC_DIST_CLI = path.join(REPO_ROOT, 'dist', 'cli.js');

/** node's argv for `kubegc ARGS` (from source unless `entry` says otherwise), with the bin's runtime flags. */
export function kubegcArgv(
  args: readonly string[],
  nodeFlags: readonly string[] = [],
  entry: string = KUBEGC_CLI,
  runtimeFlags: readonly string[] = RUNTIME_FLAGS,
): string[] {
  return [...runtimeFlags, ...nodeFlags, '--disable-warning=ExperimentalWarning', entry, ...args];
}

/** `kubegc controller` on this kubeconfig; ephemeral ports, so several may run at once. */
export function controllerArgs(kubeconfig: string, extra: readonly string[] = []): string[] {
  return [
    'controller',
    '--kubeconfig',
    kubeconfig,
    '--metrics-bind-address',
    '127.0.0.1:0',
    '--health-probe-bind-address',
    '127.0.0.1:0',
    ...extra,
  ];
}
