// This node's pods as the API server knows them: for "containers of pods
// deleted from the API" (the kubelet's allSourcesReady + pod manager), for
// evicted and terminated pods (whose dead containers the kubelet removes while
// the Pod object still exists), and for the images pods bound here will run
// or mount (image volumes).
// Only a complete list counts: any failure means "unknown", and nothing is
// removed on the strength of it. Nor does a list for a node name the API has
// no Node of: LIST by spec.nodeName answers [] for any name, so an empty list
// is "no pods" only if the Node exists. Each pod is reduced to these few
// fields as its page arrives; no object is kept.
import { type KubeClient } from '../api/client.ts';
import { isObjectNotFound } from '../api/errors.ts';
import { METADATA_ACCEPT } from '../api/request.ts';
import { fieldEquals } from '../api/field-selector.ts';

/** An ownerReference: the object that owns another (here, a pod's or a workload's controller). */
export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface NodePod {
  uid: string;
  /** namespace/name, for what an operator reads (who keeps an image); absent if the API gave no name. */
  ref?: string;
  /** metadata.namespace. */
  namespace?: string;
  /**
   * The ownerReference with `controller: true` (a pod has at most one): the
   * Job, ReplicaSet, StatefulSet or DaemonSet that made it, for the images
   * expected back (expected-back.ts). Absent for a bare pod.
   */
  controller?: OwnerRef;
  /** A mirror pod: the UID of the static pod it mirrors (its containers carry that UID). */
  mirrorOf?: string;
  /** status.phase as the API has it (Pending, Running, Succeeded, Failed, Unknown). */
  phase: string;
  /** Failed with reason Evicted (the kubelet's IsEvicted): its content may go at once. */
  evicted: boolean;
  /** Every image its containers, init containers and ephemeral containers name. */
  images: string[];
  /**
   * The images its image volumes mount (KEP-4639, `spec.volumes[].image.reference`):
   * no container names them, and CRI ListContainers shows no mounts.
   */
  volumeImages?: string[];
}

