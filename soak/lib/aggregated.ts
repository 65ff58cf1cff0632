// Owners served by an aggregated API (issue 32, item 6: "an APIService that flaps", "an
// aggregated API without field selectors"): AggWidgets of `agg.soak.kubegc.io`, held in memory
// by the aggregated server of test/support/aggregated-api.ts, which refuses every field
// selector (a GC must read them by GET), own workload objects (shapes.ts) while the APIService
// now and then leaves discovery or its server answers 503 to everything.
//
// The oracle cannot learn their history the usual way: their resourceVersions count on that
// server's own clock (from 10^12) and mean nothing next to the etcd revisions every other state
// in the History is keyed by. But the soak is their only writer (no GC writes an object that has
// neither owner references nor GC finalizers, and the workload's other helpers never touch
// them), so it records them itself, in etcd revisions, bracketing each write with a read of
// etcd's revision (SyntheticStream).
import type { Cluster } from '../../cluster/controlplane.ts';
import { AggregatedApi } from '../../test/support/aggregated-api.ts';
import type { ServiceAccountRef } from '../../test/support/service-account.ts';
import type { History, RevisionClock } from './history.ts';
import { KubeError, eventually, waitUntil, type Kube, type WatchEvent } from './kube.ts';
import type { Prng } from './prng.ts';
import { AGGREGATED, RBAC_GROUP, type ResourceDef } from './resources.ts';
import type { Obj } from './workload.ts';

/** Runs async sections one at a time, in call order. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(section: () => Promise<T>): Promise<T> {
    const result = this.tail.then(section);
    // The next section waits for this one to settle, whatever its outcome.
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/** One object of a synthetic stream: what its ADDED and DELETED events carry. */
export interface SyntheticObject {
  namespace: string;
  name: string;
  uid: string;
}

/**
 * The History of a resource whose only writer is the soak, in etcd revisions: every write is
 * made under one lock, together with a read of etcd's current revision, so that no write is
 * ever in flight unrecorded while the lock is free.
 *
 * - A create is recorded as ADDED at the revision R1 read right after it answered: the object
 *   certainly exists from R1 until it is deleted. Counting it absent before R1 (an exact
 *   creation) is harmless: nothing can refer to it before its UID is known (the create's
 *   answer), and a dependent created afterwards is written at a revision above R1.
 * - A delete is recorded as DELETED at the revision R2 read before it starts: the object
 *   certainly existed through R2 - 1. From R2 on it counts as gone, early by the time the delete
 *   takes: conservative for I1 (a GC delete of a dependent at R2 or later is judged as if the
 *   owner were gone, never flagged for it), and I2's 60 s begin that much early (a delete takes
 *   milliseconds).
 * - A bookmark at the current revision, under the lock: every recorded state holds through it,
 *   since nothing is being written. Without bookmarks the last state of a live object would be
 *   certain only through the last write of the resource, and the oracle would judge nothing
 *   after it.
 */
export class SyntheticStream {
  private readonly lock = new Mutex();
  private readonly history: History;
  private readonly r: ResourceDef;
  private readonly revision: () => Promise<number>;

  constructor(history: History, r: ResourceDef, revision: () => Promise<number>) {
    this.history = history;
    this.r = r;
    this.revision = revision;
  }

  private emit(type: WatchEvent['type'], rev: number, o?: SyntheticObject): void {
    const metadata = o
      ? { name: o.name, namespace: o.namespace, uid: o.uid, resourceVersion: String(rev) }
      : { name: '', uid: '', resourceVersion: String(rev) };
    this.history.event(this.r, { type, object: { metadata } }, Date.now());
  }

  /** Starts the stream with an empty list at the current revision: the soak has written nothing yet. */
  async start(): Promise<void> {
    await this.lock.run(async () =>
      this.history.list(this.r, await this.revision(), [], Date.now()),
    );
  }

  /** Runs `write` (a create), then records its object ADDED at the revision read after it answered. */
  created<T extends SyntheticObject>(write: () => Promise<T>): Promise<T> {
    return this.lock.run(async () => {
      const o = await write();
      this.emit('ADDED', await this.revision(), o);
      return o;
    });
  }

  /** Records `o` DELETED at the current revision, then runs `write` (the delete). */
  deleted(o: SyntheticObject, write: () => Promise<void>): Promise<void> {
    return this.lock.run(async () => {
      this.emit('DELETED', await this.revision(), o);
      await write();
    });
  }

