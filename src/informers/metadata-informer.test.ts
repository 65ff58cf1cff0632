import http from 'node:http';
import type { KubeClient } from '../api/client.ts';
import { listenAndConnect } from '../api/stand-in-server.testing.ts';
import { CONFIGMAPS as configmaps } from '../graph/graph-fixture.testing.ts';
import { createLogger } from '../log.ts';
import {
  compareResourceVersions,
  INITIAL_EVENTS_END,
  MetadataInformer,
  type InformerEvent,
} from './metadata-informer.ts';

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
      { watchList: false, onMalformedWatchEvent: (gr) => malformed.push(gr) },
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
  test('false until listed and watching, false across a failed watch, then by the resourceVersion delivered, however long the watch has been open', async () => {
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
      { watchList: false },
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
      // An open watch proves nothing by itself (it may be behind): only delivery counts.
      await new Promise((r) => setTimeout(r, 1100));
      expect(informer.caughtUp('12')).toBe(false);
      openStream?.write(
        `${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '30' } } })}\n`,
      );
      await within('the bookmark at 30', () => informer.caughtUp('30'));
      expect(informer.caughtUp('31')).toBe(false);
      expect(watchRequests).toBe(2);
    } finally {
      await informer.stop();
      expect(informer.caughtUp('1')).toBe(false);
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 15_000);
});

// Issue 32, item 4: an aggregated API server counts its resourceVersions with
// a counter of its own; a watch of it "at 1000000000000" says nothing about an
// owner's etcd revision 10, however the numbers compare.
describe('MetadataInformer.caughtUp across storages', () => {
  test('only a resourceVersion of the storage its resource counts is compared', async () => {
    let opened: () => void = () => undefined;
    const streamOpen = new Promise<void>((r) => (opened = r));
    const server = http.createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
      res.writeHead(200, { 'content-type': 'application/json' });
      if (q.get('watch') !== 'true') {
        res.end(JSON.stringify({ metadata: { resourceVersion: '1000000000000' }, items: [] }));
        return;
      }
      res.flushHeaders();
      opened();
    });
    const client = await listenAndConnect(server);
    let storage = 'agg.example.io/v1/widgets';
    const informer = new MetadataInformer(
      client,
      { ...configmaps, group: 'agg.example.io', resource: 'widgets', kind: 'Widget' },
      () => undefined,
      createLogger('error'),
      { watchList: false, storage: () => storage },
    );
    try {
      informer.start();
      await streamOpen;
      const deadline = Date.now() + 5000;
      while (!informer.caughtUp('10', storage)) {
        if (Date.now() > deadline) throw new Error('the informer never saw its open stream');
        await new Promise((r) => setTimeout(r, 10));
      }
      // Its own versions, as its own watch orders them.
      expect(informer.caughtUp('1000000000000', storage)).toBe(true);
      expect(informer.caughtUp('1000000000001', storage)).toBe(false);
      // An owner's etcd revision (kube-apiserver's storage, the default), or another resource's.
      expect(informer.caughtUp('10')).toBe(false);
      expect(informer.caughtUp('10', 'kube-apiserver')).toBe(false);
      expect(informer.caughtUp('10', 'agg.example.io/v1/gadgets')).toBe(false);
      // The storage is asked each time: a group found to be kube-apiserver's own compares with etcd.
      storage = 'kube-apiserver';
      expect(informer.caughtUp('10')).toBe(true);
    } finally {
      await informer.stop();
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 15_000);
});

// Issue 19, item 2: a watch that ends normally at its timeout left the
// informer "caught up" while no watch was open at all.
test('a watch that ends normally is a gap until the next one opens: not caught up meanwhile', async () => {
  let watches = 0;
  let first: http.ServerResponse | undefined;
  let releaseSecond: () => void = () => undefined;
  const secondHeld = new Promise<void>((r) => (releaseSecond = r));
  let secondAsked = false;
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
    if (q.get('watch') !== 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
      return;
    }
    if (++watches === 1) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      first = res;
      return;
    }
    // The re-watch is answered only when the test says so (a slow reconnect).
    secondAsked = true;
    void secondHeld.then(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
    });
  });
  const client = await listenAndConnect(server);
  const informer = new MetadataInformer(
    client,
    configmaps,
    () => undefined,
    createLogger('error'),
    {
      watchList: false,
    },
  );
  try {
    informer.start();
    await until('the first watch', () => informer.caughtUp('10'));
    // The server's timeout: the stream ends normally.
    first?.end();
    await until('the re-watch to be asked for', () => secondAsked);
    expect(informer.caughtUp('10')).toBe(false);
    releaseSecond();
    // Open again from resourceVersion 10: what it delivers continues what was delivered.
    await until('the second watch', () => informer.caughtUp('10'));
    expect(informer.caughtUp('11')).toBe(false);
  } finally {
    releaseSecond();
    await informer.stop();
    client.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}, 15_000);

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
      { maxBackoffMs: 50, watchList: false },
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

