// The worker's choice between deciding on the graph's copy and reading the
// object live, with an in-memory stand-in for the API (the e2e tests prove the
// same against a real kube-apiserver).
import { jest } from '@jest/globals';
import { ApiError } from '../api/errors.ts';
import type { ObjectMeta, OwnerReference, ResourceInfo } from '../api/resources.ts';
import { coordinatesKey } from '../graph/graph.ts';
import { cmRef as ownerRef, graphFixture } from '../graph/graph-fixture.testing.ts';
import { attemptToDelete } from './attempt-to-delete.ts';
import { workerContext } from './context.testing.ts';
import { CollectionSlis } from './slis.ts';
import { withoutReferences, type DeletionPropagation } from './decide.ts';
import {
  StaleDecisionError,
  type DeletePreconditions,
  type GcApi,
  type WriteOutcome,
} from './operations.ts';

interface DeleteCall {
  name: string;
  uid: string;
  resourceVersion: string | undefined;
  withResourceVersion: boolean;
  policy: DeletionPropagation;
}

/** The cluster as the API would answer, by name; `conflictOnce` answers one DELETE with 409. */
function fakeApi(objects: Map<string, ObjectMeta>, conflictOnce = false) {
  const gets: string[] = [];
  const deletes: DeleteCall[] = [];
  const removed: string[][] = [];
  let conflicts = conflictOnce ? 1 : 0;
  const api = {
    removeOwnerReferences: jest.fn((_r: ResourceInfo, meta: ObjectMeta, uids: string[]) => {
      removed.push(uids);
      const live = objects.get(meta.name);
      if (!live) return Promise.resolve({ outcome: 'gone' as const });
      live.ownerReferences = (live.ownerReferences ?? []).filter((r) => !uids.includes(r.uid));
      return Promise.resolve({ outcome: 'done' as const });
    }),
    getMeta: jest.fn((_r: ResourceInfo, _ns: string | undefined, name: string) => {
      gets.push(name);
      const live = objects.get(name);
      // A copy, as a real read returns: later writes by others must not show through it.
      return Promise.resolve(live && structuredClone(live));
    }),
    delete: jest.fn(
      (
        _r: ResourceInfo,
        meta: ObjectMeta,
        policy: DeletionPropagation,
        guard: DeletePreconditions,
      ): Promise<WriteOutcome> => {
        const withRv = guard === 'uidAndResourceVersion';
        deletes.push({
          name: meta.name,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
          withResourceVersion: withRv,
          policy,
        });
        const live = objects.get(meta.name);
        if (!live || live.uid !== meta.uid) return Promise.resolve({ outcome: 'gone' as const });
        if (conflicts > 0 || (withRv && live.resourceVersion !== meta.resourceVersion)) {
          conflicts--;
          return Promise.resolve({ outcome: 'conflict' as const });
        }
        objects.delete(meta.name);
        return Promise.resolve({ outcome: 'done' as const });
      },
    ),
  };
  const removedAt: { name: string; uids: string[]; resourceVersion: string | undefined }[] = [];
  Object.assign(api, {
    removeOwnerReferencesAt: jest.fn(
      (_r: ResourceInfo, meta: ObjectMeta, refs: OwnerReference[]) => {
        const uids = refs.map((r) => r.uid);
        removedAt.push({ name: meta.name, uids, resourceVersion: meta.resourceVersion });
        const live = objects.get(meta.name);
        if (!live || live.uid !== meta.uid) return Promise.resolve({ outcome: 'gone' as const });
        if (live.resourceVersion !== meta.resourceVersion)
          return Promise.resolve({ outcome: 'conflict' as const });
        live.ownerReferences = withoutReferences(live.ownerReferences ?? [], refs);
        live.resourceVersion = String(Number(live.resourceVersion) + 1);
        return Promise.resolve({ outcome: 'done' as const });
      },
    ),
  });
  const unblocks: { name: string; resourceVersion: string | undefined }[] = [];
  /** Runs right before an unblock PATCH or a DELETE reaches the "server": a concurrent writer. */
  const before: { unblock?: () => void; delete?: () => void } = {};
  Object.assign(api, {
    unblockOwnerReferences: jest.fn((_r: ResourceInfo, meta: ObjectMeta) => {
      before.unblock?.();
      unblocks.push({ name: meta.name, resourceVersion: meta.resourceVersion });
      const live = objects.get(meta.name);
      if (!live || live.uid !== meta.uid) return Promise.resolve({ outcome: 'gone' as const });
      if (live.resourceVersion !== meta.resourceVersion)
        return Promise.resolve({ outcome: 'conflict' as const });
      live.ownerReferences = (live.ownerReferences ?? []).map((r) => ({
        ...r,
        blockOwnerDeletion: false,
      }));
      live.resourceVersion = String(Number(live.resourceVersion) + 1);
      return Promise.resolve({ outcome: 'done' as const, meta: { ...live } });
    }),
  });
  const del = api.delete;
  api.delete = jest.fn(
    (
      r: ResourceInfo,
      meta: ObjectMeta,
      policy: DeletionPropagation,
      guard: DeletePreconditions,
      stillValid?: () => string | undefined,
    ): Promise<WriteOutcome> => {
      before.delete?.();
      // GcApi runs `stillValid` right before the request goes on the wire.
      const why = stillValid?.();
      if (why) return Promise.reject(new StaleDecisionError(why));
      return del(r, meta, policy, guard);
    },
  );
  return { api: api as unknown as GcApi, gets, deletes, removed, removedAt, unblocks, before };
}

