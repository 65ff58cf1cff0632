// Bulk verification of unobserved owners: the plan (which owners a LIST
// verifies), the verdicts on a snapshot (exactly a read by name's), the
// snapshot LIST itself through a real KubeClient against a local HTTP server,
// and the verifier over a graph fed by a real Propagator. The e2e tests
// (test/e2e/gc-bulk-verify.test.ts) prove the same against kube-apiserver.
import http from 'node:http';
import { ApiError } from '../api/errors.ts';
import { RestMapper, type ObjectMeta, type ResourceInfo } from '../api/resources.ts';
import {
  CONFIGMAPS,
  cmIdentity,
  cmKey,
  cmMeta,
  cmRef,
  graphFixture,
  type GraphFixture,
} from '../graph/graph-fixture.testing.ts';
import { silentLogger } from '../log.ts';
import {
  BulkVerifier,
  judgeOnSnapshot,
  planVerification,
  type BulkGroup,
  type BulkVerifyOptions,
  type PendingOwner,
} from './bulk-verify.ts';
import { IncompleteListError, type GcApi, type ListSnapshot } from './operations.ts';
import { standInGcApi } from './stand-in-gc-api.testing.ts';

const NODES: ResourceInfo = {
  group: '',
  version: 'v1',
  resource: 'nodes',
  kind: 'Node',
  namespaced: false,
  verbs: ['list', 'watch', 'delete'],
};

/** Owner ConfigMap `cm-<uid>` in `namespace`, named by dependents of resourceVersion `rv`. */
function pending(uid: string, namespace = 'ns', rv = '10'): PendingOwner {
  return {
    identity: cmIdentity(uid, { namespace }),
    resource: CONFIGMAPS,
    nodeNamespace: namespace,
    dependentsVersion: rv,
  };
}

const many = (n: number, namespace = 'ns'): PendingOwner[] =>
  Array.from({ length: n }, (_, i) => pending(`o${i}`, namespace));
const uids = (owners: readonly PendingOwner[]): string[] => owners.map((o) => o.identity.uid);

describe('planVerification', () => {
  const opts = { minOwners: 20, pageSize: 500 };
  const count = (n: number | undefined) => () => n;

  test('20 owners of one resource in one namespace: one LIST of that namespace', () => {
    const plan = planVerification(many(20), count(1000), opts);
    expect(plan.single).toEqual([]);
    expect(plan.bulk).toHaveLength(1);
    expect(plan.bulk[0]).toMatchObject({ namespace: 'ns', expectedPages: 3 });
    expect(uids(plan.bulk[0]?.owners ?? [])).toEqual(uids(many(20)));
  });

  test('owners in several namespaces: one LIST of every namespace', () => {
    const plan = planVerification([...many(10, 'a'), ...many(10, 'b')], count(0), opts);
    expect(plan.bulk.map((g) => g.namespace)).toEqual([undefined]);
  });

  test.each([
    ['fewer than minOwners', many(19), count(0)],
    [
      'a resource not watched (its size unknown, and no informer to show what the LIST finds)',
      many(50),
      count(undefined),
    ],
    ['more pages than half the reads they save', many(40), count(10_000)],
  ])('%s: one live read each', (_, owners, objectCount) => {
    const plan = planVerification(owners, objectCount, opts);
    expect(plan.bulk).toEqual([]);
    expect(uids(plan.single)).toEqual(uids(owners));
  });

  test('a resource that cannot be listed: one live read each', () => {
    const owners = many(30).map((o) => ({ ...o, resource: { ...CONFIGMAPS, verbs: ['get'] } }));
    expect(planVerification(owners, count(0), opts).bulk).toEqual([]);
  });

  test('each resource on its own: a cluster-scoped kind is listed whole', () => {
    const nodes = Array.from({ length: 20 }, (_, i): PendingOwner => ({
      identity: { apiVersion: 'v1', kind: 'Node', namespace: '', name: `n${i}`, uid: `n${i}` },
      resource: NODES,
      nodeNamespace: 'ns',
      dependentsVersion: '1',
    }));
    const plan = planVerification([...nodes, ...many(5)], count(0), opts);
    expect(plan.bulk.map((g) => [g.resource.resource, g.namespace])).toEqual([
      ['nodes', undefined],
    ]);
    expect(uids(plan.single)).toEqual(uids(many(5)));
  });
});

