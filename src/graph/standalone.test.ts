// Objects in no ownership relation are kept outside graphology (standalone
// objects) and move in and out of it as they gain or lose a relation. Every
// transition must leave readers (workers, debug endpoint, metrics) seeing
// what they saw when every object was a graphology node, and must never turn
// an observed owner into a virtual one (which costs a live read).
import type { ObjectMeta } from '../api/resources.ts';
import { coordinatesKey, type NodeSnapshot } from './graph.ts';
import {
  cmIdentity,
  cmMeta,
  cmRef as ref,
  del,
  graphFixture,
  upsert,
  virtualDelete,
} from './graph-fixture.testing.ts';

const TS = '2024-01-01T00:00:00Z';

/** These objects have been observed: the graph holds their resourceVersion. */
function meta(uid: string, extra: Partial<ObjectMeta> = {}): ObjectMeta {
  return cmMeta(uid, { resourceVersion: '1', ...extra });
}

function setup() {
  const f = graphFixture({ absentCapacity: 100 });
  /** A graphology node (not a standalone object). */
  const inGraphology = (uid: string): boolean => f.graph.g.hasNode(uid);
  return { ...f, inGraphology };
}

/** What a worker saw for an observed object with no owners and no dependents. */
function loneSnapshot(uid: string, resourceVersion: string): NodeSnapshot {
  return {
    ...cmIdentity(uid),
    virtual: false,
    beingDeleted: false,
    deletingDependents: false,
    hasGcFinalizer: false,
    resourceVersion,
    ownerReferences: [],
    dependents: [],
  };
}

describe('an object in no ownership relation', () => {
  test('is kept outside graphology, and readers see it as a node with no owners or dependents', () => {
    const { graph, queued, apply, inGraphology } = setup();
    apply(upsert(meta('a', { resourceVersion: '10' })));

    expect(inGraphology('a')).toBe(false);
    expect(graph.has('a')).toBe(true);
    expect(graph.order).toBe(1);
    expect(graph.countVirtual()).toBe(0);
    expect(graph.get('a')).toEqual({
      ...cmIdentity('a'),
      virtual: false,
      beingDeleted: false,
      deletingDependents: false,
      hasOrphanFinalizer: false,
      hasForegroundFinalizer: false,
      resourceVersion: '10',
      ownerReferences: [],
    });
    expect(graph.snapshot('a')).toEqual(loneSnapshot('a', '10'));
    expect(graph.dependents('a')).toEqual([]);
    expect(graph.owners('a')).toEqual([]);
    expect(graph.hasDependents('a')).toBe(false);
    expect([...graph.uids()]).toEqual(['a']);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('an update keeps it outside graphology with the new resourceVersion, name and namespace', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('a', { resourceVersion: '10' })));
    apply(upsert(meta('a', { resourceVersion: '11', name: 'renamed', namespace: 'other' })));
    expect(inGraphology('a')).toBe(false);
    expect(graph.get('a')).toMatchObject({
      resourceVersion: '11',
      name: 'renamed',
      namespace: 'other',
    });
    expect(graph.order).toBe(1);
  });

  test('the copy readers get cannot be written to (it would change nothing)', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('a')));
    const a = graph.get('a');
    expect(() => {
      if (a) a.resourceVersion = 'x';
    }).toThrow(TypeError);
  });
});

