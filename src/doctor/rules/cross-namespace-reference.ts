// cross-namespace-reference: an owner found in another namespace than its
// namespaced dependent's, or a namespaced owner kind named by a
// cluster-scoped object. Both invalid: the garbage collector treats the
// first as absent and never collects the second.
import type { CrossNamespaceReference, OwnerInfo } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { dependentBase } from './dependent.ts';

export function crossNamespaceReferences(ix: SnapshotIndex): CrossNamespaceReference[] {
  const out: CrossNamespaceReference[] = [];
  for (const d of ix.unsettled) {
    if (!d.invalid) continue;
    const owners = ix.ownersOf(d);
    const bad = owners.filter(
      (x) => x.state === 'other-namespace' || x.state === 'namespaced-owner-of-cluster-scoped',
    );
    out.push({
      kind: 'cross-namespace-reference',
      ...dependentBase(ix, d.i),
      reason: (bad[0] as OwnerInfo).state,
      detail: bad
        .map((x) =>
          x.state === 'other-namespace'
            ? `owner ${x.kind} ${x.name} (uid ${x.uid}) is in namespace ${x.foundInNamespace ?? ''}: a namespaced owner must be in the dependent's namespace; the garbage collector treats it as absent`
            : `a cluster-scoped object names a namespaced owner kind (${x.kind} ${x.name}): the garbage collector never collects it`,
        )
        .join('; '),
      owners,
    });
  }
  return out;
}