describe('judgeOnSnapshot: as a read by the owner name would judge each owner', () => {
  const group = (owners: PendingOwner[]): BulkGroup => ({
    resource: CONFIGMAPS,
    namespace: 'ns',
    owners,
    expectedPages: 1,
  });
  const item = (name: string, uid: string, namespace = 'ns'): ObjectMeta => ({
    name,
    uid,
    namespace,
  });

  test('the name holding the UID: present; nothing under the name: absent', () => {
    const v = judgeOnSnapshot(group([pending('a'), pending('b')]), {
      resourceVersion: '20',
      items: [item('cm-a', 'a')],
    });
    expect(uids(v.present)).toEqual(['a']);
    expect(uids(v.absent)).toEqual(['b']);
    expect(v.unproven).toEqual([]);
  });

  test('the name holding another UID, or the UID under another name: absent', () => {
    const v = judgeOnSnapshot(group([pending('a'), pending('b')]), {
      resourceVersion: '20',
      items: [item('cm-a', 'replaced'), item('renamed', 'b')],
    });
    expect(uids(v.absent)).toEqual(['a', 'b']);
  });

  test('the name in another namespace: absent in the one the reference means', () => {
    const v = judgeOnSnapshot(group([pending('a')]), {
      resourceVersion: '20',
      items: [item('cm-a', 'a', 'elsewhere')],
    });
    expect(uids(v.absent)).toEqual(['a']);
  });

  test('a LIST older than a dependent naming the owner proves nothing about it', () => {
    const v = judgeOnSnapshot(group([pending('a', 'ns', '21'), pending('b', 'ns', '20')]), {
      resourceVersion: '20',
      items: [],
    });
    expect(uids(v.unproven)).toEqual(['a']);
    expect(uids(v.absent)).toEqual(['b']);
  });

  test('one name twice: not a list of one snapshot', () => {
    expect(() =>
      judgeOnSnapshot(group([pending('a')]), {
        resourceVersion: '20',
        items: [item('cm-a', 'x'), item('cm-a', 'a')],
      }),
    ).toThrow(IncompleteListError);
  });
});

