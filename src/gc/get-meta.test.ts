// GcApi.getMeta, the live read of one object (a LIST of its name), through a
// real KubeClient against a local HTTP server: the name escaped in the field
// selector, and an answer that is not "this one object" or "none" refused.
import http from 'node:http';
import { listenAndConnect } from '../api/stand-in-server.testing.ts';
import type { ResourceInfo } from '../api/resources.ts';
import { GcApi } from './operations.ts';

const CLUSTERROLES: ResourceInfo = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'clusterroles',
  kind: 'ClusterRole',
  namespaced: false,
  verbs: ['list', 'watch', 'delete', 'patch'],
};
const ROLES: ResourceInfo = { ...CLUSTERROLES, resource: 'roles', kind: 'Role', namespaced: true };

const item = (name: string, namespace?: string) => ({
  metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: '3' },
});

/** Answers every request with `body`; records the path and the decoded fieldSelector. */
async function serve(body: unknown) {
  const seen: { path: string; fieldSelector: string | null }[] = [];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    seen.push({ path: u.pathname, fieldSelector: u.searchParams.get('fieldSelector') });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  const client = await listenAndConnect(server, { qps: 1000, burst: 1000 });
  return {
    api: new GcApi(client),
    seen,
    close: async () => {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('GcApi.getMeta', () => {
  test.each([
    ['reader,writer', 'metadata.name=reader\\,writer'],
    ['x,metadata.name!=x', 'metadata.name=x\\,metadata.name!\\=x'],
    ['a\\b=c', 'metadata.name=a\\\\b\\=c'],
  ])('sends the name %j escaped in the field selector', async (name, selector) => {
    const srv = await serve({ items: [item(name)] });
    try {
      await expect(srv.api.getMeta(CLUSTERROLES, undefined, name)).resolves.toMatchObject({
        name,
        uid: `uid-${name}`,
      });
      expect(srv.seen).toEqual([
        { path: '/apis/rbac.authorization.k8s.io/v1/clusterroles', fieldSelector: selector },
      ]);
    } finally {
      await srv.close();
    }
  });

  test('zero items and no continue token: absent', async () => {
    const srv = await serve({ metadata: {}, items: [] });
    try {
      await expect(srv.api.getMeta(ROLES, 'ns', 'r')).resolves.toBeUndefined();
      expect(srv.seen.map((s) => s.path)).toEqual([
        '/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles',
      ]);
    } finally {
      await srv.close();
    }
  });

  test.each([
    ['a continue token and no items', { metadata: { continue: 'c1' }, items: [] }, /continue/],
    [
      'a continue token and the item',
      { metadata: { continue: 'c1' }, items: [item('r', 'ns')] },
      /continue/,
    ],
    ['two items', { items: [item('r', 'ns'), item('other', 'ns')] }, /2 items/],
    ['two items of the name', { items: [item('r', 'ns'), item('r', 'ns')] }, /2 items/],
    ['one item of another name', { items: [item('other', 'ns')] }, /named "other"/],
    ['one item in another namespace', { items: [item('r', 'elsewhere')] }, /namespace/],
    [
      'one item without a uid',
      { items: [{ metadata: { name: 'r', namespace: 'ns' } }] },
      /metadata/,
    ],
  ])('%s: an error naming the resource and the name, never "absent"', async (_, body, why) => {
    const srv = await serve(body);
    try {
      const read = srv.api.getMeta(ROLES, 'ns', 'r');
      await expect(read).rejects.toThrow('roles.rbac.authorization.k8s.io ns/r');
      await expect(read).rejects.toThrow(why);
    } finally {
      await srv.close();
    }
  });
});
