// The soak's own record of every object it touches, independent of kubegc:
// for each object (by UID) the states it went through, each with the etcd
// revision it started at (resourceVersions are etcd revisions, comparable
// across resources) and the revision through which it certainly held.
//
// A watch delivers every change, so a state holds until the next event. A
// broken watch that has to re-list (410 Gone, apiserver restart) loses the
// changes between the last revision it saw and the list's: the record keeps
// that gap, and a state is only certain up to the gap; an object missing from
// the re-list was deleted at an unknown revision inside it. Queries answer
// 'unknown' there, and the oracle never flags on an unknown.
//
// `History` and `RevisionClock` are pure (unit-tested); `Recorder` runs the
// list/watch loops that feed them.
import type { Kube, KubeObject, ObjectList, WatchEvent } from './kube.ts';
import { collectionPath, groupOf, namespacedKind, type ResourceDef } from './resources.ts';

export interface Ref {
  uid: string;
  kind: string;
  name: string;
  apiVersion: string;
  block: boolean;
  controller: boolean;
}

export interface Snapshot {
  deleting: boolean;
  finalizers: string[];
  refs: Ref[];
}

export interface Segment {
  /** Revision at which this state started (the object's resourceVersion then). */
  from: number;
  /** The state certainly held through this revision (an event or a list showed it). */
  knownThrough: number;
  /** undefined: the object is gone. */
  snap: Snapshot | undefined;
  /** Seen on a watch (the change is known to have happened exactly at `from`). */
  viaWatch: boolean;
  /** Local time (ms since the epoch) at which the state was first seen. */
  seenAt: number;
  /** A re-list found it gone: it was deleted somewhere after this revision and by `from`. */
  goneAfter?: number;
}

export interface ObjectHistory {
  uid: string;
  resource: string;
  group: string;
  kind: string;
  namespace: string;
  name: string;
  segments: Segment[];
  /** First seen as ADDED on a watch: it did not exist before segments[0].from. */
  createdExact: boolean;
}

export type StateAt =
  | { kind: 'exists'; snap: Snapshot; segment: Segment }
  | { kind: 'gone'; segment: Segment }
  | { kind: 'absent' }
  | { kind: 'unknown'; why: string };

interface Stream {
  resource: string;
  /** Open intervals (a, b) of revisions a watch may have missed. */
  gaps: [number, number][];
  coveredThrough: number;
  started: boolean;
  relists: number;
}

function snapshotOf(obj: KubeObject): Snapshot {
  const m = obj.metadata;
  return {
    deleting: Boolean(m.deletionTimestamp),
    finalizers: [...(m.finalizers ?? [])].sort(),
    refs: (m.ownerReferences ?? []).map((r) => ({
      uid: r.uid,
      kind: r.kind,
      name: r.name,
      apiVersion: r.apiVersion,
      block: r.blockOwnerDeletion === true,
      controller: r.controller === true,
    })),
  };
}

function sameSnap(a: Snapshot, b: Snapshot): boolean {
  return (
    a.deleting === b.deleting &&
    a.finalizers.join(',') === b.finalizers.join(',') &&
    JSON.stringify(a.refs) === JSON.stringify(b.refs)
  );
}

export function describeSnap(s: Snapshot | undefined): string {
  if (!s) return 'gone';
  const refs = s.refs
    .map(
      (r) => `${r.apiVersion} ${r.kind}/${r.name}(${r.uid.slice(0, 8)}${r.block ? ',block' : ''})`,
    )
    .join(' ');
  return `${s.deleting ? 'DELETING ' : ''}finalizers=[${s.finalizers.join(',')}] owners=[${refs}]`;
}

export class History {
  readonly objects = new Map<string, ObjectHistory>();
  private readonly streams = new Map<string, Stream>();
  private readonly byResource = new Map<string, Set<string>>();
  private readonly keep: (obj: KubeObject) => boolean;

  /** `keep` filters what is recorded (the soak's namespaces). */
  constructor(keep: (obj: KubeObject) => boolean = () => true) {
    this.keep = keep;
  }

  private stream(resource: string): Stream {
    let s = this.streams.get(resource);
    if (!s) {
      s = { resource, gaps: [], coveredThrough: 0, started: false, relists: 0 };
      this.streams.set(resource, s);
    }
    return s;
  }

  /** Everything recorded, for --dump. */
  toJSON(): unknown {
    return { streams: [...this.streams.values()], objects: [...this.objects.values()] };
  }

