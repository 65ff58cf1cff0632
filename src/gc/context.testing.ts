// For unit tests: the context a worker runs in, over a graph fixture, so
// that a worker test states only what it changes (the API, hooks, metrics).
import { RestMapper } from '../api/resources.ts';
import { CONFIGMAPS, type GraphFixture } from '../graph/graph-fixture.testing.ts';
import { silentLogger } from '../log.ts';
import { WorkerState, type GcContext } from './context.ts';

/**
 * ConfigMaps the only resource, not a dry run, fresh worker state, verified
 * facts fed back through the fixture's propagator and requeued uids recorded
 * in `queued.del`; `fields` adds or replaces any of that.
 */
export function workerContext(
  f: GraphFixture,
  fields: Pick<GcContext, 'api'> & Partial<GcContext>,
): GcContext {
  return {
    graph: f.graph,
    absent: f.absent,
    mapper: () => new RestMapper([CONFIGMAPS]),
    pushGraphEvent: (e) => f.propagator.apply({ ...e, lane: 'user' }),
    enqueueDelete: (uid) => f.queued.del.push(uid),
    log: silentLogger,
    dryRun: false,
    state: new WorkerState(),
    ...fields,
  };
}