// ---------------------------------------------------------------------------
// Listing: the watch-list (initial events ended by a bookmark) and the
// paginated LIST it falls back to.

const event = (type: string, uid: string, rv: string): string =>
  `${JSON.stringify({ type, object: { metadata: { uid, name: uid, namespace: 'ns', resourceVersion: rv } } })}\n`;
const bookmark = (rv: string, end = false): string =>
  `${JSON.stringify({
    type: 'BOOKMARK',
    object: {
      metadata: {
        resourceVersion: rv,
        ...(end ? { annotations: { [INITIAL_EVENTS_END]: 'true' } } : {}),
      },
    },
  })}\n`;
const isWatchList = (q: URLSearchParams): boolean => q.get('sendInitialEvents') === 'true';

/** A stand-in API server whose every request (its query and response) the test answers. */
async function fakeApi(
  answer: (q: URLSearchParams, res: http.ServerResponse, n: number) => void,
): Promise<{ client: KubeClient; requests: URLSearchParams[]; close(): Promise<void> }> {
  const requests: URLSearchParams[] = [];
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams;
    requests.push(q);
    answer(q, res, requests.length);
  });
  const client = await listenAndConnect(server);
  return {
    client,
    requests,
    close: async () => {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const openStream = (res: http.ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.flushHeaders();
};

async function until(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const summary = (events: InformerEvent[]): string[] => events.map((e) => `${e.type} ${e.meta.uid}`);

describe('MetadataInformer watch-list', () => {
  test('objects arrive as initial events; only the initial-events-end bookmark ends the sync, and the same stream goes on as the watch', async () => {
    let stream: http.ServerResponse | undefined;
    const api = await fakeApi((q, res) => {
      openStream(res);
      stream = res;
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error'),
    );
    let synced = false;
    void informer.waitForSync().then(() => (synced = true));
    try {
      informer.start();
      await until('the watch-list request', () => stream !== undefined);
      const q = api.requests[0];
      expect(q?.get('sendInitialEvents')).toBe('true');
      expect(q?.get('watch')).toBe('true');
      expect(q?.get('resourceVersionMatch')).toBe('NotOlderThan');
      expect(q?.get('allowWatchBookmarks')).toBe('true');
      expect(q?.get('resourceVersion')).toBeNull();
      // Key order, not resourceVersion order; a plain bookmark in between ends nothing.
      stream?.write(event('ADDED', 'b', '9') + event('ADDED', 'a', '7') + bookmark('12'));
      await until('two upserts', () => events.length === 2);
      await new Promise((r) => setTimeout(r, 50));
      expect(synced).toBe(false);
      expect(informer.synced).toBe(false);
      expect(informer.caughtUp('1')).toBe(false);
      stream?.write(bookmark('20', true));
      await informer.waitForSync();
      expect(informer.caughtUp('20')).toBe(true);
      expect(informer.caughtUp('21')).toBe(false);
      stream?.write(event('MODIFIED', 'a', '21') + event('DELETED', 'b', '22'));
      await until('the live events', () => events.length === 4);
      expect(summary(events)).toEqual(['upsert b', 'upsert a', 'upsert a', 'delete b']);
      expect(informer.caughtUp('22')).toBe(true);
      expect(api.requests).toHaveLength(1);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test.each([
    ['watch-list', true],
    ['paginated LIST', false],
  ])(
    '%s: listing again after 410 Gone reports what vanished meanwhile, and only that',
    async (_mode, watchList) => {
      const answers: ((res: http.ServerResponse) => void)[] = watchList
        ? [
            (res) => {
              openStream(res);
              res.write(event('ADDED', 'a', '5') + event('ADDED', 'b', '6') + bookmark('10', true));
              res.end(
                `${JSON.stringify({ type: 'ERROR', object: { code: 410, message: 'too old' } })}\n`,
              );
            },
            (res) => {
              openStream(res);
              res.write(
                event('ADDED', 'b', '6') + event('ADDED', 'c', '25') + bookmark('30', true),
              );
            },
          ]
        : [
            (res) =>
              res.end(
                JSON.stringify({
                  metadata: { resourceVersion: '10' },
                  items: [
                    { metadata: { uid: 'a', name: 'a' } },
                    { metadata: { uid: 'b', name: 'b' } },
                  ],
                }),
              ),
            (res) => {
              openStream(res);
              res.end(
                `${JSON.stringify({ type: 'ERROR', object: { code: 410, message: 'too old' } })}\n`,
              );
            },
            (res) =>
              res.end(
                JSON.stringify({
                  metadata: { resourceVersion: '30' },
                  items: [
                    { metadata: { uid: 'b', name: 'b' } },
                    { metadata: { uid: 'c', name: 'c' } },
                  ],
                }),
              ),
            openStream,
          ];
      const api = await fakeApi((_q, res, n) => {
        const a = answers[n - 1];
        if (a) a(res);
        else openStream(res);
      });
      const events: InformerEvent[] = [];
      const informer = new MetadataInformer(
        api.client,
        configmaps,
        (e) => void events.push(e),
        createLogger('error'),
        { watchList },
      );
      try {
        informer.start();
        await until('the second list', () => events.some((e) => e.meta.uid === 'c'));
        expect(summary(events)).toEqual([
          'upsert a',
          'upsert b',
          'upsert b',
          'upsert c',
          'delete a',
        ]);
        await until('watching from the second list', () => informer.caughtUp('30'));
        expect(informer.caughtUp('31')).toBe(false);
        // The second list starts from scratch: no resourceVersion, nor the first one's.
        const relist = api.requests[watchList ? 1 : 2];
        expect(relist?.get('resourceVersion')).toBeNull();
        if (!watchList) expect(api.requests[3]?.get('resourceVersion')).toBe('30');
      } finally {
        await informer.stop();
        await api.close();
      }
    },
  );

  test('a stream broken before its initial-events-end bookmark is listed again in full; nothing it had not finished is taken for deleted', async () => {
    const api = await fakeApi((_q, res, n) => {
      openStream(res);
      if (n === 1) {
        res.write(event('ADDED', 'a', '5') + bookmark('10', true));
        // The watch breaks (410); the next watch-list breaks half-way.
        res.end(`${JSON.stringify({ type: 'ERROR', object: { code: 410 } })}\n`);
      } else if (n === 2) {
        res.write(event('ADDED', 'b', '12'));
        setTimeout(() => res.destroy(), 50);
      } else res.write(event('ADDED', 'b', '12') + event('ADDED', 'a', '5') + bookmark('40', true));
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error', () => undefined),
      { maxBackoffMs: 20 },
    );
    try {
      informer.start();
      await until('the third watch-list', () => informer.caughtUp('40'));
      expect(summary(events)).toEqual(['upsert a', 'upsert b', 'upsert b', 'upsert a']);
      expect(api.requests.map((q) => [isWatchList(q), q.get('resourceVersion')])).toEqual([
        [true, null],
        [true, null],
        [true, null],
      ]);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test('refused by the server (422: the WatchList gate off, an older server), it lists with pages from then on', async () => {
    const api = await fakeApi((q, res) => {
      if (isWatchList(q)) {
        res.writeHead(422, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            kind: 'Status',
            code: 422,
            reason: 'Invalid',
            message:
              'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
          }),
        );
      } else if (q.get('watch') === 'true') {
        openStream(res);
        if (q.get('resourceVersion') === '10')
          res.end(`${JSON.stringify({ type: 'ERROR', object: { code: 410 } })}\n`);
      } else
        res.end(
          JSON.stringify({
            metadata: {
              resourceVersion: q.get('continue') ? '10' : '10',
              continue: q.get('continue') ? '' : 'p2',
            },
            items: [{ metadata: { uid: q.get('continue') ? 'b' : 'a', name: 'x' } }],
          }),
        );
    });
    const logged: { msg: string; reason?: string }[] = [];
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('info', (l) => void logged.push(JSON.parse(l))),
      { pageSize: 1 },
    );
    try {
      informer.start();
      await informer.waitForSync();
      // 410 on the watch from 10: listed again, with pages again (no second watch-list).
      await until(
        'the second LIST',
        () => api.requests.filter((q) => q.get('watch') !== 'true').length >= 4,
      );
      const kinds = api.requests.map((q) =>
        isWatchList(q) ? 'watch-list' : q.get('watch') === 'true' ? 'watch' : 'list',
      );
      expect(kinds.slice(0, 6)).toEqual(['watch-list', 'list', 'list', 'watch', 'list', 'list']);
      expect(summary(events).slice(0, 2)).toEqual(['upsert a', 'upsert b']);
      expect(events.filter((e) => e.type === 'delete')).toEqual([]);
      expect(logged).toContainEqual(
        expect.objectContaining({
          msg: 'watch-list not served; listing with pages instead',
          reason: expect.stringContaining('422'),
        }),
      );
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test('a server that ignores sendInitialEvents (no initial-events-end bookmark ever) is given up after watchListQuietMs for the paginated LIST', async () => {
    const api = await fakeApi((q, res) => {
      if (q.get('watch') === 'true') {
        openStream(res);
        if (isWatchList(q)) res.write(event('ADDED', 'a', '5') + bookmark('6'));
      } else
        res.end(
          JSON.stringify({
            metadata: { resourceVersion: '10' },
            items: [{ metadata: { uid: 'a', name: 'a' } }, { metadata: { uid: 'b', name: 'b' } }],
          }),
        );
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error'),
      { watchListQuietMs: 100 },
    );
    try {
      informer.start();
      await informer.waitForSync();
      expect(summary(events)).toEqual(['upsert a', 'upsert a', 'upsert b']);
      await until('the watch from the LIST', () => informer.caughtUp('10'));
      expect(api.requests.map((q) => q.get('resourceVersion'))).toEqual([null, null, '10']);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test.each([
    ['ends', (res: http.ServerResponse) => res.end()],
    ['is destroyed', (res: http.ServerResponse) => res.destroy()],
  ])(
    'an object delivered by a watch-list whose stream %s before the initial-events-end bookmark, and missing from the next complete one, is reported deleted',
    async (_how, cut) => {
      const api = await fakeApi((_q, res, n) => {
        openStream(res);
        if (n === 1) {
          res.write(event('ADDED', 'a', '5') + event('ADDED', 'b', '6'));
          setTimeout(() => cut(res), 50);
        } else res.write(event('ADDED', 'b', '6') + bookmark('20', true));
      });
      const events: InformerEvent[] = [];
      const informer = new MetadataInformer(
        api.client,
        configmaps,
        (e) => void events.push(e),
        createLogger('error', () => undefined),
        { maxBackoffMs: 20 },
      );
      try {
        informer.start();
        await informer.waitForSync();
        expect(summary(events)).toEqual(['upsert a', 'upsert b', 'upsert b', 'delete a']);
        expect(api.requests.map(isWatchList)).toEqual([true, true]);
      } finally {
        await informer.stop();
        await api.close();
      }
    },
  );

  test('an object deleted during the initial events of a broken watch-list is reported deleted once, and not again by the next list', async () => {
    const api = await fakeApi((_q, res, n) => {
      openStream(res);
      if (n === 1) {
        res.write(event('ADDED', 'a', '5') + event('ADDED', 'b', '6') + event('DELETED', 'a', '7'));
        setTimeout(() => res.destroy(), 50);
      } else res.write(event('ADDED', 'c', '8') + bookmark('20', true));
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error', () => undefined),
      { maxBackoffMs: 20 },
    );
    try {
      informer.start();
      await informer.waitForSync();
      expect(summary(events)).toEqual(['upsert a', 'upsert b', 'delete a', 'upsert c', 'delete b']);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test('paginated LIST: an object of a page delivered by a list whose next page fails, and missing from the relist, is reported deleted', async () => {
    let lists = 0;
    const api = await fakeApi((q, res) => {
      if (q.get('watch') === 'true') {
        openStream(res);
        return;
      }
      lists++;
      if (lists === 2) {
        // The second page of the first list: the API server restarts.
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', code: 503, message: 'unavailable' }));
        return;
      }
      res.end(
        JSON.stringify(
          lists === 1
            ? {
                metadata: { resourceVersion: '10', continue: 'p2' },
                items: [{ metadata: { uid: 'a', name: 'a' } }],
              }
            : {
                metadata: { resourceVersion: '20' },
                items: [{ metadata: { uid: 'b', name: 'b' } }],
              },
        ),
      );
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error', () => undefined),
      { watchList: false, pageSize: 1, maxBackoffMs: 20 },
    );
    try {
      informer.start();
      await informer.waitForSync();
      expect(summary(events)).toEqual(['upsert a', 'upsert b', 'delete a']);
      expect(api.requests.map((q) => q.get('continue'))).toEqual([null, 'p2', null]);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test('a server that ignores sendInitialEvents on a busy stream (never silent, no initial-events-end bookmark) is given up after watchListDeadlineMs for the paginated LIST', async () => {
    const timers: NodeJS.Timeout[] = [];
    const api = await fakeApi((q, res) => {
      if (q.get('watch') === 'true') {
        openStream(res);
        if (!isWatchList(q)) return;
        let rv = 5;
        const t = setInterval(() => {
          if (!res.destroyed) res.write(event('MODIFIED', 'a', String(rv++)));
        }, 10);
        timers.push(t);
        res.on('close', () => clearInterval(t));
      } else
        res.end(
          JSON.stringify({
            metadata: { resourceVersion: '10' },
            items: [{ metadata: { uid: 'a', name: 'a' } }, { metadata: { uid: 'b', name: 'b' } }],
          }),
        );
    });
    const events: InformerEvent[] = [];
    const logged: { msg: string; reason?: string }[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('info', (l) => void logged.push(JSON.parse(l))),
      { watchListQuietMs: 200, watchListDeadlineMs: 500 },
    );
    try {
      informer.start();
      await Promise.race([
        informer.waitForSync(),
        new Promise((_, reject) =>
          timers.push(setTimeout(() => reject(new Error('not synced within 3 s')), 3000)),
        ),
      ]);
      expect(summary(events).slice(-2)).toEqual(['upsert a', 'upsert b']);
      expect(events.filter((e) => e.type === 'delete')).toEqual([]);
      await until('the watch from the LIST', () => informer.caughtUp('10'));
      const kinds = api.requests.map((q) =>
        isWatchList(q) ? 'watch-list' : q.get('watch') === 'true' ? 'watch' : 'list',
      );
      expect(kinds).toEqual(['watch-list', 'list', 'watch']);
      expect(api.requests[2]?.get('resourceVersion')).toBe('10');
      expect(logged).toContainEqual(
        expect.objectContaining({
          msg: 'watch-list not served; listing with pages instead',
          reason: 'no initial-events-end bookmark within 500 ms',
        }),
      );
    } finally {
      for (const t of timers) clearTimeout(t);
      await informer.stop();
      await api.close();
    }
  });

  test('403 on the watch-list counts as forbidden at once; allowed again, it syncs', async () => {
    let allowed = false;
    const api = await fakeApi((_q, res) => {
      if (!allowed) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'forbidden' }));
        return;
      }
      openStream(res);
      res.write(bookmark('10', true));
    });
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      () => undefined,
      createLogger('error', () => undefined),
      { maxBackoffMs: 50 },
    );
    try {
      informer.start();
      await until('the 403 to be seen', () => informer.failures > 0);
      expect(informer.forbidden).toBe(true);
      expect(informer.stalled()).toBe(true);
      allowed = true;
      await informer.waitForSync();
      expect(informer.forbidden).toBe(false);
      expect(informer.stalled()).toBe(false);
      expect(api.requests.every(isWatchList)).toBe(true);
    } finally {
      await informer.stop();
      await api.close();
    }
  });

  test('stop() during the initial events ends the stream at once; the informer never counts as synced', async () => {
    let stream: http.ServerResponse | undefined;
    const api = await fakeApi((_q, res) => {
      openStream(res);
      res.write(event('ADDED', 'a', '5'));
      stream = res;
    });
    const events: InformerEvent[] = [];
    const informer = new MetadataInformer(
      api.client,
      configmaps,
      (e) => void events.push(e),
      createLogger('error'),
    );
    try {
      informer.start();
      await until('the first event', () => events.length === 1);
      const t = Date.now();
      await informer.stop();
      expect(Date.now() - t).toBeLessThan(1000);
      stream?.write(bookmark('10', true));
      await new Promise((r) => setTimeout(r, 50));
      expect(informer.synced).toBe(false);
      expect(api.requests).toHaveLength(1);
    } finally {
      await informer.stop();
      await api.close();
    }
  });
});
