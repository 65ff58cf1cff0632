// What /healthz (liveness) and /readyz (readiness) of `kubegc controller` mean.
// Liveness is only "the process and its event loop are alive": answering at
// all proves it. A watch that cannot be repaired (a broken conversion webhook,
// an aggregated API that does not answer) is the cluster's problem, not the
// process's: restarting would re-list everything and reopen the initial-sync
// window on every replica, and fix nothing. It is reported by the
// kubegc_watch_stalled metric, a Warning event and a line in /readyz.
import type { Check } from '../shared/serving/server.ts';

export interface ProbeState {
  /** The initial sync finished (or timed out): the graph is warm. */
  readonly synced: boolean;
  /** group-resources whose watch is stalled beyond what the watchdog repairs. */
  stalledInformers(): string[];
}

export function controllerProbes(gc: ProbeState): { healthz: () => Check; readyz: () => Check } {
  return {
    healthz: () => ({ ok: true }),
    readyz: () => {
      const stalled = gc.stalledInformers();
      const warnings =
        stalled.length > 0
          ? [
              `watches stalled or refused by RBAC (see the WatchStalled and WatchForbidden events; everything else is collected as usual): ${stalled.join(', ')}`,
            ]
          : undefined;
      return gc.synced
        ? { ok: true, warnings }
        : { ok: false, reason: 'initial sync not done', warnings };
    },
  };
}
