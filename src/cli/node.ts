// `kubegc node`: image and container garbage collection on one node, over CRI
// (the DaemonSet mode). Flags are named like the kubelet's.
import type http from 'node:http';
import os from 'node:os';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { KubeClient, loadKubeConfig } from '../api/client.ts';
import { inClusterConfig, SA_DIR, type KubeConfigLike } from '../api/kubeconfig.ts';
import type { Logger } from '../log.ts';
import { ContainerGarbageCollector } from '../node/container-gc.ts';
import { DISK_REPORT_PATH } from '../node/disk-report.ts';
import { DEFAULT_CONTAINER_GC_POLICY } from '../node/container-gc-policy.ts';
import { ImageGarbageCollector } from '../node/image-gc.ts';
import { apiWorkloadReader, ExpectedBackChecker } from '../node/expected-back.ts';
import { imagePatternProblem } from '../node/image-refs.ts';
import {
  DEFAULT_IMAGE_GC_POLICY,
  imageGcDisabled,
  validateImageGcPolicy,
  type ImageGcPolicy,
} from '../node/image-gc-policy.ts';
import { createNodeMetrics, type NodeMetrics } from '../node/metrics.ts';
import { NodeGc } from '../node/node-gc.ts';
import { apiNodeEvents, noNodeEvents, type NodeEvents } from '../node/node-events.ts';
import {
  apiPodLister,
  NODE_NAME_FIX,
  nodeExists,
  nodeNotFoundError,
  PodListGate,
} from '../node/pods.ts';
import { PressureMonitor, rootDirProblem } from '../node/pressure.ts';
import {
  DEFAULT_EVICTION_HARD,
  parseEvictionHard,
  parseReclaimMargin,
  type ThresholdValue,
} from '../node/pressure-policy.ts';
import { RuntimeConnection } from '../node/runtime.ts';
import { secureServing } from '../shared/serving/secure-serving.ts';
import { parseBindAddress, startObservabilityServer } from '../shared/serving/server.ts';
import { VERSION } from '../version.ts';
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

const minutes = (ms: number): string => `${ms / 60_000}m`;

