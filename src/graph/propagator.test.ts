import type { ObjectMeta, OwnerReference, ResourceInfo } from '../api/resources.ts';
import { coordinatesKey } from './graph.ts';
import {
  cmIdentity,
  cmKey,
  cmMeta as meta,
  cmRef as ref,
  del,
  graphFixture,
  upsert,
  virtualDelete,
} from './graph-fixture.testing.ts';

const TS = '2024-01-01T00:00:00Z';

const REPLICASETS: ResourceInfo = {
  group: 'apps',
  version: 'v1',
  resource: 'replicasets',
  kind: 'ReplicaSet',
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
};

const NAMESPACES: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'namespaces',
  kind: 'Namespace',
  namespaced: false,
  verbs: ['list', 'watch', 'delete'],
};

function setup(capacity = 100) {
  const f = graphFixture({ absentCapacity: capacity });
  return { ...f, p: f.propagator };
}

describe('what the graph stores', () => {
  test('the last observed resourceVersion, for DELETE preconditions', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('a', { resourceVersion: '10' })));
    expect(graph.get('a')?.resourceVersion).toBe('10');
    apply(upsert(meta('a', { resourceVersion: '11' })));
    expect(graph.get('a')?.resourceVersion).toBe('11');
  });

  test('an update with unchanged references keeps the stored references and edges', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('o')));
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    const stored = graph.get('d')?.ownerReferences;
    apply(
      upsert(
        meta('d', {
          resourceVersion: '2',
          ownerReferences: [ref('o', { blockOwnerDeletion: true })],
        }),
      ),
    );
    expect(graph.get('d')?.ownerReferences).toBe(stored);
    expect(graph.edge('o', 'd')).toEqual({ controller: false, blockOwnerDeletion: true });
  });

  test('a changed flag on a kept reference updates the stored reference and the edge', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('o')));
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    apply(upsert(meta('d', { ownerReferences: [ref('o', { controller: true })] })));
    expect(graph.get('d')?.ownerReferences).toEqual([ref('o', { controller: true })]);
    expect(graph.edge('o', 'd')).toEqual({ controller: true, blockOwnerDeletion: false });
    // The owner may have been waiting for this blocking dependent.
    expect(queued.del).toEqual(['o']);
  });

  test('siblings with the same references share one stored array; a change to one leaves the other as it was', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('o')), upsert(meta('o2')));
    apply(upsert(meta('d1', { ownerReferences: [ref('o', { controller: true })] })));
    apply(upsert(meta('d2', { ownerReferences: [ref('o', { controller: true })] })));
    const shared = graph.get('d1')?.ownerReferences;
    expect(graph.get('d2')?.ownerReferences).toBe(shared);
    expect(graph.edge('o', 'd2')).toEqual({ controller: true, blockOwnerDeletion: false });
    apply(upsert(meta('d2', { ownerReferences: [ref('o', { controller: true }), ref('o2')] })));
    expect(graph.get('d1')?.ownerReferences).toEqual([ref('o', { controller: true })]);
    expect(graph.get('d2')?.ownerReferences).toEqual([ref('o', { controller: true }), ref('o2')]);
    expect(graph.owners('d1')).toEqual(['o']);
    // A sibling with other flags gets its own.
    apply(upsert(meta('d3', { ownerReferences: [ref('o')] })));
    expect(graph.get('d3')?.ownerReferences).toEqual([ref('o')]);
    expect(graph.edge('o', 'd3')).toEqual({ controller: false, blockOwnerDeletion: false });
  });

  test('a new dependent naming one owner twice gets one edge', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('o')));
    apply(upsert(meta('d', { ownerReferences: [ref('o'), ref('o', { controller: true })] })));
    expect(graph.owners('d')).toEqual(['o']);
    expect(graph.get('d')?.ownerReferences).toHaveLength(2);
  });

  test('references keep their order and optional fields as the object has them', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('a')));
    const refs = [
      ref('x'),
      ref('a', { controller: false }),
      ref('y', { blockOwnerDeletion: true }),
    ];
    apply(upsert(meta('d', { ownerReferences: refs })));
    expect(graph.get('d')?.ownerReferences).toEqual(refs);
    apply(upsert(meta('d', { ownerReferences: [refs[2], refs[0]] as OwnerReference[] })));
    expect(graph.get('d')?.ownerReferences).toEqual([refs[2], refs[0]]);
    expect(graph.owners('d').sort()).toEqual(['x', 'y']);
  });
});

