// Kubernetes Events (events.k8s.io/v1) recorded by kubegc. Best effort: a
// failure to record is logged, never retried at the cost of GC work.
import os from 'node:os';
import type { KubeClient } from '../api/client.ts';
import type { Logger } from '../log.ts';
import { NotLeaderError, tenureRequestOptions, type WriteTenure } from '../leader/lease.ts';

export interface Regarding {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
}

export interface EventRecorder {
  warning(regarding: Regarding, reason: string, action: string, note: string): void;
  /** A Normal event (the node GC's pressure reclaims that worked). */
  normal?(regarding: Regarding, reason: string, action: string, note: string): void;
  /** Resolves when every event POST started so far has finished (or failed). */
  drain?(): Promise<void>;
}

export interface EventRecorderOptions {
  /**
   * The write guard, run as each POST's `beforeSend` (after the rate limiter,
   * before every attempt): a replica that lost its lease records no more events.
   */
  beforeSend?: () => void;
  /**
   * With leader election, the tenure that bounds when a POST can take effect
   * (as for the GC's own writes): its signal cancels a POST still in flight
   * when the tenure ends, and its timeout is no longer than leaseDuration −
   * renewDeadline.
   */
  tenure?: WriteTenure;
}

export const REPORTING_CONTROLLER = 'kubegc';

export function apiEventRecorder(
  client: KubeClient,
  log: Logger,
  instance = os.hostname(),
  opts: EventRecorderOptions = {},
): EventRecorder {
  const pending = new Set<Promise<void>>();
  return {
    async drain() {
      while (pending.size > 0) await Promise.all(pending);
    },
    warning(regarding, reason, action, note) {
      record(regarding, reason, action, note, 'Warning');
    },
    normal(regarding, reason, action, note) {
      record(regarding, reason, action, note, 'Normal');
    },
  };

  function record(
    regarding: Regarding,
    reason: string,
    action: string,
    note: string,
    type: 'Warning' | 'Normal',
  ): void {
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
      type,
      note: note.slice(0, 1024),
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        namespace: regarding.namespace,
        name: regarding.name,
        uid: regarding.uid,
      },
    };
    const post: Promise<void> = client
      .request<unknown>(
        'POST',
        `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
        {
          body,
          verb: 'CREATE',
          beforeSend: opts.beforeSend,
          ...tenureRequestOptions(opts.tenure),
        },
      )
      .then(
        () => undefined,
        (err: unknown) => {
          const fields = { reason, name: regarding.name, error: (err as Error).message };
          // Not leading (any more): expected, and said once by the elector.
          if (err instanceof NotLeaderError) log.debug('event not recorded', fields);
          else log.warn('could not record event', fields);
        },
      )
      .finally(() => pending.delete(post));
    pending.add(post);
  }
}
