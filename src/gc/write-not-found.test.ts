// Issue 32, item 3: a write answered 404 naming the object is "gone" only once
// a live read agrees. An admission webhook may deny a write with code 404 and
// the object's name; taken for "gone", the foregroundDeletion or orphan
// finalizer stayed for good. GcApi.removeFinalizer through a real KubeClient
// against a local HTTP server standing in for the API server.
import http from 'node:http';
import { CONFIGMAPS } from '../graph/graph-fixture.testing.ts';
import type { GcApi } from './operations.ts';
import { standInGcApi } from './stand-in-gc-api.testing.ts';

const notFound = (name: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  reason: 'NotFound',
  code: 404,
  message: `admission webhook "deny.e2e.kubegc.io" denied the request: configmaps "${name}" not found`,
  details: { name, kind: 'configmaps' },
});

/**
 * A ConfigMap `owner` with the foregroundDeletion finalizer, or none if
 * `exists` is false; each PATCH is answered by `patch` in turn (then 200).
 */
async function serve(exists: boolean, patch: number[]) {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.method ?? '');
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const item = {
      metadata: {
        name: 'owner',
        namespace: 'ns',
        uid: 'uid-owner',
        resourceVersion: '3',
        deletionTimestamp: '2026-12-01T00:00:00Z',
        finalizers: ['foregroundDeletion'],
      },
    };
    if (req.method === 'GET') return json(200, { items: exists ? [item] : [] });
    const status = patch.shift() ?? 200;
    return json(status, status === 404 ? notFound('owner') : item);
  });
  return { ...(await standInGcApi(server)), seen };
}

const removeForeground = (api: GcApi) =>
  api.removeFinalizer(CONFIGMAPS, 'ns', 'owner', 'uid-owner', 'foregroundDeletion');

describe('GcApi.removeFinalizer', () => {
  test('a PATCH answered 404 once while a live read finds the object: read again and patched again', async () => {
    const srv = await serve(true, [404]);
    try {
      expect(await removeForeground(srv.api)).toEqual({ outcome: 'done' });
      expect(srv.seen).toEqual(['GET', 'PATCH', 'GET', 'PATCH']);
    } finally {
      await srv.close();
    }
  });

  test('every PATCH answered 404 while a live read finds the object: an error (retried), never "gone"', async () => {
    const srv = await serve(true, [404, 404, 404, 404, 404]);
    try {
      await expect(removeForeground(srv.api)).rejects.toThrow(/answered 404 though a live read/);
    } finally {
      await srv.close();
    }
  });

  test('a live read finds nothing: gone, and nothing is written', async () => {
    const srv = await serve(false, []);
    try {
      expect(await removeForeground(srv.api)).toEqual({ outcome: 'gone' });
      expect(srv.seen).toEqual(['GET']);
    } finally {
      await srv.close();
    }
  });
});