  /** A bookmark at the current revision, once no write is in flight. */
  bookmark(): Promise<void> {
    return this.lock.run(async () => this.emit('BOOKMARK', await this.revision()));
  }

  /** Runs `section` with no write of the resource in flight or starting meanwhile. */
  exclusive<T>(section: () => Promise<T>): Promise<T> {
    return this.lock.run(section);
  }
}

/** The grant kubegc needs for a resource whose server refuses field selectors (docs/security.md). */
export const AGGREGATED_GET_GRANT = 'kubegc-soak-aggregated-get';

/** Lets `sa` GET the AggWidgets (only that: deploy/'s ClusterRole has no `get`). */
export async function grantAggregatedGet(admin: Kube, sa: ServiceAccountRef): Promise<void> {
  const rbac = `/apis/${RBAC_GROUP}/v1`;
  const grants: [string, object][] = [
    [
      'clusterroles',
      {
        rules: [
          { apiGroups: [AGGREGATED.group], resources: [AGGREGATED.resource], verbs: ['get'] },
        ],
      },
    ],
    [
      'clusterrolebindings',
      {
        roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: AGGREGATED_GET_GRANT },
        subjects: [{ kind: 'ServiceAccount', namespace: sa.namespace, name: sa.name }],
      },
    ],
  ];
  for (const [plural, spec] of grants) {
    const path = `${rbac}/${plural}`;
    const res = await admin.raw('POST', path, {
      body: { metadata: { name: AGGREGATED_GET_GRANT }, ...spec },
    });
    if (res.status !== 201 && res.status !== 409)
      throw new KubeError('POST', path, res.status, res.text);
  }
}

/** At most one flap a minute (as the Gadget CRD's): the group is away for a moment, not for good. */
const FLAP_EVERY_MS = 60_000;

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface AggregatedOwnersOptions {
  cluster: Cluster;
  history: History;
  clock: RevisionClock;
  /** etcd's current revision. */
  revision: () => Promise<number>;
  log: (line: string) => void;
}

/** The soak's AggWidgets: created, deleted (Background) and flapped, each write recorded in the History. */
export class AggregatedOwners {
  /** What was done (for the report's operations table). */
  readonly counts = new Map<string, number>();
  private readonly api: AggregatedApi;
  private readonly stream: SyntheticStream;
  private readonly log: (line: string) => void;
  /** Live owners whose scenario left them alive: a flap may delete one. */
  private readonly spare = new Map<string, Obj>();
  /** Recorded DELETED, and not gone yet (every retry failed): deleted again before the oracle runs. */
  private readonly pending = new Map<string, Obj>();
  private flapping = false;
  private lastFlap = 0;

  private constructor(api: AggregatedApi, stream: SyntheticStream, log: (line: string) => void) {
    this.api = api;
    this.stream = stream;
    this.log = log;
  }

  /** Starts and registers the aggregated server, and starts the AggWidgets' stream in the History. */
  static async start(o: AggregatedOwnersOptions): Promise<AggregatedOwners> {
    const api = await AggregatedApi.start(o.cluster, {
      group: AGGREGATED.group,
      version: AGGREGATED.version,
      resource: AGGREGATED.resource,
      kind: AGGREGATED.kind,
      fieldSelectors: 'refuse',
    });
    // Each read of the revision ties the clock too (a probe: sent before, answered after).
    const revision = async (): Promise<number> => {
      let rev = 0;
      await waitUntil(
        "etcd's revision",
        async () => {
          const sent = Date.now();
          rev = await o.revision();
          o.clock.probe(sent, Date.now(), rev);
          return true;
        },
        30_000,
        250,
      );
      return rev;
    };
    const stream = new SyntheticStream(o.history, AGGREGATED, revision);
    await stream.start();
    return new AggregatedOwners(api, stream, o.log);
  }

  private count(op: string): void {
    this.counts.set(op, (this.counts.get(op) ?? 0) + 1);
  }

  private stored(o: Obj): boolean {
    return this.api.stored(o.ns, o.name)?.metadata.uid === o.uid;
  }

