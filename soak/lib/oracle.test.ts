// The oracle over synthetic histories: what must be flagged, and what must not
// (including what a re-list gap leaves unknown).
import { SyntheticStream, type SyntheticObject } from './aggregated.ts';
import { History, RevisionClock } from './history.ts';
import type { KubeObject, OwnerReference, WatchEvent } from './kube.ts';
import {
  checkI1,
  checkI2,
  checkI3,
  checkI5,
  collections,
  injectedDelayMs,
  ONE_READ_MS,
  oneReadBoundMs,
  oneReadDeletes,
  resolveDeletes,
  type DeleteCall,
  type OneReadContext,
  type ReadCall,
} from './oracle.ts';
import { AGGREGATED, resourceDef } from './resources.ts';

const CM = resourceDef('configmaps');
const SECRET = resourceDef('secrets');
const CLUSTERROLE = resourceDef('clusterroles');
const GC = new Set(['kubegc']);

function cm(
  name: string,
  uid: string,
  rv: number,
  o: { owners?: OwnerReference[]; deleting?: boolean; finalizers?: string[]; ns?: string } = {},
): KubeObject {
  return {
    metadata: {
      name,
      namespace: o.ns ?? 'soak-a',
      uid,
      resourceVersion: String(rv),
      ownerReferences: o.owners,
      finalizers: o.finalizers,
      deletionTimestamp: o.deleting ? '2026-01-01T00:00:00Z' : undefined,
    },
  };
}

const ref = (name: string, uid: string, block = false): OwnerReference => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name,
  uid,
  blockOwnerDeletion: block,
});

/** A history fed event by event, each seen at time = revision × 100 ms (a clock that follows). */
class Scenario {
  readonly history = new History();
  readonly clock = new RevisionClock();
  constructor(listRev = 1) {
    for (const r of [CM, SECRET, CLUSTERROLE]) this.history.list(r, listRev, [], listRev * 100);
    this.clock.probe(listRev * 100 - 1, listRev * 100, listRev);
  }
  ev(type: WatchEvent['type'], obj: KubeObject, r = CM): this {
    const rev = Number(obj.metadata.resourceVersion);
    this.history.event(r, { type, object: obj }, rev * 100 + 5);
    this.clock.write(rev * 100 - 1, rev * 100 + 5, rev);
    return this;
  }
  /** A watch bookmark: nothing changed in the stream up to `rev`. */
  bookmark(rev: number, r = CM): this {
    this.history.event(
      r,
      {
        type: 'BOOKMARK',
        object: { metadata: { name: '', uid: '', resourceVersion: String(rev) } },
      },
      rev * 100,
    );
    return this;
  }
  /** A probe of the current revision (the clock's upper bound after `t`). */
  probe(t: number, rev: number): this {
    this.clock.probe(t, t + 1, rev);
    return this;
  }
  relist(rev: number, items: KubeObject[]): this {
    this.history.list(CM, rev, items, rev * 100);
    return this;
  }
}

/** A DELETE of `name` received just before revision `rev` took effect and completed after. */
function del(name: string, uid: string, rev: number, user = 'kubegc'): DeleteCall {
  return {
    auditID: `a-${name}-${rev}`,
    user,
    resource: 'configmaps',
    group: '',
    namespace: 'soak-a',
    name,
    uid,
    policy: 'Background',
    code: 200,
    received: rev * 100 - 20,
    completed: rev * 100 + 10,
  };
}

