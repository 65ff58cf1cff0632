// Images expected back (issue 35): an image whose last user on this node was
// a pod of a workload that still exists and still names it (a CronJob's next
// Job, a Deployment or StatefulSet rolling or scaled to zero, a DaemonSet)
// will most likely be pulled again soon. The image pass removes such images
// last, and never for the maximum age (image-gc-policy.ts withExpectedBack).
//
// Cost, for a fleet: no node watches workloads. The node already knows, from
// its own pods, the controller of each image's last user (ImageRecord.lastUser);
// only when an image with such a record is about to be removed is its
// workload read, by GET of one object by namespace and name (never a list or
// a watch), and every answer is kept for a while (EXPECTED_BACK_TTL_MS), so a
// pass with many images of one workload reads it once. Anything that cannot
// be read (RBAC, a kind not served, no answer) means "not expected back": it
// never blocks a pass, and is counted.
import type { KubeClient } from '../api/client.ts';
import { ApiError, isObjectNotFound } from '../api/errors.ts';
import type { Logger } from '../log.ts';
import { TtlLru } from '../shared/ttl-lru.ts';
import type { LastUser } from './image-gc-policy.ts';
import { imageRefNames } from './image-refs.ts';
import type { NodeMetrics } from './metrics.ts';
import { controllerRef, type OwnerRef, type RawOwnerRef } from './pods.ts';

/** How a check ended: a closed set, the metric's label. */
export type ExpectedBackResult =
  /** The workload exists and names the image: removed last, never for age. */
  | 'expected-back'
  /** It exists but will not bring the image back (suspended, finished, deleting, another image). */
  | 'not-expected-back'
  /** An object of the chain is gone (a 404 naming it, or another object under its name). */
  | 'gone'
  /** A controller kubegc does not follow (a custom one, a ReplicationController, a Node for a mirror pod). */
  | 'unsupported-kind'
  /** It could not be read (RBAC, a kind not served, no answer, a 5xx). */
  | 'unreadable';

export const EXPECTED_BACK_RESULTS: readonly ExpectedBackResult[] = [
  'expected-back',
  'not-expected-back',
  'gone',
  'unsupported-kind',
  'unreadable',
];

export interface ExpectedBackVerdict {
  result: ExpectedBackResult;
  /** The workload decided on (or the object the chain stopped at), as "CronJob shop/nightly". */
  workload: string;
  /** Why, in words (the log). */
  why: string;
}

export interface CheckOptions {
  /** A pressure reclaim: each read gives up after EXPECTED_BACK_URGENT_TIMEOUT_MS. */
  urgent?: boolean;
  /** Ends the wait: the check answers `unreadable` at once (the read goes on and fills the cache). */
  signal?: AbortSignal;
}

/** Decides whether an image last used by `user`'s pod is expected back. Never throws. */
export interface ExpectedBackCheck {
  check(user: LastUser, names: readonly string[], o?: CheckOptions): Promise<ExpectedBackVerdict>;
}

/** The workload kinds kubegc reads: group and kind, and where one lives in the API. */
export type WorkloadKind =
  'Job' | 'CronJob' | 'ReplicaSet' | 'Deployment' | 'StatefulSet' | 'DaemonSet';

const KINDS: Record<WorkloadKind, { group: string; version: string; resource: string }> = {
  Job: { group: 'batch', version: 'v1', resource: 'jobs' },
  CronJob: { group: 'batch', version: 'v1', resource: 'cronjobs' },
  ReplicaSet: { group: 'apps', version: 'v1', resource: 'replicasets' },
  Deployment: { group: 'apps', version: 'v1', resource: 'deployments' },
  StatefulSet: { group: 'apps', version: 'v1', resource: 'statefulsets' },
  DaemonSet: { group: 'apps', version: 'v1', resource: 'daemonsets' },
};

/**
 * The kind an ownerReference names, if kubegc follows it. By group and kind:
 * the version in a reference is the one its writer used, and kubegc reads
 * every kind at its served v1.
 */
