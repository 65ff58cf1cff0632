// This node's pods as the API server knows them: for "containers of pods
// deleted from the API" (the kubelet's allSourcesReady + pod manager), for
// evicted and terminated pods (whose dead containers the kubelet removes while
// the Pod object still exists), and for the images pods bound here will run
// or mount (image volumes).
// Only a complete list counts: any failure means "unknown", and nothing is
// removed on the strength of it. Each pod is reduced to these few fields as
// its page arrives; no object is kept.
import { type KubeClient } from '../api/client.ts';
import { fieldEquals } from '../api/field-selector.ts';

export interface NodePod {
  uid: string;
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

export interface PodLister {
  /** Every pod bound to this node; throws unless the list is complete. */
  nodePods(): Promise<NodePod[]>;
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

interface RawPod {
  metadata?: { uid?: string; annotations?: Record<string, string> };
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
  return {
    uid,
    ...(mirrorOf ? { mirrorOf } : {}),
    phase,
    evicted: phase === 'Failed' && p.status?.reason === 'Evicted',
    images: [...images],
    ...(volumeImages.size ? { volumeImages: [...volumeImages] } : {}),
  };
}

export function apiPodLister(client: KubeClient, nodeName: string, pageSize = 500): PodLister {
  return {
    async nodePods() {
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