  /** Creates an AggWidget in `ns` (through kube-apiserver, as the cluster admin). */
  async create(p: Prng, ns: string): Promise<Obj> {
    const name = `agg-${p.suffix(6)}`;
    const made = await this.stream.created(async () => {
      try {
        const ref = await this.api.create(ns, name);
        return { namespace: ns, name, uid: ref.uid };
      } catch (err) {
        // Applied with its answer lost (an apiserver restart)? The server's own memory says.
        const uid = this.api.stored(ns, name)?.metadata.uid;
        if (uid === undefined) throw err;
        return { namespace: ns, name, uid };
      }
    });
    this.count('shape: AggWidget created');
    return { r: AGGREGATED, ns, name, uid: made.uid };
  }

  /** Deletes `o` (Background: the server removes it at once, it has no finalizers). */
  async delete(o: Obj): Promise<void> {
    this.spare.delete(o.uid);
    this.pending.set(o.uid, o);
    await this.stream.deleted({ namespace: o.ns, name: o.name, uid: o.uid }, () =>
      this.untilGone(o, 60_000),
    );
    this.count('shape: AggWidget deleted');
  }

  /**
   * Deletes `o` until it is gone: the History already says so. A failed request (an apiserver
   * restart, a 503) is tried again; the server's memory, not a read through kube-apiserver, says
   * when it is done.
   */
  private async untilGone(o: Obj, timeoutMs: number): Promise<void> {
    await waitUntil(
      `AggWidget ${o.ns}/${o.name} to go`,
      async () => {
        if (this.stored(o))
          await this.api.delete(o.ns, o.name, 'Background').catch(() => undefined);
        return !this.stored(o);
      },
      timeoutMs,
      1000,
    );
    this.pending.delete(o.uid);
  }

  /** `o` stays after its scenario: alive to the end, unless a flap deletes it. */
  keep(o: Obj): void {
    this.spare.set(o.uid, o);
  }

  /** A bookmark at the current revision (periodically, and before the oracle runs). */
  bookmark(): Promise<void> {
    return this.stream.bookmark();
  }

  /**
   * The group goes away for a while: the APIService deleted and created again (the group leaves
   * discovery), or the server answering 503 to everything for a few seconds (it stays in
   * discovery, stale). Half the time a spare owner is deleted first while the GC's watches are
   * held, so that the GC learns of it only once the group is back. At most one flap at a time,
   * at most one a minute; no AggWidget is written meanwhile (nor could be).
   */
  async flap(p: Prng): Promise<void> {
    if (this.flapping || Date.now() - this.lastFlap < FLAP_EVERY_MS) return;
    this.flapping = true;
    try {
      const victims = [...this.spare.values()];
      if (victims.length && p.chance(0.5)) {
        this.api.holdWatches();
        await this.delete(p.pick(victims));
        this.count('shape: AggWidget deleted with the watches held');
      }
      await this.stream.exclusive(async () => {
        if (p.chance(0.5)) {
          await this.api.unregister();
          this.count('shape: APIService deleted');
          // Some spells span a discovery round of the GCs (30 s for both).
          await pause(p.int(5_000, 40_000));
          await this.api.register();
          this.count('shape: APIService created again');
        } else {
          this.api.setAvailable(false);
          this.count('shape: aggregated API unavailable');
          await pause(p.int(3_000, 15_000));
          this.api.setAvailable(true);
          await waitUntil(
            'the aggregated API in discovery',
            () => this.api.inDiscovery(),
            90_000,
            500,
          );
          this.count('shape: aggregated API available again');
        }
      });
    } finally {
      this.lastFlap = Date.now();
      // Whatever happened (an apiserver restart in the middle), the group comes back.
      await this.ensureBack().finally(() => {
        this.flapping = false;
      });
    }
  }

  /**
   * The group served again (available, registered, watches released) and every AggWidget
   * recorded deleted really gone: before the workload's last phase ends, so that a GC can
   * collect what it must within I2's 60 s.
   */
  async ensureBack(timeoutMs = 180_000): Promise<void> {
    await this.stream.exclusive(async () => {
      this.api.setAvailable(true);
      this.api.releaseWatches();
      if (!(await eventually(() => this.api.inDiscovery(), 30_000, 500))) {
        // An unregister cut short: register() deletes and creates the APIService again.
        this.log('the aggregated API is not in discovery: registering it again');
        await waitUntil(
          'the aggregated API registered again',
          async () => {
            await this.api.register();
            return true;
          },
          timeoutMs,
          2000,
        );
      }
    });
    for (const o of [...this.pending.values()]) await this.untilGone(o, timeoutMs);
  }

  /** Unregisters the group (APIService and Service) and stops the server. */
  close(): Promise<void> {
    return this.api.close();
  }
}
