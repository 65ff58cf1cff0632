import { ApiError } from '../api/errors.ts';
import type { ObjectMeta, OwnerReference } from '../api/resources.ts';
import { cmMeta, cmRef, graphFixture } from '../graph/graph-fixture.testing.ts';
import { UnresolvableKindError } from './context.ts';
import { CollectionSlis, foregroundBlocker, refusal } from './slis.ts';

const TS = '2026-01-01T00:00:00Z';

function meta(uid: string, extra: Partial<ObjectMeta> = {}): ObjectMeta {
  return cmMeta(uid, { resourceVersion: '1', ...extra });
}
function ref(uid: string, blockOwnerDeletion = true): OwnerReference {
  return cmRef(uid, { blockOwnerDeletion });
}
const foregroundDeleting = { deletionTimestamp: TS, finalizers: ['foregroundDeletion'] };
const heldByFinalizer = { deletionTimestamp: TS, finalizers: ['example.com/hold'] };

function setup() {
  let clock = 1_000_000;
  const lags: number[] = [];
  const slis = new CollectionSlis({ collectionLag: (s) => lags.push(s) }, { now: () => clock });
  const { graph, observe, observeDelete } = graphFixture({
    absentCapacity: 100,
    sinks: { observedGone: (uid) => slis.gone(uid), forgotten: (uid) => slis.forget(uid) },
  });
  const advance = (ms: number): void => {
    clock += ms;
  };
  return { graph, slis, lags, upsert: observe, remove: observeDelete, advance, now: () => clock };
}

describe('pending collections and collection lag', () => {
  test('lag runs from the owner known gone to the delete seen by the informers; pending until then', () => {
    const { slis, lags, upsert, remove, advance, now } = setup();
    upsert(meta('d', { ownerReferences: [ref('o', false)] }));
    const ownerGoneAt = now();
    advance(2000);
    slis.collecting('d', ownerGoneAt);
    expect(slis.pendingCount).toBe(1);
    advance(3000);
    expect(slis.oldestPendingSeconds()).toBe(3);
    // Asked twice (a retried DELETE): the first ask counts.
    slis.collecting('d', now());
    remove(meta('d', { ownerReferences: [ref('o', false)] }));
    expect(lags).toEqual([5]);
    expect(slis.pendingCount).toBe(0);
    expect(slis.oldestPendingSeconds()).toBe(0);
  });

  test('an object the GC never asked to delete, or one whose resource stops being watched, observes no lag', () => {
    const { slis, lags, upsert, remove } = setup();
    upsert(meta('x'));
    remove(meta('x'));
    slis.collecting('y', 0);
    slis.forget('y');
    expect(lags).toEqual([]);
    expect(slis.pendingCount).toBe(0);
  });

  test('the oldest pending is the first asked, in O(1)', () => {
    const { slis, advance } = setup();
    slis.collecting('a', 0);
    advance(1000);
    slis.collecting('b', 0);
    advance(1000);
    expect(slis.oldestPendingSeconds()).toBe(2);
    slis.gone('a');
    expect(slis.oldestPendingSeconds()).toBe(1);
  });
});

describe('why a foreground deletion is not finishing', () => {
  test('a blocking dependent held by a finalizer of its own', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('o', foregroundDeleting));
    upsert(meta('d', { ownerReferences: [ref('o')], ...heldByFinalizer }));
    expect(foregroundBlocker(graph, 'o', slis.failures)).toMatchObject({
      reason: 'dependent-finalizer',
      dependent: 'd',
    });
  });

  test('progressing: a blocking dependent not deleted yet, or a non-blocking one held', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('o', foregroundDeleting));
    upsert(meta('d', { ownerReferences: [ref('o')] }));
    upsert(meta('n', { ownerReferences: [ref('o', false)], ...heldByFinalizer }));
    expect(foregroundBlocker(graph, 'o', slis.failures)).toBeUndefined();
  });

  test('a blocking dependent whose delete is refused', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('o', foregroundDeleting));
    upsert(meta('d', { ownerReferences: [ref('o')] }));
    slis.failed('d', '403 Forbidden: no');
    expect(foregroundBlocker(graph, 'o', slis.failures)).toMatchObject({
      reason: 'dependent-undeletable',
      dependent: 'd',
    });
    slis.succeeded('d');
    expect(foregroundBlocker(graph, 'o', slis.failures)).toBeUndefined();
  });

  test('its own finalizer removal refused', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('o', foregroundDeleting));
    slis.failed('o', '403 Forbidden: no');
    expect(foregroundBlocker(graph, 'o', slis.failures)?.reason).toBe('write-refused');
  });

  test('a cycle of blocking references between objects deleting their dependents', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('a', { ownerReferences: [ref('b')], ...foregroundDeleting }));
    upsert(meta('b', { ownerReferences: [ref('a')], ...foregroundDeleting }));
    expect(foregroundBlocker(graph, 'a', slis.failures)).toMatchObject({
      reason: 'cycle',
      dependent: 'b',
    });
  });

  test('a chain: the reason and the dependent at its end', () => {
    const { graph, slis, upsert } = setup();
    upsert(meta('o', foregroundDeleting));
    upsert(meta('m', { ownerReferences: [ref('o')], ...foregroundDeleting }));
    upsert(meta('l', { ownerReferences: [ref('m')], ...heldByFinalizer }));
    const b = foregroundBlocker(graph, 'o', slis.failures);
    expect(b).toMatchObject({ reason: 'dependent-finalizer', dependent: 'l' });
    expect(b?.detail).toContain('cm-m');
    expect(b?.detail).toContain('cm-l');
  });
});

