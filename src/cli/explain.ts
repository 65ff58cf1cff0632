// `kubegc explain RESOURCE/NAME [-n NAMESPACE] [-o text|json]`: read-only.
import { KubeClient, loadKubeConfig } from '../api/client.ts';
import { ExplainError, explain, renderExplanation } from '../explain/explain.ts';
import { explainNode, NODE_EXPLAIN_DEFAULTS } from '../explain/node.ts';
import { renderDiskReport } from '../node/disk-report.ts';
import { VERSION } from '../version.ts';
import { CONTEXT_FLAG, KUBECONFIG_FLAG, OUTPUT_FLAG } from './common-flags.ts';
import { formatFlags, parseFlags, UsageError, type FlagSpecs } from './flags.ts';

export const EXPLAIN_FLAGS = {
  namespace: {
    kind: 'string',
    short: 'n',
    help: 'namespace of a namespaced object (default: default)',
  },
  'agent-namespace': {
    kind: 'string',
    default: NODE_EXPLAIN_DEFAULTS.namespace,
    help: "for node/NAME: the namespace of kubegc's node agents",
  },
  output: OUTPUT_FLAG,
  kubeconfig: KUBECONFIG_FLAG,
  context: CONTEXT_FLAG,
  help: { kind: 'bool', help: 'show this help' },
} satisfies FlagSpecs;

export const EXPLAIN_USAGE = `usage: kubegc explain RESOURCE/NAME [-n NAMESPACE] [-o text|json]
       kubegc explain node/NAME [--agent-namespace NS] [-o text|json]

Explains, from the cluster alone, why an object is or is not being garbage
collected: its owner chain up, its dependents down, their finalizers,
deletionTimestamp and blockOwnerDeletion, and what blocks what. Read-only.

For node/NAME: the node's disk as its kubegc node agent finds it now, asked
through the API server's pod proxy: what image GC could reclaim, what it
cannot and why (in use by which pods, pinned, the sandbox image, too young),
and how far each eviction signal is from the kubelet's threshold. Needs the
ClusterRole kubegc-node-explainer in the agents' namespace.

examples:
  kubegc explain deployment/web -n shop
  kubegc explain replicasets.apps/web-6d4b -n shop -o json
  kubegc explain clusterrole/aggregate-view
  kubegc explain node/worker-1 -o json

flags:
${formatFlags(EXPLAIN_FLAGS)}`;

/** How kubectl spells the Node resource (node/NAME asks the node agent, not the GC's graph). */
const NODE_RESOURCE = new Set(['node', 'nodes', 'no']);

export async function explainCommand(argv: string[]): Promise<number> {
  const { flags, args } = parseFlags(argv, EXPLAIN_FLAGS);
  if (flags.help) {
    console.log(EXPLAIN_USAGE);
    return 0;
  }
  const [target, ...extra] = args;
  if (!target || extra.length > 0)
    throw new UsageError('explain takes exactly one RESOURCE/NAME (see kubegc explain --help)');
  const slash = target.indexOf('/');
  if (slash <= 0 || slash === target.length - 1)
    throw new UsageError(`"${target}" is not RESOURCE/NAME (e.g. deployment/web)`);
  let kc;
  try {
    kc = await loadKubeConfig(flags.kubeconfig, flags.context);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const client = await KubeClient.create(kc, { userAgent: `kubegc/${VERSION} explain` });
  try {
    const resource = target.slice(0, slash);
    if (NODE_RESOURCE.has(resource.toLowerCase())) {
      const report = await explainNode(client, target.slice(slash + 1), {
        ...NODE_EXPLAIN_DEFAULTS,
        namespace: flags['agent-namespace'],
      });
      process.stdout.write(
        flags.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : renderDiskReport(report),
      );
      return 0;
    }
    const result = await explain(
      client,
      target.slice(0, slash),
      target.slice(slash + 1),
      flags.namespace,
    );
    process.stdout.write(
      flags.output === 'json' ? `${JSON.stringify(result, null, 2)}\n` : renderExplanation(result),
    );
    return 0;
  } catch (err) {
    if (err instanceof ExplainError) {
      console.error(`kubegc explain: ${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    client.close();
  }
}
