// `kubegc controller`: the owner-reference garbage collector.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { DEFAULT_CLIENT_OPTIONS, KubeClient, loadKubeConfig } from '../api/client.ts';
import {
  DEFAULT_GC_OPTIONS,
  DEFAULT_IGNORED_RESOURCES,
  GarbageCollector,
} from '../gc/garbage-collector.ts';
import type { Logger } from '../log.ts';
import { VERSION } from '../version.ts';
import { LeaderElector, type WriteTenure } from '../leader/lease.ts';
import { debugGraphHandler } from '../observability/debug-graph.ts';
import { createControllerMetrics } from '../observability/metrics.ts';
import { controllerProbes } from '../observability/probes.ts';
import { secureServing } from '../shared/serving/secure-serving.ts';
import { startObservabilityServer } from '../shared/serving/server.ts';
import {
  atLeast,
  HEALTH_PROBE_BIND_ADDRESS_FLAG,
  HELP_FLAG,
  LOG_LEVEL_FLAG,
  METRICS_BIND_ADDRESS_FLAG,
  SECURE_SERVING_FLAGS,
  secureServingOptions,
  daemonStart,
  timerDuration,
} from './common-flags.ts';
import { formatFlags, UsageError, type FlagSpecs, type FlagValues } from './flags.ts';

const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export const CONTROLLER_FLAGS = {
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
    validate: timerDuration(1000),
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
  'housekeeping-qps-share': {
    kind: 'number',
    help: "the part of --kube-api-qps that housekeeping (verifying owners never seen, leaked dependents found at start-up) may take while requests of the user's work wait for a token (0 ≤ share < 1); it takes every token when none waits",
    default: String(DEFAULT_CLIENT_OPTIONS.housekeepingQpsShare),
    validate: (v) => (v >= 0 && v < 1 ? undefined : 'must be at least 0 and below 1'),
  },
  'kube-api-content-type': {
    kind: 'string',
    help: "how lists and watches ask for metadata: application/vnd.kubernetes.protobuf (first, JSON as the server's fallback, as kube-controller-manager does; a resource whose protobuf cannot be decoded falls back to JSON) or application/json",
    default: 'application/vnd.kubernetes.protobuf',
    validate: (v) =>
      v === 'application/vnd.kubernetes.protobuf' || v === 'application/json'
        ? undefined
        : 'must be application/vnd.kubernetes.protobuf or application/json',
  },
  'request-timeout': {
    kind: 'duration',
    help: 'timeout of one API request (watches excepted)',
    default: '30s',
    validate: timerDuration(1000),
  },
  'initial-sync-timeout': {
    kind: 'duration',
    help: 'start deciding after every informer listed once, or after this long',
    default: '30s',
    validate: timerDuration(),
  },
  'min-watch-timeout': {
    kind: 'duration',
    help: 'each watch asks the API server to end it after this long to twice this long (client-go: 5m); shorter means more reconnects',
    default: '5m',
    validate: atLeast(1000),
  },
  'orphan-watch-timeout': {
    kind: 'duration',
    help: 'an Orphan deletion waits this long for resources it can neither watch nor list (so that no unseen dependent keeps its reference); then it goes ahead with a warning',
    default: '2m',
  },
  'blocked-deletion-event-after': {
    kind: 'duration',
    help: 'an object whose deletion the GC finalizers hold (foregroundDeletion, orphan) and that stays blocked this long gets a Warning event DeletionBlocked naming what blocks it, repeated at most every 30m (0: no events)',
    default: '5m',
  },
  'dry-run': {
    kind: 'bool',
    help: 'decide, log and count, but never PATCH or DELETE',
    default: 'false',
  },
  'metrics-bind-address': METRICS_BIND_ADDRESS_FLAG('/metrics and /debug/graph'),
  ...SECURE_SERVING_FLAGS,
  'health-probe-bind-address': HEALTH_PROBE_BIND_ADDRESS_FLAG,
  'leader-elect': {
    kind: 'bool',
    help: 'run as one of several replicas: only the holder of a Lease decides and writes',
    default: 'false',
  },
  'leader-elect-lease-duration': {
    kind: 'duration',
    help: 'how long standbys wait before taking a lease that is not renewed',
    default: '15s',
  },
  'leader-elect-renew-deadline': {
    kind: 'duration',
    help: 'how long the leader keeps trying to renew before it stops',
    default: '10s',
    validate: timerDuration(),
  },
  'leader-elect-retry-period': {
    kind: 'duration',
    help: 'interval between attempts to acquire or renew the lease',
    default: '2s',
    validate: timerDuration(100),
  },
  'leader-elect-resource-namespace': {
    kind: 'string',
    help: "namespace of the Lease (default: the pod's namespace in a cluster, else kubegc-system)",
  },
  'leader-elect-resource-name': { kind: 'string', help: 'name of the Lease', default: 'kubegc' },
  'log-level': LOG_LEVEL_FLAG,
  help: HELP_FLAG,
} satisfies FlagSpecs;

