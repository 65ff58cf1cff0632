// stuck-deletion: an object with a deletionTimestamp that is still there,
// and why: its own finalizers, or (foregroundDeletion) the chains of
// blocking dependents below it, each followed down to what holds it (a
// foreign finalizer, a dependent nobody deleted, a cycle), the ones held by
// foreign finalizers first.
import { FOREGROUND_FINALIZER, ORPHAN_FINALIZER } from '../../gc/decide.ts';
import {
  MAX_CHAIN,
  compareObjects,
  describeBlocker,
  formatAge,
  plural,
  type Blocker,
  type BlockerState,
  type Holder,
  type ObjectRef,
  type StuckDeletion,
} from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { isoSeconds } from '../snapshot.ts';

const GC_FINALIZERS = new Set([FOREGROUND_FINALIZER, ORPHAN_FINALIZER]);
const MAX_BLOCKERS = 20;
/** Objects visited below one stuck object (a Deployment in foreground deletion with 100k Pods). */
const WALK_BUDGET = 100_000;
const BLOCKER_ORDER: Record<BlockerState, number> = {
  'foreign-finalizer': 0,
  cycle: 1,
  'not-deleted': 2,
  orphaning: 3,
  graceful: 4,
  'awaiting-gc': 5,
  'too-deep': 6,
};

export function stuckDeletions(ix: SnapshotIndex): StuckDeletion[] {
  const obj = ix.s.objects;
  const { ref, finalizersOf, blockingDeps, dependentCount, listedByGr, nowS } = ix;
  const findings: StuckDeletion[] = [];
  const namespacesRes = listedByGr.get('/namespaces');
  for (let i = 0; i < obj.length; i++) {
    const deleted = obj.deleted.get(i);
    if (!deleted || obj.res.get(i) === namespacesRes) continue;
    const uid = obj.uid[i] as string;
    const f = [...finalizersOf(i)];
    const gc = f.filter((x) => GC_FINALIZERS.has(x));
    const foreign = f.filter((x) => !GC_FINALIZERS.has(x));
    const age = Math.max(0, nowS - deleted);
    const self = ref(i);
    const own = foreign.length ? holder(ix, i, foreign) : null;
    const { blockers, total } = f.includes(FOREGROUND_FINALIZER)
      ? blockersOf(ix, i)
      : { blockers: [], total: 0 };
    const first = blockers[0];
    const { reason, detail } = whyStuck(f, foreign, age, {
      blocking: blockingDeps.get(uid)?.length ?? 0,
      dependents: dependentCount.get(uid) ?? 0,
      first,
      total,
    });
    findings.push({
      kind: 'stuck-deletion',
      object: self,
      since: isoSeconds(deleted),
      ageSeconds: age,
      sinceBasis: 'deletionTimestamp',
      reason,
      detail,
      finalizers: f,
      gcFinalizers: gc,
      foreignFinalizers: foreign,
      blockingDependents: blockingDeps.get(uid)?.length ?? 0,
      dependents: dependentCount.get(uid) ?? 0,
      blockers,
      blockersTotal: total,
      chain: first ? first.chain : [self],
      heldBy: first ? first.heldBy : own,
    });
  }
  return findings;
}

function holder(ix: SnapshotIndex, i: number, finalizers: string[]): Holder {
  const deleted = ix.s.objects.deleted.get(i);
  return {
    object: ix.ref(i),
    finalizers,
    deleting: deleted > 0,
    deletingSince: deleted > 0 ? isoSeconds(deleted) : null,
  };
}

