// `kubectl gc`: kubegc's read-only commands as a kubectl plugin. kubectl
// runs the first `kubectl-gc` on PATH with the arguments after `gc`; npm ci
// links node_modules/.bin/kubectl-gc to the same dist/cli.js as kubegc
// (scripts/link-bin.mjs), which comes here when it is started under that
// name. kubectl's own --kubeconfig, --context, -n and KUBECONFIG are the
// commands' own flags and environment, so they mean what they mean to kubectl.
// Only what reads: the controller and the node agent are not plugins.
import { VERSION } from '../version.ts';
import { UsageError } from './flags.ts';
import { dispatch, type Command } from './dispatch.ts';

const PLUGIN_COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  doctor: {
    summary: 'what is stuck in deletion, leaked or invalid, cluster-wide',
    load: async () => (await import('./doctor.ts')).doctorCommand,
  },
  explain: {
    summary: 'why an object is or is not being collected (RESOURCE/NAME)',
    load: async () => (await import('./explain.ts')).explainCommand,
  },
};

export const PLUGIN_USAGE = `kubectl gc (kubegc ${VERSION}): Kubernetes garbage collection, read-only

usage: kubectl gc <command> [flags]

commands:
${Object.entries(PLUGIN_COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`)
  .join('\n')}

examples:
  kubectl gc doctor --older-than 1h
  kubectl gc explain deployment/web -n shop
  kubectl gc explain clusterrole/aggregate-view --context prod -o json

Each command takes kubectl's --kubeconfig, --context and -n, and reads
KUBECONFIG as kubectl does (kubectl gc <command> --help for its flags).

flags:
  -h, --help     show this help
  --version      print the version`;

/** The plugin's command line: `kubectl gc ARGS` runs `kubectl-gc ARGS`. */
export async function runKubectlPlugin(argv: string[]): Promise<number> {
  return dispatch(argv, PLUGIN_USAGE, async (name) => {
    const command = PLUGIN_COMMANDS[name];
    if (!command)
      throw new UsageError(
        `unknown command "${name}": kubectl gc runs ${Object.keys(PLUGIN_COMMANDS).join(' and ')} (see kubectl gc --help)`,
      );
    return command.load();
  });
}

/** Whether this process was started as the kubectl plugin (its bin's name). */
export function startedAsKubectlPlugin(argv1: string | undefined): boolean {
  const base = (argv1 ?? '').split(/[\\/]/).pop() ?? '';
  return base === 'kubectl-gc' || base === 'kubectl-gc.js';
}
