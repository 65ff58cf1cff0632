// The kubegc command line. Subcommands: `controller` (owner-reference GC) and
// `node` (image and container GC); each lives in its own module under src/.
// Loaded by src/cli.ts once the Node.js version is known to be good.
import { VERSION } from '../version.ts';
import { dispatch, type Command } from './dispatch.ts';
import { UsageError } from './flags.ts';
import { runKubectlPlugin, startedAsKubectlPlugin } from './kubectl-plugin.ts';

/** Subcommands, loaded lazily so `kubegc --help` stays fast. */
const COMMANDS: Record<string, { summary: string; load?: () => Promise<Command> }> = {
  controller: {
    summary: 'owner-reference garbage collection for the whole cluster',
    load: async () => (await import('./controller.ts')).controllerCommand,
  },
  doctor: {
    summary: 'what is stuck in deletion, leaked or invalid, cluster-wide (read-only)',
    load: async () => (await import('./doctor.ts')).doctorCommand,
  },
  explain: {
    summary: 'why an object is or is not being collected (read-only, any cluster)',
    load: async () => (await import('./explain.ts')).explainCommand,
  },
  node: {
    summary: 'image and container garbage collection on this node over CRI',
    load: async () => (await import('./node.ts')).nodeCommand,
  },
};

export const USAGE = `kubegc ${VERSION}: a Kubernetes garbage collector

usage: kubegc <command> [flags]

commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`)
  .join('\n')}

flags:
  -h, --help     show this help (kubegc <command> --help for a command's flags)
  --version      print the version`;

export async function run(argv: string[]): Promise<number> {
  return dispatch(argv, USAGE, async (name) => {
    const command = COMMANDS[name];
    if (!command) throw new UsageError(`unknown command "${name}" (see kubegc --help)`);
    if (!command.load) throw new UsageError(`"${name}" is not implemented in this version`);
    return command.load();
  });
}

export function main(): void {
  const plugin = startedAsKubectlPlugin(process.argv[1]);
  const name = plugin ? 'kubectl gc' : 'kubegc';
  (plugin ? runKubectlPlugin : run)(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      if (err instanceof UsageError) {
        console.error(`${name}: ${err.message}`);
        process.exitCode = 2;
      } else {
        console.error(
          `${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
        );
        process.exitCode = 1;
      }
    },
  );
}
