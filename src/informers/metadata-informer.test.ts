import type { ObjectMeta } from '../api/resources.ts';
import { trimMeta } from './metadata-informer.ts';

type Raw = Parameters<typeof trimMeta>[0];

const owner = {
  apiVersion: 'apps/v1',
  kind: 'ReplicaSet',
  name: 'rs',
  uid: 'o1',
  controller: true,
  blockOwnerDeletion: true,
};

describe('trimMeta', () => {
  test('keeps what the GC needs and drops labels, annotations and managedFields', () => {
    const raw = {
      uid: 'u1',
      name: 'pod-1',
      namespace: 'ns',
      resourceVersion: '42',
      deletionTimestamp: '2024-01-01T00:00:00Z',
      finalizers: ['foregroundDeletion'],
      ownerReferences: [owner],
      labels: { app: 'web' },
      annotations: { a: 'b' },
      managedFields: [{ manager: 'kubectl' }],
      creationTimestamp: '2023-12-31T00:00:00Z',
      generation: 3,
    };
    expect(trimMeta(raw as Raw)).toStrictEqual<ObjectMeta>({
      uid: 'u1',
      name: 'pod-1',
      namespace: 'ns',
      resourceVersion: '42',
      deletionTimestamp: '2024-01-01T00:00:00Z',
      finalizers: ['foregroundDeletion'],
      ownerReferences: [owner],
    });
  });

  test('omits empty and missing optional fields', () => {
    expect(
      trimMeta({ uid: 'u1', name: 'node-1', namespace: '', finalizers: [], ownerReferences: [] }),
    ).toStrictEqual<ObjectMeta>({ uid: 'u1', name: 'node-1' });
  });

  test('keeps an empty name (relist deletes carry none)', () => {
    expect(trimMeta({ uid: 'u1', name: '' })).toStrictEqual<ObjectMeta>({ uid: 'u1', name: '' });
  });

  test.each<[string, Raw]>([
    ['no metadata', undefined],
    ['no uid', { name: 'x', namespace: 'ns', ownerReferences: [owner] }],
    ['empty uid', { uid: '', name: 'x' }],
    ['no name', { uid: 'u1' }],
  ])('%s → undefined', (_name, raw) => {
    expect(trimMeta(raw)).toBeUndefined();
  });
});