describe('I1', () => {
  test('flags a delete of a dependent whose owner exists and is not being deleted', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [ref('owner', 'O')] }))
      .probe(2000, 12);
    const calls = [del('dep', 'D', 12)];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(resolved[0]?.status).toBe('exact');
    const v = checkI1(s.history, resolved, GC, calls);
    expect(v).toHaveLength(1);
    expect(v[0]?.object).toContain('soak-a/dep');
    expect(v[0]?.summary).toContain('existed and was not being deleted');
    expect(v[0]?.evidence.join('\n')).toContain('a-dep-12');
  });

  test('does not flag a delete after the owner is gone', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('DELETED', cm('owner', 'O', 12))
      .ev('DELETED', cm('dep', 'D', 13, { owners: [ref('owner', 'O')] }))
      .probe(2000, 13);
    const calls = [del('dep', 'D', 13)];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(checkI1(s.history, resolved, GC, calls)).toEqual([]);
    const c = collections(s.history, resolved);
    expect(c).toHaveLength(1);
    expect(c[0]?.latencyMs).toBe(100);
  });

  /** O in foreground deletion at 12, switched to Orphan at 14; its dependent D deleted at `depDeletedAt`. */
  const foregroundThenOrphan = (depDeletedAt: number): Scenario =>
    new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O', true)] }))
      .ev('MODIFIED', cm('owner', 'O', 12, { deleting: true, finalizers: ['foregroundDeletion'] }))
      .ev('MODIFIED', cm('owner', 'O', 14, { deleting: true, finalizers: ['orphan'] }))
      .ev('DELETED', cm('dep', 'D', depDeletedAt, { owners: [ref('owner', 'O', true)] }))
      .probe(3000, 20);

  test('does not flag when the owner is in foreground deletion; flags once it switched to Orphan', () => {
    const before = foregroundThenOrphan(13);
    // Events out of revision order are fine for the history: segments are per object.
    const calls13 = [del('dep', 'D', 13)];
    expect(
      checkI1(before.history, resolveDeletes(before.history, before.clock, calls13), GC, calls13),
    ).toEqual([]);
    const after = foregroundThenOrphan(15);
    const calls15 = [del('dep', 'D', 15)];
    const v = checkI1(
      after.history,
      resolveDeletes(after.history, after.clock, calls15),
      GC,
      calls15,
    );
    expect(v).toHaveLength(1);
    expect(v[0]?.summary).toContain('Orphan');
  });

  describe('a DELETE one read old (owner switched from Foreground to Orphan after the GC read it)', () => {
    // The DELETE of D: received at 1480, completed at 1510 (del()); the switch is seen at 1405.
    const read = (received: number, completed: number, name = 'owner'): ReadCall => ({
      user: 'kubegc',
      resource: 'configmaps',
      group: '',
      namespace: 'soak-a',
      name,
      code: 200,
      received,
      completed,
    });
    const check = (reads: ReadCall[], ctx: OneReadContext = {}) => {
      const s = foregroundThenOrphan(15);
      const calls = [{ ...del('dep', 'D', 15), userAgent: 'kubegc/0.1.0 (r0-id)' }];
      const resolved = resolveDeletes(s.history, s.clock, calls);
      const excused = oneReadDeletes(s.history, s.clock, resolved, reads, GC, ctx);
      return {
        excused,
        i1: checkI1(s.history, resolved, GC, calls, excused),
        // (O itself keeps its orphan finalizer in this history: only D's entry is of interest.)
        i3: checkI3(s.history, resolved, GC, calls, excused).filter((v) =>
          v.object.includes('soak-a/dep'),
        ),
      };
    };

    test('read before the switch, DELETE right after the answer: excused, neither I1 nor I3', () => {
      const r = check([read(1300, 1350)]);
      expect([...r.excused.keys()]).toEqual(['a-dep-15']);
      expect(r.excused.get('a-dep-15')?.reason).toContain(
        'switched from Foreground to Orphan at revision 14',
      );
      expect(r.i1).toEqual([]);
      expect(r.i3).toEqual([]);
    });

    test.each([
      ['no read of the owner', []],
      ['a read received after the switch was seen', [read(1450, 1460)]],
      ['a read answered more than ONE_READ_MS before the DELETE', [read(300, 400)]],
      ['a read of another object', [read(1300, 1350, 'other')]],
      ['a read answered after the DELETE was received', [read(1300, 1500)]],
    ])('%s: flagged (I1 and I3)', (_name, reads) => {
      const r = check(reads);
      expect(r.excused.size).toBe(0);
      expect(r.i1).toHaveLength(1);
      expect(r.i3).toHaveLength(1);
    });
  });

  describe("... with latency injected on the GC's connection (net-delay)", () => {
    // Answered 1530 ms before the DELETE was received: beyond ONE_READ_MS on a plain connection.
    const read = (): ReadCall => ({
      user: 'kubegc',
      resource: 'configmaps',
      group: '',
      namespace: 'soak-a',
      name: 'owner',
      code: 200,
      received: -100,
      completed: -50,
    });
    const processOf = (ua: string | undefined) =>
      ua?.includes('(r0-id)') ? 'kubegc-r0' : undefined;
    const delay = (ms: number, processes = ['kubegc-r0'], start = -1000, end = 5000) => ({
      delays: [{ start, end, ms, processes }],
      processOf,
    });
    const s = () => foregroundThenOrphan(15);
    const run = (ctx: OneReadContext) => {
      const h = s();
      const calls = [{ ...del('dep', 'D', 15), userAgent: 'kubegc/0.1.0 (r0-id)' }];
      const resolved = resolveDeletes(h.history, h.clock, calls);
      const excused = oneReadDeletes(h.history, h.clock, resolved, [read()], GC, ctx);
      return { excused, i1: checkI1(h.history, resolved, GC, calls, excused, [read()]) };
    };

    test('the bound is ONE_READ_MS plus twice the latency each way', () => {
      expect(oneReadBoundMs(0)).toBe(ONE_READ_MS);
      expect(oneReadBoundMs(885)).toBe(ONE_READ_MS + 1770);
    });

    test('a delay on the deleting process during the read and the DELETE: excused', () => {
      const r = run(delay(300));
      expect([...r.excused.keys()]).toEqual(['a-dep-15']);
      expect(r.excused.get('a-dep-15')?.reason).toContain('300 ms injected each way on kubegc-r0');
      expect(r.i1).toEqual([]);
    });

    test.each([
      ['no delay', {}],
      ['a delay too small for the gap', delay(200)],
      ['a delay on another process', delay(900, ['kubegc-r1'])],
      ['a delay that ended (and drained) before the read', delay(900, ['kubegc-r0'], -5000, -1100)],
      ['a delay that began after the DELETE', delay(900, ['kubegc-r0'], 1500, 3000)],
    ])('%s: flagged, with the read in the evidence', (_name, ctx) => {
      const r = run(ctx);
      expect(r.excused.size).toBe(0);
      expect(r.i1).toHaveLength(1);
      expect(r.i1[0]?.evidence.join('\n')).toContain(
        'GC read of the owner: kubegc → 200, received 1969-12-31T23:59:59.900Z',
      );
    });

    test('a process the user agent does not name: a delay on any GC process counts', () => {
      expect(run({ ...delay(300, ['kubegc-r1']), processOf: () => undefined }).excused.size).toBe(
        1,
      );
    });

    test('injectedDelayMs: the largest overlapping window, a window holding chunks for its latency after it ends', () => {
      const ws = [
        { start: 0, end: 1000, ms: 200, processes: ['a'] },
        { start: 500, end: 600, ms: 700, processes: ['a'] },
        { start: 0, end: 10_000, ms: 1400, processes: ['b'] },
      ];
      expect(injectedDelayMs(ws, 'a', 550, 560)).toBe(700);
      expect(injectedDelayMs(ws, 'a', 0, 100)).toBe(200);
      expect(injectedDelayMs(ws, 'a', 1250, 2000)).toBe(700);
      expect(injectedDelayMs(ws, 'a', 1301, 2000)).toBe(0);
      expect(injectedDelayMs(ws, undefined, 1301, 2000)).toBe(1400);
    });
  });

  test('does not flag when a re-list gap leaves the owner state unknown', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }));
    // The watch breaks after 11; the re-list at 20 no longer has the owner: it went somewhere in (11, 20].
    s.relist(20, [cm('dep', 'D', 11, { owners: [ref('owner', 'O')] })]);
    s.ev('DELETED', cm('dep', 'D', 21, { owners: [ref('owner', 'O')] })).probe(3000, 21);
    expect(s.history.stateAt('O', 15).kind).toBe('unknown');
    expect(s.history.stateAt('O', 11).kind).toBe('exists');
    expect(s.history.stateAt('O', 20).kind).toBe('gone');
    const calls = [del('dep', 'D', 21)];
    expect(checkI1(s.history, resolveDeletes(s.history, s.clock, calls), GC, calls)).toEqual([]);
    // ... while a delete inside the gap, with the owner unknown there, is not flagged either.
    const s2 = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }));
    s2.relist(20, []);
    const calls2 = [del('dep', 'D', 15)];
    const r2 = resolveDeletes(s2.history, s2.clock, calls2);
    expect(r2[0]?.status).toBe('window');
    expect(checkI1(s2.history, r2, GC, calls2)).toEqual([]);
  });

  test('a cross-namespace reference is no owner; a delete by another user is not the GC', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10, { ns: 'soak-b' }))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [ref('owner', 'O')] }))
      .ev('ADDED', cm('owner2', 'O2', 13))
      .ev('ADDED', cm('dep2', 'D2', 14, { owners: [ref('owner2', 'O2')] }))
      .ev('DELETED', cm('dep2', 'D2', 15, { owners: [ref('owner2', 'O2')] }))
      .probe(3000, 15);
    const calls = [del('dep', 'D', 12), del('dep2', 'D2', 15, 'soak')];
    expect(checkI1(s.history, resolveDeletes(s.history, s.clock, calls), GC, calls)).toEqual([]);
  });

  test('a concurrent delete of the same object by someone else makes the attribution ambiguous', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [ref('owner', 'O')] }))
      .probe(2000, 12);
    const calls = [del('dep', 'D', 12), del('dep', 'D', 12, 'soak')];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(resolved[0]?.status).toBe('ambiguous');
    expect(checkI1(s.history, resolved, GC, calls)).toEqual([]);
  });
});

