// Kubernetes Events (events.k8s.io/v1) recorded by kubegc. Best effort: a
// failure to record is logged, never retried at the cost of GC work.
import os from 'node:os';
import type { KubeClient } from '../api/client.ts';
import type { Logger } from '../log.ts';

export interface Regarding {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
}

export interface EventRecorder {
  warning(regarding: Regarding, reason: string, action: string, note: string): void;
}

export const REPORTING_CONTROLLER = 'kubegc';

export function apiEventRecorder(
  client: KubeClient,
  log: Logger,
  instance = os.hostname(),
): EventRecorder {
  return {
    warning(regarding, reason, action, note) {
      // Events of cluster-scoped objects live in the default namespace, as kubectl shows them.
      const namespace = regarding.namespace || 'default';
      const now = new Date().toISOString().replace(/(\.\d{3})Z$/, '$1000Z');
      const body = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        // client-go's naming: <object>.<unique hex suffix> (a generateName ending in '.' is invalid).
        metadata: {
          name: `${regarding.name}.${Date.now().toString(16)}${Math.floor(Math.random() * 0xfff).toString(16)}`,
          namespace,
        },
        eventTime: now,
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: `${REPORTING_CONTROLLER}-${instance}`.slice(0, 128),
        action,
        reason,
        type: 'Warning',
        note: note.slice(0, 1024),
        regarding: {
          apiVersion: regarding.apiVersion,
          kind: regarding.kind,
          namespace: regarding.namespace,
          name: regarding.name,
          uid: regarding.uid,
        },
      };
      client
        .request(
          'POST',
          `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
          { body, verb: 'CREATE' },
        )
        .catch((err: unknown) =>
          log.warn('could not record event', {
            reason,
            name: regarding.name,
            error: (err as Error).message,
          }),
        );
    },
  };
}