function setup(objects: Map<string, ObjectMeta>, opts: { conflictOnce?: boolean } = {}) {
  const queued: string[] = [];
  const lags: number[] = [];
  const slis = new CollectionSlis({ collectionLag: (s) => lags.push(s) });
  const f = graphFixture({
    sinks: {
      attemptToDelete: (uid) => queued.push(uid),
      attemptToDeleteRateLimited: (uid) => queued.push(uid),
      observedGone: (uid) => slis.gone(uid),
    },
  });
  const fake = fakeApi(objects, opts.conflictOnce);
  const latencies: number[] = [];
  const ctx = workerContext(f, {
    api: fake.api,
    enqueueDelete: (uid) => queued.push(uid),
    metrics: { decisionLatency: (s) => latencies.push(s) },
    slis,
  });
  const { graph, absent, observe, observeDelete } = f;
  return { ctx, graph, absent, queued, observe, observeDelete, latencies, slis, lags, ...fake };
}

const owner: ObjectMeta = { uid: 'o', name: 'cm-o', namespace: 'ns', resourceVersion: '1' };
const dependent: ObjectMeta = {
  uid: 'd',
  name: 'dep',
  namespace: 'ns',
  resourceVersion: '7',
  ownerReferences: [ownerRef('o')],
};

test('owner observed deleted: the dependent is deleted from the graph copy, with uid and resourceVersion preconditions, without a GET', async () => {
  const objects = new Map([[dependent.name, { ...dependent }]]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observeDelete(owner);
  expect(t.queued).toEqual(['d']);

  await attemptToDelete(t.ctx, 'd');

  expect(t.gets).toEqual([]);
  expect(t.deletes).toEqual([
    {
      name: 'dep',
      uid: 'd',
      resourceVersion: '7',
      withResourceVersion: true,
      policy: 'Background',
    },
  ]);
  expect(objects.has('dep')).toBe(false);
  expect(t.latencies).toHaveLength(1);
});

describe('collection lag: one observation per object the GC deleted, whichever comes first', () => {
  test('the DELETE answer, then the watch event', async () => {
    const t = setup(new Map([[dependent.name, { ...dependent }]]));
    t.observe(owner);
    t.observe(dependent);
    t.observeDelete(owner);
    await attemptToDelete(t.ctx, 'd');
    expect(t.slis.pendingCount).toBe(1);
    expect(t.lags).toEqual([]);
    t.observeDelete(dependent);
    expect(t.slis.pendingCount).toBe(0);
    expect(t.lags).toHaveLength(1);
  });

  test('the watch event handled before the DELETE answer: nothing is left pending', async () => {
    const t = setup(new Map([[dependent.name, { ...dependent }]]));
    t.observe(owner);
    t.observe(dependent);
    t.observeDelete(owner);
    t.before.delete = () => t.observeDelete(dependent);
    await attemptToDelete(t.ctx, 'd');
    expect(t.slis.pendingCount).toBe(0);
    expect(t.lags).toHaveLength(1);
  });
});

test('owner observed in foreground deletion: a leaf is deleted Background and a middle object Foreground, from the graph copy', async () => {
  const middle: ObjectMeta = { ...dependent, uid: 'm', name: 'middle', resourceVersion: '8' };
  const leaf: ObjectMeta = {
    uid: 'l',
    name: 'leaf',
    namespace: 'ns',
    resourceVersion: '9',
    ownerReferences: [{ ...ownerRef('m'), name: 'middle' }],
  };
  const deleting = {
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  };
  const objects = new Map<string, ObjectMeta>([
    ['cm-o', { ...owner, ...deleting }],
    ['middle', { ...middle }],
    ['leaf', { ...leaf }],
  ]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(middle);
  t.observe(leaf);
  t.observe({
    ...owner,
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  });
  expect(t.queued).toEqual(['m', 'o']);

  await attemptToDelete(t.ctx, 'm');
  objects.set('middle', { ...middle, ...deleting });
  t.observe({ ...middle, ...deleting });
  await attemptToDelete(t.ctx, 'l');

  // Only the owners the graph shows waiting are read live (the informers may
  // lag a switch to Orphan); the dependents themselves are not.
  expect(t.gets).toEqual(['cm-o', 'middle']);
  expect(t.deletes.map((d) => [d.name, d.policy, d.resourceVersion])).toEqual([
    ['middle', 'Foreground', '8'],
    ['leaf', 'Background', '9'],
  ]);
});

test('an owner observed being deleted without the foregroundDeletion finalizer is read live', async () => {
  const objects = new Map([
    ['dep', { ...dependent }],
    ['cm-o', { ...owner, deletionTimestamp: '2024-01-01T00:00:00Z', finalizers: ['other'] }],
  ]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observe({ ...owner, deletionTimestamp: '2024-01-01T00:00:00Z', finalizers: ['other'] });

  await attemptToDelete(t.ctx, 'd');

  expect(t.gets).toEqual(['dep', 'cm-o']);
  expect(t.deletes).toEqual([]);
});

test('the object changed since the graph saw it (409): decided again from a live read', async () => {
  // Live: a second owner was added that the graph has not seen yet, and it exists.
  const live: ObjectMeta = {
    ...dependent,
    resourceVersion: '8',
    ownerReferences: [ownerRef('o'), ownerRef('keeper')],
  };
  const keeper: ObjectMeta = { uid: 'keeper', name: 'cm-keeper', namespace: 'ns' };
  const objects = new Map([
    ['dep', live],
    ['cm-keeper', keeper],
  ]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observeDelete(owner);

  await attemptToDelete(t.ctx, 'd');

  // One DELETE at the graph's version (refused), then the live read: an owner
  // exists, so only the reference to the gone one is removed.
  expect(t.deletes.map((d) => d.resourceVersion)).toEqual(['7']);
  expect(t.gets).toEqual(['dep', 'cm-keeper']);
  expect(t.removed).toEqual([['o']]);
  expect(objects.get('dep')?.ownerReferences).toEqual([ownerRef('keeper')]);
});

describe('a second owner the graph observes alive', () => {
  const keeper: ObjectMeta = {
    uid: 'keeper',
    name: 'cm-keeper',
    namespace: 'ns',
    resourceVersion: '2',
  };
  const twoOwners: ObjectMeta = {
    ...dependent,
    ownerReferences: [ownerRef('o'), ownerRef('keeper')],
  };

  test("keeps the dependent: the gone owner's reference is removed from the graph copy, guarded by uid and resourceVersion, without a read", async () => {
    const objects = new Map([
      ['dep', structuredClone(twoOwners)],
      ['cm-keeper', { ...keeper }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(keeper);
    t.observe(twoOwners);
    t.observeDelete(owner);
    expect(t.queued).toEqual(['d']);

    await attemptToDelete(t.ctx, 'd');

    expect(t.gets).toEqual([]);
    expect(t.deletes).toEqual([]);
    expect(t.removedAt).toEqual([{ name: 'dep', uids: ['o'], resourceVersion: '7' }]);
    expect(objects.get('dep')?.ownerReferences).toEqual([ownerRef('keeper')]);
  });

  test("the copy is stale (someone removed the live owner's reference meanwhile): the guarded PATCH is refused and the live read deletes the dependent", async () => {
    // Live: only the gone owner's reference is left, at a newer version. An
    // unguarded PATCH would strip it and leave an orphan that is never collected.
    const objects = new Map<string, ObjectMeta>([
      ['dep', { ...dependent, resourceVersion: '8', ownerReferences: [ownerRef('o')] }],
      ['cm-keeper', { ...keeper }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(keeper);
    t.observe(twoOwners);
    t.observeDelete(owner);

    await attemptToDelete(t.ctx, 'd');

    expect(t.removedAt.map((r) => r.resourceVersion)).toEqual(['7']);
    expect(t.gets).toEqual(['dep']);
    expect(t.deletes).toEqual([expect.objectContaining({ name: 'dep', resourceVersion: '8' })]);
    expect(objects.has('dep')).toBe(false);
  });

  test('an owner the graph shows being deleted (without foregroundDeletion) is not vouched for: both are read live', async () => {
    const deletingKeeper = {
      ...keeper,
      deletionTimestamp: '2024-01-01T00:00:00Z',
      finalizers: ['other'],
    };
    const objects = new Map([
      ['dep', structuredClone(twoOwners)],
      ['cm-keeper', { ...deletingKeeper }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(deletingKeeper);
    t.observe(twoOwners);
    t.observeDelete(owner);

    await attemptToDelete(t.ctx, 'd');

    expect(t.removedAt).toEqual([]);
    expect(t.gets).toEqual(['dep', 'cm-keeper']);
    // Live, the keeper still exists (being deleted, not in foreground): the dependent stays.
    expect(t.deletes).toEqual([]);
    expect(t.removed).toEqual([['o']]);
  });

  test('a second owner the graph has never observed (virtual) is read live', async () => {
    const objects = new Map([
      ['dep', structuredClone(twoOwners)],
      ['cm-keeper', { ...keeper }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(twoOwners);
    t.observeDelete(owner);

    await attemptToDelete(t.ctx, 'd');

    expect(t.removedAt).toEqual([]);
    expect(t.gets).toEqual(['dep', 'cm-keeper']);
    expect(t.removed).toEqual([['o']]);
  });

  test('a reference naming the observed owner under another name is not vouched for', async () => {
    const wrongName = {
      ...dependent,
      ownerReferences: [ownerRef('o'), { ...ownerRef('keeper'), name: 'other' }],
    };
    const objects = new Map([
      ['dep', structuredClone(wrongName)],
      ['cm-keeper', { ...keeper }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(keeper);
    t.observe(wrongName);
    t.observeDelete(owner);

    await attemptToDelete(t.ctx, 'd');

    expect(t.removedAt).toEqual([]);
    expect(t.gets[0]).toBe('dep');
  });
});

test('an owner first known from its dependent (virtual), observed before its queued key comes up: nothing is read or written', async () => {
  const objects = new Map([
    ['dep', { ...dependent }],
    ['cm-o', { ...owner }],
  ]);
  const t = setup(objects);
  t.observe(dependent); // listed first: the owner becomes a virtual node, queued for a live check
  expect(t.queued).toEqual(['o']);
  t.observe(owner); // then its own informer lists it

  await attemptToDelete(t.ctx, 'o');

  expect(t.gets).toEqual([]);
  expect(t.deletes).toEqual([]);
  expect(t.removedAt).toEqual([]);
});

test('the same owner still unobserved when its key comes up is read live', async () => {
  const objects = new Map([
    ['dep', { ...dependent }],
    ['cm-o', { ...owner }],
  ]);
  const t = setup(objects);
  t.observe(dependent);

  await attemptToDelete(t.ctx, 'o');

  expect(t.gets).toEqual(['cm-o']);
  expect(t.deletes).toEqual([]);
});

test('an owner not known gone: the live path reads the dependent and the owner', async () => {
  const objects = new Map([['dep', { ...dependent }]]);
  const t = setup(objects);
  t.observe(dependent); // the owner was never observed: a virtual node

  await attemptToDelete(t.ctx, 'd');

  expect(t.gets).toEqual(['dep', 'cm-o']);
  expect(t.deletes).toEqual([expect.objectContaining({ name: 'dep', withResourceVersion: true })]);
  expect(objects.has('dep')).toBe(false);
});

test('a dependent carrying the orphan finalizer is decided from a live read (its policy comes from it)', async () => {
  const withFinalizer = { ...dependent, finalizers: ['orphan'] };
  const objects = new Map([['dep', { ...withFinalizer }]]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(withFinalizer);
  t.observeDelete(owner);

  await attemptToDelete(t.ctx, 'd');

  expect(t.gets).toEqual(['dep']);
  expect(t.deletes.map((d) => d.policy)).toEqual(['Orphan']);
});

test('dry run never decides on the graph copy', async () => {
  const objects = new Map([['dep', { ...dependent }]]);
  const t = setup(objects);
  t.ctx.dryRun = true;
  t.observe(owner);
  t.observe(dependent);
  t.observeDelete(owner);
  expect(t.absent.has(coordinatesKey('v1', 'ConfigMap', 'ns', 'cm-o', 'o'))).toBe(true);

  await attemptToDelete(t.ctx, 'd');

  expect(t.gets).toEqual(['dep']);
  expect(t.deletes).toEqual([]);
  expect(objects.has('dep')).toBe(true);
});

// Issue 10, item 1: the cycle breaker must not carry a stale decision through a conflict.
describe('breaking a cycle (unblock, then Foreground DELETE)', () => {
  // A (owner) in foreground deletion; X references A and has a dependent Y
  // that is itself deleting its dependents: X is to be unblocked and deleted.
  const a: ObjectMeta = { uid: 'a', name: 'cm-a', namespace: 'ns', resourceVersion: '1' };
  const b: ObjectMeta = { uid: 'b', name: 'cm-b', namespace: 'ns', resourceVersion: '2' };
  const x: ObjectMeta = {
    uid: 'x',
    name: 'cm-x',
    namespace: 'ns',
    resourceVersion: '10',
    ownerReferences: [{ ...ownerRef('a'), blockOwnerDeletion: true }],
  };
  const y: ObjectMeta = {
    uid: 'y',
    name: 'cm-y',
    namespace: 'ns',
    resourceVersion: '11',
    ownerReferences: [{ ...ownerRef('x'), blockOwnerDeletion: true }],
  };
  const deleting = {
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  };

  function cycle() {
    const objects = new Map<string, ObjectMeta>([
      ['cm-a', { ...a, ...deleting }],
      ['cm-b', { ...b }],
      ['cm-x', structuredClone(x)],
      ['cm-y', { ...y, ...deleting }],
    ]);
    const t = setup(objects);
    for (const m of [a, b, x, y]) t.observe(m);
    t.observe({ ...y, ...deleting });
    t.observe({ ...a, ...deleting });
    /** A controller gives X a second, live owner B (a new resourceVersion). */
    const adopt = (): void => {
      const live = objects.get('cm-x');
      if (!live || live.ownerReferences?.some((r) => r.uid === 'b')) return;
      live.ownerReferences = [...(live.ownerReferences ?? []), ownerRef('b')];
      live.resourceVersion = String(Number(live.resourceVersion) + 1);
    };
    return { t, objects, adopt };
  }

  test('with nothing in between: PATCH at the read version, DELETE at the version the PATCH returned', async () => {
    const { t, objects } = cycle();
    await attemptToDelete(t.ctx, 'x');
    expect(t.unblocks).toEqual([{ name: 'cm-x', resourceVersion: '10' }]);
    expect(t.deletes).toEqual([
      expect.objectContaining({
        name: 'cm-x',
        policy: 'Foreground',
        resourceVersion: '11',
        withResourceVersion: true,
      }),
    ]);
    expect(objects.has('cm-x')).toBe(false);
  });

  test('a live owner added before the PATCH (409): decided again, X kept with only its live owner', async () => {
    const { t, objects, adopt } = cycle();
    t.before.unblock = adopt;
    await attemptToDelete(t.ctx, 'x');
    expect(t.deletes).toEqual([]);
    expect(objects.get('cm-x')?.ownerReferences?.map((r) => r.uid)).toEqual(['a', 'b']);
    expect(t.queued).toContain('x');
    // Decided again: B is solid, so only the waiting owner's reference goes.
    t.before.unblock = undefined;
    await attemptToDelete(t.ctx, 'x');
    expect(t.deletes).toEqual([]);
    expect(t.removed).toEqual([['a']]);
    expect(objects.has('cm-x')).toBe(true);
  });

  test('a live owner added between the PATCH and the DELETE (409 on the DELETE): X kept', async () => {
    const { t, objects, adopt } = cycle();
    t.before.delete = adopt;
    await attemptToDelete(t.ctx, 'x');
    expect(t.deletes).toHaveLength(1);
    expect(objects.has('cm-x')).toBe(true);
    expect(t.queued).toContain('x');
  });

  test('only blockOwnerDeletion changed before the PATCH: the PATCH is retried on the fresh version', async () => {
    const { t, objects } = cycle();
    t.before.unblock = () => {
      t.before.unblock = undefined;
      const live = objects.get('cm-x');
      if (!live) return;
      live.ownerReferences = [{ ...ownerRef('a'), blockOwnerDeletion: false }];
      live.resourceVersion = '15';
    };
    await attemptToDelete(t.ctx, 'x');
    expect(t.unblocks.map((u) => u.resourceVersion)).toEqual(['10', '15']);
    expect(objects.has('cm-x')).toBe(false);
  });
});

// Issue 10, item 5: the graph can lag a switch from Foreground to Orphan.
test('an owner the graph shows waiting but the API server shows with the orphan finalizer: the dependent is not deleted', async () => {
  const objects = new Map<string, ObjectMeta>([
    ['dep', { ...dependent }],
    // A second DELETE (Orphan) already replaced foregroundDeletion; the informer has not said so.
    ['cm-o', { ...owner, deletionTimestamp: '2024-01-01T00:00:00Z', finalizers: ['orphan'] }],
  ]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observe({
    ...owner,
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  });

  await attemptToDelete(t.ctx, 'd');

  expect(t.deletes).toEqual([]);
  expect(objects.has('dep')).toBe(true);
});

// Issue 19 follow-up (CI soak): the owner switched to Orphan between kubegc's
// live read of it (waiting) and the DELETE of its dependent going on the wire.
test.each([
  ['the graph copy', false],
  ['a live read of the dependent', true],
])(
  'an owner read as waiting that the graph shows switched to Orphan right before the DELETE is sent (decided on %s): no DELETE, the dependent kept',
  async (_how, live) => {
    const foreground = {
      deletionTimestamp: '2024-01-01T00:00:00Z',
      finalizers: ['foregroundDeletion'],
    };
    const orphan = { deletionTimestamp: '2024-01-01T00:00:00Z', finalizers: ['orphan'] };
    // Live: a second owner the graph has never seen (cm-x, gone) sends the decision the live way.
    const dep: ObjectMeta = live
      ? { ...dependent, ownerReferences: [ownerRef('o'), ownerRef('x')] }
      : { ...dependent };
    const objects = new Map<string, ObjectMeta>([
      ['dep', { ...dep }],
      ['cm-o', { ...owner, ...foreground }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(dep);
    t.observe({ ...owner, ...foreground });
    // The second DELETE (Orphan) lands after kubegc read the owner, and the
    // informer delivers it before the dependent's DELETE leaves.
    let switched = false;
    t.before.delete = () => {
      if (switched) return;
      switched = true;
      objects.set('cm-o', { ...owner, ...orphan });
      t.observe({ ...owner, ...orphan });
    };

    await attemptToDelete(t.ctx, 'd');

    expect(switched).toBe(true);
    expect(t.gets).toContain(live ? 'dep' : 'cm-o');
    expect(t.deletes).toEqual([]);
    expect(objects.has('dep')).toBe(true);
  },
);

// Issue 10, item 7: an observed live node wins over the absent-owner cache.
test('an owner recorded absent but observed alive again: read live, the dependent kept', async () => {
  const objects = new Map<string, ObjectMeta>([
    ['dep', { ...dependent }],
    ['cm-o', { ...owner }],
  ]);
  const t = setup(objects);
  // Recorded absent (a 404 during an inconsistent read, an etcd restore)...
  t.absent.add(coordinatesKey('v1', 'ConfigMap', 'ns', 'cm-o', 'o'));
  // ...and then observed by the informers.
  t.observe(owner);
  t.observe(dependent);

  await attemptToDelete(t.ctx, 'd');

  expect(t.deletes).toEqual([]);
  expect(t.gets).toContain('cm-o');
  expect(objects.has('dep')).toBe(true);
  expect(t.absent.has(coordinatesKey('v1', 'ConfigMap', 'ns', 'cm-o', 'o'))).toBe(false);
});

// Issue 10, item 3: a 404 on the graph-copy DELETE updates the graph.
test('the graph-copy DELETE finds the object gone (404): the graph learns it and its dependents are queued', async () => {
  const child: ObjectMeta = {
    uid: 'c',
    name: 'child',
    namespace: 'ns',
    resourceVersion: '9',
    ownerReferences: [{ ...ownerRef('d'), name: 'dep' }],
  };
  // "dep" is already gone from the API server; its informer missed the delete.
  const objects = new Map<string, ObjectMeta>([['child', { ...child }]]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observe(child);
  t.observeDelete(owner);
  t.queued.length = 0;

  await attemptToDelete(t.ctx, 'd');

  expect(t.deletes.map((d) => d.name)).toEqual(['dep']);
  expect(t.graph.get('d')?.virtual).toBe(true); // its dependent still names it
  expect(t.queued).toEqual(['c']);
});

test('dependents of one waiting owner decided at once share live reads of it, each sent after the decisions it serves began', async () => {
  const deleting = {
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  };
  const deps = ['d1', 'd2', 'd3'].map((uid, i): ObjectMeta => ({
    ...dependent,
    uid,
    name: uid,
    resourceVersion: String(10 + i),
  }));
  const objects = new Map<string, ObjectMeta>([
    ['cm-o', { ...owner, ...deleting }],
    ...deps.map((d): [string, ObjectMeta] => [d.name, { ...d }]),
  ]);
  const t = setup(objects);
  t.observe(owner);
  for (const d of deps) t.observe(d);
  t.observe({ ...owner, ...deleting });

  await Promise.all(deps.map((d) => attemptToDelete(t.ctx, d.uid)));
  // The first decision reads at once; the two begun while that read was in
  // flight share the one read sent when it returned.
  expect(t.gets).toEqual(['cm-o', 'cm-o']);
  expect(t.deletes.map((d) => d.name).sort()).toEqual(['d1', 'd2', 'd3']);

  // A decision that begins after that read was sent reads again.
  objects.set('late', { ...dependent, uid: 'late', name: 'late', resourceVersion: '20' });
  t.observe({ ...dependent, uid: 'late', name: 'late', resourceVersion: '20' });
  await attemptToDelete(t.ctx, 'late');
  expect(t.gets).toEqual(['cm-o', 'cm-o', 'cm-o']);
});

test('a DELETE answered 429: decided again after the Retry-After the server gave, not retried on the old decision', async () => {
  const objects = new Map([[dependent.name, { ...dependent }]]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observeDelete(owner);
  const throttled = new ApiError('DELETE', '/api/v1/namespaces/ns/configmaps/dep', 429, '{}');
  throttled.retryAfterMs = 2000;
  t.api.delete = jest.fn(() => Promise.reject(throttled));
  expect(await attemptToDelete(t.ctx, 'd')).toEqual({ result: 'retryAfter', delayMs: 2000 });
  expect(t.api.delete).toHaveBeenCalledTimes(1);
  expect(objects.has('dep')).toBe(true);
});

// Issue 19, item 6: an admission webhook can deny a write with code 404 and the object's name.
test('a DELETE answered 404 for an object that exists: the graph does not learn "gone", the object is decided again', async () => {
  const objects = new Map([[dependent.name, { ...dependent }]]);
  const t = setup(objects);
  t.observe(owner);
  t.observe(dependent);
  t.observeDelete(owner);
  t.api.delete = jest.fn(() => Promise.resolve({ outcome: 'gone' as const }));
  expect(await attemptToDelete(t.ctx, 'd')).toEqual({ result: 'requeue' });
  expect(t.gets).toEqual(['dep']);
  expect(t.graph.get('d')?.virtual).toBe(false);
});

// Issue 32, item 1: two references with one UID, one naming the live owner
// and one naming nothing, with the other known absent beforehand. Upstream
// classifies each reference on its own: the live one is solid, the object stays.
describe('two references with one UID, one naming a live owner', () => {
  const x: ObjectMeta = { uid: 'x', name: 'cm-x', namespace: 'ns', resourceVersion: '3' };
  const live: OwnerReference = { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm-x', uid: 'x' };
  const bogus: OwnerReference = { apiVersion: 'v1', kind: 'ConfigMap', name: 'bogus', uid: 'x' };

  function patchedToBoth() {
    const before: ObjectMeta = { ...dependent, ownerReferences: [ownerRef('o')] };
    const after: ObjectMeta = {
      ...dependent,
      resourceVersion: '8',
      ownerReferences: [live, bogus],
    };
    const objects = new Map([
      ['dep', structuredClone(after)],
      ['cm-x', { ...x }],
    ]);
    const t = setup(objects);
    t.observe(owner);
    t.observe(x);
    t.observe(before);
    // `bogus` was read absent earlier (another object naming it, say).
    t.absent.add(coordinatesKey('v1', 'ConfigMap', 'ns', 'bogus', 'x'));
    t.observe(after);
    return { t, objects };
  }

  test('decided on the graph copy: kept, and only the reference naming nothing is removed', async () => {
    const { t, objects } = patchedToBoth();
    expect(t.graph.get('d')?.ownerReferences).toEqual([live, bogus]);

    await attemptToDelete(t.ctx, 'd');

    expect(t.deletes).toEqual([]);
    expect(objects.get('dep')?.ownerReferences).toEqual([live]);
  });

  test('decided live: kept, and only the reference naming nothing is removed', async () => {
    const { t, objects } = patchedToBoth();
    // A graph that has not observed `cm-x` cannot vouch for it: every owner is read live.
    const g = graphFixture();
    g.observe({ ...dependent, resourceVersion: '8', ownerReferences: [live, bogus] });
    t.ctx.graph = g.graph;

    await attemptToDelete(t.ctx, 'd');

    expect(t.deletes).toEqual([]);
    expect(t.gets).toContain('cm-x');
    expect(objects.get('dep')?.ownerReferences).toEqual([live]);
  });
});
