// The invariants, checked over the soak's own watch history and the API
// server's audit log, never over anything kubegc says about itself.
// Pure functions; they flag only on positive evidence: where the history
// leaves a state unknown (a re-list gap, a revision not yet observed), they
// do not flag.
import {
  History,
  describeSnap,
  type ObjectHistory,
  type RevisionClock,
  type Segment,
  type Snapshot,
} from './history.ts';
import { FOREGROUND, ORPHAN, groupOf, namespacedKind } from './resources.ts';

/** One DELETE request from the audit log, reduced to what the oracle needs. */
export interface DeleteCall {
  auditID: string;
  user: string;
  userAgent?: string;
  resource: string;
  group: string;
  namespace: string;
  name: string;
  /** preconditions.uid of its DeleteOptions. */
  uid?: string;
  policy?: string;
  code: number;
  /** requestReceivedTimestamp and stageTimestamp (ResponseComplete), ms since the epoch. */
  received: number;
  completed: number;
}

/** One get or list by a GC user that named one object (audit level Metadata). */
export interface ReadCall {
  user: string;
  resource: string;
  group: string;
  namespace: string;
  name: string;
  code: number;
  received: number;
  completed: number;
}

export type Invariant = 'I1' | 'I2' | 'I3' | 'I4' | 'I5';

export interface Violation {
  invariant: Invariant;
  /** The object (or process) it concerns, e.g. "configmaps soak-a/cm-x1 (uid 1234abcd)". */
  object: string;
  summary: string;
  evidence: string[];
  /** When it happened (ms since the epoch), to name the faults around it. */
  at?: number;
}

export interface ResolvedDelete {
  call: DeleteCall;
  rec: ObjectHistory | undefined;
  /** Revisions within which the delete took effect. */
  lo: number;
  hi: number;
  /** The revision at which this delete started the object's deletion, when exactly known and attributable. */
  effect: { rev: number; before: Segment; after: Segment } | undefined;
  status: 'exact' | 'window' | 'unresolved' | 'ambiguous';
}

const ok = (code: number): boolean => code >= 200 && code < 300;
const short = (uid: string): string => uid.slice(0, 8);

export function objectName(rec: ObjectHistory): string {
  return `${rec.resource} ${rec.namespace}/${rec.name} (uid ${short(rec.uid)})`;
}

function sameTarget(call: DeleteCall, rec: ObjectHistory): boolean {
  return (
    call.resource === rec.resource &&
    call.namespace === rec.namespace &&
    call.name === rec.name &&
    (call.uid === undefined || call.uid === rec.uid)
  );
}

/** The revision window [lo, hi] in which a request took effect. */
export function windowOf(clock: RevisionClock, call: DeleteCall): [number, number] {
  // From the revision seen when it was received (a DELETE of an object already being
  // deleted may write nothing) to the one when it had completed; a few ms of slack for
  // clock granularity (audit: µs, local: ms).
  return [clock.lowerBound(call.received - 3), clock.upperBound(call.completed + 3)];
}

/**
 * Ties each successful DELETE to the object it hit and, where the history
 * shows it, to the revision at which it took effect.
 */
export function resolveDeletes(
  history: History,
  clock: RevisionClock,
  calls: readonly DeleteCall[],
): ResolvedDelete[] {
  const byName = new Map<string, ObjectHistory[]>();
  for (const rec of history.objects.values()) {
    const k = `${rec.resource}/${rec.namespace}/${rec.name}`;
    const list = byName.get(k) ?? [];
    list.push(rec);
    byName.set(k, list);
  }
  const successful = calls.filter((c) => ok(c.code));
  const out: ResolvedDelete[] = [];
  for (const call of successful) {
    const [lo, hi] = windowOf(clock, call);
    if (lo > hi) {
      // The clock contradicts itself here: tie nothing to this request.
      out.push({ call, rec: undefined, lo, hi, effect: undefined, status: 'unresolved' });
      continue;
    }
    let rec = call.uid ? history.objects.get(call.uid) : undefined;
    if (!rec && !call.uid) {
      // No UID precondition: the object of that name that existed in the window, if only one did.
      const candidates = (
        byName.get(`${call.resource}/${call.namespace}/${call.name}`) ?? []
      ).filter((r) => {
        const s = history.stateOf(r, lo);
        return s.kind === 'exists' || s.kind === 'unknown';
      });
      if (candidates.length === 1) rec = candidates[0];
    }
    if (!rec || !sameTarget(call, rec)) {
      out.push({ call, rec: undefined, lo, hi, effect: undefined, status: 'unresolved' });
      continue;
    }
    const start = history.deletionStart(rec);
    let effect: ResolvedDelete['effect'];
    let status: ResolvedDelete['status'] = 'window';
    // A change this request made comes after the revision seen when it arrived.
    if (start?.exact && start.rev > lo && start.rev <= hi) {
      // Did someone else's DELETE of the same object possibly take effect at that revision?
      const rival = successful.some((o) => {
        if (o === call || o.user === call.user || !sameTarget(o, rec)) return false;
        const [olo, ohi] = windowOf(clock, o);
        return start.rev > olo && start.rev <= ohi;
      });
      if (rival) status = 'ambiguous';
      else {
        effect = { rev: start.rev, before: start.before, after: start.after };
        status = 'exact';
      }
    }
    out.push({ call, rec, lo, hi, effect, status });
  }
  return out;
}