export const CONTROLLER_USAGE = `usage: kubegc controller [flags]

Watches every deletable resource (metadata only) and deletes objects whose
owners are gone, honouring the orphan and foregroundDeletion finalizers.
Logs are JSON lines on stderr; one line per deletion.

flags:
${formatFlags(CONTROLLER_FLAGS)}`;

type ControllerFlags = FlagValues<typeof CONTROLLER_FLAGS>;

export async function controllerCommand(argv: string[]): Promise<number> {
  const start = daemonStart('controller', argv, CONTROLLER_FLAGS, CONTROLLER_USAGE);
  if (!start) return 0;
  const { flags, log } = start;
  let kc;
  try {
    kc = await loadKubeConfig(flags.kubeconfig);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { leaseDuration, renewDeadline, retryPeriod } = leaderElectionDurations(flags);
  const metrics = createControllerMetrics();
  // This replica's identity: the Lease holder it writes as, and part of every
  // request's User-Agent so that the API server's audit log attributes each write.
  const identity = `${os.hostname()}_${randomUUID()}`;
  const client = await KubeClient.create(kc, {
    qps: flags['kube-api-qps'],
    burst: flags['kube-api-burst'],
    housekeepingQpsShare: flags['housekeeping-qps-share'],
    requestTimeoutMs: flags['request-timeout'],
    userAgent: `kubegc/${VERSION} (${identity})`,
    onRequest: metrics.apiRequest,
  });
  let elector: LeaderElector | undefined;
  /** Set first thing on SIGTERM/SIGINT or a lost lease: the write guard refuses from then on. */
  let stopping = false;
  // Checked by every write right before it goes on the wire (after the rate
  // limiter, before each retry): with leader election, only while the last
  // renewal started less than the renew deadline ago.
  const writesAllowed = (): boolean => !stopping && (elector ? elector.mayWrite() : true);
  const gc = garbageCollector(flags, client, log, metrics, {
    allowWrites: writesAllowed,
    // Each write's signal aborts when the tenure ends; its timeout is at most
    // leaseDuration − renewDeadline (elector.writeTimeoutMs).
    writeTenure: flags['leader-elect']
      ? {
          writeSignal: () => elector?.writeSignal(),
          writeTimeoutMs: Math.min(flags['request-timeout'], leaseDuration - renewDeadline),
        }
      : undefined,
  });
  metrics.bind({
    graphNodes: () => gc.graph.order,
    virtualNodes: () => gc.graph.countVirtual(),
    monitoredResources: () => gc.monitoredResources(),
    stalledResources: () => gc.stalledInformers(),
    queues: () => [gc.deleteQueue, gc.orphanQueue],
    ownersAwaitingVerification: () => gc.bulkVerifier.waiting,
    rateLimited: (lane) => client.rateLimited(lane),
    isLeader: writesAllowed,
    slis: () => gc.slis,
  });
  // Its own client: a burst of scrapes with new tokens never waits behind the
  // GC's rate limit, and never takes from it.
  const reviewClient = await KubeClient.create(kc, {
    qps: 20,
    burst: 40,
    requestTimeoutMs: 10_000,
    userAgent: `kubegc/${VERSION} (${identity}) metrics-auth`,
  });
  const server = await startObservabilityServer({
    metricsAddress: flags['metrics-bind-address'],
    healthAddress: flags['health-probe-bind-address'],
    secure: await secureServing(secureServingOptions(flags), reviewClient, log),
    registry: metrics.registry,
    ...controllerProbes(gc),
    routes: { '/debug/graph': debugGraphHandler(gc.graph) },
    log,
  });
  log.info('kubegc controller starting', {
    version: VERSION,
    server: client.server.toString(),
    dryRun: flags['dry-run'],
    metricsAddress: server.metrics ?? 'disabled',
    metricsScheme: server.metricsScheme,
    healthAddress: server.health ?? 'disabled',
    leaderElection: flags['leader-elect'],
    identity,
  });

  let leaseClient: KubeClient | undefined;
  if (flags['leader-elect']) {
    const namespace =
      flags['leader-elect-resource-namespace'] ?? readNamespaceFile() ?? 'kubegc-system';
    // Its own client: lease renewals must never wait behind the GC's own rate limit.
    leaseClient = await KubeClient.create(kc, {
      qps: 0,
      userAgent: `kubegc/${VERSION} (${identity}) leader-election`,
    });
    elector = new LeaderElector(leaseClient, log, {
      namespace,
      name: flags['leader-elect-resource-name'],
      identity,
      leaseDurationMs: leaseDuration,
      renewDeadlineMs: renewDeadline,
      retryPeriodMs: retryPeriod,
    });
  }

  return runController({
    gc,
    elector,
    log,
    setStopping: () => {
      stopping = true;
    },
    isStopping: () => stopping,
    close: async () => {
      await server.close();
      client.close();
      reviewClient.close();
      leaseClient?.close();
    },
  });
}

/** The garbage collector the flags describe, writing only while `guard.allowWrites()`. */
function garbageCollector(
  flags: ControllerFlags,
  client: KubeClient,
  log: Logger,
  metrics: ReturnType<typeof createControllerMetrics>,
  guard: { allowWrites: () => boolean; writeTenure: WriteTenure | undefined },
): GarbageCollector {
  return new GarbageCollector(
    client,
    log,
    {
      workers: flags.workers,
      discoveryPeriodMs: flags['discovery-period'],
      ignoredResources: flags['ignored-resources'],
      dryRun: flags['dry-run'],
      initialSyncTimeoutMs: flags['initial-sync-timeout'],
      orphanWatchWaitMs: flags['orphan-watch-timeout'],
      blockedDeletionEventAfterMs: flags['blocked-deletion-event-after'],
      informer: {
        minWatchTimeoutSec: flags['min-watch-timeout'] / 1000,
        protobuf: flags['kube-api-content-type'] === 'application/vnd.kubernetes.protobuf',
      },
      allowWrites: guard.allowWrites,
      writeTenure: guard.writeTenure,
    },
    metrics.gc,
  );
}

/** The three leader-election durations, checked as client-go checks them. */
function leaderElectionDurations(flags: ControllerFlags): {
  leaseDuration: number;
  renewDeadline: number;
  retryPeriod: number;
} {
  const leaseDuration = flags['leader-elect-lease-duration'];
  const renewDeadline = flags['leader-elect-renew-deadline'];
  const retryPeriod = flags['leader-elect-retry-period'];
  if (flags['leader-elect']) {
    if (leaseDuration <= renewDeadline)
      throw new UsageError(
        '--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline',
      );
    if (renewDeadline <= retryPeriod * 1.2)
      throw new UsageError(
        '--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period',
      );
  }
  return { leaseDuration, renewDeadline, retryPeriod };
}

/**
 * Runs the controller until a signal or a lost lease, then stops in the
 * order that keeps two replicas from ever writing at once; resolves to the
 * exit code.
 */
function runController(r: {
  gc: GarbageCollector;
  elector: LeaderElector | undefined;
  log: Logger;
  /** The write guard refuses from the moment this is called. */
  setStopping: () => void;
  isStopping: () => boolean;
  /** The metrics port and the API clients, closed last. */
  close: () => Promise<void>;
}): Promise<number> {
  const { gc, elector, log } = r;
  return new Promise<number>((resolve) => {
    const stop = (signal: string, code: number): void => {
      if (r.isStopping()) return;
      // 1. Writes stop: from here the guard refuses every write not yet on the wire.
      r.setStopping();
      log.info('stopping', { signal });
      (async () => {
        // A standby stops campaigning at once (it has no writes to drain).
        if (elector && !elector.isLeader) await elector.stop();
        // 2. The workers and their in-flight requests (and Event POSTs) drain.
        await gc.stop();
        // 3. Only then is the Lease released, so a standby never writes while we still do.
        await elector?.stop();
        await r.close();
      })()
        .then(() => resolve(code))
        .catch((err: unknown) => {
          log.error('error while stopping', { error: (err as Error).message });
          resolve(1);
        });
    };
    process.once('SIGTERM', () => stop('SIGTERM', 0));
    process.once('SIGINT', () => stop('SIGINT', 0));
    if (!elector) {
      void gc.start();
      return;
    }
    const leader = elector;
    const campaign = leader.run(() => {
      // Like kube-controller-manager: a replica that lost the lease stops
      // writing at once (mayWrite() is already false) and exits, to come back as a standby.
      stop('leader lease lost', 1);
    });
    void (async () => {
      await gc.sync();
      await campaign;
      if (r.isStopping() || !leader.isLeader) return;
      gc.startWorkers();
    })();
  });
}

function readNamespaceFile(): string | undefined {
  try {
    return readFileSync(SA_NAMESPACE_FILE, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