test('I1: a delete that writes nothing (the object already being deleted) is judged over its window', () => {
  const build = (ownerGone: boolean): Scenario => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev(
        'ADDED',
        cm('dep', 'D', 11, { owners: [ref('owner', 'O')], finalizers: ['soak.kubegc.io/hold'] }),
      )
      .ev(
        'MODIFIED',
        cm('dep', 'D', 12, {
          owners: [ref('owner', 'O')],
          finalizers: ['soak.kubegc.io/hold'],
          deleting: true,
        }),
      );
    if (ownerGone) s.ev('DELETED', cm('owner', 'O', 13));
    // The GC's DELETE arrives at about revision 20 and changes nothing.
    return s.probe(1995, 20).probe(2030, 20).bookmark(25);
  };
  const call = { ...del('dep', 'D', 20), received: 2000, completed: 2010 };
  const alive = build(false);
  const r = resolveDeletes(alive.history, alive.clock, [call]);
  expect(r[0]?.status).toBe('window');
  expect(checkI1(alive.history, r, GC, [call])).toHaveLength(1);
  const gone = build(true);
  expect(
    checkI1(gone.history, resolveDeletes(gone.history, gone.clock, [call]), GC, [call]),
  ).toEqual([]);
});

describe('I2 and I3', () => {
  test('I2 flags an object whose owners are all gone; not one with a live owner', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('keep', 'K', 11))
      .ev('ADDED', cm('dep', 'D', 12, { owners: [ref('owner', 'O')] }))
      .ev('ADDED', cm('dep2', 'D2', 13, { owners: [ref('owner', 'O'), ref('keep', 'K')] }))
      .ev('ADDED', cm('fake', 'F', 14, { owners: [ref('never', 'N')] }))
      .ev('DELETED', cm('owner', 'O', 15));
    const v = checkI2(s.history, { stoppedAt: 1600, checkedAt: 61_600 });
    expect(v.map((x) => x.object).sort()).toEqual([
      'configmaps soak-a/dep (uid D)',
      'configmaps soak-a/fake (uid F)',
    ]);
  });

  test('I3 flags a GC finalizer left and a dependent that still references its Orphan-deleted owner', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('ADDED', cm('ok', 'K', 12, { owners: [ref('owner', 'O')] }))
      .ev('MODIFIED', cm('owner', 'O', 13, { deleting: true, finalizers: ['orphan'] }))
      .ev('MODIFIED', cm('ok', 'K', 14))
      .ev('DELETED', cm('owner', 'O', 15, { deleting: true, finalizers: ['orphan'] }))
      .ev('ADDED', cm('stuck', 'S', 16, { deleting: true, finalizers: ['foregroundDeletion'] }));
    const v = checkI3(s.history, [], GC, []);
    expect(v.map((x) => `${x.object}: ${x.summary}`).sort()).toEqual([
      expect.stringMatching(/soak-a\/dep .*still references ConfigMap owner/),
      expect.stringMatching(/soak-a\/stuck .*foregroundDeletion/),
    ]);
  });

  test('I3 flags the GC deleting a dependent whose only owner was deleted with Orphan', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('MODIFIED', cm('owner', 'O', 12, { deleting: true, finalizers: ['orphan'] }))
      .ev('DELETED', cm('owner', 'O', 13, { deleting: true, finalizers: ['orphan'] }))
      .ev('DELETED', cm('dep', 'D', 14, { owners: [ref('owner', 'O')] }))
      .probe(3000, 14);
    const calls = [del('dep', 'D', 14)];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    const v = checkI3(s.history, resolved, GC, calls);
    expect(v).toHaveLength(1);
    expect(v[0]?.summary).toContain('deleted with Orphan');
    // Deleted while the owner was still in foreground deletion, before it switched to Orphan: fine.
    const early = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O', true)] }))
      .ev('MODIFIED', cm('owner', 'O', 12, { deleting: true, finalizers: ['foregroundDeletion'] }))
      .ev('DELETED', cm('dep', 'D', 13, { owners: [ref('owner', 'O', true)] }))
      .ev('MODIFIED', cm('owner', 'O', 14, { deleting: true, finalizers: ['orphan'] }))
      .ev('DELETED', cm('owner', 'O', 15, { deleting: true, finalizers: ['orphan'] }))
      .probe(3000, 15);
    const earlyCalls = [del('dep', 'D', 13)];
    const earlyResolved = resolveDeletes(early.history, early.clock, earlyCalls);
    expect(checkI3(early.history, earlyResolved, GC, earlyCalls)).toEqual([]);
    expect(checkI1(early.history, earlyResolved, GC, earlyCalls)).toEqual([]);
    // The workload deleting it itself is fine.
    const mine = [del('dep', 'D', 14, 'soak')];
    expect(checkI3(s.history, resolveDeletes(s.history, s.clock, mine), GC, mine)).toEqual([]);
  });
});