/** Owner states in which deleting a dependent is wrong: alive, or being deleted with Orphan. */
function protects(snap: Snapshot): boolean {
  return !snap.deleting || snap.finalizers.includes(ORPHAN);
}

function segmentLine(label: string, rec: ObjectHistory, history: History, seg: Segment): string {
  const i = rec.segments.indexOf(seg);
  const through = history.certainThrough(rec, i);
  return `${label} ${objectName(rec)} from rev ${seg.from}${seg.viaWatch ? ' (watch)' : ' (list)'} ${
    seg.snap ? `certain through ${Number.isFinite(through) ? through : '∞'}` : ''
  } at ${new Date(seg.seenAt).toISOString()}: ${describeSnap(seg.snap)}`;
}

function historyLines(
  label: string,
  rec: ObjectHistory,
  history: History,
  around: number,
): string[] {
  // The segments around the revision in question: enough to see the change, not the whole life.
  const idx = rec.segments.findIndex((s) => s.from > around);
  const end = idx === -1 ? rec.segments.length : idx + 1;
  return rec.segments
    .slice(Math.max(0, end - 4), end)
    .map((s) => segmentLine(label, rec, history, s));
}

function auditLine(c: DeleteCall): string {
  return `audit ${c.auditID}: ${c.user}${c.userAgent ? ` (${c.userAgent})` : ''} DELETE ${c.resource} ${c.namespace}/${c.name} uid=${c.uid ?? '-'} policy=${c.policy ?? '-'} → ${c.code}, received ${new Date(c.received).toISOString()}, completed ${new Date(c.completed).toISOString()}`;
}

/**
 * I1: no DELETE by the GC hit an object that, when it took effect, had an owner
 * that existed and was not being deleted (or was being deleted with Orphan).
 */
/** A GC DELETE one read old (oneReadDeletes): the object it deleted and why it is not a violation. */
export interface Excused {
  object: string;
  reason: string;
}

/**
 * How soon after the GC's read of an owner its DELETE of a dependent must follow to be "one
 * read old", on a connection without injected latency.
 */
export const ONE_READ_MS = 1000;

/** Latency the soak added each way on GC processes' connections to the API server (net-delay). */
export interface InjectedDelay {
  start: number;
  end: number;
  ms: number;
  /** The process labels whose proxies carried it. */
  processes: readonly string[];
}

export interface OneReadContext {
  /** The net-delay faults of the run. */
  delays?: readonly InjectedDelay[];
  /** The process label of a request's user agent, where known. */
  processOf?: (userAgent: string | undefined) => string | undefined;
}

/**
 * The largest latency injected each way on `process`'s connection (any GC process's, if
 * unknown) at some time in [from, to]. A delay window also holds what was queued in it for
 * up to its latency after it ends.
 */
export function injectedDelayMs(
  delays: readonly InjectedDelay[],
  process: string | undefined,
  from: number,
  to: number,
): number {
  let max = 0;
  for (const w of delays) {
    if (process !== undefined && !w.processes.includes(process)) continue;
    if (w.start > to || w.end + w.ms < from) continue;
    max = Math.max(max, w.ms);
  }
  return max;
}

