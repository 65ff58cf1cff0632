import type { ObjectMeta, OwnerReference } from '../api/resources.ts';
import type { DependentSnapshot } from '../graph/graph.ts';
import {
  classifyLookup,
  decide,
  decideDeletingDependents,
  policyFromFinalizers,
  removalByUidIsExact,
  sameOwnerReferences,
  withoutReferences,
  type ClassifiedOwner,
  type Decision,
  type DeletionPropagation,
  type ForegroundDecision,
  type OwnerLookup,
  type OwnerState,
} from './decide.ts';

const TS = '2024-01-01T00:00:00Z';

function ref(uid: string, extra: Partial<OwnerReference> = {}): OwnerReference {
  return { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `rs-${uid}`, uid, ...extra };
}

function owner(uid: string, state: OwnerState): ClassifiedOwner {
  return { ref: ref(uid), state, detail: 'test' };
}

function dep(uid: string, extra: Partial<DependentSnapshot> = {}): DependentSnapshot {
  return {
    uid,
    blockOwnerDeletion: false,
    deletingDependents: false,
    beingDeleted: false,
    ...extra,
  };
}

function live(finalizers?: string[]): ObjectMeta {
  return { uid: 'self', name: 'self', namespace: 'ns', ...(finalizers ? { finalizers } : {}) };
}

describe('classifyLookup', () => {
  test.each<[string, OwnerLookup, OwnerState, string]>([
    ['not found', { found: false }, 'dangling', 'not-found'],
    ['found under another uid', { found: true, uid: 'other' }, 'dangling', 'uid-mismatch'],
    [
      'uid mismatch even while deleting in the foreground',
      { found: true, uid: 'other', deletionTimestamp: TS, finalizers: ['foregroundDeletion'] },
      'dangling',
      'uid-mismatch',
    ],
    ['found, same uid', { found: true, uid: 'o1' }, 'solid', 'owner-exists'],
    [
      'deletionTimestamp + foregroundDeletion',
      { found: true, uid: 'o1', deletionTimestamp: TS, finalizers: ['foregroundDeletion'] },
      'waiting',
      'owner-deleting-dependents',
    ],
    [
      'deletionTimestamp + foregroundDeletion among other finalizers',
      {
        found: true,
        uid: 'o1',
        deletionTimestamp: TS,
        finalizers: ['example.com/keep', 'foregroundDeletion'],
      },
      'waiting',
      'owner-deleting-dependents',
    ],
    [
      'deletionTimestamp without foregroundDeletion (background deletion)',
      { found: true, uid: 'o1', deletionTimestamp: TS },
      'solid',
      'owner-exists',
    ],
    [
      'deletionTimestamp with only the orphan finalizer',
      { found: true, uid: 'o1', deletionTimestamp: TS, finalizers: ['orphan'] },
      'solid',
      'owner-exists',
    ],
    [
      'foregroundDeletion without deletionTimestamp',
      { found: true, uid: 'o1', finalizers: ['foregroundDeletion'] },
      'solid',
      'owner-exists',
    ],
  ])('%s → %s', (_name, lookup, state, detail) => {
    const r = ref('o1');
    expect(classifyLookup(r, lookup)).toEqual({ ref: r, state, detail });
  });
});

