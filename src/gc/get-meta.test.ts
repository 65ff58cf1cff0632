// GcApi.getMeta, the live read of one object (a LIST of its name), through a
// real KubeClient against a local HTTP server: the name escaped in the field
// selector, and an answer that is not "this one object" or "none" refused.
import http from 'node:http';
import type { ResourceInfo } from '../api/resources.ts';
import { ApiError } from '../api/errors.ts';
import { refusesFieldSelector } from './operations.ts';
import { standInGcApi } from './stand-in-gc-api.testing.ts';

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
  return { ...(await standInGcApi(server)), seen };
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

// An aggregated API server that supports no field selector answers the LIST
// with a 400 (issue 32, item 4): the object is then read with a GET, and so
// is every later object of that resource. A read that fails is never "absent".
describe('GcApi.getMeta on a server that refuses field selectors', () => {
  const WIDGETS: ResourceInfo = {
    group: 'agg.example.io',
    version: 'v1',
    resource: 'widgets',
    kind: 'Widget',
    namespaced: true,
    verbs: ['list', 'watch', 'delete', 'patch', 'get'],
  };
  const REFUSED = {
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    message: 'field label not supported: metadata.name',
    reason: 'BadRequest',
    code: 400,
  };
  const notFound = (name: string) => ({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    message: `widgets.agg.example.io "${name}" not found`,
    reason: 'NotFound',
    details: { name, group: 'agg.example.io', kind: 'widgets' },
    code: 404,
  });

  type Answer = { status: number; body: unknown };
  /** `answer(kind, name)`: kind is 'list' (a LIST, its fieldSelector) or 'get' (a GET of one name). */
  async function serveBy(answer: (kind: 'list' | 'get', path: string) => Answer) {
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      const selector = u.searchParams.get('fieldSelector');
      const kind = selector === null ? 'get' : 'list';
      seen.push(`${kind} ${u.pathname}`);
      const a = answer(kind, u.pathname);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(typeof a.body === 'string' ? a.body : JSON.stringify(a.body));
    });
    return { ...(await standInGcApi(server)), seen };
  }
  const base = '/apis/agg.example.io/v1/namespaces/ns/widgets';

  test('reads by GET after the refusal, and goes straight to GET for every later read of the resource', async () => {
    const srv = await serveBy((kind, path) =>
      kind === 'list'
        ? { status: 400, body: REFUSED }
        : path.endsWith('/w1')
          ? { status: 200, body: item('w1', 'ns') }
          : { status: 404, body: notFound(path.slice(path.lastIndexOf('/') + 1)) },
    );
    try {
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w1')).resolves.toMatchObject({
        name: 'w1',
        uid: 'uid-w1',
      });
      // A 404 that names the object: absent.
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w2')).resolves.toBeUndefined();
      expect(srv.seen).toEqual([`list ${base}`, `get ${base}/w1`, `get ${base}/w2`]);
      // Another resource of another server is still read by a LIST of its name.
      await srv.api.getMeta(ROLES, 'ns', 'r').catch(() => undefined);
      expect(srv.seen[3]).toBe('list /apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles');
    } finally {
      await srv.close();
    }
  });

  test.each<[string, Answer, RegExp]>([
    [
      'forbidden (no `get` in the ClusterRole)',
      {
        status: 403,
        body: {
          kind: 'Status',
          status: 'Failure',
          reason: 'Forbidden',
          code: 403,
          message: 'widgets.agg.example.io "w1" is forbidden: User "kubegc" cannot get resource',
        },
      },
      /403 Forbidden.*grant kubegc's service account `get` on widgets\.agg\.example\.io/,
    ],
    [
      'a 404 for the path (the version no longer served), not naming the object',
      {
        status: 404,
        body: {
          kind: 'Status',
          code: 404,
          reason: 'NotFound',
          message: 'the server could not find the requested resource',
        },
      },
      /404/,
    ],
    [
      'a 503 (the aggregated server unavailable)',
      { status: 503, body: 'service unavailable' },
      /503/,
    ],
    ['a 200 without metadata', { status: 200, body: { kind: 'Widget' } }, /no usable metadata/],
    ['a 200 of another name', { status: 200, body: item('other', 'ns') }, /named "other"/],
  ])('the GET answered %s: an error, never "absent"', async (_, getAnswer, why) => {
    const srv = await serveBy((kind) =>
      kind === 'list' ? { status: 400, body: REFUSED } : getAnswer,
    );
    try {
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w1')).rejects.toThrow(why);
      // Still by GET: the refusal was remembered, the failed GET changes nothing.
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w1')).rejects.toThrow(why);
      expect(srv.seen).toEqual([`list ${base}`, `get ${base}/w1`, `get ${base}/w1`]);
    } finally {
      await srv.close();
    }
  });

  test.each<[string, Answer]>([
    [
      'a 400 about something else',
      { status: 400, body: { ...REFUSED, message: 'invalid resourceVersion' } },
    ],
    [
      'a 500 that speaks of a field label',
      { status: 500, body: { ...REFUSED, code: 500, reason: 'InternalError' } },
    ],
    [
      'a 403',
      { status: 403, body: { ...REFUSED, code: 403, reason: 'Forbidden', message: 'forbidden' } },
    ],
    ['a 406', { status: 406, body: 'not acceptable' }],
  ])('the LIST answered %s: an error, and no switch to GET', async (_, listAnswer) => {
    const srv = await serveBy((kind) =>
      kind === 'list' ? listAnswer : { status: 200, body: item('w1', 'ns') },
    );
    try {
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w1')).rejects.toThrow(String(listAnswer.status));
      await expect(srv.api.getMeta(WIDGETS, 'ns', 'w1')).rejects.toThrow(String(listAnswer.status));
      expect(srv.seen).toEqual([`list ${base}`, `list ${base}`]);
    } finally {
      await srv.close();
    }
  });

  test.each<[string, number, string, boolean]>([
    [
      'field label not supported (kube-apiserver, a generic registry)',
      400,
      JSON.stringify(REFUSED),
      true,
    ],
    [
      '"fieldSelector is not supported"',
      400,
      JSON.stringify({ ...REFUSED, message: 'fieldSelector is not supported' }),
      true,
    ],
    [
      '"field selectors are not supported" as plain text',
      400,
      'field selectors are not supported',
      true,
    ],
    [
      'a 400 about the label selector',
      400,
      JSON.stringify({ ...REFUSED, message: 'unable to parse requirement: labelSelector' }),
      false,
    ],
    ['a 422 about the field selector', 422, JSON.stringify({ ...REFUSED, code: 422 }), false],
  ])('refusesFieldSelector: %s (status %s)', (_, status, body, want) => {
    expect(refusesFieldSelector(new ApiError('GET', base, status, body))).toBe(want);
  });
});