describe('virtual owners', () => {
  test('a dependent whose owner is unseen creates a virtual owner in its namespace and queues it', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('d', { namespace: 'dep-ns', ownerReferences: [ref('o')] })));

    expect(graph.get('o')).toEqual({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: 'dep-ns',
      name: 'cm-o',
      uid: 'o',
      virtual: true,
      beingDeleted: false,
      deletingDependents: false,
      hasOrphanFinalizer: false,
      hasForegroundFinalizer: false,
      resourceVersion: '',
      ownerReferences: [],
    });
    expect(graph.get('d')?.virtual).toBe(false);
    expect(graph.dependents('o')).toEqual(['d']);
    expect(graph.owners('d')).toEqual(['o']);
    expect(queued).toEqual({ del: ['o'], rateLimited: [], orphan: [] });
    expect(graph.countVirtual()).toBe(1);
  });

  test('a second dependent of the same virtual owner does not queue it again', () => {
    const { graph, queued, apply } = setup();
    apply(
      upsert(meta('d1', { ownerReferences: [ref('o')] })),
      upsert(meta('d2', { ownerReferences: [ref('o')] })),
    );
    expect(queued.del).toEqual(['o']);
    expect(graph.dependents('o')).toEqual(['d1', 'd2']);
  });

  test("the owner's own upsert marks it observed; matching dependents are not queued", () => {
    const { graph, queued, apply, clear } = setup();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(upsert(meta('o', { resourceVersion: '7' })));

    expect(graph.get('o')).toMatchObject({ virtual: false, namespace: 'ns', name: 'cm-o' });
    expect(graph.countVirtual()).toBe(0);
    expect(graph.dependents('o')).toEqual(['d']);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('an owner observed under other coordinates than claimed queues the disagreeing dependents', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('good', { ownerReferences: [ref('o')] })),
      upsert(meta('bad', { ownerReferences: [ref('o', { name: 'other-name' })] })),
    );
    clear();
    apply(upsert(meta('o')));
    expect(graph.get('o')).toMatchObject({ virtual: false, name: 'cm-o' });
    expect(queued.del).toEqual(['bad']);
  });

  test('an owner observed in another namespace than the dependent (seen after it) queues the dependent', () => {
    const { graph, queued, apply, clear } = setup();
    apply(upsert(meta('d', { namespace: 'ns', ownerReferences: [ref('o')] })));
    clear();
    apply(upsert(meta('o', { namespace: 'elsewhere' })));
    expect(graph.get('o')).toMatchObject({ virtual: false, namespace: 'elsewhere' });
    expect(queued.del).toEqual(['d']);
  });

  test('a cluster-scoped owner of a namespaced dependent is valid: nothing is queued', () => {
    const { graph, queued, apply, clear } = setup();
    const nsRef: OwnerReference = { apiVersion: 'v1', kind: 'Namespace', name: 'team', uid: 'n' };
    apply(upsert(meta('d', { ownerReferences: [nsRef] })));
    expect(graph.get('n')).toMatchObject({ virtual: true, namespace: 'ns' });
    clear();
    apply(upsert({ uid: 'n', name: 'team' }, NAMESPACES));
    expect(graph.get('n')).toMatchObject({ virtual: false, namespace: '', kind: 'Namespace' });
    expect(queued.del).toEqual([]);
  });

  test('a virtual owner nobody references any more is dropped', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d', { ownerReferences: [] })));
    expect(graph.has('o')).toBe(false);
    expect(graph.has('d')).toBe(true);
  });
});

