// The leader-election write guard at the moment a write goes on the wire:
// GcApi's PATCH/DELETE and the Event POSTs through a real KubeClient (token
// bucket, 429 retries) against a local HTTP server, with the elector's
// mayWrite() as the guard. (Two real replicas against kube-apiserver:
// test/e2e/leader-tenure.test.ts.)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from '../api/client.ts';
import { ApiError } from '../api/errors.ts';
import { type RequestOptions } from '../api/request.ts';
import type { ObjectMeta, ResourceInfo } from '../api/resources.ts';
import { LeaderElector, NotLeaderError } from '../leader/lease.ts';
import { silentLogger } from '../log.ts';
import { apiEventRecorder } from '../shared/events.ts';
import { GcApi, StaleDecisionError } from './operations.ts';

const CONFIGMAPS: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: ['list', 'watch', 'delete', 'patch'],
};

const meta = (name: string): ObjectMeta => ({
  uid: `uid-${name}`,
  name,
  namespace: 'ns',
  resourceVersion: '7',
});

interface Seen {
  method: string;
  url: string;
}

type Handler = (
  seen: Seen,
  n: number,
) => { status: number; headers?: Record<string, string>; body?: unknown };

/** A plain HTTP API server stand-in that records what reached it. */
async function serve(handler: Handler = () => ({ status: 200 })) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const s = { method: req.method ?? '', url: req.url ?? '' };
      seen.push(s);
      const answer = handler(s, seen.length);
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, url, close: () => new Promise<void>((r) => server.close(() => r())) };
}

async function clientFor(url: string, qps: number): Promise<KubeClient> {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return KubeClient.create(kc, { qps, burst: 1 });
}

/**
 * A Lease API: no Lease (404), the create succeeds, and every later request
 * hangs until aborted (or until close()).
 */
function leaseApiThatStopsAnswering() {
  let calls = 0;
  let closed = false;
  const hung = new Set<(err: Error) => void>();
  return {
    request<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
      calls++;
      if (closed) return Promise.reject(new Error('closed'));
      if (calls === 1) return Promise.reject(new ApiError(method, path, 404, '{}'));
      if (calls === 2) return Promise.resolve({} as T);
      return new Promise<T>((_resolve, reject) => {
        hung.add(reject);
        o.signal?.addEventListener('abort', () => reject(new Error(`${method} ${path}: aborted`)));
      });
    },
    close(): void {
      closed = true;
      for (const reject of hung) reject(new Error('closed'));
    },
  };
}

test('a write waiting in the token bucket when the renew deadline passes never reaches the wire', async () => {
  const srv = await serve();
  // One request per 2.5 s: the second DELETE waits in the bucket past the 1 s renew deadline.
  const client = await clientFor(srv.url, 0.4);
  const lost = { at: NaN };
  const leaseApi = leaseApiThatStopsAnswering();
  const elector = new LeaderElector(leaseApi, silentLogger, {
    namespace: 'ns',
    name: 'kubegc',
    identity: 'a',
    leaseDurationMs: 1500,
    renewDeadlineMs: 1000,
    retryPeriodMs: 200,
  });
  try {
    await elector.run(() => (lost.at = performance.now()));
    const api = new GcApi(client, () => elector.mayWrite());
    const first = api.delete(CONFIGMAPS, meta('first'), 'Background', 'uidAndResourceVersion');
    const queued = api.delete(CONFIGMAPS, meta('queued'), 'Background', 'uidAndResourceVersion');
    await expect(first).resolves.toEqual({ outcome: 'done' });
    await expect(queued).rejects.toBeInstanceOf(NotLeaderError);
    expect(srv.seen.map((s) => s.url)).toEqual(['/api/v1/namespaces/ns/configmaps/first']);
    // The lease was given up at the deadline, while its renewal was still outstanding.
    expect(lost.at).not.toBeNaN();
    expect(elector.mayWrite()).toBe(false);
  } finally {
    leaseApi.close();
    await elector.stop();
    client.close();
    await srv.close();
  }
});