export const NODE_FLAGS = {
  'cri-endpoint': {
    kind: 'string',
    help: "the runtime's CRI socket (kubelet: --container-runtime-endpoint; CRI-O: unix:///var/run/crio/crio.sock)",
    default: 'unix:///run/containerd/containerd.sock',
  },
  'runtime-request-timeout': {
    kind: 'duration',
    help: 'deadline of every CRI call',
    default: '2m',
    validate: timerDuration(100),
  },
  'request-timeout': {
    kind: 'duration',
    // Short by default: a pressure reclaim waits on the pod list before it frees anything,
    // and the kubelet's eviction manager looks again every 10 s. An API server that does not
    // answer within this makes the pods unknown for that pass (nothing goes for a pod reason).
    help: 'timeout of one API request (the Node read, each page of the pod list, events); an unanswered read leaves the pods unknown for that pass',
    default: '5s',
    validate: timerDuration(100),
  },
  'node-name': {
    kind: 'string',
    help: "this node (the DaemonSet passes spec.nodeName); default: $NODE_NAME, else the host name; with API access a name the API has no Node of means this node's pods are unknown (nothing of deleted pods is removed)",
    // '' falls back to $NODE_NAME and the host name, as the kubelet's --hostname-override.
    validate: (v) => {
      if (typeof v !== 'string' || v === '') return undefined;
      const problem = nodeNameProblem(v.toLowerCase());
      return problem && `"${v}" ${problem}`;
    },
  },
  kubeconfig: {
    kind: 'string',
    help: 'API credentials (in a pod: the service account); without API access, containers of deleted pods are kept and no events are recorded',
  },
  'image-gc-high-threshold': {
    kind: 'int',
    help: 'image filesystem usage percent at or above which images are removed',
    default: String(DEFAULT_IMAGE_GC_POLICY.highThresholdPercent),
  },
  'image-gc-low-threshold': {
    kind: 'int',
    help: 'usage percent image GC frees down to',
    default: String(DEFAULT_IMAGE_GC_POLICY.lowThresholdPercent),
  },
  'image-minimum-gc-age': {
    kind: 'duration',
    help: 'images detected more recently are never removed for space',
    default: minutes(DEFAULT_IMAGE_GC_POLICY.minAgeMs),
  },
  'image-maximum-gc-age': {
    kind: 'duration',
    help: 'unused images older than this are removed whatever the usage (0: off)',
    default: '0',
  },
  'eviction-hard': {
    kind: 'string',
    help: "the kubelet's hard eviction thresholds, in its syntax (signal<value, comma-separated; given, it replaces the defaults, as on the kubelet); kubegc reclaims disk before a nodefs, imagefs or containerfs signal gets there (memory and pid signals are accepted and ignored); '' turns pressure reclaim off",
    default: DEFAULT_EVICTION_HARD,
  },
  'eviction-reclaim-margin': {
    kind: 'string',
    help: 'reclaim starts when a disk signal is within this of its --eviction-hard threshold and frees until it is twice this above (a percentage of the filesystem, at most 10%, or a quantity such as 2Gi)',
    default: '5%',
  },
  'root-dir': {
    kind: 'string',
    help: "a path on the kubelet's root filesystem (the kubelet's --root-dir, or a directory below it): nodefs for the eviction signals",
    default: '/var/lib/kubelet',
  },
  'pressure-check-period': {
    kind: 'duration',
    help: "time between disk pressure checks (statfs only, unless a reclaim is due); shorter than the kubelet's 10s so that the margin is not spent waiting for a check; 0: pressure reclaim off",
    // The kubelet's eviction manager checks every 10 s at a phase kubegc does
    // not know; checking as rarely spends on average half the time the margin
    // buys before kubegc even looks (a 3 MB/s fill crossed the 5% margin of a
    // 1 GiB imagefs in 17 s in the node soak). Three statfs calls are cheap.
    default: '2s',
    validate: (v) => (v === 0 || v >= 100 ? undefined : 'must be 0 or at least 100ms'),
  },
  'pinned-images': {
    kind: 'list',
    help: 'image globs never removed, e.g. registry.k8s.io/pause:*,*/critical/* (* spans / and :); compared as written and as the runtimes normalise references (nginx:*, docker.io/nginx:* and index.docker.io/library/nginx:* all match docker.io/library/nginx:1.25; a tag+digest pattern matches the digest and the tag); a pattern without wildcards that is not a valid reference or image ID is a usage error',
    default: '',
    // A pattern no image can match pins nothing, silently: refuse it.
    validate: (v) =>
      Array.isArray(v) ? v.map(imagePatternProblem).find((p) => p?.certain)?.message : undefined,
  },
  'expected-back-images': {
    kind: 'bool',
    help: 'with API access, an image whose last user on this node was a pod of a workload that still exists and names it (a CronJob, a Deployment, StatefulSet or ReplicaSet even scaled to 0, a DaemonSet, a Job not finished) is removed last for space and never for --image-maximum-gc-age; the workload is read (GET) only when such an image is about to go',
    default: 'true',
  },
  'expected-back-max-unused': {
    kind: 'duration',
    help: 'an image unused for longer than this is no longer protected as expected back (0: no bound)',
    default: '168h',
  },
  'pod-infra-container-image': {
    kind: 'string',
    help: 'the sandbox (pause) image, never removed; default: what the runtime reports',
  },
  'max-removals-per-run': {
    kind: 'int',
    help: 'at most this many image removals per image GC pass (0: no cap)',
    default: '0',
    validate: atLeast(0),
  },
  'state-file': {
    kind: 'string',
    help: "where image ages (first detected, last used) persist across restarts ('' keeps them in memory, like the kubelet)",
    default: '',
  },
  'image-gc-period': {
    kind: 'duration',
    help: 'time between image GC passes',
    default: '5m',
    validate: atLeast(100),
  },
  'container-gc-period': {
    kind: 'duration',
    help: 'time between container GC passes',
    default: '1m',
    validate: atLeast(100),
  },
  'minimum-container-ttl-duration': {
    kind: 'duration',
    help: 'dead containers younger than this are kept',
    default: String(DEFAULT_CONTAINER_GC_POLICY.minAgeMs),
  },
  'maximum-dead-containers-per-container': {
    kind: 'int',
    help: 'dead containers kept per pod and container name (<0: no limit)',
    default: String(DEFAULT_CONTAINER_GC_POLICY.maxPerPodContainer),
  },
  'maximum-dead-containers': {
    kind: 'int',
    help: 'dead containers kept on the node (<0: no limit)',
    default: String(DEFAULT_CONTAINER_GC_POLICY.maxContainers),
  },
  'pod-logs-dir': {
    kind: 'string',
    help: 'pod log directories (<namespace>_<name>_<uid>) of deleted pods are removed here',
    default: '/var/log/pods',
  },
  'container-logs-dir': {
    kind: 'string',
    help: 'legacy container log symlinks of removed containers and dangling ones are removed here',
    default: '/var/log/containers',
  },
  once: {
    kind: 'bool',
    help: `one container pass, one image pass and one pressure check, then exit: 0 done, 1 a pass failed, 3 the low threshold was not reached or a pressure reclaim fell short`,
    default: 'false',
  },
  'dry-run': {
    kind: 'bool',
    help: 'decide and log what would be removed, remove nothing',
    default: 'false',
  },
  'metrics-bind-address': METRICS_BIND_ADDRESS_FLAG('/metrics'),
  ...SECURE_SERVING_FLAGS,
  'health-probe-bind-address': HEALTH_PROBE_BIND_ADDRESS_FLAG,
  'log-level': LOG_LEVEL_FLAG,
  help: HELP_FLAG,
} satisfies FlagSpecs;