describe('edges', () => {
  test('carry controller and blockOwnerDeletion (missing flags are false)', () => {
    const { graph, apply } = setup();
    apply(
      upsert(meta('o1')),
      upsert(
        meta('d', {
          ownerReferences: [
            ref('o1', { controller: true, blockOwnerDeletion: false }),
            ref('o2', { blockOwnerDeletion: true }),
            ref('o3'),
          ],
        }),
      ),
    );
    expect(graph.edge('o1', 'd')).toEqual({ controller: true, blockOwnerDeletion: false });
    expect(graph.edge('o2', 'd')).toEqual({ controller: false, blockOwnerDeletion: true });
    expect(graph.edge('o3', 'd')).toEqual({ controller: false, blockOwnerDeletion: false });
    expect(graph.owners('d')).toEqual(['o1', 'o2', 'o3']);
  });

  test('are updated when a reference changes its flags', () => {
    const { graph, apply } = setup();
    apply(
      upsert(meta('o')),
      upsert(meta('d', { ownerReferences: [ref('o')] })),
      upsert(
        meta('d', { ownerReferences: [ref('o', { controller: true, blockOwnerDeletion: true })] }),
      ),
    );
    expect(graph.edge('o', 'd')).toEqual({ controller: true, blockOwnerDeletion: true });
  });

  test('an owner observed in another namespace than the dependent (seen before it) gets the dependent queued', () => {
    const { graph, queued, apply, clear } = setup();
    apply(upsert(meta('o', { namespace: 'elsewhere' })));
    clear();
    apply(upsert(meta('d', { namespace: 'ns', ownerReferences: [ref('o')] })));
    expect(queued.del).toEqual(['d']);
    expect(graph.dependents('o')).toEqual(['d']);
  });

  test('a valid reference to an observed owner queues nothing', () => {
    const { queued, apply, clear } = setup();
    apply(upsert(meta('o')));
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test('a reference naming an observed owner under another kind queues the dependent', () => {
    const { queued, apply, clear } = setup();
    apply(upsert(meta('o')));
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o', { kind: 'Secret' })] })));
    expect(queued.del).toEqual(['d']);
  });
});

describe('owner reference changes', () => {
  test('removing a blocking reference drops the edge and queues that owner only', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('o1')),
      upsert(meta('o2')),
      upsert(
        meta('d', {
          ownerReferences: [ref('o1', { blockOwnerDeletion: true }), ref('o2')],
        }),
      ),
    );
    clear();
    apply(upsert(meta('d', { ownerReferences: [] })));
    expect(graph.edge('o1', 'd')).toBeUndefined();
    expect(graph.edge('o2', 'd')).toBeUndefined();
    expect(graph.dependents('o1')).toEqual([]);
    expect(graph.get('d')?.ownerReferences).toEqual([]);
    expect(queued).toEqual({ del: ['o1'], rateLimited: [], orphan: [] });
  });

  test('removing a non-blocking reference queues nothing', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('o1')),
      upsert(meta('o2')),
      upsert(meta('d', { ownerReferences: [ref('o1'), ref('o2')] })),
    );
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o2')] })));
    expect(graph.owners('d')).toEqual(['o2']);
    expect(queued.del).toEqual([]);
  });

  test('blockOwnerDeletion turning false queues the owner; turning true does not', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('o')),
      upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })),
    );
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: false })] })));
    expect(queued.del).toEqual(['o']);
    expect(graph.edge('o', 'd')).toEqual({ controller: false, blockOwnerDeletion: false });
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    expect(queued.del).toEqual([]);
    expect(graph.edge('o', 'd')).toEqual({ controller: false, blockOwnerDeletion: true });
  });

  test('an added reference to an unseen owner creates it virtual and queues it', () => {
    const { graph, queued, apply, clear } = setup();
    apply(upsert(meta('d')));
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    expect(graph.get('o')?.virtual).toBe(true);
    expect(queued.del).toEqual(['o']);
  });

  test('a dependent updated after its owner was deleted keeps being tracked', () => {
    const { graph, queued, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })), del(meta('o')));
    clear();
    // The user deletes the dependent with Orphan before the GC got to it.
    apply(
      upsert(
        meta('d', { ownerReferences: [ref('o')], deletionTimestamp: TS, finalizers: ['orphan'] }),
      ),
    );
    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(graph.get('d')).toMatchObject({ beingDeleted: true, hasOrphanFinalizer: true });
    expect(queued.orphan).toEqual(['d']);
  });
});

