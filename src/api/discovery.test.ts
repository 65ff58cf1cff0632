// Which group-versions kube-apiserver serves from its own etcd (their
// APIService is Local), and so which resourceVersions compare across
// resources (issue 32, item 4): from the APIService list, through a real
// KubeClient against a stand-in server.
import http from 'node:http';
import { listenAndConnect } from './stand-in-server.testing.ts';
import {
  KUBE_APISERVER_STORAGE,
  discover,
  localGroupVersions,
  resourceVersionStorage,
} from './discovery.ts';

async function serve(status: number, body: unknown) {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? '');
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  const client = await listenAndConnect(server);
  return {
    client,
    paths,
    close: async () => {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const apiService = (group: string, version: string, service?: object) => ({
  metadata: { name: `${version}.${group}` },
  spec: { group, version, ...(service ? { service } : {}) },
});

describe('localGroupVersions', () => {
  test('the group-versions whose APIService has no service: built-in groups and custom resources', async () => {
    const srv = await serve(200, {
      kind: 'APIServiceList',
      items: [
        apiService('', 'v1'),
        apiService('apps', 'v1'),
        apiService('stable.example.com', 'v1'),
        apiService('metrics.k8s.io', 'v1beta1', {
          namespace: 'kube-system',
          name: 'metrics',
          port: 443,
        }),
        { metadata: { name: 'broken' } },
      ],
    });
    try {
      await expect(localGroupVersions(srv.client)).resolves.toEqual(
        new Set(['v1', 'apps/v1', 'stable.example.com/v1']),
      );
      expect(srv.paths).toEqual(['/apis/apiregistration.k8s.io/v1/apiservices']);
    } finally {
      await srv.close();
    }
  });

  test('a list that fails throws (the caller then counts nothing as local)', async () => {
    const srv = await serve(403, { kind: 'Status', code: 403, reason: 'Forbidden', message: 'no' });
    try {
      await expect(localGroupVersions(srv.client)).rejects.toThrow('403');
    } finally {
      await srv.close();
    }
  });
});

describe('resourceVersionStorage', () => {
  const local = new Set(['v1', 'apps/v1']);
  test.each<
    [
      string,
      { group: string; version: string; resource: string },
      ReadonlySet<string> | undefined,
      string,
    ]
  >([
    [
      'a core resource',
      { group: '', version: 'v1', resource: 'configmaps' },
      local,
      KUBE_APISERVER_STORAGE,
    ],
    [
      'a built-in group',
      { group: 'apps', version: 'v1', resource: 'deployments' },
      local,
      KUBE_APISERVER_STORAGE,
    ],
    [
      'an aggregated group: its own resource',
      { group: 'agg.example.io', version: 'v1', resource: 'widgets' },
      local,
      'agg.example.io/v1/widgets',
    ],
    [
      'another version of a local group, not (yet) registered',
      { group: 'apps', version: 'v2', resource: 'deployments' },
      local,
      'apps/v2/deployments',
    ],
    [
      "APIServices unknown: nothing is kube-apiserver's",
      { group: '', version: 'v1', resource: 'configmaps' },
      undefined,
      'v1/configmaps',
    ],
  ])('%s', (_, r, known, want) => {
    expect(resourceVersionStorage(r, known)).toBe(want);
  });
});

describe('discover', () => {
  test("a resource served only in a version other than its group's preferred one is preferred in that version (client-go's ServerPreferredResources)", async () => {
    // Two CRDs of one group: widgets in v2 (preferred) and v1, gadgets in v1 only.
    const resource = (name: string, kind: string, version: string) => ({
      resource: name,
      responseKind: { group: 'soak.kubegc.io', version, kind },
      scope: 'Namespaced',
      verbs: ['delete', 'get', 'list', 'watch'],
    });
    const server = http.createServer((req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
      });
      const items =
        req.url === '/apis'
          ? [
              {
                metadata: { name: 'soak.kubegc.io' },
                versions: [
                  { version: 'v2', resources: [resource('widgets', 'Widget', 'v2')] },
                  {
                    version: 'v1',
                    resources: [
                      resource('widgets', 'Widget', 'v1'),
                      resource('gadgets', 'Gadget', 'v1'),
                    ],
                  },
                ],
              },
            ]
          : [];
      res.end(JSON.stringify({ kind: 'APIGroupDiscoveryList', items }));
    });
    const client = await listenAndConnect(server);
    try {
      const res = await discover(client);
      expect(res.preferred.map((r) => `${r.resource}/${r.version}`).sort()).toEqual([
        'gadgets/v1',
        'widgets/v2',
      ]);
      expect(res.all).toHaveLength(3);
    } finally {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