/**
 * The bound on the time from a read's answer (server side) to the DELETE's arrival: the
 * GC's own processing, plus the answer's way to the GC and the DELETE's way back, each of
 * which an injected delay lengthens by its latency.
 */
export function oneReadBoundMs(delayEachWayMs: number): number {
  return ONE_READ_MS + 2 * delayEachWayMs;
}

/**
 * GC DELETEs made on a decision one read old, which no GC can avoid: the
 * dependent's owner went from Foreground to Orphan deletion (a second DELETE)
 * after a successful read of it by the GC that may have been served before
 * the switch (received before the revision clock shows the switch), and the
 * DELETE was received within oneReadBoundMs of that read's answer (ONE_READ_MS, plus
 * twice the latency the soak injected on the deleting process's connection meanwhile: the
 * answer and the DELETE each crossed it). The switch
 * and the DELETE touch two objects, with no precondition across them;
 * upstream's window is the same (GET the owner, then DELETE the dependent).
 * By auditID: the object deleted and why it is excused. Deletes on owners
 * the GC never read, read after the switch, or read long before, are not excused.
 */
export function oneReadDeletes(
  history: History,
  clock: RevisionClock,
  resolved: readonly ResolvedDelete[],
  reads: readonly ReadCall[],
  gcUsers: ReadonlySet<string>,
  ctx: OneReadContext = {},
): Map<string, Excused> {
  const out = new Map<string, Excused>();
  const delays = ctx.delays ?? [];
  for (const d of resolved) {
    if (!gcUsers.has(d.call.user) || !d.rec || !d.effect) continue;
    const dep = d.rec;
    const process = ctx.processOf?.(d.call.userAgent);
    const delayOf = (r: ReadCall): number =>
      injectedDelayMs(delays, process, r.received, d.call.received);
    const rev = d.effect.rev;
    const excuses: string[] = [];
    let protectedBy = 0;
    for (const ref of d.effect.before.snap?.refs ?? []) {
      const owner = history.objects.get(ref.uid);
      if (!owner || !History.refersTo(ref, dep, owner)) continue;
      const state = history.stateOf(owner, rev);
      if (state.kind !== 'exists' || !protects(state.snap)) continue;
      protectedBy++;
      const i = owner.segments.indexOf(state.segment);
      const prev = i > 0 ? owner.segments[i - 1] : undefined;
      // Orphan now, in foreground deletion just before: a switch at state.segment.from.
      if (
        !state.snap.deleting ||
        !prev?.snap?.deleting ||
        !prev.snap.finalizers.includes(FOREGROUND)
      )
        continue;
      const switchRev = state.segment.from;
      const read = reads
        .filter(
          (r) =>
            gcUsers.has(r.user) &&
            ok(r.code) &&
            r.resource === owner.resource &&
            r.group === owner.group &&
            r.namespace === owner.namespace &&
            r.name === owner.name &&
            r.completed <= d.call.received + 3 &&
            d.call.received - r.completed <= oneReadBoundMs(delayOf(r)) &&
            clock.lowerBound(r.received - 3) < switchRev,
        )
        .sort((a, b) => b.completed - a.completed)[0];
      if (!read) continue;
      const delay = delayOf(read);
      excuses.push(
        `${owner.kind} ${owner.name} (uid ${short(owner.uid)}) switched from Foreground to Orphan at revision ${switchRev}; the GC read it at ${new Date(read.received).toISOString()} (before the switch, revision ≥ ${clock.lowerBound(read.received - 3)} then), answered ${(d.call.received - read.completed).toFixed(0)} ms before this DELETE was received${delay ? ` (bound ${oneReadBoundMs(delay)} ms: ${delay} ms injected each way on ${process ?? "the GC's connections"})` : ''}`,
      );
    }
    if (protectedBy > 0 && excuses.length === protectedBy)
      out.set(d.call.auditID, { object: objectName(dep), reason: excuses.join('; ') });
  }
  return out;
}

