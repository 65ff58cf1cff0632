// How the repository's own tools (tests, demo, benchmarks) start kubegc from
// source against a local control plane: one place for the Node.js flags, the
// entry point and the controller's loopback-only listeners.
import path from 'node:path';
import { RUNTIME_FLAGS } from '../src/runtime-flags.ts';
import { REPO_ROOT } from './controlplane.ts';

export const KUBEGC_CLI = path.join(REPO_ROOT, 'src', 'cli.ts');

/** node's argv for `kubegc ARGS` from source, as the image and the bin start it. */
export function kubegcArgv(args: readonly string[], nodeFlags: readonly string[] = []): string[] {
  return [
    ...RUNTIME_FLAGS,
    ...nodeFlags,
    '--disable-warning=ExperimentalWarning',
    KUBEGC_CLI,
    ...args,
  ];
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