describe('deletion starting with a finalizer', () => {
  const deleting = (finalizers: string[]): ObjectMeta =>
    meta('o', { deletionTimestamp: TS, finalizers });

  test('orphan queues attemptToOrphan once; a repeated delete queues it again', () => {
    const { graph, queued, apply } = setup();
    apply(upsert(meta('o', { finalizers: ['orphan'] })));
    // The finalizer alone, without deletionTimestamp, is no deletion.
    expect(queued.orphan).toEqual([]);

    apply(upsert(deleting(['orphan'])));
    expect(queued.orphan).toEqual(['o']);
    expect(graph.get('o')).toMatchObject({ beingDeleted: true, hasOrphanFinalizer: true });

    apply(upsert(deleting(['orphan'])));
    expect(queued.orphan).toEqual(['o']);

    // The finalizer is removed (other finalizers keep the object), then a
    // repeated DELETE adds it back while deletionTimestamp stays.
    apply(upsert(deleting(['example.com/keep'])));
    expect(queued.orphan).toEqual(['o']);
    expect(graph.get('o')?.hasOrphanFinalizer).toBe(false);
    apply(upsert(deleting(['example.com/keep', 'orphan'])));
    expect(queued.orphan).toEqual(['o', 'o']);
    expect(queued.del).toEqual([]);
  });

  test('an object first observed while being deleted with orphan is queued', () => {
    const { queued, apply } = setup();
    apply(upsert(deleting(['orphan'])));
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: ['o'] });
  });

  test('foregroundDeletion marks deletingDependents and queues every dependent and the owner', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('o')),
      upsert(meta('d1', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })),
      upsert(meta('d2', { ownerReferences: [ref('o')] })),
    );
    clear();
    apply(upsert(deleting(['foregroundDeletion'])));
    expect(graph.get('o')).toMatchObject({
      beingDeleted: true,
      deletingDependents: true,
      hasForegroundFinalizer: true,
    });
    expect(queued).toEqual({ del: ['d1', 'd2', 'o'], rateLimited: [], orphan: [] });

    clear();
    apply(upsert(deleting(['foregroundDeletion'])));
    expect(queued.del).toEqual([]);
    expect(graph.get('o')?.deletingDependents).toBe(true);
  });

  test('a dependent added to an owner that is deletingDependents is queued', () => {
    const { queued, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(deleting(['foregroundDeletion'])));
    clear();
    apply(upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    expect(queued.del).toEqual(['d']);
  });

  test('a dependent deleted while its owner is deletingDependents queues the owner', () => {
    const { graph, queued, apply, clear } = setup();
    apply(
      upsert(meta('o')),
      upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })),
      upsert(deleting(['foregroundDeletion'])),
    );
    clear();
    apply(del(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })));
    expect(queued.del).toEqual(['o']);
    expect(graph.dependents('o')).toEqual([]);
    expect(graph.has('o')).toBe(true);
  });
});

// Issue 19, item 1: the objects of a resource that left discovery stayed in
// the graph as observed ("alive") nodes nobody watched any more.
describe('unobserved (its resource no longer watched)', () => {
  test('an owner with a dependent becomes virtual, is queued to be verified, and nothing is recorded absent', () => {
    const { graph, absent, queued, apply, clear } = setup();
    const ref = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o' };
    apply(
      upsert({ uid: 'o', name: 'rs', namespace: 'ns' }, REPLICASETS),
      upsert(meta('d1', { ownerReferences: [ref] })),
    );
    clear();
    apply({ type: 'unobserved', uid: 'o' });
    expect(graph.get('o')?.virtual).toBe(true);
    expect(graph.dependents('o')).toEqual(['d1']);
    expect(queued).toEqual({ del: ['o'], rateLimited: [], orphan: [] });
    expect(absent.size).toBe(0);
  });

  test("an object in no relation, and a leaf, leave the graph; the leaf's owner stays observed", () => {
    const { graph, queued, apply, clear } = setup();
    const ref = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o' };
    apply(
      upsert({ uid: 'o', name: 'rs', namespace: 'ns' }, REPLICASETS),
      upsert(meta('d1', { ownerReferences: [ref] })),
      upsert(meta('lone')),
    );
    clear();
    apply({ type: 'unobserved', uid: 'lone' }, { type: 'unobserved', uid: 'd1' });
    expect(graph.has('lone')).toBe(false);
    expect(graph.has('d1')).toBe(false);
    expect(graph.get('o')?.virtual).toBe(false);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });
});