export function checkI1(
  history: History,
  resolved: readonly ResolvedDelete[],
  gcUsers: ReadonlySet<string>,
  allCalls: readonly DeleteCall[],
  /** DELETEs one read old (oneReadDeletes), not flagged. */
  excused: ReadonlyMap<string, Excused> = new Map(),
  /** The GC users' reads: those of the owner shortly before the DELETE go into the evidence. */
  reads: readonly ReadCall[] = [],
): Violation[] {
  const out: Violation[] = [];
  const flagged = new Set<string>();
  for (const d of resolved) {
    if (!gcUsers.has(d.call.user) || !d.rec || excused.has(d.call.auditID)) continue;
    const dep = d.rec;
    let refs: Snapshot['refs'];
    let at: string;
    let ownerState: (owner: ObjectHistory) => Snapshot | undefined;
    let around: number;
    if (d.effect) {
      const rev = d.effect.rev;
      refs = d.effect.before.snap?.refs ?? [];
      at = `at revision ${rev}, where its deletion took effect`;
      around = rev;
      const before = d.effect.before.snap;
      ownerState = (owner) => {
        // A self-reference: its owner is the object as it was before its own deletion began.
        if (owner.uid === dep.uid) return before;
        const s = history.stateOf(owner, rev);
        return s.kind === 'exists' ? s.snap : undefined;
      };
    } else if (d.status === 'window' && Number.isFinite(d.hi)) {
      // No attributable change of the object in the window: it was already being deleted.
      const seg = history.segmentOver(dep, d.lo, d.hi);
      if (!seg?.snap) continue;
      refs = seg.snap.refs;
      at = `throughout revisions ${d.lo}–${d.hi} of the request (the object was already being deleted)`;
      around = d.hi;
      ownerState = (owner) => history.segmentOver(owner, d.lo, d.hi)?.snap;
    } else continue;
    if (d.effect && History.neverCollected(dep, refs)) {
      // Not "an owner existed" but the same wrong: a delete the GC may never make.
      out.push({
        invariant: 'I1',
        at: d.call.received,
        object: objectName(dep),
        summary: `${d.call.user} deleted it ${at}; it is cluster-scoped and references a namespaced kind (${refs
          .filter((r) => namespacedKind(groupOf(r.apiVersion), r.kind) === true)
          .map((r) => `${r.kind} ${r.name}`)
          .join(', ')}), which makes its owners undecidable: upstream never collects it`,
        evidence: [auditLine(d.call), ...historyLines('dependent', dep, history, around)],
      });
      continue;
    }
    for (const ref of refs) {
      const owner = history.objects.get(ref.uid);
      if (!owner || !History.refersTo(ref, dep, owner)) continue;
      const snap = ownerState(owner);
      if (!snap || !protects(snap)) continue;
      const key = `${dep.uid}/${owner.uid}`;
      if (flagged.has(key)) continue;
      flagged.add(key);
      const others = allCalls.filter(
        (c) =>
          c !== d.call &&
          c.resource === dep.resource &&
          c.namespace === dep.namespace &&
          c.name === dep.name,
      );
      out.push({
        invariant: 'I1',
        at: d.call.received,
        object: objectName(dep),
        summary: `${d.call.user} deleted it while its owner ${owner.kind} ${owner.name} (uid ${short(owner.uid)}) ${
          snap.deleting ? 'was being deleted with Orphan' : 'existed and was not being deleted'
        }, ${at}`,
        evidence: [
          auditLine(d.call),
          ...others.map((c) => `other ${auditLine(c)}`),
          `revision window of the request: ${d.lo}–${Number.isFinite(d.hi) ? d.hi : '∞'}`,
          ...historyLines('dependent', dep, history, around),
          ...historyLines('owner', owner, history, around),
          ...readsBefore(reads, gcUsers, owner, d.call.received),
        ],
      });
    }
  }
  return out;
}

/** How far back before a flagged DELETE the GC's reads of the owner are shown. */
const READS_SHOWN_MS = 10_000;

function readsBefore(
  reads: readonly ReadCall[],
  gcUsers: ReadonlySet<string>,
  owner: ObjectHistory,
  before: number,
): string[] {
  return reads
    .filter(
      (r) =>
        gcUsers.has(r.user) &&
        r.resource === owner.resource &&
        r.group === owner.group &&
        r.namespace === owner.namespace &&
        r.name === owner.name &&
        r.received <= before &&
        before - r.received <= READS_SHOWN_MS,
    )
    .map(
      (r) =>
        `GC read of the owner: ${r.user} → ${r.code}, received ${new Date(r.received).toISOString()}, answered ${new Date(r.completed).toISOString()} (${(before - r.completed).toFixed(0)} ms before the DELETE was received)`,
    );
}

