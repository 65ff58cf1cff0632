import {
  collectionPath,
  groupResource,
  groupVersion,
  isDeletable,
  normaliseGroupResource,
  objectPath,
  parseApiVersion,
  RestMapper,
  trimMeta,
  type ObjectMeta,
  type RawMeta,
  type ResourceInfo,
} from './resources.ts';

const VERBS = ['list', 'watch', 'delete'];

function resource(
  group: string,
  version: string,
  res: string,
  kind: string,
  namespaced: boolean,
  verbs: readonly string[] = VERBS,
): ResourceInfo {
  return { group, version, resource: res, kind, namespaced, verbs };
}

const pods = resource('', 'v1', 'pods', 'Pod', true);
const nodes = resource('', 'v1', 'nodes', 'Node', false);
const replicasets = resource('apps', 'v1', 'replicasets', 'ReplicaSet', true);
const clusterroles = resource(
  'rbac.authorization.k8s.io',
  'v1',
  'clusterroles',
  'ClusterRole',
  false,
);

describe('parseApiVersion', () => {
  test.each([
    ['v1', { group: '', version: 'v1' }],
    ['apps/v1', { group: 'apps', version: 'v1' }],
    ['rbac.authorization.k8s.io/v1', { group: 'rbac.authorization.k8s.io', version: 'v1' }],
    ['example.com/v1beta1', { group: 'example.com', version: 'v1beta1' }],
  ])('%s', (apiVersion, expected) => {
    expect(parseApiVersion(apiVersion)).toEqual(expected);
  });
});

describe('groupVersion', () => {
  test.each([
    [pods, 'v1'],
    [replicasets, 'apps/v1'],
    [clusterroles, 'rbac.authorization.k8s.io/v1'],
  ])('%#', (r, gv) => {
    expect(groupVersion(r)).toBe(gv);
    expect(parseApiVersion(gv)).toEqual({ group: r.group, version: r.version });
  });
});

describe('groupResource', () => {
  test.each([
    [pods, 'pods'],
    [replicasets, 'replicasets.apps'],
    [clusterroles, 'clusterroles.rbac.authorization.k8s.io'],
  ])('%#', (r, gr) => {
    expect(groupResource(r)).toBe(gr);
  });
});

describe('normaliseGroupResource', () => {
  test.each([
    ['events', 'events'],
    ['events.', 'events'],
    ['events.events.k8s.io', 'events.events.k8s.io'],
    ['replicasets.apps', 'replicasets.apps'],
  ])('%s → %s', (text, expected) => {
    expect(normaliseGroupResource(text)).toBe(expected);
  });
});

describe('collectionPath', () => {
  test.each<[ResourceInfo, string | undefined, string]>([
    [pods, undefined, '/api/v1/pods'],
    [pods, 'default', '/api/v1/namespaces/default/pods'],
    [pods, '', '/api/v1/pods'],
    [nodes, undefined, '/api/v1/nodes'],
    [nodes, 'default', '/api/v1/nodes'],
    [replicasets, undefined, '/apis/apps/v1/replicasets'],
    [replicasets, 'kube-system', '/apis/apps/v1/namespaces/kube-system/replicasets'],
    [clusterroles, 'x', '/apis/rbac.authorization.k8s.io/v1/clusterroles'],
    [pods, 'a/b', '/api/v1/namespaces/a%2Fb/pods'],
  ])('%#: %p', (r, namespace, path) => {
    expect(collectionPath(r, namespace)).toBe(path);
  });
});

describe('objectPath', () => {
  test.each<[ResourceInfo, string | undefined, string, string]>([
    [pods, 'default', 'web-0', '/api/v1/namespaces/default/pods/web-0'],
    [nodes, undefined, 'node-1', '/api/v1/nodes/node-1'],
    // A cluster-scoped resource ignores the namespace it is given.
    [nodes, 'default', 'node-1', '/api/v1/nodes/node-1'],
    [replicasets, 'ns', 'rs', '/apis/apps/v1/namespaces/ns/replicasets/rs'],
    [clusterroles, 'ns', 'admin', '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin'],
    [
      clusterroles,
      undefined,
      'system:a b',
      '/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aa%20b',
    ],
  ])('%#: %s', (r, namespace, name, path) => {
    expect(objectPath(r, namespace, name)).toBe(path);
  });
});

describe('isDeletable', () => {
  test.each<[readonly string[], boolean]>([
    [['list', 'watch', 'delete'], true],
    [['create', 'delete', 'get', 'list', 'patch', 'watch'], true],
    [['list', 'watch'], false],
    [['list', 'delete'], false],
    [['watch', 'delete'], false],
    [[], false],
  ])('%p → %p', (verbs, deletable) => {
    expect(isDeletable(resource('', 'v1', 'x', 'X', true, verbs))).toBe(deletable);
  });
});

describe('RestMapper', () => {
  const rsV1beta2 = resource('apps', 'v1beta2', 'replicasets', 'ReplicaSet', true);
  const widgets = resource('example.com', 'v1', 'widgets', 'Widget', true);
  const widgetsAlias = resource('example.com', 'v1', 'widgetaliases', 'Widget', true);
  const mapper = new RestMapper([pods, nodes, replicasets, rsV1beta2, widgets, widgetsAlias]);

  test.each<[string, string, ResourceInfo | undefined]>([
    ['v1', 'Pod', pods],
    ['v1', 'Node', nodes],
    ['apps/v1', 'ReplicaSet', replicasets],
    // Any served version, not only the preferred one.
    ['apps/v1beta2', 'ReplicaSet', rsV1beta2],
    // Several resources with one kind: the first listed wins.
    ['example.com/v1', 'Widget', widgets],
    // Unserved version.
    ['apps/v1beta1', 'ReplicaSet', undefined],
    ['v2', 'Pod', undefined],
    // Wrong group: core has no ReplicaSet, apps has no Pod.
    ['v1', 'ReplicaSet', undefined],
    ['apps/v1', 'Pod', undefined],
    // Kinds are case-sensitive.
    ['v1', 'pod', undefined],
    ['example.com/v1', 'Gadget', undefined],
  ])('%s %s', (apiVersion, kind, expected) => {
    expect(mapper.resolve(apiVersion, kind)).toBe(expected);
  });

  test('counts distinct group/version/kind', () => {
    expect(mapper.size).toBe(5);
    expect(new RestMapper([]).size).toBe(0);
  });
});

const owner = {
  apiVersion: 'apps/v1',
  kind: 'ReplicaSet',
  name: 'rs',
  uid: 'o1',
  controller: true,
  blockOwnerDeletion: true,
};

type Raw = RawMeta | undefined;

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