export interface PodListOptions {
  /**
   * For a pressure reclaim: the kubelet evicts at its next check whatever
   * the API server does, so the reclaim does not wait on it (PodListGate).
   */
  urgent?: boolean;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface PodLister {
  /**
   * Every pod bound to this node; throws unless the list is complete and
   * this node exists (PodsUnknownError when it does not).
   */
  nodePods(o?: PodListOptions): Promise<NodePod[]>;
}

/**
 * Why this node's pods are not known, so that no pod counts as deleted:
 * no Node of that name (a wrong --node-name, $NODE_NAME or host name), a list
 * that names none of the pods running here (the same, or a name of another
 * node), or a list that failed.
 */
export type PodsUnknownReason = 'node-not-found' | 'ready-pods-unlisted' | 'list-failed';

export class PodsUnknownError extends Error {
  readonly reason: PodsUnknownReason;
  constructor(reason: PodsUnknownReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** How to fix a node name, for every message that doubts it. */
export const NODE_NAME_FIX =
  "give this node's name with --node-name or NODE_NAME (the DaemonSet sets NODE_NAME from spec.nodeName)";

export function nodeNotFoundError(nodeName: string): PodsUnknownError {
  return new PodsUnknownError(
    'node-not-found',
    `no Node "${nodeName}" in the API: the pods listed by spec.nodeName=${nodeName} say nothing about the pods on this node, so none counts as deleted; ${NODE_NAME_FIX}`,
  );
}

/**
 * Whether the API has a Node of this name: true, or false only for a 404 whose
 * Status names that Node (a 404 for the path itself, from a proxy say, means
 * nothing about it); any other failure throws. Metadata only: a Node's status
 * (its image list) can be large, and this runs every pass.
 */
export async function nodeExists(
  client: KubeClient,
  nodeName: string,
  o: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<boolean> {
  try {
    await client.request<unknown>('GET', `/api/v1/nodes/${encodeURIComponent(nodeName)}`, {
      accept: METADATA_ACCEPT,
      ...requestLimits(o),
    });
    return true;
  } catch (err) {
    if (isObjectNotFound(err, nodeName)) return false;
    throw err;
  }
}

/** A static pod's containers carry the kubelet's UID for it, which its mirror pod names here. */
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/** Succeeded or Failed: the pod runs nothing and never will again. */
export function isTerminated(pod: NodePod): boolean {
  return pod.phase === 'Succeeded' || pod.phase === 'Failed';
}

/** The UIDs the runtime's labels can carry for these pods (their own and the mirrored ones). */
export function podUidsOf(pods: readonly NodePod[]): Set<string> {
  const uids = new Set<string>();
  for (const p of pods) {
    uids.add(p.uid);
    if (p.mirrorOf) uids.add(p.mirrorOf);
  }
  return uids;
}

interface PodList {
  metadata?: { continue?: string };
  items?: RawPod[];
}

/** An ownerReference as the API gives it (any field may be missing in bad input). */
export interface RawOwnerRef {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

/**
 * The controller among an object's ownerReferences (`controller: true`; the
 * API server allows at most one), if it names what it points at.
 */
export function controllerRef(refs: readonly RawOwnerRef[] | undefined): OwnerRef | undefined {
  const c = refs?.find((r) => r.controller === true);
  if (!c?.apiVersion || !c.kind || !c.name || !c.uid) return undefined;
  return { apiVersion: c.apiVersion, kind: c.kind, name: c.name, uid: c.uid };
}

interface RawPod {
  metadata?: {
    uid?: string;
    name?: string;
    namespace?: string;
    annotations?: Record<string, string>;
    ownerReferences?: RawOwnerRef[];
  };
  spec?: {
    containers?: { image?: string }[];
    initContainers?: { image?: string }[];
    ephemeralContainers?: { image?: string }[];
    volumes?: { image?: { reference?: string } }[];
  };
  status?: { phase?: string; reason?: string };
}

export function toNodePod(p: RawPod): NodePod | undefined {
  const uid = p.metadata?.uid;
  if (!uid) return undefined;
  const images = new Set<string>();
  for (const list of [p.spec?.containers, p.spec?.initContainers, p.spec?.ephemeralContainers])
    for (const c of list ?? []) if (c.image) images.add(c.image);
  const volumeImages = new Set<string>();
  for (const v of p.spec?.volumes ?? [])
    if (v.image?.reference) volumeImages.add(v.image.reference);
  const phase = p.status?.phase ?? 'Pending';
  const mirrorOf = p.metadata?.annotations?.[MIRROR_POD_ANNOTATION];
  const name = p.metadata?.name;
  const namespace = p.metadata?.namespace;
  const controller = controllerRef(p.metadata?.ownerReferences);
  return {
    uid,
    ...(name ? { ref: `${namespace ?? ''}/${name}` } : {}),
    ...(namespace ? { namespace } : {}),
    ...(controller ? { controller } : {}),
    ...(mirrorOf ? { mirrorOf } : {}),
    phase,
    evicted: phase === 'Failed' && p.status?.reason === 'Evicted',
    images: [...images],
    ...(volumeImages.size ? { volumeImages: [...volumeImages] } : {}),
  };
}

function requestLimits(o: { signal?: AbortSignal; timeoutMs?: number }): {
  signal?: AbortSignal;
  timeoutMs?: number;
} {
  return {
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
  };
}

export function apiPodLister(client: KubeClient, nodeName: string, pageSize = 500): PodLister {
  return {
    async nodePods(o = {}) {
      // Before the list: a Node registered in between makes the list this
      // node's; one checked after could have appeared after an empty list.
      if (!(await nodeExists(client, nodeName, o))) throw nodeNotFoundError(nodeName);
      const pods: NodePod[] = [];
      let token: string | undefined;
      do {
        const page = await client.request<PodList>('GET', '/api/v1/pods', {
          query: {
            fieldSelector: fieldEquals('spec.nodeName', nodeName),
            limit: pageSize,
            continue: token,
          },
          verb: 'LIST',
          ...requestLimits(o),
        });
        for (const item of page.items ?? []) {
          const pod = toNodePod(item);
          if (pod) pods.push(pod);
        }
        token = page.metadata?.continue || undefined;
      } while (token);
      return pods;
    },
  };
}

/** After a list failed (no answer, an error), a reclaim does not ask again for this long. */
export const URGENT_SKIP_AFTER_FAILURE_MS = 15_000;
/** A reclaim's own list gives up after this long (a healthy API answers in milliseconds). */
export const URGENT_LIST_TIMEOUT_MS = 2_000;

/**
 * The pod lists of both passes, so that a pressure reclaim never waits on
 * the API server. The kubelet's eviction manager needs no API to reclaim,
 * and evicts at its next check, 10 s at most after the threshold is crossed;
 * a reclaim that waited out a list's timeout in its container step, again in
 * its image step, and first for the periodic pass holding the lock to time
 * out its own, spent 12 s of that (node soak, API server unreachable). So:
 * a reclaim cuts short the lists periodic passes are waiting on
 * (`cutShort`: those passes keep everything a pod could own, as on any
 * failed list), gives its own list 2 s, and does not ask at all within 15 s
 * of a failed one. Every such list is a failed one for the pass: pods
 * unknown, nothing removed for a pod reason; never a shortcut to absence.
 */
export class PodListGate implements PodLister {
  private readonly inner: PodLister;
  private readonly now: () => number;
  private readonly waiting = new Set<AbortController>();
  private failedAt: number | undefined;

  constructor(inner: PodLister, now: () => number = Date.now) {
    this.inner = inner;
    this.now = now;
  }

  async nodePods(o: PodListOptions = {}): Promise<NodePod[]> {
    if (o.urgent && this.failedAt !== undefined) {
      const ago = this.now() - this.failedAt;
      if (ago < URGENT_SKIP_AFTER_FAILURE_MS)
        throw new Error(
          `not asked: the last list of this node's pods failed ${(ago / 1000).toFixed(1)} s ago, and a pressure reclaim does not wait on the API server`,
        );
    }
    const own = new AbortController();
    const signal = o.signal ? AbortSignal.any([o.signal, own.signal]) : own.signal;
    if (!o.urgent) this.waiting.add(own);
    try {
      const pods = await this.inner.nodePods({
        signal,
        ...(o.urgent
          ? { timeoutMs: URGENT_LIST_TIMEOUT_MS }
          : o.timeoutMs
            ? { timeoutMs: o.timeoutMs }
            : {}),
      });
      this.failedAt = undefined;
      return pods;
    } catch (err) {
      if (own.signal.aborted)
        throw new Error('cut short: a pressure reclaim does not wait for this list', {
          cause: err,
        });
      // A definite answer (no such Node) says nothing of the API's health.
      if (!(err instanceof PodsUnknownError)) this.failedAt = this.now();
      throw err;
    } finally {
      this.waiting.delete(own);
    }
  }

  /** Aborts the lists periodic passes are waiting on; how many there were. */
  cutShort(): number {
    const n = this.waiting.size;
    for (const c of this.waiting) c.abort();
    this.waiting.clear();
    return n;
  }
}