export interface Quiescence {
  /** When the workload stopped (ms since the epoch). */
  stoppedAt: number;
  /** When the check was made. */
  checkedAt: number;
}

/** The owners of `rec` (valid references only) that still exist, per the latest history. */
function liveOwners(history: History, rec: ObjectHistory, snap: Snapshot): ObjectHistory[] {
  const out: ObjectHistory[] = [];
  for (const ref of snap.refs) {
    const owner = history.objects.get(ref.uid);
    if (owner && History.refersTo(ref, rec, owner) && history.current(owner)) out.push(owner);
  }
  return out;
}

/** Objects whose owners are all gone (that the GC should collect), per the latest history. */
export function uncollected(history: History): ObjectHistory[] {
  return history.live().filter((rec) => {
    const snap = history.current(rec);
    if (!snap || snap.refs.length === 0) return false;
    // Never collected (upstream refuses to decide on it): nothing to wait for.
    if (History.neverCollected(rec, snap.refs)) return false;
    // Being deleted and held only by someone else's finalizer: the GC's part is done.
    if (snap.deleting && !snap.finalizers.some((f) => f === ORPHAN || f === FOREGROUND))
      return false;
    return liveOwners(history, rec, snap).length === 0;
  });
}

/** Objects still carrying a GC finalizer. */
export function gcFinalizersLeft(history: History): ObjectHistory[] {
  return history.live().filter((rec) => {
    const snap = history.current(rec);
    return snap?.finalizers.some((f) => f === ORPHAN || f === FOREGROUND) ?? false;
  });
}

/** When the last of the object's owners (as referenced now) went away, if known. */
function lastOwnerGone(history: History, rec: ObjectHistory, snap: Snapshot): number | undefined {
  let last: number | undefined;
  for (const ref of snap.refs) {
    const owner = history.objects.get(ref.uid);
    const gone = owner && History.refersTo(ref, rec, owner) ? history.gone(owner) : undefined;
    const t = gone?.seenAt ?? rec.segments[0]?.seenAt;
    if (t !== undefined) last = Math.max(last ?? 0, t);
  }
  return last;
}

/** I2: after the workload stops, every object whose owners are all gone is gone within 60 s. */
export function checkI2(history: History, q: Quiescence): Violation[] {
  return uncollected(history).map((rec) => {
    const snap = history.current(rec) as Snapshot;
    const gone = lastOwnerGone(history, rec, snap);
    return {
      invariant: 'I2' as const,
      object: objectName(rec),
      summary: `still present ${Math.round((q.checkedAt - Math.max(q.stoppedAt, gone ?? 0)) / 1000)} s after the workload stopped${
        gone ? ` and ${Math.round((q.checkedAt - gone) / 1000)} s after its last owner went` : ''
      }, every owner gone`,
      evidence: [
        ...historyLines('object', rec, history, Number.POSITIVE_INFINITY),
        ...snap.refs.map((ref) => {
          const owner = history.objects.get(ref.uid);
          if (!owner) return `owner ${ref.kind}/${ref.name} uid ${short(ref.uid)}: never observed`;
          if (!History.refersTo(ref, rec, owner))
            return `owner ${ref.kind}/${ref.name} uid ${short(ref.uid)}: the reference does not resolve (${owner.namespace}/${owner.kind}/${owner.name})`;
          const g = history.gone(owner);
          return g ? segmentLine('owner', owner, history, g) : `owner ${objectName(owner)} exists`;
        }),
      ],
    };
  });
}

/** Owners deleted with Orphan (and not switched back to Foreground afterwards), with their orphan window. */
function orphanDeleted(history: History): { owner: ObjectHistory; from: number; to: number }[] {
  const out: { owner: ObjectHistory; from: number; to: number }[] = [];
  for (const rec of history.objects.values()) {
    const first = rec.segments.findIndex((s) => s.snap?.finalizers.includes(ORPHAN));
    if (first === -1) continue;
    const later = rec.segments.slice(first);
    if (later.some((s) => s.snap?.finalizers.includes(FOREGROUND))) continue;
    const gone = history.gone(rec);
    out.push({
      owner: rec,
      from: (rec.segments[first] as Segment).from,
      to: gone ? gone.from : Number.POSITIVE_INFINITY,
    });
  }
  return out;
}