// GcApi's writes are never re-sent after a 429 (see below); the client's
// retry still checks the guard for the writes it does re-send (Event POSTs).
test('a write waiting out a 429 Retry-After when writes stop is not retried', async () => {
  let allowed = true;
  const srv = await serve(() => {
    // The API server throttles the first attempt; meanwhile this replica loses its lease.
    allowed = false;
    return { status: 429, headers: { 'retry-after': '1' } };
  });
  const client = await clientFor(srv.url, 0);
  try {
    const guard = (): void => {
      if (!allowed) throw new NotLeaderError('not the leader');
    };
    await expect(
      client.request('POST', '/apis/events.k8s.io/v1/namespaces/ns/events', {
        body: {},
        beforeSend: guard,
      }),
    ).rejects.toBeInstanceOf(NotLeaderError);
    expect(srv.seen).toHaveLength(1);
  } finally {
    client.close();
    await srv.close();
  }
});

test('after an event-loop stall longer than the renew deadline, no write leaves, before any timer has run', async () => {
  const srv = await serve(({ method }) =>
    method === 'GET'
      ? {
          status: 200,
          body: {
            items: [{ metadata: { ...meta('after'), resourceVersion: '8', finalizers: ['x'] } }],
          },
        }
      : { status: 200 },
  );
  const client = await clientFor(srv.url, 0);
  let stall = 0;
  const elector = new LeaderElector(
    {
      request: <T>(method: string) =>
        method === 'GET'
          ? Promise.resolve({ spec: {}, metadata: { resourceVersion: '1' } } as T)
          : Promise.resolve({} as T),
    },
    silentLogger,
    {
      namespace: 'ns',
      name: 'kubegc',
      identity: 'a',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      now: () => performance.now() + stall,
    },
  );
  try {
    await elector.run(() => undefined);
    const api = new GcApi(client, () => elector.mayWrite());
    await expect(
      api.delete(CONFIGMAPS, meta('before'), 'Background', 'uidAndResourceVersion'),
    ).resolves.toEqual({ outcome: 'done' });
    // The process was stopped for longer than the renew deadline; it resumes here.
    stall = 10_000;
    await expect(
      api.delete(CONFIGMAPS, meta('after'), 'Background', 'uidAndResourceVersion'),
    ).rejects.toBeInstanceOf(NotLeaderError);
    await expect(
      api.removeFinalizer(CONFIGMAPS, 'ns', 'after', 'uid-after', 'x'),
    ).rejects.toBeInstanceOf(NotLeaderError);
    expect(srv.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'DELETE /api/v1/namespaces/ns/configmaps/before',
      // removeFinalizer reads first (a read is not guarded); its PATCH is refused.
      'GET /api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dafter',
    ]);
  } finally {
    await elector.stop();
    client.close();
    await srv.close();
  }
});

test('Event POSTs pass the write guard too, and drain() waits for them', async () => {
  let allowed = true;
  const srv = await serve();
  const client = await clientFor(srv.url, 0);
  try {
    const events = apiEventRecorder(client, silentLogger, 'host', {
      beforeSend: () => {
        if (!allowed) throw new NotLeaderError('not the leader');
      },
    });
    const regarding = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'a', uid: 'u' };
    events.warning(regarding, 'OwnerRefInvalidNamespace', 'Delete', 'note');
    await events.drain?.();
    expect(srv.seen.map((s) => s.method)).toEqual(['POST']);
    allowed = false;
    events.warning(regarding, 'OwnerRefInvalidNamespace', 'Delete', 'note');
    await events.drain?.();
    expect(srv.seen).toHaveLength(1);
  } finally {
    client.close();
    await srv.close();
  }
});

test('a DELETE answered 429 is not re-sent on the old decision: the caller gets the error and decides again', async () => {
  const srv = await serve(() => ({ status: 429, headers: { 'retry-after': '1' } }));
  const client = await clientFor(srv.url, 0);
  try {
    const api = new GcApi(client, () => true);
    await expect(
      api.delete(CONFIGMAPS, meta('dep'), 'Background', 'uidAndResourceVersion'),
    ).rejects.toMatchObject({
      status: 429,
    });
    expect(srv.seen).toHaveLength(1);
  } finally {
    client.close();
    await srv.close();
  }
});

