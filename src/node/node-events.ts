// Warning events on this node's Node object (FreeDiskSpaceFailed,
// ImageGCFailed, ContainerGCFailed, InvalidDiskCapacity), as the kubelet
// records them, and kubegc's own (pressure reclaims, PodsUnknown). Best
// effort: without API access they are only logged.
import { type KubeClient } from '../api/client.ts';
import { isNotFound } from '../api/errors.ts';
import { apiEventRecorder, type EventRecorder } from '../shared/events.ts';
import type { Logger } from '../log.ts';

export type NodeEventReason =
  | 'FreeDiskSpaceFailed'
  | 'ImageGCFailed'
  | 'ContainerGCFailed'
  | 'InvalidDiskCapacity'
  /** Normal: a pressure reclaim brought the signal back above threshold + margin. */
  | 'DiskPressureReclaimed'
  /** Warning: it did not; the kubelet may evict pods when the threshold is crossed. */
  | 'DiskPressureReclaimFailed'
  /** Warning: this node's pods cannot be known (no such Node, or a list of another node's). */
  | 'PodsUnknown';

export interface NodeEvents {
  warning(reason: NodeEventReason, note: string): void;
  normal?(reason: NodeEventReason, note: string): void;
}

export const noNodeEvents: NodeEvents = { warning: () => undefined, normal: () => undefined };

/** The action field of events.k8s.io/v1 events, per reason. */
const ACTION: Record<NodeEventReason, string> = {
  FreeDiskSpaceFailed: 'ImageGarbageCollect',
  ImageGCFailed: 'ImageGarbageCollect',
  InvalidDiskCapacity: 'ImageGarbageCollect',
  ContainerGCFailed: 'ContainerGarbageCollect',
  DiskPressureReclaimed: 'ReclaimDiskPressure',
  DiskPressureReclaimFailed: 'ReclaimDiskPressure',
  PodsUnknown: 'ContainerGarbageCollect',
};

export function apiNodeEvents(client: KubeClient, nodeName: string, log: Logger): NodeEvents {
  const recorder: EventRecorder = apiEventRecorder(client, log);
  // The kubelet's node reference uses the node name as UID; the real UID is
  // better when the Node object can be read, so look it up once.
  let uid: Promise<string> | undefined;
  const nodeUid = (): Promise<string> => {
    uid ??= client
      .request<{ metadata?: { uid?: string } }>(
        'GET',
        `/api/v1/nodes/${encodeURIComponent(nodeName)}`,
      )
      .then((n) => n.metadata?.uid ?? nodeName)
      .catch((err: unknown) => {
        if (!isNotFound(err)) uid = undefined; // try again next time
        log.debug('cannot read the Node object; events name it by name only', {
          node: nodeName,
          error: (err as Error).message,
        });
        return nodeName;
      });
    return uid;
  };
  return {
    warning(reason, note) {
      void nodeUid().then((u) =>
        recorder.warning(
          { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: u },
          reason,
          ACTION[reason],
          note,
        ),
      );
    },
    normal(reason, note) {
      void nodeUid().then((u) =>
        recorder.normal?.(
          { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: u },
          reason,
          ACTION[reason],
          note,
        ),
      );
    },
  };
}