export function workloadKindOf(ref: {
  apiVersion: string;
  kind: string;
}): WorkloadKind | undefined {
  const slash = ref.apiVersion.indexOf('/');
  const group = slash === -1 ? '' : ref.apiVersion.slice(0, slash);
  const spec = (KINDS as Record<string, { group: string } | undefined>)[ref.kind];
  return spec && spec.group === group ? (ref.kind as WorkloadKind) : undefined;
}

/** The path of one workload object (GET by namespace and name). */
export function workloadPath(kind: WorkloadKind, namespace: string, name: string): string {
  const k = KINDS[kind];
  return `/apis/${k.group}/${k.version}/namespaces/${encodeURIComponent(namespace)}/${k.resource}/${encodeURIComponent(name)}`;
}

interface RawPodSpec {
  containers?: { image?: string }[];
  initContainers?: { image?: string }[];
  volumes?: { image?: { reference?: string } }[];
}

/** A workload object as the API gives it, reduced to what the decision reads. */
export interface RawWorkload {
  metadata?: {
    uid?: string;
    deletionTimestamp?: string;
    ownerReferences?: RawOwnerRef[];
  };
  spec?: {
    suspend?: boolean;
    template?: { spec?: RawPodSpec };
    jobTemplate?: { spec?: { template?: { spec?: RawPodSpec } } };
  };
  status?: { conditions?: { type?: string; status?: string }[] };
}

/**
 * What is kept of a workload object (in the cache): its UID, whether it is
 * being deleted, suspended (a CronJob) or finished (a Job), its controller,
 * and every image its pod template names, normalised.
 */
export interface WorkloadSummary {
  uid: string;
  deleting: boolean;
  suspended: boolean;
  finished: boolean;
  controller?: OwnerRef;
  images: string[];
}

function templateOf(kind: WorkloadKind, w: RawWorkload): RawPodSpec | undefined {
  return kind === 'CronJob' ? w.spec?.jobTemplate?.spec?.template?.spec : w.spec?.template?.spec;
}

export function summarizeWorkload(kind: WorkloadKind, w: RawWorkload): WorkloadSummary {
  const spec = templateOf(kind, w);
  const images = new Set<string>();
  const refs = [
    ...(spec?.containers ?? []).map((c) => c.image),
    ...(spec?.initContainers ?? []).map((c) => c.image),
    ...(spec?.volumes ?? []).map((v) => v.image?.reference),
  ];
  for (const ref of refs) if (ref) for (const n of imageRefNames(ref)) images.add(n);
  const controller = controllerRef(w.metadata?.ownerReferences);
  return {
    uid: w.metadata?.uid ?? '',
    deleting: Boolean(w.metadata?.deletionTimestamp),
    suspended: kind === 'CronJob' && w.spec?.suspend === true,
    finished:
      kind === 'Job' &&
      (w.status?.conditions ?? []).some(
        (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
      ),
    ...(controller ? { controller } : {}),
    images: [...images],
  };
}

/**
 * The decision on the workload the chain ends at (pure): it exists (the
 * caller read it), is not being deleted, and its pod template names the image
 * by one of its names (`names`, imageNames of the image: both sides
 * normalised). A CronJob must not be suspended; a Job (one no CronJob owns)
 * must not have finished. A Deployment or StatefulSet scaled to zero still
 * counts: scaling up brings the image back.
 */
export function decideWorkload(
  kind: WorkloadKind,
  w: WorkloadSummary,
  names: readonly string[],
): { expected: boolean; why: string } {
  if (w.deleting) return { expected: false, why: 'being deleted' };
  if (w.suspended) return { expected: false, why: 'suspended' };
  if (w.finished) return { expected: false, why: 'finished (Complete or Failed)' };
  const images = new Set(w.images);
  if (!names.some((n) => images.has(n)))
    return { expected: false, why: 'its pod template no longer names the image' };
  return {
    expected: true,
    why:
      kind === 'CronJob'
        ? "its pod template names the image: the next Job's pod will use it"
        : kind === 'Job'
          ? 'not finished, and its pod template names the image'
          : 'its pod template names the image',
  };
}

/**
 * The name the CronJob controller gives its Jobs: `<cronjob>-<scheduled time
 * in minutes>`. A Job deleted after it finished (ttlSecondsAfterFinished,
 * history limits) leaves only that name; its CronJob is looked for under the
 * part before the suffix.
 */
export function cronJobOfJobName(jobName: string): string | undefined {
  const m = /^(.+)-\d{8,}$/.exec(jobName);
  return m?.[1];
}

/** "CronJob shop/nightly": how a workload is named in notes and logs. */
export function workloadName(kind: string, namespace: string, name: string): string {
  return `${kind} ${namespace}/${name}`;
}

/** One GET's outcome: the object, gone (a 404 naming it), or unreadable. */
export type ReadOutcome =
  | { kind: 'found'; summary: WorkloadSummary }
  | { kind: 'gone' }
  | { kind: 'unreadable'; error: string };

/** Reads one workload object by kind, namespace and name (never a list or a watch). */
export type WorkloadReader = (
  kind: WorkloadKind,
  namespace: string,
  name: string,
  o: { timeoutMs?: number },
) => Promise<ReadOutcome>;

/**
 * GET of one object with the node's API client. Only a 404 whose Status
 * names the object means gone: a 404 for the path (a kind not served, an
 * API group missing) says nothing about the object, and is unreadable.
 */
export function apiWorkloadReader(client: KubeClient): WorkloadReader {
  return async (kind, namespace, name, o) => {
    try {
      const w = await client.request<RawWorkload>('GET', workloadPath(kind, namespace, name), {
        ...(o.timeoutMs ? { timeoutMs: o.timeoutMs, retryThrottled: false } : {}),
      });
      return { kind: 'found', summary: summarizeWorkload(kind, w) };
    } catch (err) {
      if (isObjectNotFound(err, name)) return { kind: 'gone' };
      const status = err instanceof ApiError ? err.status : undefined;
      return {
        kind: 'unreadable',
        error: `${status ? `${status}: ` : ''}${err instanceof Error ? err.message : String(err)}`,
      };
    }
  };
}

function abortReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return `not answered in time: ${r instanceof Error ? r.message : String(r)}`;
}