describe('delete events', () => {
  test('deleting an owner with dependents queues them, caches its coordinates and keeps it as a virtual node', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(
      upsert({ uid: 'o', name: 'rs', namespace: 'ns' }, REPLICASETS),
      upsert(
        meta('d1', {
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o' }],
        }),
      ),
      upsert(
        meta('d2', {
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o' }],
        }),
      ),
    );
    clear();
    apply(del({ uid: 'o', name: 'rs', namespace: 'ns' }, REPLICASETS));

    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(queued).toEqual({ del: ['d1', 'd2'], rateLimited: [], orphan: [] });
    expect(absent.size).toBe(1);
    expect(absent.has('apps|ReplicaSet|ns|rs|o')).toBe(true);
    expect(absent.has(coordinatesKey('apps/v1beta2', 'ReplicaSet', 'ns', 'rs', 'o'))).toBe(true);
    // Full coordinates, not the UID alone.
    expect(absent.has(coordinatesKey('apps/v1', 'ReplicaSet', 'other', 'rs', 'o'))).toBe(false);
    expect(absent.has(coordinatesKey('apps/v1', 'ReplicaSet', 'ns', 'rs2', 'o'))).toBe(false);
    expect(absent.has(coordinatesKey('v1', 'ReplicaSet', 'ns', 'rs', 'o'))).toBe(false);
    // The dependents stay, still attached to the owner, now a virtual node.
    expect(graph.has('d1')).toBe(true);
    expect(graph.owners('d1')).toEqual(['o']);
  });

  test('deleting an owner without dependents does not touch the cache', () => {
    const { graph, absent, queued, apply } = setup();
    apply(upsert(meta('o')), del(meta('o')));
    expect(graph.has('o')).toBe(false);
    expect(absent.size).toBe(0);
    expect(queued.del).toEqual([]);
  });

  test('a relist-style delete carrying only the uid removes the node and caches its known identity', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(del({ uid: 'o', name: '' }));
    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(queued.del).toEqual(['d']);
    expect(absent.has(cmKey('o'))).toBe(true);
  });

  test('a delete for an unknown uid is ignored', () => {
    const { graph, absent, queued, apply } = setup();
    apply(upsert(meta('o')), del({ uid: 'nope', name: '' }));
    expect(graph.order).toBe(1);
    expect(absent.size).toBe(0);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });

  test("deleting a virtual owner's last dependent drops the virtual owner", () => {
    const { graph, apply } = setup();
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })), del(meta('d')));
    expect(graph.order).toBe(0);
  });
});

