// `kubegc controller`: the owner-reference garbage collector.
import { DEFAULT_CLIENT_OPTIONS, KubeClient, loadKubeConfig } from '../api/client.ts';
import {
  DEFAULT_GC_OPTIONS,
  DEFAULT_IGNORED_RESOURCES,
  GarbageCollector,
} from '../gc/garbage-collector.ts';
import { createLogger, LEVELS, type Level } from '../log.ts';
import { VERSION } from '../version.ts';
import { formatFlags, parseFlags, UsageError, type FlagSpecs } from './flags.ts';

const atLeast = (min: number) => (v: unknown) =>
  (v as number) < min ? `must be at least ${min}` : undefined;

export const CONTROLLER_FLAGS: FlagSpecs = {
  kubeconfig: {
    kind: 'string',
    help: 'kubeconfig file (else $KUBECONFIG, ~/.kube/config, in-cluster service account)',
  },
  workers: {
    kind: 'int',
    help: 'objects decided in parallel (kube-controller-manager: --concurrent-gc-syncs)',
    default: String(DEFAULT_GC_OPTIONS.workers),
    validate: atLeast(1),
  },
  'discovery-period': {
    kind: 'duration',
    help: 'how often to re-discover resources (new CRDs are watched within this)',
    default: '30s',
    validate: atLeast(1000),
  },
  'ignored-resources': {
    kind: 'list',
    help: `resource.group entries never watched, added to ${DEFAULT_IGNORED_RESOURCES.join(',')}`,
    default: '',
  },
  'kube-api-qps': {
    kind: 'number',
    help: 'client-side limit on API requests per second (0: unlimited)',
    default: String(DEFAULT_CLIENT_OPTIONS.qps),
    validate: atLeast(0),
  },
  'kube-api-burst': {
    kind: 'int',
    help: 'burst allowed above --kube-api-qps',
    default: String(DEFAULT_CLIENT_OPTIONS.burst),
    validate: atLeast(1),
  },
  'request-timeout': {
    kind: 'duration',
    help: 'timeout of one API request (watches excepted)',
    default: '30s',
    validate: atLeast(1000),
  },
  'initial-sync-timeout': {
    kind: 'duration',
    help: 'start deciding after every informer listed once, or after this long',
    default: '30s',
  },
  'dry-run': {
    kind: 'bool',
    help: 'decide, log and count, but never PATCH or DELETE',
    default: 'false',
  },
  'log-level': {
    kind: 'string',
    help: `one of ${LEVELS.join(', ')}`,
    default: 'info',
    validate: (v) =>
      LEVELS.includes(v as Level) ? undefined : `must be one of ${LEVELS.join(', ')}`,
  },
  help: { kind: 'bool', help: 'show this help' },
};

export const CONTROLLER_USAGE = `usage: kubegc controller [flags]

Watches every deletable resource (metadata only) and deletes objects whose
owners are gone, honouring the orphan and foregroundDeletion finalizers.
Logs are JSON lines on stderr; one line per deletion.

flags:
${formatFlags(CONTROLLER_FLAGS)}`;

export async function controllerCommand(argv: string[]): Promise<number> {
  const { flags, args } = parseFlags(argv, CONTROLLER_FLAGS);
  if (flags.help) {
    console.log(CONTROLLER_USAGE);
    return 0;
  }
  if (args.length > 0)
    throw new UsageError(`unexpected argument "${args[0]}" (see kubegc controller --help)`);
  const log = createLogger(flags['log-level'] as Level);
  let kc;
  try {
    kc = loadKubeConfig(flags.kubeconfig as string | undefined);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const client = await KubeClient.create(kc, {
    qps: flags['kube-api-qps'] as number,
    burst: flags['kube-api-burst'] as number,
    requestTimeoutMs: flags['request-timeout'] as number,
    userAgent: `kubegc/${VERSION}`,
  });
  const gc = new GarbageCollector(client, log, {
    workers: flags.workers as number,
    discoveryPeriodMs: flags['discovery-period'] as number,
    ignoredResources: flags['ignored-resources'] as string[],
    dryRun: flags['dry-run'] as boolean,
    initialSyncTimeoutMs: flags['initial-sync-timeout'] as number,
  });
  log.info('kubegc controller starting', {
    version: VERSION,
    server: client.server.toString(),
    dryRun: flags['dry-run'],
  });

  let stopping = false;
  const stopped = new Promise<number>((resolve) => {
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info('stopping', { signal });
      gc.stop()
        .then(() => {
          client.close();
          resolve(0);
        })
        .catch((err: unknown) => {
          log.error('error while stopping', { error: (err as Error).message });
          resolve(1);
        });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await gc.start();
  return stopped;
}