test("a DELETE whose decision is found stale right before the wire (after the token bucket's wait) is never sent", async () => {
  const srv = await serve();
  // 1 request per second, burst 1: the second DELETE waits about a second in the bucket.
  const client = await clientFor(srv.url, 1);
  try {
    const api = new GcApi(client, () => true);
    const decision: { stale?: string } = {};
    await api.delete(CONFIGMAPS, meta('first'), 'Background', 'uid', () => decision.stale);
    const second = api.delete(CONFIGMAPS, meta('dep'), 'Background', 'uid', () => decision.stale);
    // Found stale while the request waits for its token; checked when it leaves.
    decision.stale = 'owner switched to Orphan';
    await expect(second).rejects.toBeInstanceOf(StaleDecisionError);
    expect(srv.seen.map((x) => x.url)).toEqual(['/api/v1/namespaces/ns/configmaps/first']);
  } finally {
    client.close();
    await srv.close();
  }
});

// Issue 19, item 4: every write carries a decision, so none is re-sent after Retry-After.
test.each([
  ['the unblock PATCH', (api: GcApi) => api.unblockOwnerReferences(CONFIGMAPS, meta('dep'))],
  [
    'the guarded owner-reference PATCH',
    (api: GcApi) =>
      api.removeOwnerReferencesAt(CONFIGMAPS, meta('dep'), [
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: 'uid-owner' },
      ]),
  ],
  [
    'the orphaning PATCH',
    (api: GcApi) => api.removeOwnerReferences(CONFIGMAPS, meta('dep'), ['uid-owner']),
  ],
])('%s answered 429 is not re-sent on the old decision', async (_name, write) => {
  const srv = await serve(() => ({ status: 429, headers: { 'retry-after': '1' } }));
  const client = await clientFor(srv.url, 0);
  try {
    await expect(write(new GcApi(client, () => true))).rejects.toMatchObject({ status: 429 });
    expect(srv.seen).toHaveLength(1);
  } finally {
    client.close();
    await srv.close();
  }
});

// Live reads go through the same client: a LIST of the one name, so that
// kubegc's ClusterRole needs no `get` on `*` (and with it, none on nodes/proxy).
describe('GcApi.getMeta: a LIST of one name', () => {
  const page = (names: string[]) => ({
    status: 200,
    body: { items: names.map((n) => ({ metadata: { ...meta(n), resourceVersion: '9' } })) },
  });

  test('the object: its metadata, read by fieldSelector on the collection', async () => {
    const srv = await serve(() => page(['a']));
    const client = await clientFor(srv.url, 0);
    try {
      const got = await new GcApi(client).getMeta(CONFIGMAPS, 'ns', 'a');
      expect(got).toEqual({ ...meta('a'), resourceVersion: '9' });
      expect(srv.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
        'GET /api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Da',
      ]);
    } finally {
      client.close();
      await srv.close();
    }
  });

  test('an empty list: the object does not exist; an item of another name is not taken for it (nor for "absent")', async () => {
    const srv = await serve((_s, n) => page(n === 1 ? [] : ['other']));
    const client = await clientFor(srv.url, 0);
    try {
      const api = new GcApi(client);
      await expect(api.getMeta(CONFIGMAPS, 'ns', 'a')).resolves.toBeUndefined();
      await expect(api.getMeta(CONFIGMAPS, 'ns', 'a')).rejects.toThrow('named "other"');
    } finally {
      client.close();
      await srv.close();
    }
  });

  test('a 404 for the collection (the resource is no longer served) is an error, never "gone"', async () => {
    const srv = await serve(() => ({ status: 404, body: { kind: 'Status', reason: 'NotFound' } }));
    const client = await clientFor(srv.url, 0);
    try {
      await expect(new GcApi(client).getMeta(CONFIGMAPS, 'ns', 'a')).rejects.toBeInstanceOf(
        ApiError,
      );
    } finally {
      client.close();
      await srv.close();
    }
  });

  test('a resource that cannot be listed is read with a GET of the object', async () => {
    const srv = await serve(() => ({ status: 200, body: { metadata: meta('a') } }));
    const client = await clientFor(srv.url, 0);
    try {
      const getOnly = { ...CONFIGMAPS, verbs: ['get', 'delete'] };
      await expect(new GcApi(client).getMeta(getOnly, 'ns', 'a')).resolves.toEqual(meta('a'));
      expect(srv.seen.map((s) => s.url)).toEqual(['/api/v1/namespaces/ns/configmaps/a']);
    } finally {
      client.close();
      await srv.close();
    }
  });
});