describe('virtual deletes', () => {
  test('of a virtual node whose dependents all match: removed, cached, dependents queued', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(
      upsert(meta('d1', { ownerReferences: [ref('o')] })),
      upsert(meta('d2', { ownerReferences: [ref('o', { apiVersion: 'v1' })] })),
    );
    clear();
    apply(virtualDelete(cmIdentity('o')));
    expect(graph.has('o')).toBe(false);
    expect(absent.has(cmKey('o'))).toBe(true);
    expect(absent.size).toBe(1);
    expect(queued).toEqual({ del: ['d1', 'd2'], rateLimited: [], orphan: [] });
  });

  test('whose identity disagrees with some dependents: node kept, matching queued, node re-queued rate-limited', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(
      upsert(meta('d1', { ownerReferences: [ref('o')] })),
      upsert(
        meta('d2', {
          namespace: 'ns2',
          ownerReferences: [ref('o', { kind: 'Secret', name: 's' })],
        }),
      ),
    );
    clear();
    apply(virtualDelete(cmIdentity('o')));
    expect(graph.get('o')).toMatchObject({
      virtual: true,
      apiVersion: 'v1',
      kind: 'Secret',
      name: 's',
      namespace: 'ns2',
    });
    expect(graph.dependents('o')).toEqual(['d1', 'd2']);
    expect(absent.has(cmKey('o'))).toBe(true);
    expect(absent.size).toBe(1);
    expect(queued).toEqual({ del: ['d1'], rateLimited: ['o'], orphan: [] });

    // Verified absent under the other claimed identity too: d2 is queued, and
    // while d1 still names the first identity the node is kept and re-queued.
    clear();
    apply(
      virtualDelete({ apiVersion: 'v1', kind: 'Secret', namespace: 'ns2', name: 's', uid: 'o' }),
    );
    expect(absent.has(coordinatesKey('v1', 'Secret', 'ns2', 's', 'o'))).toBe(true);
    expect(graph.get('o')).toMatchObject({ virtual: true, kind: 'ConfigMap', namespace: 'ns' });
    expect(queued).toEqual({ del: ['d2'], rateLimited: ['o'], orphan: [] });

    // Once d1 is gone, the remaining dependent matches: the node goes.
    clear();
    apply(del(meta('d1', { ownerReferences: [ref('o')] })));
    expect(graph.dependents('o')).toEqual(['d2']);
    apply(
      virtualDelete({ apiVersion: 'v1', kind: 'Secret', namespace: 'ns2', name: 's', uid: 'o' }),
    );
    expect(graph.has('o')).toBe(false);
    expect(queued).toEqual({ del: ['d2'], rateLimited: [], orphan: [] });
  });

  test('of an observed node under other coordinates: node kept, dependents using them queued', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(
      upsert(meta('o')),
      upsert(meta('good', { ownerReferences: [ref('o')] })),
      upsert(meta('bad', { ownerReferences: [ref('o', { name: 'gone' })] })),
    );
    clear();
    apply(virtualDelete(cmIdentity('o', { name: 'gone' })));
    expect(graph.get('o')).toMatchObject({ virtual: false, name: 'cm-o' });
    expect(graph.dependents('o')).toEqual(['good', 'bad']);
    expect(absent.has(cmKey('o', 'ns', 'gone'))).toBe(true);
    expect(absent.has(cmKey('o'))).toBe(false);
    expect(queued).toEqual({ del: ['bad'], rateLimited: [], orphan: [] });
  });

  test('of an observed node under its own coordinates removes it like a delete event', () => {
    const { graph, absent, queued, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(virtualDelete(cmIdentity('o')));
    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(absent.has(cmKey('o'))).toBe(true);
    expect(queued.del).toEqual(['d']);
  });

  test('of an unknown uid is ignored', () => {
    const { graph, absent, queued, apply } = setup();
    apply(upsert(meta('o')), virtualDelete(cmIdentity('x')));
    expect(graph.order).toBe(1);
    expect(absent.size).toBe(0);
    expect(queued).toEqual({ del: [], rateLimited: [], orphan: [] });
  });
});

describe('push and onIdle', () => {
  test('onIdle resolves at once with nothing pending', async () => {
    const { p } = setup();
    await expect(p.onIdle()).resolves.toBeUndefined();
    expect(p.applied).toBe(0);
  });

  test('applies pushed events asynchronously and in order', async () => {
    const { graph, absent, queued, p } = setup();
    p.push(upsert(meta('o')));
    p.push(upsert(meta('d', { ownerReferences: [ref('o')] })));
    p.push(del(meta('o')));
    p.push(upsert(meta('o2')));
    expect(p.depth).toBe(4);
    expect(graph.order).toBe(0);

    await p.onIdle();
    expect(p.depth).toBe(0);
    expect(p.applied).toBe(4);
    // In order: o seen (not virtual, so not queued), d added, o deleted (d queued).
    expect(queued.del).toEqual(['d']);
    expect(absent.has(cmKey('o'))).toBe(true);
    expect(graph.get('o')?.virtual).toBe(true); // its dependents still name it
    expect(graph.has('o2')).toBe(true);
    expect(graph.has('d')).toBe(true);
  });
});

describe('flushed()', () => {
  test('resolves once the events pushed before it are applied, though more keep coming', async () => {
    const { graph, p } = setup();
    for (let i = 0; i < 5000; i++) p.push(upsert(meta(`a${i}`)));
    const flushed = p.flushed().then(() => graph.order);
    // A steady stream of later events: onIdle() would wait for these too.
    let more = 0;
    const feed = setInterval(() => {
      for (let i = 0; i < 100; i++) p.push(upsert(meta(`b${more++}`)));
    }, 0);
    try {
      expect(await flushed).toBeGreaterThanOrEqual(5000);
      expect(graph.get('a4999')).toBeDefined();
    } finally {
      clearInterval(feed);
    }
  });

  test('resolves at once when nothing is queued', async () => {
    const { p } = setup();
    await expect(p.flushed()).resolves.toBeUndefined();
  });
});

