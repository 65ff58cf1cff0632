import http from 'node:http';
import type { KubeClient } from '../api/client.ts';
import { listenAndConnect } from '../api/stand-in-server.testing.ts';
import { DISK_REPORT_SCHEMA_VERSION, type DiskReport } from '../node/disk-report.ts';
import { ExplainError } from './explain.ts';
import { explainNode } from './node.ts';

const NS = 'kubegc-system';

const report: DiskReport = {
  schemaVersion: DISK_REPORT_SCHEMA_VERSION,
  node: 'worker-1',
  at: '2026-12-07T00:00:00.000Z',
  images: {
    mountpoint: '/var/lib/containerd',
    capacityBytes: 100,
    availableBytes: 10,
    usagePercent: 90,
    highThresholdPercent: 85,
    lowThresholdPercent: 80,
    wantedBytes: 10,
    reclaimable: [],
    kept: { 'in-use': { images: 1, bytes: 50, by: ['shop/web-0'] } },
  },
  pressure: null,
};

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/**
 * A stand-in API server: the TokenRequest, the agents' pod list and the pod
 * proxy to /debug/disk, each answering as `answers` says.
 */
function apiServer(answers: {
  token?: number;
  pods?: { name: string; phase: string; port?: number }[];
  proxy?: (token: string | undefined) => [number, unknown];
}): { server: http.Server; seen: Seen[] } {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === `/api/v1/namespaces/${NS}/serviceaccounts/kubegc-node-explain/token`) {
      const status = answers.token ?? 201;
      if (status === 201) send(201, { status: { token: 'minted' } });
      else
        send(status, {
          kind: 'Status',
          code: status,
          reason: status === 404 ? 'NotFound' : 'Forbidden',
          details: { name: 'kubegc-node-explain' },
          message: 'no',
        });
      return;
    }
    if (url.pathname === `/api/v1/namespaces/${NS}/pods`) {
      send(200, {
        items: (answers.pods ?? []).map((p) => ({
          metadata: { name: p.name },
          status: { phase: p.phase },
          spec: {
            containers: [{ ports: [{ name: 'metrics', containerPort: p.port ?? 8443 }] }],
          },
        })),
      });
      return;
    }
    if (url.pathname.startsWith(`/api/v1/namespaces/${NS}/pods/https:`)) {
      const header = req.headers['x-kubegc-authorization'];
      const [status, body] = answers.proxy?.(typeof header === 'string' ? header : undefined) ?? [
        200,
        report,
      ];
      send(status, body);
      return;
    }
    send(404, { kind: 'Status', code: 404, message: 'not here' });
  });
  return { server, seen };
}

let client: KubeClient | undefined;
afterEach(() => client?.close());

test('mints the explain token, finds the running agent on the node, and asks it through the pod proxy with the token in X-Kubegc-Authorization', async () => {
  const { server, seen } = apiServer({
    pods: [
      { name: 'kubegc-node-old', phase: 'Failed' },
      { name: 'kubegc-node-abc', phase: 'Running', port: 9443 },
    ],
  });
  client = await listenAndConnect(server);
  expect(await explainNode(client, 'worker-1')).toEqual(report);
  const list = seen.find((s) => s.url.startsWith(`/api/v1/namespaces/${NS}/pods?`));
  const q = new URL(list?.url ?? '', 'http://x').searchParams;
  expect(q.get('fieldSelector')).toBe('spec.nodeName=worker-1');
  expect(q.get('labelSelector')).toBe('app.kubernetes.io/name=kubegc-node');
  const proxied = seen.find((s) => s.url.includes('/proxy/'));
  expect(proxied?.url).toBe(
    `/api/v1/namespaces/${NS}/pods/https:kubegc-node-abc:9443/proxy/debug/disk`,
  );
  expect(proxied?.headers['x-kubegc-authorization']).toBe('Bearer minted');
  // The caller's own credentials go to the API server, as for every request.
  expect(proxied?.headers.authorization).toBe('Bearer t');
  server.close();
});

test('refusals name what to grant: no TokenRequest (403), no running agent, the agent refusing the token, another schema version', async () => {
  const cases: [Parameters<typeof apiServer>[0], RegExp][] = [
    [{ token: 403, pods: [{ name: 'a', phase: 'Running' }] }, /kubegc-node-explainer/],
    [
      { token: 404, pods: [{ name: 'a', phase: 'Running' }] },
      /no ServiceAccount kubegc-system\/kubegc-node-explain/,
    ],
    [{ pods: [{ name: 'a', phase: 'Pending' }] }, /no running kubegc node agent on node worker-1/],
    [
      {
        pods: [{ name: 'a', phase: 'Running' }],
        proxy: () => [403, { kind: 'Status', code: 403, message: 'Forbidden: /debug/disk' }],
      },
      /refused .*kubegc-node-explainer/,
    ],
    [
      {
        pods: [{ name: 'a', phase: 'Running' }],
        proxy: () => [200, { ...report, schemaVersion: 99 }],
      },
      /schema version 99; this kubegc reads 1/,
    ],
    [
      {
        pods: [{ name: 'a', phase: 'Running' }],
        proxy: () => [503, 'cannot explain the disk now: runtime down'],
      },
      /the node agent kubegc-system\/a answered: .*503/,
    ],
  ];
  for (const [answers, message] of cases) {
    const { server } = apiServer(answers);
    client = await listenAndConnect(server);
    const err = await explainNode(client, 'worker-1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExplainError);
    expect((err as Error).message).toMatch(message);
    client.close();
    server.close();
  }
});
