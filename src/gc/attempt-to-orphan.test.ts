// The orphan worker's wait for watches that are behind (upstream #26120), with
// an in-memory stand-in for the API; the e2e race test proves the same against
// a real kube-apiserver and a real informer swap.
import type { ObjectMeta, ResourceInfo } from '../api/resources.ts';
import { graphFixture, upsert } from '../graph/graph-fixture.testing.ts';
import type { GraphEvent } from '../graph/propagator.ts';
import { createLogger } from '../log.ts';
import { workerContext } from './context.testing.ts';
import { attemptToOrphan } from './attempt-to-orphan.ts';
import type { GcApi } from './operations.ts';
import { ApiError } from '../api/errors.ts';

const WIDGETS: ResourceInfo = {
  group: 'example.com',
  version: 'v1',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
};

function setup(behind: () => ResourceInfo[], waitMs = 60_000, catchUpMs = 60_000) {
  const f = graphFixture({ log: createLogger('error') });
  const { graph, propagator } = f;
  const orphaned: string[] = [];
  /** Consistent LISTs read: resource/namespace/owner. */
  const lists: string[] = [];
  /** What a consistent LIST answers. */
  let listed: () => Promise<ObjectMeta[]> = () => Promise.resolve([]);
  /** Run after each orphaning PATCH, in turn (a concurrent writer). */
  const afterOrphan: (() => void)[] = [];
  /** discoveredSince() calls. */
  const discoveries: number[] = [];
  /** What discoveredSince() says the round could not show. */
  const undiscovered: string[] = [];
  const finalizersRemoved: string[] = [];
  const api = {
    removeOwnerReferences: (_r: ResourceInfo, dep: { uid: string }) => {
      orphaned.push(dep.uid);
      afterOrphan.shift()?.();
      return Promise.resolve({ outcome: 'done' });
    },
    listDependents: (r: ResourceInfo, ns: string | undefined, owner: string) => {
      lists.push(`${r.resource}/${ns ?? ''}/${owner}`);
      return listed();
    },
    removeFinalizer: (_r: ResourceInfo, _ns: string | undefined, _name: string, uid: string) => {
      finalizersRemoved.push(uid);
      return Promise.resolve({ outcome: 'done' });
    },
  } as unknown as GcApi;
  const logged: { level: string; msg: string }[] = [];
  const warnings: string[] = [];
  /** Events the informers delivered but the graph has not applied yet. */
  const inFlight: GraphEvent[] = [];
  const ctx = workerContext(f, {
    api,
    log: createLogger('info', (l) => void logged.push(JSON.parse(l))),
    events: { warning: (_r, reason) => void warnings.push(reason) },
    watchesBehind: behind,
    discoveredSince: (since) => {
      discoveries.push(since);
      return Promise.resolve([...undiscovered]);
    },
    orphanCatchUpMs: catchUpMs,
    graphFlushed: () => {
      for (const e of inFlight.splice(0)) propagator.apply(e);
      return Promise.resolve();
    },
    orphanWatchWaitMs: waitMs,
  });
  const observe = (m: ObjectMeta): GraphEvent => upsert(m);
  return {
    ctx,
    graph,
    propagator,
    orphaned,
    finalizersRemoved,
    logged,
    warnings,
    inFlight,
    observe,
    lists,
    afterOrphan,
    discoveries,
    undiscovered,
    answerLists: (f: () => Promise<ObjectMeta[]>) => {
      listed = f;
    },
  };
}

const owner: ObjectMeta = {
  uid: 'o',
  name: 'o',
  namespace: 'ns',
  resourceVersion: '5',
  deletionTimestamp: '2026-12-01T00:00:00Z',
  finalizers: ['orphan'],
};
const dependent = (uid: string): ObjectMeta => ({
  uid,
  name: uid,
  namespace: 'ns',
  resourceVersion: '6',
  ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid: 'o' }],
});

test('a watch behind: no write, looked at again shortly, after a discovery round begun since the deletion was seen', async () => {
  const asked: [boolean, string][] = [];
  const t = setup(() => [WIDGETS]);
  t.ctx.watchesBehind = (namespaced, rv) => {
    asked.push([namespaced, rv]);
    return [WIDGETS];
  };
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  const before = Date.now();
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'retryAfter', delayMs: 250 });
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'retryAfter', delayMs: 250 });
  expect(t.orphaned).toEqual([]);
  expect(t.finalizersRemoved).toEqual([]);
  expect(t.lists).toEqual([]);
  // Asked about namespaced resources, at the owner's resourceVersion when the wait began.
  expect(asked).toEqual([
    [true, '5'],
    [true, '5'],
  ]);
  // Each look first has a discovery round begun since the wait began.
  expect(t.discoveries).toHaveLength(2);
  expect(t.discoveries[0]).toBeGreaterThanOrEqual(before);
  expect(t.discoveries[1]).toBe(t.discoveries[0]);
});

