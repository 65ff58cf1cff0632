// The worker's choice between deciding on the graph's copy and reading the
// object live, with an in-memory stand-in for the API (the e2e tests prove the
// same against a real kube-apiserver).
import { jest } from '@jest/globals';
import type { ObjectMeta, OwnerReference, ResourceInfo } from '../api/resources.ts';
import { RestMapper } from '../api/resources.ts';
import { AbsentOwnerCache } from '../graph/absent-owner-cache.ts';
import { coordinatesKey, OwnershipGraph } from '../graph/graph.ts';
import { Propagator, type GraphEvent } from '../graph/propagator.ts';
import { silentLogger } from '../log.ts';
import { attemptToDelete, type GcContext } from './attempt-to-delete.ts';
import type { DeletionPropagation } from './decide.ts';
import type { GcApi } from './operations.ts';

const CONFIGMAPS: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
};

const ownerRef = (uid: string): OwnerReference => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name: `cm-${uid}`,
  uid,
});

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
      if (live)
        live.ownerReferences = (live.ownerReferences ?? []).filter((r) => !uids.includes(r.uid));
      return Promise.resolve();
    }),
    getMeta: jest.fn((_r: ResourceInfo, _ns: string | undefined, name: string) => {
      gets.push(name);
      return Promise.resolve(objects.get(name));
    }),
    delete: jest.fn(
      (_r: ResourceInfo, meta: ObjectMeta, policy: DeletionPropagation, withRv: boolean) => {
        deletes.push({
          name: meta.name,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
          withResourceVersion: withRv,
          policy,
        });
        const live = objects.get(meta.name);
        if (!live || live.uid !== meta.uid) return Promise.resolve('gone' as const);
        if (conflicts > 0 || (withRv && live.resourceVersion !== meta.resourceVersion)) {
          conflicts--;
          return Promise.resolve('conflict' as const);
        }
        objects.delete(meta.name);
        return Promise.resolve('deleted' as const);
      },
    ),
  };
  return { api: api as unknown as GcApi, gets, deletes, removed };
}

function setup(objects: Map<string, ObjectMeta>, opts: { conflictOnce?: boolean } = {}) {
  const graph = new OwnershipGraph();
  const absent = new AbsentOwnerCache();
  const queued: string[] = [];
  const propagator = new Propagator(
    graph,
    absent,
    {
      attemptToDelete: (uid) => queued.push(uid),
      attemptToDeleteRateLimited: (uid) => queued.push(uid),
      attemptToOrphan: () => undefined,
    },
    silentLogger,
  );
  const fake = fakeApi(objects, opts.conflictOnce);
  const latencies: number[] = [];
  const ctx: GcContext = {
    api: fake.api,
    graph,
    absent,
    mapper: () => new RestMapper([CONFIGMAPS]),
    pushGraphEvent: (e: GraphEvent) => propagator.apply(e),
    enqueueDelete: (uid) => queued.push(uid),
    log: silentLogger,
    dryRun: false,
    metrics: { decisionLatency: (s) => latencies.push(s) },
  };
  const observe = (m: ObjectMeta): void =>
    propagator.apply({ type: 'upsert', resource: CONFIGMAPS, meta: m });
  const observeDelete = (m: ObjectMeta): void =>
    propagator.apply({ type: 'delete', resource: CONFIGMAPS, meta: m });
  return { ctx, graph, absent, queued, observe, observeDelete, latencies, ...fake };
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

test('owner observed in foreground deletion: a leaf is deleted Background and a middle object Foreground, from the graph copy', async () => {
  const middle: ObjectMeta = { ...dependent, uid: 'm', name: 'middle', resourceVersion: '8' };
  const leaf: ObjectMeta = {
    uid: 'l',
    name: 'leaf',
    namespace: 'ns',
    resourceVersion: '9',
    ownerReferences: [{ ...ownerRef('m'), name: 'middle' }],
  };
  const objects = new Map([
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
  t.observe({
    ...middle,
    deletionTimestamp: '2024-01-01T00:00:00Z',
    finalizers: ['foregroundDeletion'],
  });
  await attemptToDelete(t.ctx, 'l');

  expect(t.gets).toEqual([]);
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