describe('GcApi.listSnapshot', () => {
  type Page = { status?: number; body: unknown };
  /** Answers the n-th request with pages[n]; records each request's continue and limit. */
  async function serve(pages: Page[]) {
    const seen: { path: string; continue: string | null; limit: string | null }[] = [];
    const server = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      seen.push({
        path: u.pathname,
        continue: u.searchParams.get('continue'),
        limit: u.searchParams.get('limit'),
      });
      const p = pages[seen.length - 1] ?? { status: 500, body: { message: 'no more pages' } };
      res.writeHead(p.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(p.body));
    });
    return { ...(await standInGcApi(server)), seen };
  }
  const meta = (name: string, namespace = 'ns') => ({
    metadata: { name, namespace, uid: `uid-${name}` },
  });
  const page = (rv: string, names: string[], cont?: string, namespace = 'ns'): Page => ({
    body: {
      metadata: { resourceVersion: rv, ...(cont ? { continue: cont } : {}) },
      items: names.map((n) => meta(n, namespace)),
    },
  });
  const all = () => true;
  const opts = { pageSize: 2, maxPages: 5 };

  test('every page, from the first page on: the items kept, the snapshot, the pages', async () => {
    const srv = await serve([page('7', ['a', 'b'], 'c1'), page('7', ['c'])]);
    try {
      const s = await srv.api.listSnapshot(CONFIGMAPS, 'ns', (m) => m.name !== 'b', opts);
      expect(s).toEqual({
        resourceVersion: '7',
        pages: 2,
        items: [
          { name: 'a', namespace: 'ns', uid: 'uid-a' },
          { name: 'c', namespace: 'ns', uid: 'uid-c' },
        ],
      });
      expect(srv.seen).toEqual([
        { path: '/api/v1/namespaces/ns/configmaps', continue: null, limit: '2' },
        { path: '/api/v1/namespaces/ns/configmaps', continue: 'c1', limit: '2' },
      ]);
    } finally {
      await srv.close();
    }
  });

  test('an expired continue token (410): the list again once, from a new snapshot', async () => {
    const expired = { status: 410, body: { reason: 'Expired', code: 410, message: 'expired' } };
    const srv = await serve([page('7', ['a'], 'c1'), expired, page('9', ['a', 'b'])]);
    try {
      const s = await srv.api.listSnapshot(CONFIGMAPS, 'ns', all, opts);
      expect(s.resourceVersion).toBe('9');
      expect(s.items.map((m) => m.name)).toEqual(['a', 'b']);
      expect(srv.seen.map((x) => x.continue)).toEqual([null, 'c1', null]);
    } finally {
      await srv.close();
    }
  });

  test('expired twice: an error, never a list', async () => {
    const expired = { status: 410, body: { reason: 'Expired', code: 410, message: 'expired' } };
    const srv = await serve([page('7', [], 'c1'), expired, page('8', [], 'c2'), expired]);
    try {
      await expect(srv.api.listSnapshot(CONFIGMAPS, 'ns', all, opts)).rejects.toBeInstanceOf(
        ApiError,
      );
    } finally {
      await srv.close();
    }
  });

  test.each([
    [
      'a page of another resourceVersion',
      [page('7', ['a'], 'c1'), page('8', ['b'])],
      /not the first page's 7/,
    ],
    ['no resourceVersion', [{ body: { items: [] } }], /no resourceVersion/],
    [
      'an item without a uid',
      [{ body: { metadata: { resourceVersion: '7' }, items: [{ metadata: { name: 'a' } }] } }],
      /without a uid/,
    ],
    [
      'an item in another namespace',
      [page('7', ['a'], undefined, 'elsewhere')],
      /namespace "elsewhere"/,
    ],
    [
      'a continue token for ever',
      Array.from({ length: 6 }, (_, i) => page('7', [], `c${i}`)),
      /more than 5 pages/,
    ],
  ])('%s: incomplete, nothing to conclude from', async (_, pages, why) => {
    const srv = await serve(pages);
    try {
      const listed = srv.api.listSnapshot(CONFIGMAPS, 'ns', all, opts);
      await expect(listed).rejects.toBeInstanceOf(IncompleteListError);
      await expect(listed).rejects.toThrow(why);
    } finally {
      await srv.close();
    }
  });

  test('a refusal is the ApiError it was', async () => {
    const srv = await serve([{ status: 403, body: { code: 403, message: 'forbidden' } }]);
    try {
      await expect(srv.api.listSnapshot(CONFIGMAPS, 'ns', all, opts)).rejects.toMatchObject({
        status: 403,
      });
    } finally {
      await srv.close();
    }
  });
});

/** Resolves once `check()` holds; fails after two seconds. */
async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