describe('I5', () => {
  test('flags RSS growth above 10% within one lifetime and unexplained exits', () => {
    const mb = 1048576;
    const v = checkI5(
      [
        { process: 'r0', pid: 1, quiet: 0, at: 1, rssBytes: 100 * mb },
        { process: 'r0', pid: 1, quiet: 1, at: 2, rssBytes: 105 * mb },
        { process: 'r0', pid: 1, quiet: 2, at: 3, rssBytes: 120 * mb },
        { process: 'r1', pid: 2, quiet: 0, at: 1, rssBytes: 100 * mb },
        { process: 'r1', pid: 3, quiet: 1, at: 2, rssBytes: 200 * mb },
      ],
      [
        { process: 'r1', pid: 2, at: 1, code: null, signal: 'SIGKILL', cause: 'gc-kill' },
        { process: 'r2', pid: 4, at: 1, code: 1, signal: null, cause: undefined },
      ],
    );
    expect(v.map((x) => x.object)).toEqual(['r0 pid 1', 'r2 pid 4']);
  });
});

describe('odd but legal references (issue 32): each reference judged by kind, name, namespace and UID', () => {
  const clusterRole = (
    name: string,
    uid: string,
    rv: number,
    owners?: OwnerReference[],
  ): KubeObject => ({
    metadata: { name, uid, resourceVersion: String(rv), ownerReferences: owners },
  });
  const crRef = (name: string, uid: string): OwnerReference => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    name,
    uid,
  });
  const gcDelete = (s: Scenario, name: string, uid: string, rev: number, ns = 'soak-a') => {
    const calls = [{ ...del(name, uid, rev), namespace: ns }];
    return { calls, resolved: resolveDeletes(s.history, s.clock, calls) };
  };
  const i2 = (s: Scenario): string[] =>
    checkI2(s.history, { stoppedAt: 1600, checkedAt: 61_600 }).map((v) => v.object);

  test('two references with one UID, the live owner and a name that does not exist: the live one holds', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O'), ref('bogus', 'O')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [ref('owner', 'O'), ref('bogus', 'O')] }))
      .probe(2000, 12);
    const { calls, resolved } = gcDelete(s, 'dep', 'D', 12);
    expect(checkI1(s.history, resolved, GC, calls).map((v) => v.summary)).toEqual([
      expect.stringContaining('owner ConfigMap owner'),
    ]);
    const kept = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('bogus', 'O'), ref('owner', 'O')] }));
    expect(i2(kept)).toEqual([]);
  });

  test('references under a live UID that name another object (name or kind) are absent', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', { metadata: { ...cm('sec', 'S', 11).metadata } }, SECRET)
      // Both names bogus, one UID (the live ConfigMap's).
      .ev('ADDED', cm('two', 'T', 12, { owners: [ref('bogus1', 'O'), ref('bogus2', 'O')] }))
      // A ConfigMap reference carrying the Secret's UID and name: the kind does not match.
      .ev('ADDED', cm('kind', 'K', 13, { owners: [ref('sec', 'S')] }))
      .ev('DELETED', cm('two', 'T', 14, { owners: [ref('bogus1', 'O'), ref('bogus2', 'O')] }))
      .ev('DELETED', cm('kind', 'K', 15, { owners: [ref('sec', 'S')] }))
      .probe(2000, 15);
    const calls = [del('two', 'T', 14), del('kind', 'K', 15)];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(resolved.map((d) => d.status)).toEqual(['exact', 'exact']);
    expect(checkI1(s.history, resolved, GC, calls)).toEqual([]);
    const left = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10))
      .ev('ADDED', cm('two', 'T', 12, { owners: [ref('bogus1', 'O'), ref('bogus2', 'O')] }));
    expect(i2(left)).toEqual(['configmaps soak-a/two (uid T)']);
  });

  test('a self-reference is a live owner: never collected, its deletion flagged', () => {
    const s = new Scenario()
      .ev('ADDED', cm('me', 'M', 10, { owners: [ref('me', 'M')] }))
      .ev('DELETED', cm('me', 'M', 11, { owners: [ref('me', 'M')] }))
      .probe(2000, 11);
    const { calls, resolved } = gcDelete(s, 'me', 'M', 11);
    expect(checkI1(s.history, resolved, GC, calls)).toHaveLength(1);
    const kept = new Scenario().ev('ADDED', cm('me', 'M', 10, { owners: [ref('me', 'M')] }));
    expect(i2(kept)).toEqual([]);
  });

  test('a cluster-scoped owner holds a namespaced dependent', () => {
    const s = new Scenario()
      .ev('ADDED', clusterRole('a,b=c\\d e', 'R', 10), CLUSTERROLE)
      .ev('ADDED', cm('dep', 'D', 11, { owners: [crRef('a,b=c\\d e', 'R')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [crRef('a,b=c\\d e', 'R')] }))
      .bookmark(12, CLUSTERROLE) // the ClusterRoles' watch has seen past the delete
      .probe(2000, 12);
    const { calls, resolved } = gcDelete(s, 'dep', 'D', 12);
    expect(checkI1(s.history, resolved, GC, calls)).toHaveLength(1);
    const kept = new Scenario()
      .ev('ADDED', clusterRole('a,b=c\\d e', 'R', 10), CLUSTERROLE)
      .ev('ADDED', cm('dep', 'D', 11, { owners: [crRef('a,b=c\\d e', 'R')] }));
    expect(i2(kept)).toEqual([]);
  });

  test('a cluster-scoped dependent naming a namespaced kind is never collected: not awaited, its deletion flagged', () => {
    const s = new Scenario()
      .ev('ADDED', clusterRole('cr', 'R', 10, [ref('gone', 'G')]), CLUSTERROLE)
      .ev('DELETED', clusterRole('cr', 'R', 11, [ref('gone', 'G')]), CLUSTERROLE)
      .probe(2000, 11);
    const calls = [{ ...del('cr', 'R', 11), resource: 'clusterroles', namespace: '' }];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(resolved[0]?.status).toBe('exact');
    expect(checkI1(s.history, resolved, GC, calls).map((v) => v.summary)).toEqual([
      expect.stringContaining('upstream never collects it'),
    ]);
    const left = new Scenario().ev(
      'ADDED',
      clusterRole('cr', 'R', 10, [ref('gone', 'G'), crRef('gone-too', 'H')]),
      CLUSTERROLE,
    );
    expect(i2(left)).toEqual([]);
  });

  test('a cross-namespace reference is absent', () => {
    const s = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10, { ns: 'soak-b' }))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }))
      .ev('DELETED', cm('dep', 'D', 12, { owners: [ref('owner', 'O')] }))
      .probe(2000, 12);
    const { calls, resolved } = gcDelete(s, 'dep', 'D', 12);
    expect(checkI1(s.history, resolved, GC, calls)).toEqual([]);
    const left = new Scenario()
      .ev('ADDED', cm('owner', 'O', 10, { ns: 'soak-b' }))
      .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O')] }));
    expect(i2(left)).toEqual(['configmaps soak-a/dep (uid D)']);
  });

  test('I3: after an Orphan deletion, a reference that shares the owner UID under another name is not the owner’s', () => {
    const run = (after: OwnerReference[]) =>
      checkI3(
        new Scenario()
          .ev('ADDED', cm('owner', 'O', 10))
          .ev('ADDED', cm('dep', 'D', 11, { owners: [ref('owner', 'O'), ref('bogus', 'O')] }))
          .ev('MODIFIED', cm('owner', 'O', 12, { deleting: true, finalizers: ['orphan'] }))
          .ev('MODIFIED', cm('dep', 'D', 13, { owners: after }))
          .ev('DELETED', cm('owner', 'O', 14, { deleting: true, finalizers: ['orphan'] })).history,
        [],
        GC,
        [],
      ).map((v) => v.summary);
    expect(run([ref('bogus', 'O')])).toEqual([]);
    expect(run([ref('owner', 'O')])).toEqual([expect.stringContaining('still references')]);
  });
});