describe('decide', () => {
  test.each<[string, ClassifiedOwner[], string[] | undefined, DependentSnapshot[], Decision]>([
    ['no owners', [], undefined, [], { action: 'none', reason: 'no owner references' }],
    [
      'no owners, even with the orphan finalizer',
      [],
      ['orphan'],
      [dep('d1')],
      { action: 'none', reason: 'no owner references' },
    ],
    [
      'all owners exist',
      [owner('a', 'solid'), owner('b', 'solid')],
      undefined,
      [],
      { action: 'none', reason: 'all owners exist' },
    ],
    [
      'one dangling owner',
      [owner('a', 'dangling')],
      undefined,
      [],
      {
        action: 'delete',
        policy: 'Background',
        unblockOwnerReferences: false,
        reason: 'all owners are gone',
      },
    ],
    [
      'all dangling',
      [owner('a', 'dangling'), owner('b', 'dangling')],
      undefined,
      [dep('d1', { deletingDependents: true })],
      {
        action: 'delete',
        policy: 'Background',
        unblockOwnerReferences: false,
        reason: 'all owners are gone',
      },
    ],
    [
      'all dangling, object has the orphan finalizer',
      [owner('a', 'dangling')],
      ['orphan'],
      [],
      {
        action: 'delete',
        policy: 'Orphan',
        unblockOwnerReferences: false,
        reason: 'all owners are gone',
      },
    ],
    [
      'all dangling, object has the foregroundDeletion finalizer',
      [owner('a', 'dangling')],
      ['foregroundDeletion'],
      [],
      {
        action: 'delete',
        policy: 'Foreground',
        unblockOwnerReferences: false,
        reason: 'all owners are gone',
      },
    ],
    [
      'one solid, one dangling',
      [owner('a', 'solid'), owner('b', 'dangling')],
      undefined,
      [],
      {
        action: 'removeOwnerReferences',
        refs: [ref('b')],
        reason:
          'some owners exist; removing references to owners that are gone or deleting their dependents',
      },
    ],
    [
      'one solid, one waiting (with dependents)',
      [owner('a', 'waiting'), owner('b', 'solid')],
      undefined,
      [dep('d1', { deletingDependents: true })],
      {
        action: 'removeOwnerReferences',
        refs: [ref('a')],
        reason:
          'some owners exist; removing references to owners that are gone or deleting their dependents',
      },
    ],
    [
      'solid, dangling and waiting: only the solid one is kept',
      [owner('w', 'waiting'), owner('s', 'solid'), owner('d', 'dangling')],
      ['orphan'],
      [],
      {
        action: 'removeOwnerReferences',
        refs: [ref('d'), ref('w')],
        reason:
          'some owners exist; removing references to owners that are gone or deleting their dependents',
      },
    ],
    [
      'waiting only, no dependents',
      [owner('a', 'waiting')],
      undefined,
      [],
      {
        action: 'delete',
        policy: 'Background',
        unblockOwnerReferences: false,
        reason: 'owners are gone or deleting their dependents',
      },
    ],
    [
      'waiting + dangling, no dependents',
      [owner('a', 'waiting'), owner('b', 'dangling')],
      undefined,
      [],
      {
        action: 'delete',
        policy: 'Background',
        unblockOwnerReferences: false,
        reason: 'owners are gone or deleting their dependents',
      },
    ],
    [
      'waiting only, no dependents, object has the orphan finalizer',
      [owner('a', 'waiting')],
      ['orphan'],
      [],
      {
        action: 'delete',
        policy: 'Orphan',
        unblockOwnerReferences: false,
        reason: 'owners are gone or deleting their dependents',
      },
    ],
    [
      'waiting + has dependents, none deleting their own',
      [owner('a', 'waiting')],
      undefined,
      [dep('d1', { blockOwnerDeletion: true }), dep('d2', { beingDeleted: true })],
      {
        action: 'delete',
        policy: 'Foreground',
        unblockOwnerReferences: false,
        reason:
          'an owner is deleting its dependents in the foreground and this object has dependents of its own',
      },
    ],
    [
      'waiting + has dependents, one of them deleting its own',
      [owner('a', 'waiting'), owner('b', 'dangling')],
      undefined,
      [dep('d1'), dep('d2', { deletingDependents: true, beingDeleted: true })],
      {
        action: 'delete',
        policy: 'Foreground',
        unblockOwnerReferences: true,
        reason:
          'an owner is deleting its dependents in the foreground and this object has dependents of its own',
      },
    ],
    [
      'waiting + has dependents wins over the orphan finalizer',
      [owner('a', 'waiting')],
      ['orphan'],
      [dep('d1')],
      {
        action: 'delete',
        policy: 'Foreground',
        unblockOwnerReferences: false,
        reason:
          'an owner is deleting its dependents in the foreground and this object has dependents of its own',
      },
    ],
    [
      'an invalid owner among dangling ones',
      [owner('a', 'dangling'), owner('b', 'invalid')],
      undefined,
      [],
      {
        action: 'none',
        reason: 'cluster-scoped object names a namespaced owner kind; never collected',
      },
    ],
    [
      'an invalid owner beside a solid and a dangling one',
      [owner('a', 'solid'), owner('b', 'dangling'), owner('c', 'invalid')],
      undefined,
      [],
      {
        action: 'none',
        reason: 'cluster-scoped object names a namespaced owner kind; never collected',
      },
    ],
    [
      'an invalid owner beside a waiting one with dependents',
      [owner('a', 'invalid'), owner('b', 'waiting')],
      undefined,
      [dep('d1')],
      {
        action: 'none',
        reason: 'cluster-scoped object names a namespaced owner kind; never collected',
      },
    ],
  ])('%s', (_name, owners, finalizers, dependents, expected) => {
    expect(decide({ live: live(finalizers), owners, dependents })).toEqual(expected);
  });

  test('removes exactly the non-solid references, in owner order', () => {
    const d = decide({
      live: live(),
      owners: [owner('d1', 'dangling'), owner('s', 'solid'), owner('d2', 'dangling')],
      dependents: [],
    });
    expect(d.action === 'removeOwnerReferences' ? d.refs : undefined).toEqual([
      ref('d1'),
      ref('d2'),
    ]);
  });

  test('two references with one UID: the live one keeps the object, only the other is removed', () => {
    const live_ = ref('x', { name: 'rs-live' });
    const bogus = ref('x', { name: 'rs-bogus' });
    const d = decide({
      live: live(),
      owners: [
        { ref: live_, state: 'solid', detail: 'owner-exists' },
        { ref: bogus, state: 'dangling', detail: 'not-found' },
      ],
      dependents: [],
    });
    expect(d).toMatchObject({ action: 'removeOwnerReferences', refs: [bogus] });
    // A strategic merge patch by UID would remove the live reference too.
    expect(removalByUidIsExact([live_, bogus], [bogus])).toBe(false);
    expect(withoutReferences([live_, bogus], [bogus])).toEqual([live_]);
  });
});

