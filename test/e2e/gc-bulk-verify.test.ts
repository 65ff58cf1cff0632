// Owners the graph has not observed, verified in bulk (issue 34, items 2
// and 3), against the real API server. Each test starts a collector of its
// own on objects made while none ran, as a restart finds them: leaked
// dependents get their owners verified by a few LISTs, not one read each; an
// owner that exists is never taken for absent, whether the LIST shows it or
// it is created while the LIST's pages are read; a restart where nothing
// leaked reads no owner and queues nothing. Each test failed on the code
// before bulk verification (one live read per unobserved owner, each queued).
import { randomUUID } from 'node:crypto';
import type { InterceptedRequest } from '../../src/api/request.ts';
import { waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { startInProcessGc, type InProcessGcOptions } from '../support/in-process-gc.ts';
import {
  configMap,
  configMapNames,
  isGone,
  ownerRef,
  secret,
  times,
  type Ref,
} from '../support/objects.ts';

// Deleted after the file: a later run on a kept cluster must not find this
// one's objects (its Secret-owned dependents would join the next LIST).
const { cluster, c, namespace } = await e2e({ deleteNamespaces: true });

const USER_AGENT = 'kubegc-e2e-bulk-verify';

/** The collector's requests, as its client's intercept hook saw them, and what the test does there too. */
function recorder(also?: InProcessGcOptions['intercept']): {
  sent: InterceptedRequest[];
  intercept: NonNullable<InProcessGcOptions['intercept']>;
} {
  const sent: InterceptedRequest[] = [];
  return {
    sent,
    intercept: async (r) => {
      sent.push(r);
      await also?.(r);
    },
  };
}

/**
 * A live read of one object of `resource` in `ns` whose name starts with
 * `prefix` (a LIST by field selector, or a GET by name: both are sent as
 * verb GET).
 */
const singleRead =
  (ns: string, resource: string, prefix: string) =>
  (r: InterceptedRequest): boolean => {
    const base = `/api/v1/namespaces/${ns}/${resource}`;
    if (r.verb !== 'GET' || !r.path.startsWith(base)) return false;
    const selector = r.query?.fieldSelector;
    const name =
      typeof selector === 'string'
        ? selector.replace(/^metadata\.name=/, '')
        : decodeURIComponent(r.path.slice(base.length + 1));
    return name.startsWith(prefix);
  };

/** A page of a LIST of a whole resource, in `ns` or in every namespace (no field selector). */
const bulkList =
  (ns: string, resource: string) =>
  (r: InterceptedRequest): boolean =>
    r.verb === 'LIST' &&
    (r.path === `/api/v1/namespaces/${ns}/${resource}` || r.path === `/api/v1/${resource}`) &&
    r.query?.fieldSelector === undefined;

const secretRef = (name: string, uid: string): Ref => ({
  apiVersion: 'v1',
  kind: 'Secret',
  name,
  uid,
});

test('a restart with 1,000 leaked dependents verifies their owners with a few LISTs, not a read each', async () => {
  const ns = await namespace('bulk-leaked');
  const n = 1000;
  // Each names an owner of its own that no longer exists (deleted while no GC ran).
  await times(n, (i) =>
    configMap(c, ns, `dep-${i}`, [
      ownerRef({ apiVersion: 'v1', kind: 'ConfigMap', name: `owner-${i}`, uid: randomUUID() }),
    ]),
  );
  const rec = recorder();
  const started = performance.now();
  const g = await startInProcessGc(cluster, { userAgent: USER_AGENT, intercept: rec.intercept });
  try {
    await waitFor(
      'every leaked dependent to be collected',
      async () => (await configMapNames(c, ns)).length === 0,
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    const seconds = (performance.now() - started) / 1000;
    const reads = rec.sent.filter(singleRead(ns, 'configmaps', 'owner-')).length;
    const pages = rec.sent.filter(bulkList(ns, 'configmaps')).length;
    process.stderr.write(
      `bulk-verify e2e: ${n} leaked dependents collected ${seconds.toFixed(1)} s after the start; owner reads: ${reads} single, ${pages} LIST page(s)\n`,
    );
    expect(reads).toBe(0);
    expect(pages).toBeGreaterThanOrEqual(1);
    expect(pages).toBeLessThanOrEqual(10);
  } finally {
    await g.stop();
  }
}, 240_000);

test('an owner that exists is never taken for absent: shown by the LIST, or created while its pages are read', async () => {
  const ns = await namespace('bulk-live');
  // Secrets that exist: three, so that the namespace's LIST takes two pages of two.
  const alive = await secret(c, ns, 'alive');
  const other = await secret(c, ns, 'other');
  await secret(c, ns, 'taken');
  // 100 dependents whose owners never existed...
  await times(100, (i) =>
    configMap(c, ns, `dep-gone-${i}`, [ownerRef(secretRef(`gone-${i}`, randomUUID()))]),
  );
  // ...one whose owner exists...
  const keptAlive = await configMap(c, ns, 'dep-alive', [ownerRef(alive)]);
  // ...and two that name what a read by name finds absent: an existing UID
  // under a name that holds nothing, an existing name holding another UID.
  await configMap(c, ns, 'dep-wrong-name', [ownerRef(secretRef('renamed', other.uid))]);
  await configMap(c, ns, 'dep-wrong-uid', [ownerRef(secretRef('taken', randomUUID()))]);

  // The Secrets' informer shows nothing until the dependents of absent
  // owners are collected: every owner above stays unobserved while the LIST
  // is judged and its verdicts carried out, so a wrong verdict would delete
  // a dependent (nothing observed would save it).
  let openWatch = (): void => undefined;
  const watchHeld = new Promise<void>((resolve) => (openWatch = resolve));
  let late: { owner: Ref; dependent: Ref } | undefined;
  let creatingLate: Promise<void> | undefined;
  const verdicts = { absent: 0, present: 0 };
  const rec = recorder(async (r) => {
    if (r.verb === 'WATCH' && r.path === '/api/v1/secrets') await watchHeld;
    // Between two pages of the LIST (after its snapshot was taken): an
    // owner and a dependent naming it. The dependent's owner is unobserved
    // too, and not in the snapshot; it must not be judged on it.
    if (bulkList(ns, 'secrets')(r) && r.query?.continue !== undefined && !creatingLate)
      await (creatingLate = (async () => {
        const owner = await secret(c, ns, 'late');
        late = { owner, dependent: await configMap(c, ns, 'dep-late', [ownerRef(owner)]) };
      })());
  });
  const g = await startInProcessGc(cluster, {
    userAgent: USER_AGENT,
    intercept: rec.intercept,
    // Start deciding without waiting for the Secrets' informer.
    gc: { initialSyncTimeoutMs: 1000, bulkVerify: { pageSize: 2 } },
    metrics: {
      ownersVerifiedInBulk: (resource, result, n) => {
        if (resource === 'secrets') verdicts[result] += n;
      },
    },
  });
  try {
    await waitFor(
      'the dependents of absent owners to be collected',
      async () =>
        (await configMapNames(c, ns)).filter((name) => name !== 'dep-alive' && name !== 'dep-late')
          .length === 0,
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(late).toBeDefined();
    if (!late) return;
    // Decided while nothing observed could save them: both kept.
    expect(await configMapNames(c, ns)).toEqual(['dep-alive', 'dep-late']);
    openWatch();
    await g.observed(alive, late.owner, keptAlive, late.dependent);
    await g.decided();
    expect(await configMapNames(c, ns)).toEqual(['dep-alive', 'dep-late']);
    expect(await isGone(c, alive)).toBe(false);
    expect(await isGone(c, late.owner)).toBe(false);
    // Judged on the LIST: 'alive' present; the 100, 'renamed' and the second 'taken' absent.
    expect(verdicts).toEqual({ absent: 102, present: 1 });
    expect(rec.sent.filter(bulkList(ns, 'secrets')).length).toBe(2);
    // No single read of what the LIST found absent ('alive' may get one
    // after 2 s unobserved, 'late' one: it came after the LIST).
    const singles = rec.sent
      .filter(singleRead(ns, 'secrets', ''))
      .map((r) => String(r.query?.fieldSelector));
    expect(singles.filter((q) => !/=(alive|late)$/.test(q))).toEqual([]);
  } finally {
    openWatch();
    await g.stop();
  }
}, 240_000);

test('a restart where nothing leaked reads no owner and queues nothing', async () => {
  const ns = await namespace('bulk-healthy');
  const n = 1000;
  const owners = await times(n, (i) => configMap(c, ns, `owner-${i}`));
  // Named to be listed before their owners: each owner is first known from its dependent.
  const dependents = await times(n, (i) => {
    const owner = owners[i];
    if (!owner) throw new Error(`no owner ${i}`);
    return configMap(c, ns, `dep-${i}`, [ownerRef(owner)]);
  });
  const mine = new Set([...owners, ...dependents].map((o) => o.uid));
  const queued: string[] = [];
  const rec = recorder();
  const g = await startInProcessGc(cluster, {
    userAgent: USER_AGENT,
    intercept: rec.intercept,
    beforeStart: (gc) => {
      const add = gc.deleteQueue.add.bind(gc.deleteQueue);
      gc.deleteQueue.add = (key, lane) => {
        if (mine.has(key)) queued.push(key);
        add(key, lane);
      };
    },
  });
  try {
    await g.observed(...owners, ...dependents);
    await g.decided('the start-up work to be done');
    expect(queued).toEqual([]);
    expect(rec.sent.filter(singleRead(ns, 'configmaps', ''))).toEqual([]);
    expect(rec.sent.filter((r) => r.path === `/api/v1/namespaces/${ns}/configmaps`)).toEqual([]);
    expect(await configMapNames(c, ns)).toHaveLength(2 * n);
  } finally {
    await g.stop();
  }
}, 240_000);