test('the virtual-node count kept as nodes change equals a walk over the graph, through any sequence of events', () => {
  // A seeded sequence over a few UIDs: creations with references to each
  // other, deletes, re-creations and verified-absent owners.
  let seed = 7;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return (seed >>> 16) % n;
  };
  const uids = ['a', 'b', 'c', 'd', 'e', 'f'];
  let sawVirtual = 0;
  for (let run = 0; run < 20; run++) {
    const { graph, apply } = setup();
    for (let step = 0; step < 200; step++) {
      const uid = uids[random(uids.length)] as string;
      const owners = uids.filter((u) => u !== uid && random(3) === 0).map((u) => ref(u));
      const kind = random(4);
      if (kind === 0) apply(del(meta(uid)));
      else if (kind === 1) apply(virtualDelete(cmIdentity(uid)));
      else apply(upsert(meta(uid, { ownerReferences: owners })));
      let walked = 0;
      graph.g.forEachNode((_k, a) => {
        if (a.virtual) walked++;
      });
      expect(graph.countVirtual()).toBe(walked);
      sawVirtual += walked;
    }
  }
  expect(sawVirtual).toBeGreaterThan(100);
});

// Issue 32, item 1: the API server accepts two references with one UID.
describe('two references with one UID', () => {
  const live = ref('x', { name: 'cm-x' });
  const bogus = ref('x', { name: 'bogus' });

  test('an update to two references with one UID stores both, each as it is', () => {
    const { graph, apply } = setup();
    apply(upsert(meta('x')), upsert(meta('o')));
    apply(upsert(meta('d', { ownerReferences: [ref('o')] })));
    apply(upsert(meta('d', { resourceVersion: '2', ownerReferences: [live, bogus] })));
    expect(graph.get('d')?.ownerReferences).toEqual([live, bogus]);
    expect(graph.owners('d')).toEqual(['x']);
  });

  test('a reference naming the observed owner under another name queues the dependent', () => {
    const { apply, clear, queued } = setup();
    apply(upsert(meta('x')));
    apply(upsert(meta('d', { ownerReferences: [live] })));
    clear();
    apply(upsert(meta('d', { resourceVersion: '2', ownerReferences: [live, bogus] })));
    expect(queued.del).toEqual(['d']);
  });

  test('the edge blocks and controls if any of the references does, whatever their order', () => {
    const { graph, apply, clear, queued } = setup();
    apply(upsert(meta('x')));
    const blocking = ref('x', { name: 'bogus', blockOwnerDeletion: true, controller: true });
    apply(upsert(meta('d', { ownerReferences: [blocking, live] })));
    expect(graph.edge('x', 'd')).toEqual({ controller: true, blockOwnerDeletion: true });
    apply(upsert(meta('e', { ownerReferences: [live, blocking] })));
    expect(graph.edge('x', 'e')).toEqual({ controller: true, blockOwnerDeletion: true });
    // Dropping the non-blocking one keeps the edge blocking; dropping the blocking one unblocks.
    clear();
    apply(upsert(meta('d', { resourceVersion: '2', ownerReferences: [blocking] })));
    expect(graph.edge('x', 'd')).toEqual({ controller: true, blockOwnerDeletion: true });
    expect(queued.del).toEqual([]);
    apply(upsert(meta('e', { resourceVersion: '2', ownerReferences: [live] })));
    expect(graph.edge('x', 'e')).toEqual({ controller: false, blockOwnerDeletion: false });
    expect(queued.del).toEqual(['x']);
  });

  test('a virtual delete of one claimed identity queues the dependent and has the other verified', () => {
    const { graph, absent, apply, clear, queued } = setup();
    apply(upsert(meta('d', { ownerReferences: [live, bogus] })));
    clear();
    // The virtual owner has the coordinates of the first reference; verified absent under them:
    apply(virtualDelete(cmIdentity('x')));
    expect(queued.del).toEqual(['d']);
    expect(absent.has(cmKey('x'))).toBe(true);
    // The owner stays, to be verified under the other identity the dependent claims.
    expect(graph.get('x')).toMatchObject({ virtual: true, name: 'bogus' });
    expect(queued.rateLimited).toEqual(['x']);
  });
});