test('watches caught up: the dependents the graph has once the delivered events are applied are orphaned, then the finalizer goes', async () => {
  let behind = [WIDGETS];
  const t = setup(() => behind);
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  expect((await attemptToOrphan(t.ctx, 'o')).result).toBe('retryAfter');
  // The recovered watch delivered a dependent created meanwhile; the graph has not applied it yet.
  behind = [];
  t.inFlight.push(t.observe(dependent('late')));
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
  expect(t.orphaned.sort()).toEqual(['d1', 'late']);
  expect(t.finalizersRemoved).toEqual(['o']);
  expect(t.lists).toEqual([]);
  expect(t.warnings).toEqual([]);
});

test("a watch still behind after the catch-up time: its resource is read with a consistent LIST in the owner's namespace, and what it finds is orphaned too", async () => {
  const t = setup(() => [WIDGETS], 60_000, 0);
  t.answerLists(() => Promise.resolve([{ ...dependent('w1') }]));
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
  expect(t.lists).toEqual(['widgets/ns/o']);
  expect(t.orphaned.sort()).toEqual(['d1', 'w1']);
  expect(t.finalizersRemoved).toEqual(['o']);
});

test('a dependent the graph shows only after the PATCHes: orphaned before the finalizer goes', async () => {
  const t = setup(() => []);
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  t.afterOrphan.push(() => t.inFlight.push(t.observe(dependent('late'))));
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
  expect(t.orphaned).toEqual(['d1', 'late']);
  expect(t.finalizersRemoved).toEqual(['o']);
});

test('a resource neither watched nor listable: no write while the wait lasts', async () => {
  const t = setup(() => [WIDGETS], 60_000, 0);
  t.answerLists(() =>
    Promise.reject(new ApiError('GET', '/apis/example.com/v1/namespaces/ns/widgets', 503, '{}')),
  );
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  expect((await attemptToOrphan(t.ctx, 'o')).result).toBe('retryAfter');
  expect(t.orphaned).toEqual([]);
  expect(t.finalizersRemoved).toEqual([]);
  expect(t.logged.filter((l) => l.msg.includes('waits for resources'))).toHaveLength(1);
});

test('a resource neither watched nor listable for longer than the wait: orphans what it has, with a warning and an event', async () => {
  const t = setup(() => [WIDGETS], 0, 0);
  t.answerLists(() =>
    Promise.reject(new ApiError('GET', '/apis/example.com/v1/namespaces/ns/widgets', 503, '{}')),
  );
  t.propagator.apply(t.observe({ ...owner, uid: 'o2', name: 'o2' }));
  t.propagator.apply(
    t.observe({
      ...dependent('d2'),
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o2', uid: 'o2' }],
    }),
  );
  expect(await attemptToOrphan(t.ctx, 'o2')).toEqual({ result: 'done' });
  expect(t.orphaned).toEqual(['d2']);
  expect(t.finalizersRemoved).toEqual(['o2']);
  expect(t.warnings).toEqual(['OrphanWithoutWatch']);
  expect(t.logged).toContainEqual(
    expect.objectContaining({
      level: 'warn',
      unreadable: [expect.stringContaining('widgets.example.com')],
    }),
  );
});

test("RBAC refuses a dependent's PATCH: a GarbageCollectionForbidden Warning on the dependent and on the owner, and the orphan finalizer stays", async () => {
  const t = setup(() => []);
  t.ctx.api = {
    removeOwnerReferences: () =>
      Promise.reject(new ApiError('PATCH', '/api/v1/namespaces/ns/configmaps/d3', 403, '{}')),
    removeFinalizer: () => Promise.reject(new Error('must not be reached')),
  } as unknown as GcApi;
  const events: [string, string][] = [];
  t.ctx.events = { warning: (r, reason) => void events.push([r.name, reason]) };
  t.propagator.apply(t.observe({ ...owner, uid: 'o3', name: 'o3' }));
  t.propagator.apply(
    t.observe({
      ...dependent('d3'),
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o3', uid: 'o3' }],
    }),
  );
  expect((await attemptToOrphan(t.ctx, 'o3')).result).toBe('error');
  expect(events.sort()).toEqual([
    ['d3', 'GarbageCollectionForbidden'],
    ['o3', 'GarbageCollectionForbidden'],
  ]);
});