describe('decideDeletingDependents', () => {
  test.each<[string, DependentSnapshot[], ForegroundDecision]>([
    ['no dependents', [], { action: 'removeForegroundFinalizer' }],
    [
      'only non-blocking dependents do not hold the owner',
      [dep('a'), dep('b', { deletingDependents: true }), dep('c', { beingDeleted: true })],
      { action: 'removeForegroundFinalizer' },
    ],
    [
      'blocking dependents are queued',
      [dep('a', { blockOwnerDeletion: true }), dep('b', { blockOwnerDeletion: true })],
      { action: 'waitForDependents', queue: ['a', 'b'], blocking: 2 },
    ],
    [
      'non-blocking dependents are not queued',
      [dep('a', { blockOwnerDeletion: true }), dep('b'), dep('c', { beingDeleted: true })],
      { action: 'waitForDependents', queue: ['a'], blocking: 1 },
    ],
    [
      'blocking dependents already deleting their own are not re-queued but still block',
      [
        dep('a', { blockOwnerDeletion: true, deletingDependents: true, beingDeleted: true }),
        dep('b', { blockOwnerDeletion: true, beingDeleted: true }),
        dep('c'),
      ],
      { action: 'waitForDependents', queue: ['b'], blocking: 2 },
    ],
    [
      'all blocking dependents deleting their own: wait, queue nothing',
      [dep('a', { blockOwnerDeletion: true, deletingDependents: true, beingDeleted: true })],
      { action: 'waitForDependents', queue: [], blocking: 1 },
    ],
  ])('%s', (_name, dependents, expected) => {
    expect(decideDeletingDependents(dependents)).toEqual(expected);
  });
});

describe('policyFromFinalizers', () => {
  test.each<[string[] | undefined, DeletionPropagation]>([
    [undefined, 'Background'],
    [[], 'Background'],
    [['example.com/keep'], 'Background'],
    [['orphan'], 'Orphan'],
    [['example.com/keep', 'orphan'], 'Orphan'],
    [['foregroundDeletion'], 'Foreground'],
    [['example.com/keep', 'foregroundDeletion'], 'Foreground'],
    // The API server forbids both; orphan is checked first.
    [['foregroundDeletion', 'orphan'], 'Orphan'],
    // Names are exact.
    [['Orphan', 'foreground'], 'Background'],
  ])('%p → %s', (finalizers, policy) => {
    expect(policyFromFinalizers(finalizers)).toBe(policy);
  });
});

describe('sameOwnerReferences', () => {
  const a = ref('a', { controller: true, blockOwnerDeletion: true });
  const b = ref('b');
  test.each<[string, OwnerReference[] | undefined, OwnerReference[] | undefined, boolean]>([
    ['both absent', undefined, undefined, true],
    ['absent and empty', undefined, [], true],
    ['equal', [a, b], [{ ...a }, { ...b }], true],
    ['equal in another order', [a, b], [b, a], true],
    [
      'missing flags equal false flags',
      [b],
      [{ ...b, controller: false, blockOwnerDeletion: false }],
      true,
    ],
    ['one removed', [a, b], [a], false],
    ['absent vs one', undefined, [a], false],
    ['other uid', [b], [{ ...b, uid: 'c' }], false],
    ['other name', [b], [{ ...b, name: 'other' }], false],
    ['other kind', [b], [{ ...b, kind: 'Deployment' }], false],
    ['other apiVersion', [b], [{ ...b, apiVersion: 'apps/v1beta2' }], false],
    ['controller changed', [a], [{ ...a, controller: false }], false],
    ['blockOwnerDeletion changed', [a], [{ ...a, blockOwnerDeletion: undefined }], false],
    ['same length, duplicate instead of other', [a, b], [a, a], false],
  ])('%s → %p', (_name, x, y, same) => {
    expect(sameOwnerReferences(x, y)).toBe(same);
    expect(sameOwnerReferences(y, x)).toBe(same);
  });
});