  /** A history read back from --dump output (Infinity was written as null). */
  static fromJSON(json: { streams: Stream[]; objects: ObjectHistory[] }): History {
    const h = new History();
    for (const s of json.streams) h.streams.set(s.resource, s);
    for (const rec of json.objects) {
      for (const seg of rec.segments) seg.knownThrough ??= Number.POSITIVE_INFINITY;
      h.objects.set(rec.uid, rec);
      const set = h.byResource.get(rec.resource) ?? new Set<string>();
      set.add(rec.uid);
      h.byResource.set(rec.resource, set);
    }
    return h;
  }

  streamStats(): { resource: string; relists: number; coveredThrough: number }[] {
    return [...this.streams.values()].map((s) => ({
      resource: s.resource,
      relists: s.relists,
      coveredThrough: s.coveredThrough,
    }));
  }

  private record(r: ResourceDef, obj: KubeObject, createdExact: boolean): ObjectHistory {
    const uid = obj.metadata.uid;
    let rec = this.objects.get(uid);
    if (!rec) {
      rec = {
        uid,
        resource: r.resource,
        group: r.group,
        kind: r.kind,
        namespace: obj.metadata.namespace ?? '',
        name: obj.metadata.name,
        segments: [],
        createdExact,
      };
      this.objects.set(uid, rec);
      let set = this.byResource.get(r.resource);
      if (!set) this.byResource.set(r.resource, (set = new Set()));
      set.add(uid);
    }
    return rec;
  }

  private observe(
    rec: ObjectHistory,
    obj: KubeObject,
    from: number,
    knownAt: number,
    viaWatch: boolean,
    now: number,
  ): void {
    const snap = snapshotOf(obj);
    const last = rec.segments[rec.segments.length - 1];
    if (last?.snap && sameSnap(last.snap, snap) && (viaWatch || last.from === from)) {
      last.knownThrough = Math.max(last.knownThrough, knownAt);
      return;
    }
    if (last && !last.snap) return; // UIDs never come back
    rec.segments.push({ from, knownThrough: knownAt, snap, viaWatch, seenAt: now });
  }

  /** A (re-)list of a resource at revision `listRev`. */
  list(r: ResourceDef, listRev: number, items: KubeObject[], now: number): void {
    const s = this.stream(r.resource);
    const coveredBefore = s.coveredThrough;
    if (s.started && listRev > s.coveredThrough + 1) {
      s.gaps.push([s.coveredThrough, listRev]);
      s.relists++;
    }
    const seen = new Set<string>();
    for (const item of items) {
      if (!this.keep(item)) continue;
      seen.add(item.metadata.uid);
      const rec = this.record(r, item, false);
      this.observe(rec, item, Number(item.metadata.resourceVersion), listRev, false, now);
    }
    if (s.started) {
      for (const uid of this.byResource.get(r.resource) ?? []) {
        if (seen.has(uid)) continue;
        const rec = this.objects.get(uid);
        const last = rec?.segments[rec.segments.length - 1];
        if (!rec || !last?.snap) continue;
        rec.segments.push({
          from: listRev,
          knownThrough: Number.POSITIVE_INFINITY,
          snap: undefined,
          viaWatch: false,
          seenAt: now,
          goneAfter: Math.max(coveredBefore, last.knownThrough),
        });
      }
    }
    s.started = true;
    s.coveredThrough = Math.max(s.coveredThrough, listRev);
  }

  event(r: ResourceDef, ev: WatchEvent, now: number): void {
    const s = this.stream(r.resource);
    if (ev.type === 'BOOKMARK') {
      s.coveredThrough = Math.max(s.coveredThrough, Number(ev.object.metadata.resourceVersion));
      return;
    }
    if (ev.type === 'ERROR') return;
    const obj = ev.object;
    const rev = Number(obj.metadata.resourceVersion);
    s.coveredThrough = Math.max(s.coveredThrough, rev);
    if (!this.keep(obj)) return;
    const rec = this.record(r, obj, ev.type === 'ADDED');
    if (ev.type === 'DELETED') {
      const last = rec.segments[rec.segments.length - 1];
      if (last && !last.snap) return;
      rec.segments.push({
        from: rev,
        knownThrough: Number.POSITIVE_INFINITY,
        snap: undefined,
        viaWatch: true,
        seenAt: now,
      });
      return;
    }
    this.observe(rec, obj, rev, rev, true, now);
  }

