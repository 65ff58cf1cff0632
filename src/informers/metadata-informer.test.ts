import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from '../api/client.ts';
import type { ObjectMeta, ResourceInfo } from '../api/resources.ts';
import { createLogger } from '../log.ts';
import {
  compareResourceVersions,
  MetadataInformer,
  trimMeta,
  type InformerEvent,
} from './metadata-informer.ts';

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

const configmaps: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: ['list', 'watch', 'delete'],
};

/** Starts the stand-in API server on a free loopback port and returns a client of it. */
async function listenAndConnect(server: http.Server): Promise<KubeClient> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return KubeClient.create(kc, { qps: 0, burst: 1 });
}

describe('MetadataInformer watch', () => {
  const added = (uid: string, rv: string): string =>
    `${JSON.stringify({
      type: 'ADDED',
      object: { metadata: { uid, name: uid, namespace: 'ns', resourceVersion: rv } },
    })}\n`;

  test('a malformed watch line is logged, counted and the watch resumes from the last good resourceVersion', async () => {
    const watches: URLSearchParams[] = [];
    const server = http.createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
      res.writeHead(200, { 'content-type': 'application/json' });
      if (q.get('watch') !== 'true') {
        res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
        return;
      }
      watches.push(q);
      // Both watches stay open: only the informer itself can end the first one.
      if (watches.length === 1) res.write(`${added('a', '11')}{not json\n`);
      else res.write(added('b', '12'));
    });
    const client = await listenAndConnect(server);
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    const logged: { level: string; msg: string; resource?: string; line?: string }[] = [];
    const log = createLogger('warn', (l) => void logged.push(JSON.parse(l)));
    const malformed: string[] = [];
    const events: InformerEvent[] = [];
    let twoEvents: () => void = () => undefined;
    const gotTwo = new Promise<void>((r) => (twoEvents = r));
    const informer = new MetadataInformer(
      client,
      configmaps,
      (e) => {
        events.push(e);
        if (events.length === 2) twoEvents();
      },
      log,
      { onMalformedWatchEvent: (gr) => malformed.push(gr) },
    );
    let deadline: NodeJS.Timeout | undefined;
    try {
      informer.start();
      await Promise.race([
        gotTwo,
        new Promise((_, reject) => {
          deadline = setTimeout(() => reject(new Error('no second watch event within 5 s')), 5000);
        }),
      ]);
      expect(uncaught).toEqual([]);
      expect(events.map((e) => [e.type, e.meta.uid])).toEqual([
        ['upsert', 'a'],
        ['upsert', 'b'],
      ]);
      expect(malformed).toEqual(['configmaps']);
      expect(watches.map((q) => q.get('resourceVersion'))).toEqual(['10', '11']);
      expect(logged).toContainEqual(
        expect.objectContaining({ level: 'warn', resource: 'configmaps', line: '{not json' }),
      );
    } finally {
      clearTimeout(deadline);
      process.off('uncaughtException', onUncaught);
      await informer.stop();
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 15_000);
});

describe('compareResourceVersions', () => {
  test.each<[string | undefined, string | undefined, number]>([
    ['9', '10', -1],
    ['10', '10', 0],
    ['100000000000000000001', '100000000000000000000', 1],
    ['abc', '10', Number.NaN],
    [undefined, '10', Number.NaN],
    ['10', '', Number.NaN],
  ])('%s vs %s → %s', (a, b, want) => {
    expect(compareResourceVersions(a, b)).toBe(want);
  });
});

describe('MetadataInformer.caughtUp (the orphan worker asks it before letting an owner go)', () => {
  test('false until listed and watching, false across a failed watch, then by resourceVersion until the watch is a second old', async () => {
    let watchRequests = 0;
    let openStream: http.ServerResponse | undefined;
    let opened: () => void = () => undefined;
    const streamOpen = new Promise<void>((r) => (opened = r));
    const server = http.createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
      if (q.get('watch') !== 'true') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
        return;
      }
      // The first watch fails (a broken webhook, say); the second stays open.
      if (++watchRequests === 1) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"kind":"Status","code":500,"message":"conversion webhook failed"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      openStream = res;
      opened();
    });
    const client = await listenAndConnect(server);
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error'),
    );
    const within = async (what: string, check: () => boolean): Promise<void> => {
      const deadline = Date.now() + 5000;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`${what}: not within 5 s`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    try {
      expect(informer.caughtUp('1')).toBe(false);
      informer.start();
      await streamOpen;
      await within('the informer to see the open stream', () => informer.caughtUp('10'));
      // Watching again after the failure, for less than a second: only versions it has reached count.
      expect(informer.caughtUp('11')).toBe(false);
      openStream?.write(
        `${JSON.stringify({ type: 'ADDED', object: { metadata: { uid: 'a', name: 'a', namespace: 'ns', resourceVersion: '11' } } })}\n`,
      );
      await within('the event at 11', () => events.length === 1);
      expect(informer.caughtUp('11')).toBe(true);
      expect(informer.caughtUp('12')).toBe(false);
      expect(informer.caughtUp('not-a-number')).toBe(false);
      // A second later, still watching without a gap: caught up, whatever the version.
      expect(informer.caughtUp('999', Date.now() + 1000)).toBe(true);
      expect(watchRequests).toBe(2);
    } finally {
      await informer.stop();
      expect(informer.caughtUp('1', Date.now() + 1000)).toBe(false);
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 15_000);
});

describe('MetadataInformer refused by RBAC', () => {
  test('a LIST answered 403 counts as stalled at once (no retry repairs it); allowed again, it is not', async () => {
    let allowed = false;
    const server = http.createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
      if (!allowed) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'forbidden' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      if (q.get('watch') !== 'true')
        res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
      // The watch stays open.
    });
    const client = await listenAndConnect(server);
    const informer = new MetadataInformer(
      client,
      configmaps,
      () => undefined,
      createLogger('error', () => undefined),
      { maxBackoffMs: 50 },
    );
    const until = async (what: string, check: () => boolean): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    try {
      expect(informer.stalled()).toBe(false);
      informer.start();
      await until('the 403 to be seen', () => informer.failures > 0);
      expect(informer.forbidden).toBe(true);
      expect(informer.stalled()).toBe(true);
      allowed = true;
      await informer.waitForSync();
      expect(informer.forbidden).toBe(false);
      expect(informer.stalled()).toBe(false);
    } finally {
      await informer.stop();
      client.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
