// This node's pods as the API server knows them, for "containers of pods
// deleted from the API" (the kubelet's allSourcesReady + pod manager). Only a
// complete list counts: any failure means "unknown", and nothing is removed
// on the strength of it.
import { METADATA_LIST_ACCEPT, type KubeClient } from '../api/client.ts';
import { fieldEquals } from '../api/field-selector.ts';

export interface PodLister {
  /**
   * UIDs of every pod bound to this node (and, for mirror pods, of the static
   * pod they mirror); throws unless the list is complete.
   */
  podUids(): Promise<Set<string>>;
}

interface PodMetadataList {
  metadata?: { continue?: string };
  items?: { metadata?: { uid?: string; annotations?: Record<string, string> } }[];
}

/** A static pod's containers carry the kubelet's UID for it, which its mirror pod names here. */
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

export function apiPodLister(client: KubeClient, nodeName: string, pageSize = 500): PodLister {
  return {
    async podUids() {
      const uids = new Set<string>();
      let token: string | undefined;
      do {
        const page = await client.request<PodMetadataList>('GET', '/api/v1/pods', {
          query: {
            fieldSelector: fieldEquals('spec.nodeName', nodeName),
            limit: pageSize,
            continue: token,
          },
          accept: METADATA_LIST_ACCEPT,
          verb: 'LIST',
        });
        for (const p of page.items ?? []) {
          if (p.metadata?.uid) uids.add(p.metadata.uid);
          const mirrored = p.metadata?.annotations?.[MIRROR_POD_ANNOTATION];
          if (mirrored) uids.add(mirrored);
        }
        token = page.metadata?.continue || undefined;
      } while (token);
      return uids;
    },
  };
}
