// unresolvable-owner-kind: an owner reference whose apiVersion and kind no
// API serves (and no failed discovery or unavailable APIService explains).
// The garbage collector never deletes the dependent on that basis.
import type { UnresolvableOwnerKind } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { dependentBase } from './dependent.ts';

export function unresolvableOwnerKinds(ix: SnapshotIndex): UnresolvableOwnerKind[] {
  const out: UnresolvableOwnerKind[] = [];
  for (const d of ix.unsettled) {
    if (!d.unresolvable) continue;
    const owners = ix.ownersOf(d);
    out.push({
      kind: 'unresolvable-owner-kind',
      ...dependentBase(ix, d.i),
      reason: 'unresolvable-owner-kind',
      detail: `${owners
        .filter((x) => x.state === 'unresolvable')
        .map((x) => `owner ${x.kind} ${x.name}: ${x.detail}`)
        .join('; ')}: the garbage collector never deletes it on that basis`,
      owners,
    });
  }
  return out;
}