/** Answers are reused this long (a pass with many images of one workload reads it once). */
export const EXPECTED_BACK_TTL_MS = 60_000;
/** At most this many answers are kept (the oldest go first). */
export const EXPECTED_BACK_CACHE_MAX = 1000;
/** A pressure reclaim's reads give up after this long (it does not wait on the API server). */
export const EXPECTED_BACK_URGENT_TIMEOUT_MS = 2_000;

export interface ExpectedBackCheckerOptions {
  ttlMs?: number;
  maxEntries?: number;
  now?: () => number;
}

/**
 * Follows the chain from a pod's controller to the workload that would bring
 * its image back, reading each object once per TTL:
 * Job → its CronJob if a CronJob controls it, else the Job itself (a Job
 * already deleted: the CronJob its name points at); ReplicaSet → its
 * Deployment if one controls it, else the ReplicaSet; StatefulSet,
 * DaemonSet (and a Deployment or CronJob named directly) → itself. Any other
 * controller is not followed. An object of another UID under the name is
 * another object: the one referenced is gone.
 */
export class ExpectedBackChecker implements ExpectedBackCheck {
  private readonly read: WorkloadReader;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly ttlMs: number;
  private readonly now: () => number;
  /** Outcomes by kind/namespace/name, for ttlMs from when they were asked. */
  private readonly cache: TtlLru<Promise<ReadOutcome>>;

  constructor(
    read: WorkloadReader,
    log: Logger,
    metrics: NodeMetrics,
    o: ExpectedBackCheckerOptions = {},
  ) {
    this.read = read;
    this.log = log;
    this.metrics = metrics;
    this.ttlMs = o.ttlMs ?? EXPECTED_BACK_TTL_MS;
    this.now = o.now ?? Date.now;
    this.cache = new TtlLru(o.maxEntries ?? EXPECTED_BACK_CACHE_MAX, this.now);
  }