  /** The revision through which segment `i` of `rec` certainly held. */
  certainThrough(rec: ObjectHistory, i: number): number {
    const seg = rec.segments[i];
    if (!seg) return Number.NEGATIVE_INFINITY;
    if (!seg.snap) return Number.POSITIVE_INFINITY;
    const s = this.stream(rec.resource);
    const next = rec.segments[i + 1];
    const k = seg.knownThrough;
    let limit = next ? next.from - 1 : s.coveredThrough;
    for (const [a, b] of s.gaps) {
      if (b - a < 2) continue;
      if (a + 1 <= limit && b - 1 >= k + 1) limit = Math.min(limit, Math.max(a, k));
    }
    return Math.max(k, limit);
  }

  /** Index of the segment in force at revision `rev` (-1: before the first). */
  private indexAt(rec: ObjectHistory, rev: number): number {
    let lo = 0;
    let hi = rec.segments.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((rec.segments[mid] as Segment).from <= rev) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  stateAt(uid: string, rev: number): StateAt {
    const rec = this.objects.get(uid);
    if (!rec) return { kind: 'unknown', why: 'never observed' };
    return this.stateOf(rec, rev);
  }

  stateOf(rec: ObjectHistory, rev: number): StateAt {
    const i = this.indexAt(rec, rev);
    if (i < 0)
      return rec.createdExact
        ? { kind: 'absent' }
        : { kind: 'unknown', why: 'before it was first observed' };
    const seg = rec.segments[i] as Segment;
    if (!seg.snap) return { kind: 'gone', segment: seg };
    if (rev <= this.certainThrough(rec, i)) return { kind: 'exists', snap: seg.snap, segment: seg };
    return { kind: 'unknown', why: `not observed between ${seg.knownThrough} and ${rev}` };
  }

  /** The same segment certainly in force over all of [lo, hi], or undefined. */
  segmentOver(rec: ObjectHistory, lo: number, hi: number): Segment | undefined {
    const i = this.indexAt(rec, lo);
    const j = this.indexAt(rec, hi);
    if (i < 0 || i !== j) return undefined;
    const seg = rec.segments[i] as Segment;
    if (seg.snap && hi > this.certainThrough(rec, i)) return undefined;
    return seg;
  }

  /**
   * The revision at which the object started being deleted (deletionTimestamp
   * set) or went away without that, and whether that revision is exact.
   */
  deletionStart(
    rec: ObjectHistory,
  ): { rev: number; exact: boolean; before: Segment; after: Segment } | undefined {
    for (let i = 1; i < rec.segments.length; i++) {
      const seg = rec.segments[i] as Segment;
      const prev = rec.segments[i - 1] as Segment;
      if (!prev.snap || prev.snap.deleting) return undefined;
      if (seg.snap && !seg.snap.deleting) continue;
      const exact = seg.viaWatch && this.certainThrough(rec, i - 1) >= seg.from - 1;
      return { rev: seg.from, exact, before: prev, after: seg };
    }
    return undefined;
  }

  /** When the object went away, if it did. */
  gone(rec: ObjectHistory): Segment | undefined {
    const last = rec.segments[rec.segments.length - 1];
    return last && !last.snap ? last : undefined;
  }

  /** The object's latest known state (undefined: gone). */
  current(rec: ObjectHistory): Snapshot | undefined {
    return rec.segments[rec.segments.length - 1]?.snap;
  }

  live(): ObjectHistory[] {
    return [...this.objects.values()].filter((r) => this.current(r) !== undefined);
  }

  /**
   * Whether `owner` is the object `ref` (on `dep`) points to, as upstream's GC resolves
   * references: the reference's kind (and group), name and UID, and the dependent's namespace
   * for a namespaced owner (a cluster-scoped owner has none, and may own namespaced objects).
   * Each reference is judged on its own: another reference with the same UID, or the UID's
   * object under another name or kind, does not make it resolve. A reference to an object in
   * another namespace points to nothing; so does a cluster-scoped dependent's reference to a
   * namespaced kind (which upstream never collects: see neverCollected).
   */
  static refersTo(ref: Ref, dep: ObjectHistory, owner: ObjectHistory): boolean {
    return (
      owner.uid === ref.uid &&
      owner.kind === ref.kind &&
      owner.name === ref.name &&
      owner.group === groupOf(ref.apiVersion) &&
      (owner.namespace === dep.namespace || owner.namespace === '')
    );
  }

  /**
   * A cluster-scoped object with a reference to a namespaced kind: upstream's GC refuses to
   * decide on it (namespacedOwnerOfClusterScopedObjectErr, an OwnerRefInvalidNamespace event)
   * and never collects it, whatever its other references say.
   */
  static neverCollected(rec: ObjectHistory, refs: readonly Ref[]): boolean {
    return (
      rec.namespace === '' &&
      refs.some((r) => namespacedKind(groupOf(r.apiVersion), r.kind) === true)
    );
  }

  /** The UIDs of objects whose latest state has a reference to `uid`. */
  dependentsOf(uid: string): ObjectHistory[] {
    return this.live().filter((r) => this.current(r)?.refs.some((x) => x.uid === uid));
  }
}

/**
 * Bounds on "the etcd revision at wall-clock time t", from observations:
 * something seen by time t at revision r means rev(t) >= r; a request sent at
 * time t answered with revision r means rev(t) <= r (its header) or < r (a write).
 */
export class RevisionClock {
  private readonly lowT: number[] = [];
  private readonly lowR: number[] = [];
  private readonly upT: number[] = [];
  private readonly upR: number[] = [];
  private upSuffixMin: number[] | undefined;
  /** Upper bounds dropped because they contradicted what was seen by then. */
  dropped = 0;