/**
 * I3: no GC finalizer left after quiescence; every dependent of an Orphan-deleted
 * owner still exists without that reference (unless someone other than the GC
 * deleted it, or its other owners are gone).
 */
export function checkI3(
  history: History,
  resolved: readonly ResolvedDelete[],
  gcUsers: ReadonlySet<string>,
  allCalls: readonly DeleteCall[],
  /** DELETEs one read old (oneReadDeletes), not flagged. */
  excused: ReadonlyMap<string, Excused> = new Map(),
): Violation[] {
  const out: Violation[] = [];
  for (const rec of gcFinalizersLeft(history)) {
    const snap = history.current(rec) as Snapshot;
    out.push({
      invariant: 'I3',
      object: objectName(rec),
      summary: `finalizers [${snap.finalizers.join(', ')}] still set after quiescence`,
      evidence: historyLines('object', rec, history, Number.POSITIVE_INFINITY),
    });
  }
  const orphaned = orphanDeleted(history);
  const orphanOwners = new Set(orphaned.map((o) => o.owner.uid));
  const gcDeletesOf = new Map<string, ResolvedDelete[]>();
  for (const d of resolved) {
    if (!d.rec || !gcUsers.has(d.call.user) || excused.has(d.call.auditID)) continue;
    const list = gcDeletesOf.get(d.rec.uid) ?? [];
    list.push(d);
    gcDeletesOf.set(d.rec.uid, list);
  }
  // Who ever referenced whom, to look at candidate dependents only.
  const referrers = new Map<string, Set<ObjectHistory>>();
  for (const rec of history.objects.values())
    for (const seg of rec.segments)
      for (const r of seg.snap?.refs ?? []) {
        const set = referrers.get(r.uid) ?? new Set<ObjectHistory>();
        set.add(rec);
        referrers.set(r.uid, set);
      }
  for (const { owner, from, to } of orphaned) {
    const ownerGone = history.gone(owner);
    for (const dep of referrers.get(owner.uid) ?? []) {
      // (A cluster-scoped owner may have dependents in any namespace.)
      if ((owner.namespace !== '' && dep.namespace !== owner.namespace) || dep.uid === owner.uid)
        continue;
      // A dependent: it certainly referenced the owner at some revision of the orphan window.
      const referenced = dep.segments.some((s, i) => {
        if (!s.snap?.refs.some((r) => History.refersTo(r, dep, owner))) return false;
        return s.from <= to && history.certainThrough(dep, i) >= from;
      });
      if (!referenced) continue;
      const now = history.current(dep);
      if (now) {
        // By the whole reference: one sharing the owner's UID under another name is not its.
        if (ownerGone && now.refs.some((r) => History.refersTo(r, dep, owner)))
          out.push({
            invariant: 'I3',
            object: objectName(dep),
            summary: `still references ${owner.kind} ${owner.name} (uid ${short(owner.uid)}), which was deleted with Orphan and is gone`,
            evidence: [
              ...historyLines('dependent', dep, history, Number.POSITIVE_INFINITY),
              ...historyLines('owner', owner, history, Number.POSITIVE_INFINITY),
            ],
          });
        continue;
      }
      // Gone: only the GC's deletions count, and only those made on Orphan-deleted owners alone.
      const byOthers = allCalls.some(
        (c) =>
          ok(c.code) &&
          !gcUsers.has(c.user) &&
          c.resource === dep.resource &&
          c.namespace === dep.namespace &&
          c.name === dep.name &&
          (c.uid === undefined || c.uid === dep.uid),
      );
      if (byOthers) continue;
      for (const d of gcDeletesOf.get(dep.uid) ?? []) {
        // Deleted before the Orphan deletion began (say, while the owner was in foreground deletion): I1's business.
        if (!d.effect?.before.snap || d.effect.rev < from) continue;
        const refs = d.effect.before.snap.refs;
        const onlyOrphaned =
          refs.length > 0 &&
          refs.some((r) => History.refersTo(r, dep, owner)) &&
          refs.every((r) => {
            const o = history.objects.get(r.uid);
            return o !== undefined && orphanOwners.has(r.uid) && History.refersTo(r, dep, o);
          });
        if (!onlyOrphaned) continue;
        out.push({
          invariant: 'I3',
          at: d.call.received,
          object: objectName(dep),
          summary: `${d.call.user} deleted it at revision ${d.effect.rev}; its only owner${refs.length > 1 ? 's were' : ' was'} deleted with Orphan (${owner.kind} ${owner.name}, uid ${short(owner.uid)}, orphan deletion from revision ${from})`,
          evidence: [
            auditLine(d.call),
            ...historyLines('dependent', dep, history, d.effect.rev),
            ...historyLines('owner', owner, history, d.effect.rev),
          ],
        });
        break;
      }
    }
  }
  return out;
}