describe('standalone → graphology node', () => {
  test('when a dependent names it: it becomes an observed owner, with no live read queued', () => {
    const { graph, queued, apply, inGraphology } = setup();
    apply(upsert(meta('o', { resourceVersion: '5' })));
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));

    expect(inGraphology('o')).toBe(true);
    expect(graph.get('o')).toMatchObject({ virtual: false, resourceVersion: '5', name: 'cm-o' });
    expect(graph.dependents('o')).toEqual(['d']);
    expect(graph.edge('o', 'd')).toEqual({ controller: false, blockOwnerDeletion: true });
    // A virtual owner would have been queued for a live read.
    expect(queued.del).toEqual([]);
    expect(graph.countVirtual()).toBe(0);
    expect(graph.order).toBe(2);
  });

  test('when a dependent names it under other coordinates, the dependent is queued as for any observed owner', () => {
    const { queued, apply } = setup();
    apply(upsert(meta('o', { namespace: 'elsewhere' })));
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    expect(queued.del).toEqual(['d']);
  });

  test('when an existing dependent adds a reference to it', () => {
    const { graph, queued, apply, clear, inGraphology } = setup();
    apply(upsert(meta('o1')), upsert(meta('o2')));
    apply(upsert(meta('d', { ownerReferences: [ref('o1')] })));
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o1'), ref('o2')] })));
    expect(inGraphology('o2')).toBe(true);
    expect(graph.get('o2')?.virtual).toBe(false);
    expect(graph.owners('d').sort()).toEqual(['o1', 'o2']);
    expect(queued.del).toEqual([]);
  });

  test('when it gains owner references', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('o')), upsert(meta('a', { resourceVersion: '1' })));
    apply(upsert(meta('a', { resourceVersion: '2', ownerReferences: [ref('o')] })));
    expect(inGraphology('a')).toBe(true);
    expect(graph.get('a')).toMatchObject({ resourceVersion: '2', ownerReferences: [ref('o')] });
    expect(graph.owners('a')).toEqual(['o']);
    expect(graph.order).toBe(2);
  });

  test('when it gains the orphan or foregroundDeletion finalizer (before any deletion)', () => {
    const { graph, queued, apply, inGraphology } = setup();
    apply(upsert(meta('a')), upsert(meta('b')));
    apply(upsert(meta('a', { finalizers: ['orphan'] })));
    apply(upsert(meta('b', { finalizers: ['example.com/keep', 'foregroundDeletion'] })));
    expect(inGraphology('a')).toBe(true);
    expect(inGraphology('b')).toBe(true);
    expect(graph.snapshot('a')?.hasGcFinalizer).toBe(true);
    expect(graph.snapshot('b')?.hasGcFinalizer).toBe(true);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
    expect(graph.order).toBe(2);
    // Another finalizer is no relation.
    apply(upsert(meta('c', { finalizers: ['example.com/keep'] })));
    expect(inGraphology('c')).toBe(false);
  });

  test('when its deletion starts with the orphan finalizer: attemptToOrphan is queued', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('a')));
    apply(upsert(meta('a', { deletionTimestamp: TS, finalizers: ['orphan'] })));
    expect(queued.orphan).toEqual(['a']);
    expect(graph.get('a')).toMatchObject({ beingDeleted: true, hasOrphanFinalizer: true });
  });

  test('when its deletion starts with foregroundDeletion: it is deletingDependents and queued', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('a')));
    apply(upsert(meta('a', { deletionTimestamp: TS, finalizers: ['foregroundDeletion'] })));
    expect(queued.del).toEqual(['a']);
    expect(graph.get('a')).toMatchObject({ beingDeleted: true, deletingDependents: true });
  });

  test('when it is being deleted (even without a GC finalizer)', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('a')));
    apply(upsert(meta('a', { deletionTimestamp: TS, finalizers: ['example.com/keep'] })));
    expect(inGraphology('a')).toBe(true);
    expect(graph.snapshot('a')?.beingDeleted).toBe(true);
    expect(graph.order).toBe(1);
  });
});

describe('graphology node → standalone', () => {
  test('an orphaned dependent and its owner left with no dependent both leave graphology, identity and resourceVersion kept', () => {
    const { graph, queued, apply, clear, inGraphology } = setup();
    apply(upsert(meta('o', { resourceVersion: '3' })));
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    expect(inGraphology('o')).toBe(true);
    clear();
    apply(upsert(meta('d', { resourceVersion: '9' })));

    expect(inGraphology('d')).toBe(false);
    expect(inGraphology('o')).toBe(false);
    expect(graph.snapshot('d')).toEqual(loneSnapshot('d', '9'));
    expect(graph.snapshot('o')).toEqual(loneSnapshot('o', '3'));
    expect(graph.order).toBe(2);
    expect(graph.g.order).toBe(0);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('an owner keeps its node while another dependent or its own reference remains', () => {
    const { apply, inGraphology } = setup();
    apply(upsert(meta('top')), upsert(meta('o', { ownerReferences: [ref('top')] })));
    apply(upsert(meta('d1', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d2', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d1')));
    expect(inGraphology('d1')).toBe(false);
    expect(inGraphology('o')).toBe(true);
    apply(upsert(meta('d2')));
    // o still names `top`: it stays, and so does top, its owner.
    expect(inGraphology('o')).toBe(true);
    expect(inGraphology('top')).toBe(true);
  });

  test("an owner whose last dependent is deleted leaves graphology; the dependent's delete queues nothing", () => {
    const { graph, queued, apply, clear, inGraphology } = setup();
    apply(upsert(meta('o', { resourceVersion: '4' })));
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(del(meta('d')));
    expect(graph.has('d')).toBe(false);
    expect(inGraphology('o')).toBe(false);
    expect(graph.snapshot('o')).toEqual(loneSnapshot('o', '4'));
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('a node whose GC finalizer is removed (not being deleted) leaves graphology', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('a', { finalizers: ['orphan'], resourceVersion: '1' })));
    expect(inGraphology('a')).toBe(true);
    apply(upsert(meta('a', { resourceVersion: '2' })));
    expect(inGraphology('a')).toBe(false);
    expect(graph.snapshot('a')).toEqual(loneSnapshot('a', '2'));
  });

  test('an owner in foreground deletion keeps its node when its last dependent goes', () => {
    const { queued, apply, clear, inGraphology } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('o', { deletionTimestamp: TS, finalizers: ['foregroundDeletion'] })));
    clear();
    apply(del(meta('d')));
    expect(inGraphology('o')).toBe(true);
    // The owner was waiting for it.
    expect(queued.del).toEqual(['o']);
  });

  test('and back: a dependent naming it again finds it observed', () => {
    const { graph, queued, apply, clear, inGraphology } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d')));
    expect(inGraphology('o')).toBe(false);
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    expect(inGraphology('o')).toBe(true);
    expect(graph.get('o')?.virtual).toBe(false);
    expect(queued.del).toEqual([]);
  });

  test('a self-owning object that drops its reference to itself leaves graphology', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('s', { ownerReferences: [ref('s')] })));
    expect(graph.owners('s')).toEqual(['s']);
    apply(upsert(meta('s')));
    expect(inGraphology('s')).toBe(false);
    expect(graph.has('s')).toBe(true);
  });
});