describe('aggregated owners (issue 32): AggWidgets recorded in etcd revisions around the soak’s writes', () => {
  // Their own resourceVersions (from 10^12) never reach the History: the soak records each of
  // its writes at an etcd revision it reads (aggregated.ts), R1 after a create, R2 before a delete.
  const aggRef = (name: string, uid: string): OwnerReference => ({
    apiVersion: `${AGGREGATED.group}/v1`,
    kind: 'AggWidget',
    name,
    uid,
  });
  const owner: SyntheticObject = { namespace: 'soak-a', name: 'agg-x', uid: 'A' };
  const dep = (rev: number): KubeObject => cm('dep', 'D', rev, { owners: [aggRef('agg-x', 'A')] });

  /** An AggWidget created with etcd at R1 = 10, its dependent at 11, the owner deleted with etcd at `r2`. */
  async function scenario(r2: number, depDeletedAt?: number): Promise<Scenario> {
    const s = new Scenario();
    let etcd = 10;
    const stream = new SyntheticStream(s.history, AGGREGATED, () => Promise.resolve(etcd));
    await stream.created(() => Promise.resolve(owner));
    s.ev('ADDED', dep(11));
    if (depDeletedAt !== undefined && depDeletedAt < r2) s.ev('DELETED', dep(depDeletedAt));
    etcd = r2;
    await stream.deleted(owner, () => Promise.resolve());
    if (depDeletedAt !== undefined && depDeletedAt >= r2) s.ev('DELETED', dep(depDeletedAt));
    return s.probe(10_000, 100);
  }

  const i1 = (s: Scenario, rev: number): string[] => {
    const calls = [del('dep', 'D', rev)];
    const resolved = resolveDeletes(s.history, s.clock, calls);
    expect(resolved[0]?.status).toBe('exact');
    return checkI1(s.history, resolved, GC, calls).map((v) => v.summary);
  };

  test('a GC delete of its dependent between R1 and R2 is I1', async () => {
    expect(i1(await scenario(14, 12), 12)).toEqual([
      expect.stringContaining(
        'its owner AggWidget agg-x (uid A) existed and was not being deleted',
      ),
    ]);
  });

  test('a GC delete of its dependent at R2 or later is not', async () => {
    expect(i1(await scenario(14, 14), 14)).toEqual([]);
    expect(i1(await scenario(14, 15), 15)).toEqual([]);
  });

  test('while it lives, a delete after its last write is judged only once a bookmark covers it', async () => {
    const s = new Scenario();
    let etcd = 10;
    const stream = new SyntheticStream(s.history, AGGREGATED, () => Promise.resolve(etcd));
    await stream.created(() => Promise.resolve(owner));
    s.ev('ADDED', dep(11)).ev('DELETED', dep(12)).probe(10_000, 100);
    expect(i1(s, 12)).toEqual([]);
    etcd = 13;
    await stream.bookmark();
    expect(i1(s, 12)).toHaveLength(1);
  });

  test('a dependent left after its deletion is I2; one of a live AggWidget is not', async () => {
    const i2 = (s: Scenario): string[] =>
      checkI2(s.history, { stoppedAt: 1600, checkedAt: 61_600 }).map((v) => v.object);
    expect(i2(await scenario(14))).toEqual(['configmaps soak-a/dep (uid D)']);
    const live = new Scenario();
    const stream = new SyntheticStream(live.history, AGGREGATED, () => Promise.resolve(10));
    await stream.created(() => Promise.resolve(owner));
    live.ev('ADDED', dep(11));
    expect(i2(live)).toEqual([]);
  });
});
