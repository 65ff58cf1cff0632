import { deletionStatus, statusOf, type ExplainedObject } from './explain.ts';

const deleting = (finalizers: string[]) => ({
  uid: 'o',
  name: 'owner',
  namespace: 'ns',
  deletionTimestamp: '2026-12-06T08:00:00Z',
  finalizers,
});
const dependent = (blockOwnerDeletion: boolean): ExplainedObject['dependents'][number] => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name: 'dep',
  uid: 'd',
  finalizers: [],
  status: '',
  owners: [],
  dependents: [],
  blockOwnerDeletion,
});

describe('deletionStatus', () => {
  test('foreground with nothing blocking among complete lists: the finalizer will be removed', () => {
    expect(deletionStatus(deleting(['foregroundDeletion']), [dependent(false)])).toBe(
      'deleting its dependents in the foreground: no blocking dependent left, the foregroundDeletion finalizer will be removed',
    );
  });

  test('a resource whose LIST failed is not an empty one: no claim that nothing blocks', () => {
    const unlisted = ['secrets (403 Forbidden)'];
    const none = deletionStatus(deleting(['foregroundDeletion']), [], unlisted);
    expect(none).not.toContain('will be removed');
    expect(none).toContain('dependents in secrets (403 Forbidden) are unknown');
    expect(deletionStatus(deleting(['foregroundDeletion']), [dependent(true)], unlisted)).toMatch(
      /^waiting for 1 blocking dependent: ConfigMap dep; dependents in secrets/,
    );
    expect(deletionStatus(deleting(['orphan']), [], unlisted)).toMatch(
      /^being deleted with Orphan: 0 dependent\(s\).*are unknown/,
    );
  });
});

describe('statusOf', () => {
  test('a collection whose policy rests on dependents that could not all be listed says so', () => {
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'gone', uid: 'g' };
    const obj = { uid: 'd', name: 'dep', namespace: 'ns', ownerReferences: [ref] };
    const owners = [
      {
        ...ref,
        controller: false,
        blockOwnerDeletion: false,
        state: 'dangling',
        detail: 'owner ConfigMap gone (v1) not found',
      },
    ];
    const complete = statusOf(obj, owners, [], []);
    expect(complete).toMatch(/will be collected \(DELETE with propagationPolicy \w+\)$/);
    expect(statusOf(obj, owners, [], ['secrets (403 Forbidden)'])).toBe(
      `${complete}; dependents in secrets (403 Forbidden) are unknown: that list failed`,
    );
  });
});