// Issue 32, item 2: a resource that left discovery takes its objects out of
// the graph; their owners are told, so that an Orphan deletion waits for them.
test('an unobserved dependent is reported to each of its owners with the resource that left', () => {
  const departed: string[] = [];
  const { graph, propagator: p } = graphFixture({
    sinks: { departedDependent: (owner, resource) => void departed.push(`${owner} ${resource}`) },
  });
  p.apply(upsert(meta('o1')));
  p.apply(upsert(meta('o2')));
  p.apply(upsert(meta('d', { ownerReferences: [ref('o1'), ref('o2')] })));
  p.apply(upsert(meta('lone')));
  p.apply({ type: 'unobserved', uid: 'd', resource: 'widgets.example.com' });
  p.apply({ type: 'unobserved', uid: 'lone', resource: 'widgets.example.com' });
  expect(departed.sort()).toEqual(['o1 widgets.example.com', 'o2 widgets.example.com']);
  expect(graph.dependents('o1')).toEqual([]);
});

describe('the lane of each piece of work (docs/how-it-decides.md, "Lanes")', () => {
  /** Owner o, observed, and its dependent d with a blocking reference; nothing queued yet. */
  function blockingPair() {
    const f = setup();
    f.apply(
      upsert(meta('o')),
      upsert(meta('d', { ownerReferences: [ref('o', { blockOwnerDeletion: true })] })),
    );
    f.clear();
    return f;
  }

  test('an owner never seen: verified in the housekeeping lane, and its dependents queued in the lane that found it gone', () => {
    const { queuedIn, apply, clear } = setup();
    apply(upsert(meta('d1', { ownerReferences: [ref('o1')] })));
    apply(upsert(meta('d2', { ownerReferences: [ref('o2')] })));
    expect(queuedIn.del).toEqual(['o1@housekeeping', 'o2@housekeeping']);
    clear();
    apply(virtualDelete(cmIdentity('o1'), 'housekeeping'), virtualDelete(cmIdentity('o2'), 'user'));
    expect(queuedIn.del).toEqual(['d1@housekeeping', 'd2@user']);
  });

  test('an owner observed deleted: its dependents in the user lane', () => {
    const { queuedIn, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply(del(meta('o')));
    expect(queuedIn.del).toEqual(['d@user']);
  });

  test('a deletion waiting on the GC (Foreground, Orphan): user, even when the dependent that held it goes in a housekeeping verification', () => {
    const { queuedIn, apply, clear } = blockingPair();
    apply(upsert(meta('o', { deletionTimestamp: TS, finalizers: ['foregroundDeletion'] })));
    expect(queuedIn.del).toEqual(['d@user', 'o@user']);
    clear();
    apply(virtualDelete(cmIdentity('d'), 'housekeeping'));
    expect(queuedIn.del).toEqual(['o@user']);
    clear();
    apply(upsert(meta('p', { deletionTimestamp: TS, finalizers: ['orphan'] })));
    expect(queuedIn.orphan).toEqual(['p@user']);
  });

  test('a reference removed, or one that disagrees with the owner observed: user', () => {
    const { queuedIn, apply, clear } = blockingPair();
    apply(upsert(meta('d', { resourceVersion: '2' })));
    expect(queuedIn.del).toEqual(['o@user']);
    clear();
    apply(upsert(meta('e', { ownerReferences: [ref('o', { name: 'other' })] })));
    expect(queuedIn.del).toEqual(['e@user']);
  });

  test('a dependent newly naming an owner recorded absent: user', () => {
    const { queuedIn, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })), del(meta('o')));
    clear();
    apply(upsert(meta('late', { ownerReferences: [ref('o')] })));
    expect(queuedIn.del).toEqual(['late@user']);
  });

  test('what only re-verifies what was there: an object no longer watched, an owner claimed under several identities: housekeeping', () => {
    const { queuedIn, apply, clear } = setup();
    apply(upsert(meta('o')), upsert(meta('d', { ownerReferences: [ref('o')] })));
    clear();
    apply({ type: 'unobserved', uid: 'o' });
    expect(queuedIn.del).toEqual(['o@housekeeping']);
    clear();
    apply(upsert(meta('e', { ownerReferences: [ref('o', { name: 'other' })] })));
    clear();
    apply(virtualDelete(cmIdentity('o'), 'user'));
    expect(queuedIn).toEqual({ del: ['d@user'], rateLimited: ['o@housekeeping'], orphan: [] });
  });
});