/** The reason and the one-line detail of an object being deleted, from its finalizers. */
function whyStuck(
  f: string[],
  foreign: string[],
  age: number,
  dependents: { blocking: number; dependents: number; first: Blocker | undefined; total: number },
): { reason: string; detail: string } {
  const { first, total } = dependents;
  const ownPart = foreign.length
    ? `held by ${foreign.length === 1 ? 'finalizer' : 'finalizers'} ${foreign.join(', ')} for ${formatAge(age)} (since its deletionTimestamp): whatever controller owns ${foreign.length === 1 ? 'it' : 'them'} has not removed ${foreign.length === 1 ? 'it' : 'them'}`
    : '';
  const then = ownPart ? `; then ${ownPart}` : '';
  if (f.includes(FOREGROUND_FINALIZER)) {
    if (first)
      return {
        reason: 'waiting-for-dependents',
        detail: `foregroundDeletion: waiting for ${plural(dependents.blocking, 'blocking dependent')}; ${describeBlocker(first)}${total > 1 ? ` (and ${total - 1} more)` : ''}${then}`,
      };
    return {
      reason: 'foreground-no-blockers',
      detail: `foregroundDeletion with no blocking dependent left: the garbage collector removes that finalizer (is one running?)${then}`,
    };
  }
  if (f.includes(ORPHAN_FINALIZER))
    return {
      reason: 'orphaning',
      detail: `orphan: the garbage collector removes the references of its ${plural(dependents.dependents, 'dependent')}, then this finalizer (is one running?)${then}`,
    };
  if (foreign.length) return { reason: 'foreign-finalizers', detail: ownPart };
  return {
    reason: 'graceful',
    detail:
      'no finalizers: a graceful deletion still running (a Pod waits for its kubelet to confirm)',
  };
}

/**
 * The blocking dependents that hold an object in foreground deletion, walked
 * down through dependents that are themselves in foreground deletion: the
 * best MAX_BLOCKERS, and how many there are.
 */
function blockersOf(ix: SnapshotIndex, root: number): { blockers: Blocker[]; total: number } {
  const obj = ix.s.objects;
  const found: Blocker[] = [];
  let total = 0;
  let visits = 0;
  const path: number[] = [root];
  const onPath = new Set<number>([root]);
  const done = new Set<number>();
  const leaf = (state: BlockerState, heldBy: Holder | null): void => {
    total++;
    // Keep the best MAX_BLOCKERS; sorted at the end.
    found.push({ chain: path.map(ix.ref), state, heldBy });
    if (found.length > MAX_BLOCKERS * 4) {
      found.sort(compareBlockers);
      found.length = MAX_BLOCKERS;
    }
  };
  const visit = (d: number): void => {
    if (++visits > WALK_BUDGET || done.has(d)) return;
    path.push(d);
    if (onPath.has(d)) leaf('cycle', null);
    else if (path.length > MAX_CHAIN) leaf('too-deep', null);
    else {
      onPath.add(d);
      const f = ix.finalizersOf(d);
      const foreign = f.filter((x) => !GC_FINALIZERS.has(x));
      const deleting = obj.deleted.get(d) > 0;
      const heldBy = foreign.length ? holder(ix, d, foreign) : null;
      if (deleting && f.includes(FOREGROUND_FINALIZER)) {
        const kids = ix.blockingDeps.get(obj.uid[d] as string) ?? [];
        if (kids.length) for (const k of kids) visit(k);
        else leaf(heldBy ? 'foreign-finalizer' : 'awaiting-gc', heldBy);
      } else if (!deleting) leaf('not-deleted', heldBy);
      else if (heldBy) leaf('foreign-finalizer', heldBy);
      else if (f.includes(ORPHAN_FINALIZER)) leaf('orphaning', null);
      else leaf('graceful', null);
      onPath.delete(d);
      done.add(d);
    }
    path.pop();
  };
  for (const d of ix.blockingDeps.get(obj.uid[root] as string) ?? []) visit(d);
  found.sort(compareBlockers);
  return { blockers: found.slice(0, MAX_BLOCKERS), total };
}

function compareBlockers(a: Blocker, b: Blocker): number {
  const held = (x: Blocker): number =>
    x.state === 'foreign-finalizer' && x.heldBy?.deleting ? 0 : 1;
  return (
    held(a) - held(b) ||
    BLOCKER_ORDER[a.state] - BLOCKER_ORDER[b.state] ||
    (a.heldBy?.deletingSince ?? '').localeCompare(b.heldBy?.deletingSince ?? '') ||
    a.chain.length - b.chain.length ||
    compareObjects(
      a.chain[a.chain.length - 1] as ObjectRef,
      b.chain[b.chain.length - 1] as ObjectRef,
    )
  );
}