describe('the sweep: gauges and DeletionBlocked events', () => {
  const MIN = 60_000;

  test('counted by reason; an event once blocked for the threshold, repeated at most every 30 minutes; cleared when the blocker goes', () => {
    const { graph, slis, upsert, remove, advance } = setup();
    upsert(meta('o', foregroundDeleting));
    const held = meta('d', { ownerReferences: [ref('o')], ...heldByFinalizer });
    upsert(held);
    slis.foregroundStarted('o');
    const sweep = () => slis.sweep({ graph, orphanWaits: new Map() }, 5 * MIN, 30 * MIN);
    expect(sweep()).toEqual([]);
    expect(slis.blockedCount('dependent-finalizer')).toBe(1);
    expect(slis.blockedCount('cycle')).toBe(0);
    advance(4 * MIN);
    expect(sweep()).toEqual([]);
    expect(slis.oldestBlockedSeconds('dependent-finalizer')).toBe(240);
    advance(MIN);
    expect(sweep().map((e) => [e.uid, e.reason, e.dependent])).toEqual([
      ['o', 'dependent-finalizer', 'd'],
    ]);
    advance(MIN);
    expect(sweep()).toEqual([]);
    advance(30 * MIN);
    expect(sweep().map((e) => e.uid)).toEqual(['o']);
    // The dependent's finalizer goes, the dependent with it: nothing blocked.
    remove(held);
    sweep();
    expect(slis.blockedCount('dependent-finalizer')).toBe(0);
    expect(slis.oldestBlockedSeconds('dependent-finalizer')).toBe(0);
  });

  test('an Orphan deletion waiting for watches counts after a grace; a refused orphaning is write-refused', () => {
    const { graph, slis, upsert, advance, now } = setup();
    upsert(meta('o', { deletionTimestamp: TS, finalizers: ['orphan'] }));
    const waits = new Map<string, { since: number; unreadable?: string[] }>([
      ['o', { since: now(), unreadable: ['secrets (403 Forbidden)'] }],
    ]);
    const sweep = () => slis.sweep({ graph, orphanWaits: waits }, 0, 0);
    sweep();
    expect(slis.blockedCount('orphan-waiting-for-watches')).toBe(0);
    advance(slis.orphanGraceMs);
    sweep();
    expect(slis.blockedCount('orphan-waiting-for-watches')).toBe(1);
    // The event names what it cannot read.
    expect([...slis.blockedEntries()][0]?.detail).toContain('secrets (403 Forbidden)');
    slis.failed('o', '403 Forbidden: no');
    sweep();
    expect(slis.blockedCount('orphan-waiting-for-watches')).toBe(0);
    expect(slis.blockedCount('write-refused')).toBe(1);
  });

  test('an object seen gone leaves every gauge', () => {
    const { graph, slis, upsert, remove } = setup();
    const o = meta('o', foregroundDeleting);
    upsert(o);
    upsert(meta('d', { ownerReferences: [ref('o')], ...heldByFinalizer }));
    slis.foregroundStarted('o');
    slis.sweep({ graph, orphanWaits: new Map() }, 0, 0);
    expect(slis.blockedCount('dependent-finalizer')).toBe(1);
    remove(o);
    expect(slis.blockedCount('dependent-finalizer')).toBe(0);
  });
});

test('refusals: RBAC, admission and unknown kinds; not 5xx, 409 or 429', () => {
  const err = (status: number) =>
    new ApiError('DELETE', '/x', status, '{"message":"m","reason":"R"}');
  expect(refusal(err(403))).toBe('DELETE /x: 403 R: m');
  expect(refusal(err(422))).toBe('DELETE /x: 422 R: m');
  expect(refusal(new UnresolvableKindError('cannot resolve'))).toBe('cannot resolve');
  for (const s of [409, 429, 500, 503]) expect(refusal(err(s))).toBeUndefined();
  expect(refusal(new Error('socket hang up'))).toBeUndefined();
});