  /** Seen (a watch event, a response) at time `t` with revision `rev`. */
  seen(t: number, rev: number): void {
    const n = this.lowT.length;
    if (n && (this.lowT[n - 1] as number) >= t) {
      // Same or earlier instant (clock granularity): keep the larger revision at the later time.
      this.lowR[n - 1] = Math.max(this.lowR[n - 1] as number, rev);
      return;
    }
    const prev = n ? (this.lowR[n - 1] as number) : 0;
    this.lowT.push(t);
    this.lowR.push(Math.max(prev, rev));
  }

  /** A request sent at `t` saw the store at revision `rev` or later wrote at `rev`. */
  sentBefore(t: number, rev: number): void {
    this.upT.push(t);
    this.upR.push(rev);
    this.upSuffixMin = undefined;
  }

  /** A read of the current revision: sent at `sent`, answered at `received`. */
  probe(sent: number, received: number, rev: number): void {
    this.sentBefore(sent, rev);
    this.seen(received, rev);
  }

  /** A write sent at `sent`, answered at `received`, that took effect at `rev`. */
  write(sent: number, received: number, rev: number): void {
    this.sentBefore(sent, rev - 1);
    this.seen(received, rev);
  }

  toJSON(): unknown {
    return { lowT: this.lowT, lowR: this.lowR, upT: this.upT, upR: this.upR };
  }

  static fromJSON(json: {
    lowT: number[];
    lowR: number[];
    upT: number[];
    upR: number[];
  }): RevisionClock {
    const c = new RevisionClock();
    c.lowT.push(...json.lowT);
    c.lowR.push(...json.lowR);
    json.upT.forEach((t, i) => c.sentBefore(t, json.upR[i] as number));
    return c;
  }

  /** rev(t) >= this. */
  lowerBound(t: number): number {
    let lo = 0;
    let hi = this.lowT.length - 1;
    let best = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((this.lowT[mid] as number) <= t) {
        best = this.lowR[mid] as number;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return best;
  }

  /** rev(t) <= this (Infinity when nothing was sent at or after t). */
  upperBound(t: number): number {
    if (!this.upSuffixMin) {
      // Points are not necessarily in time order (concurrent requests): sort once, and drop
      // any that contradict what was already seen by then (it cannot be a true bound).
      const order = this.upT
        .map((_, i) => i)
        .sort((a, b) => (this.upT[a] as number) - (this.upT[b] as number))
        .filter((i) => (this.upR[i] as number) >= this.lowerBound(this.upT[i] as number));
      this.dropped += this.upT.length - order.length;
      const ts = order.map((i) => this.upT[i] as number);
      const rs = order.map((i) => this.upR[i] as number);
      this.upT.length = 0;
      this.upR.length = 0;
      for (let i = 0; i < ts.length; i++) {
        this.upT.push(ts[i] as number);
        this.upR.push(rs[i] as number);
      }
      const min: number[] = new Array<number>(rs.length);
      let m = Number.POSITIVE_INFINITY;
      for (let i = rs.length - 1; i >= 0; i--) {
        m = Math.min(m, rs[i] as number);
        min[i] = m;
      }
      this.upSuffixMin = min;
    }
    let lo = 0;
    let hi = this.upT.length - 1;
    let first = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((this.upT[mid] as number) >= t) {
        first = mid;
        hi = mid - 1;
      } else lo = mid + 1;
    }
    return first === -1 ? Number.POSITIVE_INFINITY : (this.upSuffixMin[first] as number);
  }
}

export interface RecorderStats {
  relists: number;
  gone410: number;
  reconnects: number;
  errors: number;
}

/**
 * List/watch loops over every soak resource, cluster-wide, feeding `history`
 * and `clock`. Survives apiserver restarts (re-watch from the last revision)
 * and 410 Gone (re-list, recorded as a gap).
 */
export class Recorder {
  readonly history: History;
  readonly clock: RevisionClock;
  readonly stats: RecorderStats = { relists: 0, gone410: 0, reconnects: 0, errors: 0 };
  private readonly kube: Kube;
  private readonly resources: readonly ResourceDef[];
  private readonly abort = new AbortController();
  private readonly loops: Promise<void>[] = [];
  private readonly lastRev = new Map<string, number>();
  private readonly synced = new Set<string>();
  private readonly log: (line: string) => void;

