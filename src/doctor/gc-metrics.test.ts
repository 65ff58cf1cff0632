// kubegc doctor's view of a running controller: the lane gauges read back
// from what the controller's own metrics registry serves, its rendering, and
// the one GET (bearer token, failures reported, not thrown).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createControllerMetrics } from '../observability/metrics.ts';
import { done, WorkQueue } from '../queue/workqueue.ts';
import type { Report } from './analyze.ts';
import { parseGcMetrics, readGcMetrics } from './gc-metrics.ts';
import { renderText } from './render.ts';

/** What a controller with a housekeeping backlog and one user key serves on /metrics. */
async function controllerMetrics(): Promise<string> {
  let t = 0;
  const q = new WorkQueue({
    name: 'garbage_collector_attempt_to_delete',
    concurrency: 1,
    process: () => Promise.resolve(done),
    now: () => t,
  });
  for (let i = 0; i < 1500; i++) q.add(`h${i}`, 'housekeeping');
  t = 90_000;
  q.add('u', 'user');
  t = 92_000;
  const m = createControllerMetrics();
  m.bind({
    graphNodes: () => 0,
    virtualNodes: () => 0,
    monitoredResources: () => new Map(),
    queues: () => [q],
    rateLimited: (lane) => (lane === 'user' ? 1 : 15),
    isLeader: () => true,
  });
  return m.registry.metrics();
}

test('reads each lane of each queue, the rate limiter and leadership from a controller’s metrics', async () => {
  const view = parseGcMetrics('https://gc/metrics', await controllerMetrics());
  expect(view).toEqual({
    url: 'https://gc/metrics',
    leader: true,
    lanes: [
      {
        queue: 'garbage_collector_attempt_to_delete',
        lane: 'user',
        waiting: 1,
        oldestWaitingSeconds: 2,
      },
      {
        queue: 'garbage_collector_attempt_to_delete',
        lane: 'housekeeping',
        waiting: 1500,
        oldestWaitingSeconds: 92,
      },
    ],
    rateLimited: { user: 1, housekeeping: 15 },
  });
});

test('the text report shows the running GC above the findings; a failed read says why', async () => {
  const report = {
    schemaVersion: 1,
    scannedAt: '2026-01-01T00:00:00.000Z',
    durationSeconds: 1,
    scope: { namespace: null, olderThanSeconds: null },
    findings: [],
    notScanned: [],
    unavailableAPIServices: [],
    summary: {
      findings: 0,
      byKind: {
        'stuck-deletion': 0,
        'terminating-namespace': 0,
        'leaked-dependent': 0,
        'cross-namespace-reference': 0,
        'unresolvable-owner-kind': 0,
        'blocking-cycle': 0,
      },
      hiddenByOlderThan: 0,
      notScanned: 0,
      objects: 0,
      resources: 0,
    },
  } satisfies Report;
  const text = renderText({
    ...report,
    gc: parseGcMetrics('https://gc/metrics', await controllerMetrics()),
  });
  expect(text.split('\n').slice(0, 3)).toEqual([
    'Running kubegc (https://gc/metrics, the leader):',
    '  garbage_collector_attempt_to_delete: user 1 waiting, the oldest for 2s; housekeeping 1,500 waiting, the oldest for 1m32s',
    '  requests waiting for its client-side rate limit: user 1, housekeeping 15',
  ]);
  const failed = renderText({
    ...report,
    gc: {
      url: 'https://gc/metrics',
      leader: null,
      lanes: [],
      rateLimited: null,
      error: 'HTTP 401: Unauthorized',
    },
  });
  expect(failed.split('\n')[0]).toBe(
    'Running kubegc (https://gc/metrics): could not be read: HTTP 401: Unauthorized',
  );
});

test('one GET with the bearer token; a refusal or no answer is the view’s error, not a throw', async () => {
  const body = await controllerMetrics();
  const server = http.createServer((req, res) => {
    if (req.headers.authorization !== 'Bearer reader') {
      res.writeHead(401).end('Unauthorized');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  try {
    const ok = await readGcMetrics(url, { token: 'reader', insecureSkipTlsVerify: false });
    expect(ok.error).toBeUndefined();
    expect(ok.lanes).toHaveLength(2);
    const refused = await readGcMetrics(url, { token: 'other', insecureSkipTlsVerify: false });
    expect(refused).toMatchObject({ lanes: [], error: 'HTTP 401: Unauthorized' });
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
  const gone = await readGcMetrics(url, { insecureSkipTlsVerify: false });
  expect(gone.error).toMatch(/ECONNREFUSED/);
});