  async check(
    user: LastUser,
    names: readonly string[],
    o: CheckOptions = {},
  ): Promise<ExpectedBackVerdict> {
    let verdict: ExpectedBackVerdict;
    const named = workloadName(user.owner.kind, user.namespace, user.owner.name);
    const { signal } = o;
    let onAbort: (() => void) | undefined;
    try {
      const followed = this.follow(user.namespace, user.owner, names, o.urgent === true);
      verdict = await (signal
        ? Promise.race([
            followed,
            new Promise<ExpectedBackVerdict>((resolve) => {
              onAbort = () =>
                resolve({ result: 'unreadable', workload: named, why: abortReason(signal) });
              if (signal.aborted) onAbort();
              else signal.addEventListener('abort', onAbort, { once: true });
            }),
          ])
        : followed);
    } catch (err) {
      // Not expected: follow() turns every failure into a verdict. Still never out of a pass.
      verdict = {
        result: 'unreadable',
        workload: named,
        why: err instanceof Error ? err.message : String(err),
      };
    } finally {
      if (signal && onAbort) signal.removeEventListener('abort', onAbort);
    }
    this.metrics.expectedBackChecks.inc({ result: verdict.result });
    return verdict;
  }

  private async follow(
    namespace: string,
    ref: OwnerRef,
    names: readonly string[],
    urgent: boolean,
  ): Promise<ExpectedBackVerdict> {
    const kind = workloadKindOf(ref);
    const named = workloadName(ref.kind, namespace, ref.name);
    if (!kind)
      return {
        result: 'unsupported-kind',
        workload: named,
        why: `${ref.apiVersion} ${ref.kind} is not a controller kubegc follows`,
      };
    const got = await this.get(kind, namespace, ref.name, urgent);
    if (got.kind === 'unreadable') return { result: 'unreadable', workload: named, why: got.error };
    if (got.kind === 'gone' || got.summary.uid !== ref.uid) {
      const why =
        got.kind === 'gone' ? 'not found' : `another object (UID ${got.summary.uid}) has its name`;
      const cronJob = kind === 'Job' ? cronJobOfJobName(ref.name) : undefined;
      if (cronJob) return this.cronJobOfGoneJob(namespace, cronJob, names, urgent, named, why);
      return { result: 'gone', workload: named, why };
    }
    const c = got.summary.controller;
    if (kind === 'Job' && c && workloadKindOf(c) === 'CronJob')
      return this.follow(namespace, c, names, urgent);
    if (kind === 'ReplicaSet' && c && workloadKindOf(c) === 'Deployment')
      return this.follow(namespace, c, names, urgent);
    const d = decideWorkload(kind, got.summary, names);
    return {
      result: d.expected ? 'expected-back' : 'not-expected-back',
      workload: named,
      why: d.why,
    };
  }

  /** A Job gone whose name is a CronJob's: that CronJob decides, if it exists. */
  private async cronJobOfGoneJob(
    namespace: string,
    name: string,
    names: readonly string[],
    urgent: boolean,
    job: string,
    jobWhy: string,
  ): Promise<ExpectedBackVerdict> {
    const named = workloadName('CronJob', namespace, name);
    const got = await this.get('CronJob', namespace, name, urgent);
    if (got.kind === 'unreadable') return { result: 'unreadable', workload: named, why: got.error };
    if (got.kind === 'gone')
      return { result: 'gone', workload: job, why: `${jobWhy}, and so is ${named}` };
    const d = decideWorkload('CronJob', got.summary, names);
    return {
      result: d.expected ? 'expected-back' : 'not-expected-back',
      workload: named,
      why: `${job} ${jobWhy}; ${d.why}`,
    };
  }

  /** One object's outcome, from the cache while it is fresh; asked once however many wait on it. */
  private get(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    urgent: boolean,
  ): Promise<ReadOutcome> {
    const key = `${kind}/${namespace}/${name}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    const outcome = this.read(kind, namespace, name, {
      ...(urgent ? { timeoutMs: EXPECTED_BACK_URGENT_TIMEOUT_MS } : {}),
    })
      .catch((err: unknown): ReadOutcome => ({
        kind: 'unreadable',
        error: err instanceof Error ? err.message : String(err),
      }))
      .then((o) => {
        // Said once per object per TTL (the answer is cached that long).
        if (o.kind === 'unreadable')
          this.log.warn(
            'cannot read a workload; the images it last used are not expected back (removed in their usual order)',
            { workload: workloadName(kind, namespace, name), error: o.error },
          );
        return o;
      });
    this.cache.set(key, outcome, this.ttlMs);
    return outcome;
  }
}