export interface Collection {
  object: string;
  /** ms from the last owner gone (as seen by the soak's watch) to the dependent gone. */
  latencyMs: number;
}

/**
 * Time from the last owner gone to the dependent gone (or deleted, when only other
 * finalizers than the GC's hold it), for every GC deletion whose owners were all gone.
 */
export function collections(history: History, resolved: readonly ResolvedDelete[]): Collection[] {
  const out: Collection[] = [];
  const seen = new Set<string>();
  for (const d of resolved) {
    if (!d.rec || !d.effect?.before.snap || seen.has(d.rec.uid)) continue;
    // Gone; or, when only someone else's finalizers hold it (the workload's hold, a Job's pod
    // tracking), from when the GC's delete took effect: their wait is not the GC's.
    const after = d.effect.after.snap;
    const heldByOthers =
      after !== undefined && !after.finalizers.some((f) => f === ORPHAN || f === FOREGROUND);
    const depGone = heldByOthers ? d.effect.after : history.gone(d.rec);
    if (!depGone?.viaWatch) continue;
    let last = 0;
    let allGone = d.effect.before.snap.refs.length > 0;
    for (const ref of d.effect.before.snap.refs) {
      const owner = history.objects.get(ref.uid);
      const g = owner ? history.gone(owner) : undefined;
      if (!owner || !History.refersTo(ref, d.rec, owner) || !g?.viaWatch || g.from > d.effect.rev) {
        allGone = false;
        break;
      }
      last = Math.max(last, g.seenAt);
    }
    if (!allGone) continue;
    seen.add(d.rec.uid);
    out.push({ object: objectName(d.rec), latencyMs: depGone.seenAt - last });
  }
  return out;
}

export interface RssSample {
  process: string;
  pid: number;
  /** The quiet period it ends. */
  quiet: number;
  at: number;
  rssBytes: number;
}

export interface ProcessExit {
  process: string;
  pid: number;
  at: number;
  code: number | null;
  signal: string | null;
  /** The injected fault that explains it, if any. */
  cause: string | undefined;
}

/**
 * I5: RSS at the end of each quiet period no more than 10% above the previous
 * one in the same process lifetime; no exits other than those the faults cause.
 */
export function checkI5(samples: readonly RssSample[], exits: readonly ProcessExit[]): Violation[] {
  const out: Violation[] = [];
  const byPid = new Map<number, RssSample[]>();
  for (const s of samples) byPid.set(s.pid, [...(byPid.get(s.pid) ?? []), s]);
  for (const list of byPid.values()) {
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1] as RssSample;
      const cur = list[i] as RssSample;
      if (cur.rssBytes > prev.rssBytes * 1.1)
        out.push({
          invariant: 'I5',
          object: `${cur.process} pid ${cur.pid}`,
          summary: `RSS grew ${(((cur.rssBytes - prev.rssBytes) / prev.rssBytes) * 100).toFixed(1)}% between the ends of quiet periods ${prev.quiet + 1} and ${cur.quiet + 1}`,
          evidence: [
            `quiet ${prev.quiet + 1}: ${(prev.rssBytes / 1048576).toFixed(1)} MiB at ${new Date(prev.at).toISOString()}`,
            `quiet ${cur.quiet + 1}: ${(cur.rssBytes / 1048576).toFixed(1)} MiB at ${new Date(cur.at).toISOString()}`,
          ],
        });
    }
  }
  for (const e of exits) {
    if (e.cause) continue;
    out.push({
      invariant: 'I5',
      object: `${e.process} pid ${e.pid}`,
      summary: `exited (${e.signal ?? `code ${e.code}`}) at ${new Date(e.at).toISOString()} with no fault to explain it`,
      evidence: [],
    });
  }
  return out;
}