  constructor(
    kube: Kube,
    resources: readonly ResourceDef[],
    history: History,
    clock: RevisionClock,
    log: (line: string) => void,
  ) {
    this.kube = kube;
    this.resources = resources;
    this.history = history;
    this.clock = clock;
    this.log = log;
  }

  start(): void {
    for (const r of this.resources) this.loops.push(this.loop(r));
  }

  /** True once every resource has been listed once. */
  get ready(): boolean {
    return this.synced.size === this.resources.length;
  }

  /** The lowest revision every watch has reached. */
  minRevision(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const r of this.resources) min = Math.min(min, this.lastRev.get(r.resource) ?? 0);
    return min;
  }

  private async listAll(r: ResourceDef): Promise<number> {
    const items: KubeObject[] = [];
    let cont: string | undefined;
    let rev: string | undefined;
    do {
      const sent = Date.now();
      const page = await this.kube.request<ObjectList>('GET', collectionPath(r), {
        query: { limit: 500, continue: cont },
        timeoutMs: 60_000,
      });
      rev ??= page.metadata.resourceVersion;
      this.clock.probe(sent, Date.now(), Number(rev));
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
    } while (cont);
    const listRev = Number(rev);
    this.history.list(r, listRev, items, Date.now());
    return listRev;
  }

  private async loop(r: ResourceDef): Promise<void> {
    const signal = this.abort.signal;
    let rev: number | undefined;
    let backoff = 250;
    while (!signal.aborted) {
      try {
        if (rev === undefined) {
          rev = await this.listAll(r);
          this.lastRev.set(r.resource, rev);
          this.synced.add(r.resource);
        }
        let gone = false;
        const res = await this.kube.watch(
          collectionPath(r),
          { resourceVersion: rev, allowWatchBookmarks: true, timeoutSeconds: 240 },
          (ev) => {
            if (ev.type === 'ERROR') {
              if (ev.object.code === 410) gone = true;
              else this.log(`watch ${r.resource}: error event ${JSON.stringify(ev.object)}`);
              return;
            }
            const evRev = Number(ev.object.metadata.resourceVersion);
            this.history.event(r, ev, Date.now());
            if (ev.type !== 'BOOKMARK') this.clock.seen(Date.now(), evRev);
            rev = evRev;
            this.lastRev.set(r.resource, evRev);
          },
          signal,
        );
        backoff = 250;
        if (res.status === 410 || gone) {
          this.stats.gone410++;
          this.stats.relists++;
          this.log(`watch ${r.resource}: 410 Gone at ${rev}; listing again`);
          rev = undefined;
        } else if (res.status !== 200) {
          this.stats.errors++;
          await this.pause(backoff);
          backoff = Math.min(backoff * 2, 5_000);
        }
      } catch (err) {
        if (signal.aborted) return;
        this.stats.reconnects++;
        this.stats.errors++;
        if (this.stats.errors % 20 === 1)
          this.log(`watch ${r.resource}: ${(err as Error).message}; retrying`);
        // Reconnect back-off while the apiserver is away (it is restarted by a fault).
        await this.pause(backoff);
        backoff = Math.min(backoff * 2, 5_000);
      }
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.abort.signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /**
   * Stops the watches and closes the record with one last list of each
   * resource (treated like a re-list: what the watches had not delivered yet
   * counts as unknown, never as seen).
   */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.loops);
    for (const r of this.resources) {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.listAll(r);
          break;
        } catch (err) {
          if (attempt >= 20) throw err;
          await new Promise((res) => setTimeout(res, 500));
        }
      }
    }
  }
}