describe('deletes', () => {
  test('of a standalone object remove it', () => {
    const { graph, absent, queued, apply } = setup();
    apply(upsert(meta('a')));
    apply(del(meta('a')));
    expect(graph.has('a')).toBe(false);
    expect(graph.order).toBe(0);
    expect(absent.goneSince(coordinatesKey('v1', 'ConfigMap', 'ns', 'cm-a', 'a'))).toBeUndefined();
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('of a promoted owner queue its dependents and cache its coordinates', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(del(meta('o')));
    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(queued.del).toEqual(['d']);
    expect(absent.goneSince(coordinatesKey('v1', 'ConfigMap', 'ns', 'cm-o', 'o'))).toBeDefined();
  });

  test('a virtual delete of a standalone object removes it only under its own coordinates', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('a')));
    apply(virtualDelete(cmIdentity('a', { name: 'other' })));
    expect(graph.has('a')).toBe(true);
    apply(virtualDelete(cmIdentity('a')));
    expect(graph.has('a')).toBe(false);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });
});

describe('virtual owners', () => {
  test('observed later, with dependents: an observed graphology node', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    expect(graph.get('o')?.virtual).toBe(true);
    apply(upsert(meta('o', { resourceVersion: '8' })));
    expect(inGraphology('o')).toBe(true);
    expect(graph.get('o')).toMatchObject({ virtual: false, resourceVersion: '8' });
    expect(graph.countVirtual()).toBe(0);
  });

  test('dropped when unreferenced, then observed: standalone', () => {
    const { graph, apply, inGraphology } = setup();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d')));
    expect(graph.has('o')).toBe(false);
    apply(upsert(meta('o')));
    expect(inGraphology('o')).toBe(false);
    expect(graph.get('o')?.virtual).toBe(false);
  });
});

// Issue 19, item 6: re-observed after a spurious delete, the owner used to
// be a standalone object with no edges, so its real delete queued nothing.
test('an owner deleted then observed again (the delete was spurious) still has its dependents, and its real delete queues them', () => {
  const { graph, apply, inGraphology, queued, clear } = setup();
  apply(upsert(meta('o')), upsert(meta('x')));
  apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
  apply(del(meta('o')));
  expect(graph.get('o')?.virtual).toBe(true); // its dependent still names it
  // A re-list shows it again.
  apply(upsert(meta('o')));
  expect(inGraphology('o')).toBe(true);
  expect(graph.get('o')?.virtual).toBe(false);
  expect(graph.dependents('o')).toEqual(['d']);
  clear();
  apply(del(meta('o')));
  expect(queued.del).toEqual(['d']);
  apply(upsert(meta('d', { ownerReferences: [ref('o'), ref('x')] })));
  expect(graph.owners('d').sort()).toEqual(['o', 'x']);
});

// Found by the soak (net-reset): an owner deleted while its dependents still
// named it stays virtual; a dependent created naming it afterwards was never decided.
test('a new dependent of an owner deleted while others still named it is queued to be decided', () => {
  const { graph, apply, queued, clear } = setup();
  apply(upsert(meta('o')));
  apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
  apply(del(meta('o')));
  expect(graph.get('o')?.virtual).toBe(true);
  clear();
  apply(upsert(meta('late', { ownerReferences: [ref('o')] })));
  expect(queued.del).toEqual(['late']);
  // A dependent already attached changing nothing about its reference queues nothing.
  clear();
  apply(upsert(meta('d', { ownerReferences: [ref('o')], resourceVersion: '9' })));
  expect(queued.del).toEqual([]);
});