export const NODE_USAGE = `usage: kubegc node [flags]

Keeps this node's disk healthy over CRI, with the kubelet's image and
container GC policies: least recently used unused images are removed when the
image filesystem passes the high threshold, dead containers beyond the
per-container and node limits are removed, and so are inactive sandboxes.
Before the kubelet's eviction manager would act (a disk signal within
--eviction-reclaim-margin of --eviction-hard), it reclaims as the kubelet
does: dead containers of terminated and evicted pods, then unused images.
Images in use, named by pods bound to this node, pinned by the runtime or
--pinned-images, and the sandbox image are never removed; images a workload
on the cluster still names (expected back) go last. Logs are JSON lines on
stderr; one line per removal.

flags:
${formatFlags(NODE_FLAGS)}`;

/** API access: --kubeconfig, else the service account in a pod, else none. */
async function apiClient(
  path: string | undefined,
  requestTimeoutMs: number,
): Promise<KubeClient | undefined> {
  let kc: KubeConfigLike;
  if (path) {
    try {
      kc = await loadKubeConfig(path);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  } else if (process.env.KUBERNETES_SERVICE_HOST) {
    const inCluster = inClusterConfig();
    if (!inCluster)
      throw new UsageError(
        `KUBERNETES_SERVICE_HOST is set but there is no service account token in ${SA_DIR} (automountServiceAccountToken: false?)`,
      );
    kc = inCluster;
  } else {
    return undefined;
  }
  return KubeClient.create(kc, { userAgent: `kubegc/${VERSION} node`, requestTimeoutMs });
}

type NodeFlags = FlagValues<typeof NODE_FLAGS>;

/** The image GC policy and the eviction thresholds of the flags, checked together. */
function nodePolicies(flags: NodeFlags): {
  imagePolicy: ImageGcPolicy;
  eviction: ReturnType<typeof parseEvictionHard>;
  margin: ThresholdValue;
} {
  const imagePolicy = {
    highThresholdPercent: flags['image-gc-high-threshold'],
    lowThresholdPercent: flags['image-gc-low-threshold'],
    minAgeMs: flags['image-minimum-gc-age'],
    maxAgeMs: flags['image-maximum-gc-age'],
  };
  const problems = validateImageGcPolicy(imagePolicy);
  if (problems.length > 0) throw new UsageError(problems.join('; '));
  try {
    return {
      imagePolicy,
      eviction: parseEvictionHard(flags['eviction-hard']),
      margin: parseReclaimMargin(flags['eviction-reclaim-margin']),
    };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** What every pass shares: the runtime, the API (if any), the log, the metrics, the Events. */
interface NodeDeps {
  runtime: RuntimeConnection;
  pods: PodListGate | undefined;
  /** The API client, if any (the workloads of images expected back are read with it). */
  client: KubeClient | undefined;
  nodeName: string;
  log: Logger;
  metrics: NodeMetrics;
  events: NodeEvents;
}

function imageCollector(
  flags: NodeFlags,
  imagePolicy: ImageGcPolicy,
  d: NodeDeps,
): ImageGarbageCollector {
  return new ImageGarbageCollector(
    d.runtime,
    {
      policy: imagePolicy,
      pinnedImages: flags['pinned-images'],
      sandboxImage: flags['pod-infra-container-image'] || undefined,
      maxRemovalsPerRun: flags['max-removals-per-run'],
      stateFile: flags['state-file'],
      dryRun: flags['dry-run'],
      ...(d.pods ? { pods: d.pods } : {}),
      // Without API access no workload can be read: nothing is expected back.
      ...(d.client && flags['expected-back-images']
        ? {
            expectedBack: {
              check: new ExpectedBackChecker(apiWorkloadReader(d.client), d.log, d.metrics),
              maxUnusedMs: flags['expected-back-max-unused'],
            },
          }
        : {}),
    },
    d.log,
    d.metrics,
    d.events,
  );
}

function containerCollector(flags: NodeFlags, d: NodeDeps): ContainerGarbageCollector {
  return new ContainerGarbageCollector(
    d.runtime,
    {
      policy: {
        minAgeMs: flags['minimum-container-ttl-duration'],
        maxPerPodContainer: flags['maximum-dead-containers-per-container'],
        maxContainers: flags['maximum-dead-containers'],
      },
      podLogsDir: flags['pod-logs-dir'],
      containerLogsDir: flags['container-logs-dir'],
      dryRun: flags['dry-run'],
      ...(d.pods ? { pods: d.pods } : {}),
      nodeName: d.nodeName,
    },
    d.log,
    d.metrics,
    d.events,
  );
}

/** The pressure reclaim, unless --eviction-hard is empty or --pressure-check-period 0. */
async function pressureMonitor(
  flags: NodeFlags,
  eviction: ReturnType<typeof parseEvictionHard>,
  margin: ThresholdValue,
  d: NodeDeps,
): Promise<PressureMonitor | undefined> {
  const on = eviction.thresholds.length > 0 && flags['pressure-check-period'] > 0;
  // Checked before any pass: --once would otherwise run both and fail only at the pressure check.
  const rootProblem = on && (await rootDirProblem(flags['root-dir']));
  if (rootProblem) throw new UsageError(rootProblem);
  if (eviction.ignored.length)
    d.log.info(
      'eviction signals kubegc does not act on (it reclaims disk; containerfs is derived from nodefs or imagefs, as on the kubelet)',
      {
        signals: eviction.ignored,
      },
    );
  if (!on) return undefined;
  return new PressureMonitor(
    d.runtime,
    {
      thresholds: eviction.thresholds,
      margin,
      rootDir: flags['root-dir'],
      dryRun: flags['dry-run'],
    },
    d.log,
    d.metrics,
    d.events,
  );
}

export async function nodeCommand(argv: string[]): Promise<number> {
  const start = daemonStart('node', argv, NODE_FLAGS, NODE_USAGE);
  if (!start) return 0;
  const { flags, log } = start;
  const { imagePolicy, eviction, margin } = nodePolicies(flags);
  const { nodeName, nameFrom } = resolveNodeName(flags['node-name']);
  const dryRun = flags['dry-run'];
  const once = flags.once;
  // Globs are checked by trying typical expansions, which can miss: a warning, not a refusal.
  for (const problem of flags['pinned-images'].map(imagePatternProblem))
    if (problem) log.warn(`--pinned-images: ${problem.message}`);

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const metrics = createNodeMetrics(registry);
  const client = await apiClient(flags.kubeconfig, flags['request-timeout']);
  const serveMetrics = !flags.once && parseBindAddress(flags['metrics-bind-address']);
  if (serveMetrics && flags['metrics-secure'] && !client)
    throw new UsageError(
      'no API access for the metrics port (--metrics-secure checks callers with TokenReview and SubjectAccessReview): give --kubeconfig, run in a cluster, or pass --metrics-secure=false or --metrics-bind-address=0',
    );
  if (client) {
    // A name from NODE_NAME or the host name is input too: one that cannot be
    // a Node's would leave this node's pods unknown on every pass.
    const problem = nodeNameProblem(nodeName);
    if (problem)
      throw new UsageError(
        `the node name "${nodeName}" (from ${nameFrom}) ${problem}; ${NODE_NAME_FIX}`,
      );
  }
  const runtime = new RuntimeConnection(
    flags['cri-endpoint'],
    flags['runtime-request-timeout'],
    log,
    (up) => metrics.runtimeUp.set(up ? 1 : 0),
  );
  const deps: NodeDeps = {
    runtime,
    pods: client ? new PodListGate(apiPodLister(client, nodeName)) : undefined,
    client,
    nodeName,
    log,
    metrics,
    events: client ? apiNodeEvents(client, nodeName, log) : noNodeEvents,
  };
  const pressure = await pressureMonitor(flags, eviction, margin, deps);
  const pressurePeriodMs = flags['pressure-check-period'];
  const gc = new NodeGc({
    runtime,
    images: imageCollector(flags, imagePolicy, deps),
    containers: containerCollector(flags, deps),
    log,
    metrics,
    events: deps.events,
    options: {
      imagePeriodMs: flags['image-gc-period'],
      containerPeriodMs: flags['container-gc-period'],
      imageGc: !imageGcDisabled(imagePolicy),
      pressurePeriodMs,
    },
    ...(pressure ? { pressure } : {}),
    ...(deps.pods ? { podLists: deps.pods } : {}),
  });
  const startFields = {
    version: VERSION,
    node: nodeName,
    endpoint: runtime.endpoint,
    api: client ? client.server.toString() : 'none',
    dryRun,
    once,
    imagePolicy,
    evictionHard: eviction.thresholds.map(
      (t) => `${t.signal}<${'percent' in t.value ? `${t.value.percent}%` : t.value.quantity}`,
    ),
    evictionReclaimMargin: flags['eviction-reclaim-margin'],
    pressureCheck: pressure ? `every ${pressurePeriodMs} ms` : 'off',
    expectedBack:
      client && flags['expected-back-images']
        ? { maxUnusedMs: flags['expected-back-max-unused'] }
        : 'off',
  };
  if (!client)
    log.info(
      'no API access: containers and log directories of deleted pods are kept, events only logged',
    );
  else await checkNodeAtStart(client, nodeName, nameFrom, log);

  if (once) {
    log.info('kubegc node: one pass', startFields);
    const code = await gc.once();
    await gc.stop();
    // The API client stays open: events still being recorded finish, and the
    // process exits once they have (idle keep-alive sockets do not hold it).
    return code;
  }

  const server = await startObservabilityServer({
    metricsAddress: flags['metrics-bind-address'],
    healthAddress: flags['health-probe-bind-address'],
    secure: serveMetrics
      ? await secureServing(secureServingOptions(flags), client, log)
      : undefined,
    registry,
    log,
    routes: { [DISK_REPORT_PATH]: (_req, res) => serveDiskReport(gc, nodeName, res, log) },
    healthz: () => ({ ok: true }),
    readyz: () =>
      runtime.up
        ? { ok: true }
        : { ok: false, reason: `container runtime at ${runtime.endpoint} not reachable` },
  });
  log.info('kubegc node starting', {
    ...startFields,
    metricsAddress: server.metrics ?? 'disabled',
    metricsScheme: server.metricsScheme,
    healthAddress: server.health ?? 'disabled',
  });
  return runUntilSignal(gc, log, async () => {
    await server.close();
    client?.close();
  });
}

/**
 * GET /debug/disk on the metrics port (authorised as /metrics is, by its own
 * path): the disk as a pass would find it now, for `kubegc explain node/NAME`.
 * A failure (the runtime down) is a 503 with the reason, not a crash.
 */
async function serveDiskReport(
  gc: NodeGc,
  nodeName: string,
  res: http.ServerResponse,
  log: Logger,
): Promise<void> {
  try {
    const report = await gc.explain(nodeName);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`${JSON.stringify(report)}\n`);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log.warn('cannot explain the disk', { error: message });
    res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`cannot explain the disk now: ${message}\n`);
  }
}

/** The node name: --node-name, else $NODE_NAME, else the host name, lowercased (as the kubelet's). */
function resolveNodeName(flag: string | undefined): { nodeName: string; nameFrom: string } {
  if (flag) return { nodeName: flag.toLowerCase(), nameFrom: '--node-name' };
  if (process.env.NODE_NAME)
    return { nodeName: process.env.NODE_NAME.toLowerCase(), nameFrom: '$NODE_NAME' };
  return { nodeName: os.hostname().toLowerCase(), nameFrom: 'the host name' };
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why a (lowercased) name cannot be a Node's, which is a DNS subdomain. */
function nodeNameProblem(name: string): string | undefined {
  if (name.length > 253) return 'is longer than 253 characters, so no Node can have it';
  if (!DNS_SUBDOMAIN.test(name))
    return "is not a DNS subdomain (lowercase letters, digits, '-' and '.'), so no Node can have it";
  return undefined;
}

/**
 * The Node is read at start so a wrong name is said at once, with where it
 * came from; every pass that lists pods reads it again (pods.ts).
 */
async function checkNodeAtStart(
  client: KubeClient,
  nodeName: string,
  nameFrom: string,
  log: Logger,
): Promise<void> {
  try {
    if (await nodeExists(client, nodeName)) return;
    log.error(nodeNotFoundError(nodeName).message, { node: nodeName, nameFrom });
  } catch (err) {
    log.warn("cannot read this node's Node object; checked again before each pod list", {
      node: nodeName,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

function runUntilSignal(gc: NodeGc, log: Logger, cleanup: () => Promise<void>): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info('stopping', { signal });
      gc.stop()
        .then(cleanup)
        .then(() => resolve(0))
        .catch((err: unknown) => {
          log.error('error while stopping', { error: (err as Error).message });
          resolve(1);
        });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    gc.start();
  });
}