describe('BulkVerifier', () => {
  interface Setup {
    f: GraphFixture;
    verifier: BulkVerifier;
    /** Owners handed to the single read, in order. */
    singles: string[];
    /** Each LIST: its namespace. */
    lists: (string | undefined)[];
    /** The queue's depth as the verifier sees it. */
    backlog: { depth: number };
  }

  /**
   * A verifier over a graph fixture whose propagator hands it the unobserved
   * owners; `list` answers its LISTs (default: none of the owners exist).
   */
  function setup(
    list: (
      namespace: string | undefined,
    ) => Promise<Pick<ListSnapshot, 'resourceVersion' | 'items'>> = () =>
      Promise.resolve({ resourceVersion: '100', items: [] }),
    opts: Partial<BulkVerifyOptions> = {},
  ): Setup {
    const singles: string[] = [];
    const lists: (string | undefined)[] = [];
    const backlog = { depth: 0 };
    const api: Pick<GcApi, 'listSnapshot'> = {
      listSnapshot: async (_r, namespace, keep) => {
        lists.push(namespace);
        const s = await list(namespace);
        return { ...s, items: s.items.filter(keep), pages: 1 };
      },
    };
    // The sink runs only once objects are observed, after the verifier exists.
    const f = graphFixture({ sinks: { verifyVirtualOwner: (uid) => verifier.add(uid) } });
    const verifier = new BulkVerifier(
      {
        api,
        graph: f.graph,
        mapper: () => new RestMapper([CONFIGMAPS]),
        pushGraphEvent: (e) => f.apply(e),
        graphFlushed: () => Promise.resolve(),
        log: silentLogger,
        verifySingly: (uid) => singles.push(uid),
        objectCount: () => 0,
        backlog: () => backlog.depth,
      },
      { windowMs: 1, presentRecheckMs: 1, ...opts },
    );
    return { f, verifier, singles, lists, backlog };
  }

  /** `n` dependents `<prefix>d<i>` in `namespace`, each naming an unobserved owner `<prefix>o<i>`. */
  function leak(f: GraphFixture, n: number, namespace = 'ns', prefix = ''): void {
    for (let i = 0; i < n; i++)
      f.observe(
        cmMeta(`${prefix}d${i}`, {
          namespace,
          resourceVersion: '50',
          ownerReferences: [cmRef(`${prefix}o${i}`)],
        }),
      );
  }

  test('owners gather until start(); then one LIST, and each absent owner a virtualDelete', async () => {
    const s = setup();
    leak(s.f, 25);
    expect(s.f.queued.del).toEqual([]);
    await new Promise((r) => setTimeout(r, 5));
    expect(s.lists).toEqual([]);
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.lists).toEqual(['ns']);
    expect(s.singles).toEqual([]);
    // Each dependent queued by its owner's virtualDelete, the owner recorded absent.
    expect(s.f.queued.del).toEqual(Array.from({ length: 25 }, (_, i) => `d${i}`));
    expect(s.f.absent.has(cmKey('o0'))).toBe(true);
    expect(s.f.graph.has('o0')).toBe(false);
    await s.verifier.stop();
  });

  test('an owner observed before its round needs nothing: no read, nothing queued', async () => {
    const s = setup();
    leak(s.f, 25);
    for (let i = 0; i < 25; i++) s.f.observe(cmMeta(`o${i}`));
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.lists).toEqual([]);
    expect(s.singles).toEqual([]);
    expect(s.f.queued.del).toEqual([]);
    await s.verifier.stop();
  });

  test('fewer than minOwners: one live read each, after a window once started', async () => {
    const s = setup();
    s.verifier.start();
    await until('the first round', () => s.verifier.idle);
    leak(s.f, 3);
    expect(s.singles).toEqual([]);
    await until('the window', () => s.singles.length === 3);
    expect(s.singles).toEqual(['o0', 'o1', 'o2']);
    expect(s.lists).toEqual([]);
    await s.verifier.stop();
  });

  test('a kind that cannot be resolved, or a namespaced owner of a cluster-scoped dependent: the single read', async () => {
    const s = setup();
    for (let i = 0; i < 25; i++)
      s.f.observe(
        cmMeta(`d${i}`, {
          ownerReferences: [
            { apiVersion: 'example.io/v1', kind: 'Gone', name: `g${i}`, uid: `g${i}` },
          ],
        }),
      );
    for (let i = 0; i < 25; i++)
      s.f.observe({ uid: `n${i}`, name: `n${i}`, ownerReferences: [cmRef(`o${i}`)] }, NODES);
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.lists).toEqual([]);
    expect(s.singles.sort()).toEqual(
      [
        ...Array.from({ length: 25 }, (_, i) => `g${i}`),
        ...Array.from({ length: 25 }, (_, i) => `o${i}`),
      ].sort(),
    );
    await s.verifier.stop();
  });

  test('an owner the LIST shows is kept unobserved, then read live if its informer has not shown it', async () => {
    const s = setup(() =>
      Promise.resolve({
        resourceVersion: '100',
        items: [{ name: 'cm-o3', uid: 'o3', namespace: 'ns' }],
      }),
    );
    leak(s.f, 25);
    s.verifier.start();
    await until('the recheck', () => s.singles.length === 1);
    expect(s.singles).toEqual(['o3']);
    expect(s.f.graph.get('o3')?.virtual).toBe(true);
    expect(s.f.queued.del).not.toContain('d3');
    expect(s.f.queued.del).toHaveLength(24);
    await s.verifier.stop();
  });

  test('a LIST older than a dependent: that owner read live', async () => {
    const s = setup();
    leak(s.f, 25);
    s.f.observe(cmMeta('late', { resourceVersion: '101', ownerReferences: [cmRef('o7')] }));
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.singles).toEqual(['o7']);
    expect(s.f.queued.del).not.toContain('d7');
    await s.verifier.stop();
  });

  test('a LIST that cannot be shown complete: each owner read live, and the next round too', async () => {
    const s = setup(() => Promise.reject(new IncompleteListError('pages of two snapshots')));
    leak(s.f, 25);
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.lists).toHaveLength(1);
    expect(s.singles).toHaveLength(25);
    expect(s.f.queued.del).toEqual([]);
    leak(s.f, 25, 'other', 'x');
    await until('the second round', () => s.verifier.idle && s.singles.length === 50);
    expect(s.lists).toHaveLength(1);
    await s.verifier.stop();
  });

  test('a transient failure (503): each owner read live, and the next round lists again', async () => {
    let fail = true;
    const s = setup(() => {
      if (!fail) return Promise.resolve({ resourceVersion: '100', items: [] });
      fail = false;
      return Promise.reject(
        new ApiError('GET', '/api/v1/namespaces/ns/configmaps', 503, '{"message":"unavailable"}'),
      );
    });
    leak(s.f, 25);
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.singles).toHaveLength(25);
    leak(s.f, 25, 'other', 'x');
    await until('the second round', () => s.verifier.idle && s.lists.length === 2);
    expect(s.singles).toHaveLength(25);
    await s.verifier.stop();
  });

  test('owners found absent go to the graph in chunks, while the queue has room', async () => {
    const s = setup(undefined, { releaseChunk: 10, releaseBelow: 5 });
    s.backlog.depth = 5;
    leak(s.f, 25);
    s.verifier.start();
    await until('the LIST', () => s.lists.length === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(s.f.queued.del).toEqual([]);
    s.backlog.depth = 0;
    await until('a first chunk', () => s.f.queued.del.length > 0);
    expect(s.f.queued.del.length).toBeGreaterThanOrEqual(10);
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.f.queued.del).toHaveLength(25);
    await s.verifier.stop();
  });

  test('an owner observed after the LIST and before its release is left alone', async () => {
    let observe = (): void => undefined;
    const s = setup(() => {
      observe();
      return Promise.resolve({ resourceVersion: '100', items: [] });
    });
    observe = () => s.f.observe(cmMeta('o4'));
    leak(s.f, 25);
    s.verifier.start();
    await until('the verifier idle', () => s.verifier.idle);
    expect(s.f.queued.del).not.toContain('d4');
    expect(s.f.graph.get('o4')?.virtual).toBe(false);
    await s.verifier.stop();
  });

  test('before start(), owners observed since are dropped as the set grows (a standby)', () => {
    const s = setup();
    for (let i = 0; i < 10_000; i++) {
      s.f.observe(cmMeta(`d${i}`, { ownerReferences: [cmRef(`o${i}`)] }));
      if (i % 2 === 0) s.f.observe(cmMeta(`o${i}`));
    }
    expect(s.verifier.waiting).toBe(5000);
  });

  test('stop() ends a release waiting for room in the queue', async () => {
    const s = setup();
    s.backlog.depth = 10_000;
    leak(s.f, 25);
    s.verifier.start();
    await until('the LIST', () => s.lists.length === 1);
    await s.verifier.stop();
    expect(s.f.queued.del).toEqual([]);
  });
});
