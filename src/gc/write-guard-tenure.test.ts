// Issue 19, item 5: the lease bounds when a write takes effect, not only when
// it is sent. A GcApi write already on the wire when the tenure ends is
// cancelled there (RST_STREAM over HTTP/2, the socket closed over HTTP/1.1)
// and rejects; and no write outlives leaseDuration − renewDeadline. Against
// local TLS servers that never answer the DELETE, through a real KubeClient
// and LeaderElector. (Two replicas against kube-apiserver, with an admission
// webhook holding the write: test/e2e/leader-tenure.test.ts.)
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from '../api/client.ts';
import { ApiError } from '../api/errors.ts';
import { type RequestOptions } from '../api/request.ts';
import type { ObjectMeta, ResourceInfo } from '../api/resources.ts';
import { LeaderElector } from '../leader/lease.ts';
import { silentLogger } from '../log.ts';
import { selfSignedCert } from '../../test/support/tls.ts';
import { apiEventRecorder } from '../shared/events.ts';
import { GcApi } from './operations.ts';

const CONFIGMAPS: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: ['list', 'watch', 'delete', 'patch'],
};

const meta: ObjectMeta = { uid: 'uid-d', name: 'd', namespace: 'ns', resourceVersion: '7' };

let tls: { key: Buffer; cert: Buffer };
beforeAll(() => {
  tls = selfSignedCert();
});

/**
 * A TLS server (HTTP/2 and HTTP/1.1, or HTTP/1.1 only) that never answers:
 * `cancelled` resolves with how each request ended before an answer (the
 * client reset the stream, or closed the connection).
 */
async function blackHole(h2: boolean) {
  const received: string[] = [];
  let onCancel: (how: string) => void = () => undefined;
  const cancelled = new Promise<string>((r) => (onCancel = r));
  const onRequest = (
    req: http2.Http2ServerRequest | import('node:http').IncomingMessage,
    res: http2.Http2ServerResponse | import('node:http').ServerResponse,
  ): void => {
    received.push(`${req.httpVersion} ${req.method ?? ''} ${req.url ?? ''}`);
    req.resume();
    const stream = 'stream' in req ? req.stream : undefined;
    res.on('close', () => {
      if (res.writableEnded) return;
      onCancel(stream ? `RST_STREAM ${stream.rstCode}` : 'connection closed');
    });
  };
  const server = h2
    ? http2.createSecureServer({ ...tls, allowHTTP1: true }, onRequest)
    : https.createServer(tls, onRequest);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    received,
    cancelled,
    url,
    close: () =>
      new Promise<void>((r) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function clientFor(url: string): Promise<KubeClient> {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return KubeClient.create(kc, { qps: 0, burst: 1 });
}

/** No Lease (404), the create succeeds, every later request fails: renewals stop succeeding. */
function leaseApiThatFailsRenewals() {
  let calls = 0;
  return {
    request<T>(method: string, path: string, _o?: RequestOptions): Promise<T> {
      calls++;
      if (calls === 1) return Promise.reject(new ApiError(method, path, 404, '{}'));
      if (calls === 2) return Promise.resolve({} as T);
      return Promise.reject(new ApiError(method, path, 503, '{}'));
    },
  };
}

/** Leading from the start; the renew deadline (1 s) passes, the write timeout (9 s) is far off. */
function electorWhoseRenewalsFail(): LeaderElector {
  return new LeaderElector(leaseApiThatFailsRenewals(), silentLogger, {
    namespace: 'ns',
    name: 'kubegc',
    identity: 'a',
    leaseDurationMs: 10_000,
    renewDeadlineMs: 1_000,
    retryPeriodMs: 200,
  });
}

describe.each([
  ['HTTP/2', true, 'RST_STREAM 8'],
  ['HTTP/1.1', false, 'connection closed'],
])('%s', (_name, h2, onTheWire) => {
  test('a DELETE in flight when the renew deadline passes is cancelled on the wire and rejects', async () => {
    const srv = await blackHole(h2);
    const client = await clientFor(srv.url);
    // The write timeout (leaseDuration − renewDeadline: 9 s) is far off: the tenure's signal cancels it.
    const elector = electorWhoseRenewalsFail();
    try {
      const start = performance.now();
      await elector.run(() => undefined);
      const api = new GcApi(client, () => elector.mayWrite(), elector);
      const write = api.delete(CONFIGMAPS, meta, 'Background', 'uidAndResourceVersion');
      const settled = write.then(
        () => 'resolved',
        (err: unknown) => err,
      );
      await expect(srv.cancelled).resolves.toBe(onTheWire);
      const err = await settled;
      const took = performance.now() - start;
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(0);
      expect((err as ApiError).message).toMatch(/aborted: the leader lease was lost/);
      expect(took).toBeGreaterThanOrEqual(1_000);
      expect(took).toBeLessThan(5_000);
      expect(client.http2).toBe(h2);
      expect(srv.received).toEqual([
        `${h2 ? '2.0' : '1.1'} DELETE /api/v1/namespaces/ns/configmaps/d`,
      ]);
    } finally {
      await elector.stop();
      client.close();
      await srv.close();
    }
  });

  test('a write still leading takes no longer than leaseDuration − renewDeadline', async () => {
    const srv = await blackHole(h2);
    const client = await clientFor(srv.url);
    const signal = new AbortController().signal;
    try {
      // A tenure that does not end; the write timeout alone cuts the write off.
      const api = new GcApi(client, () => true, {
        writeSignal: () => signal,
        writeTimeoutMs: 300,
      });
      const start = performance.now();
      const write = api.delete(CONFIGMAPS, meta, 'Background', 'uid');
      await expect(write).rejects.toMatchObject({ status: 0 });
      await expect(write).rejects.toThrow(/timed out after 300 ms/);
      expect(performance.now() - start).toBeLessThan(3_000);
      await expect(srv.cancelled).resolves.toBe(onTheWire);
    } finally {
      client.close();
      await srv.close();
    }
  });

  test('an Event POST in flight when the renew deadline passes is cancelled on the wire too', async () => {
    const srv = await blackHole(h2);
    const client = await clientFor(srv.url);
    const elector = electorWhoseRenewalsFail();
    try {
      const start = performance.now();
      await elector.run(() => undefined);
      const events = apiEventRecorder(client, silentLogger, 'host', {
        beforeSend: () => {
          if (!elector.mayWrite()) throw new Error('not leading');
        },
        tenure: { writeSignal: () => elector.writeSignal(), writeTimeoutMs: 9_000 },
      });
      events.warning(
        { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'd', uid: 'uid-d' },
        'GarbageCollectionForbidden',
        'GarbageCollect',
        'note',
      );
      await expect(srv.cancelled).resolves.toBe(onTheWire);
      await events.drain?.();
      const took = performance.now() - start;
      expect(took).toBeGreaterThanOrEqual(1_000);
      expect(took).toBeLessThan(5_000);
      expect(srv.received).toEqual([
        `${h2 ? '2.0' : '1.1'} POST /apis/events.k8s.io/v1/namespaces/ns/events`,
      ]);
    } finally {
      await elector.stop();
      client.close();
      await srv.close();
    }
  });
});