test('RBAC refuses the finalizer PATCH: a GarbageCollectionForbidden Warning on the owner', async () => {
  const t = setup(() => []);
  t.ctx.api = {
    removeOwnerReferences: () => Promise.resolve({ outcome: 'done' }),
    removeFinalizer: () =>
      Promise.reject(new ApiError('PATCH', '/api/v1/namespaces/ns/configmaps/o4', 403, '{}')),
  } as unknown as GcApi;
  const events: [string, string][] = [];
  t.ctx.events = { warning: (r, reason) => void events.push([r.name, reason]) };
  t.propagator.apply(t.observe({ ...owner, uid: 'o4', name: 'o4' }));
  await expect(attemptToOrphan(t.ctx, 'o4')).rejects.toBeInstanceOf(ApiError);
  expect(events).toEqual([['o4', 'GarbageCollectionForbidden']]);
});

test('a group discovery could not show (and of which nothing is known): no write while the wait lasts', async () => {
  const t = setup(() => [], 60_000, 0);
  t.undiscovered.push('example.com');
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  expect((await attemptToOrphan(t.ctx, 'o')).result).toBe('retryAfter');
  expect(t.orphaned).toEqual([]);
  expect(t.finalizersRemoved).toEqual([]);
  expect(t.logged).toContainEqual(
    expect.objectContaining({
      msg: expect.stringContaining('waits for resources'),
      unreadable: ['group "example.com" (discovery failed)'],
    }),
  );
  // Discovered again: the owner goes.
  t.undiscovered.length = 0;
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
  expect(t.orphaned).toEqual(['d1']);
  expect(t.finalizersRemoved).toEqual(['o']);
});

test('a group discovery could not show for longer than the wait: orphans what it has, with a warning and an event', async () => {
  const t = setup(() => [], 0, 0);
  t.undiscovered.push('*');
  t.propagator.apply(t.observe(owner));
  t.propagator.apply(t.observe(dependent('d1')));
  expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
  expect(t.orphaned).toEqual(['d1']);
  expect(t.warnings).toEqual(['OrphanWithoutWatch']);
});

// Issue 32, item 3: an admission webhook may deny the orphaning PATCH with
// code 404 and the dependent's name. Taken for "gone", the dependent kept its
// reference, the finalizer went, and the dependent was collected with the owner.
describe('a dependent PATCH answered 404', () => {
  function answered404(liveRead: ObjectMeta | undefined) {
    const t = setup(() => []);
    t.propagator.apply(t.observe(owner));
    t.propagator.apply(t.observe(dependent('d1')));
    Object.assign(t.ctx.api, {
      removeOwnerReferences: () => Promise.resolve({ outcome: 'gone' }),
      getMeta: () => Promise.resolve(liveRead),
    });
    return t;
  }

  test('a live read finds the dependent: the orphan finalizer stays, and the owner is retried', async () => {
    const t = answered404(dependent('d1'));
    const r = await attemptToOrphan(t.ctx, 'o');
    expect(r.result).toBe('error');
    expect(String(r.result === 'error' && r.error)).toMatch(
      /answered 404, but a live read finds it/,
    );
    expect(t.finalizersRemoved).toEqual([]);
  });

  test('a live read finds it gone (or another UID under its name): orphaning goes on', async () => {
    for (const live of [undefined, { ...dependent('d1'), uid: 'another' }]) {
      const t = answered404(live);
      expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
      expect(t.finalizersRemoved).toEqual(['o']);
    }
  });
});

// Issue 32, item 2: a resource that left discovery while holding a dependent
// of the owner. Released, the owner would be gone when the resource came back,
// still naming it, and the dependent would be collected.
describe('a resource that left discovery holding a dependent', () => {
  test('holds the orphan finalizer, whatever the wait; a Warning event after the timeout', async () => {
    const t = setup(() => [], 1_000);
    t.propagator.apply(t.observe(owner));
    t.propagator.apply(t.observe(dependent('d1')));
    let departed = ['widgets.example.com'];
    t.ctx.departedHolding = (o) => (o === 'o' ? departed : []);
    expect((await attemptToOrphan(t.ctx, 'o')).result).toBe('retryAfter');
    expect(t.warnings).toEqual([]);
    // Past --orphan-watch-timeout: still held, and the owner says why.
    const w = t.ctx.state.orphanWaits.get('o');
    if (w) w.since -= 2_000;
    expect((await attemptToOrphan(t.ctx, 'o')).result).toBe('retryAfter');
    expect(t.warnings).toEqual(['OrphanWaitingForResource']);
    expect(t.orphaned).toEqual([]);
    expect(t.finalizersRemoved).toEqual([]);
    // Back in discovery (its informer's catch-up is watchesBehind's part): orphaned, released.
    departed = [];
    expect(await attemptToOrphan(t.ctx, 'o')).toEqual({ result: 'done' });
    expect(t.orphaned).toEqual(['d1']);
    expect(t.finalizersRemoved).toEqual(['o']);
  });
});
