// What the three owner rules (cross-namespace-reference,
// unresolvable-owner-kind, leaked-dependent) say of every dependent: since
// its creation, the earliest its condition can have begun.
import { isoSeconds } from '../snapshot.ts';
import type { ObjectRef } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';

export function dependentBase(
  ix: SnapshotIndex,
  i: number,
): {
  object: ObjectRef;
  since: string;
  ageSeconds: number;
  sinceBasis: 'creationTimestamp';
} {
  const created = ix.s.objects.created.get(i);
  return {
    object: ix.ref(i),
    since: isoSeconds(created),
    ageSeconds: Math.max(0, ix.nowS - created),
    sinceBasis: 'creationTimestamp',
  };
}
