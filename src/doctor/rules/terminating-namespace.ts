// terminating-namespace: a namespace being deleted, and what holds it: the
// namespace controller's conditions that are True, what is left in it (by
// resource, with finalizers), the unavailable APIServices that stop every
// namespace's deletion.
import { groupResource } from '../../api/resources.ts';
import { plural, type RemainingResource, type TerminatingNamespace } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { isoSeconds } from '../snapshot.ts';

const MAX_EXAMPLES = 5;
const NAMESPACE_CONDITIONS = [
  'NamespaceDeletionDiscoveryFailure',
  'NamespaceDeletionContentFailure',
  'NamespaceFinalizersRemaining',
  'NamespaceContentRemaining',
];

export function terminatingNamespaces(ix: SnapshotIndex): TerminatingNamespace[] {
  const { s, ref, infoOf, finalizersOf, nowS, unavailableRefs } = ix;
  const obj = s.objects;
  const findings: TerminatingNamespace[] = [];
  const terminating = (s.namespaces ?? []).filter(
    (n) => n.deleted > 0 || n.phase === 'Terminating',
  );
  if (terminating.length > 0) {
    const byNs = new Map<number, Map<number, RemainingResource>>();
    for (const n of terminating) {
      const k = s.interner.namespaceIfKnown(n.name);
      if (k > 0) byNs.set(k, new Map());
    }
    for (let i = 0; i < obj.length; i++) {
      const groups = byNs.get(obj.ns.get(i));
      if (!groups) continue;
      const res = obj.res.get(i);
      let g = groups.get(res);
      if (!g) {
        const r = ref(i);
        g = {
          resource: groupResource(infoOf(i)),
          apiVersion: r.apiVersion,
          kind: r.kind,
          count: 0,
          deleting: 0,
          finalizers: {},
          examples: [],
        };
        groups.set(res, g);
      }
      g.count++;
      if (obj.deleted.get(i)) g.deleting++;
      const f = finalizersOf(i);
      for (const x of f) g.finalizers[x] = (g.finalizers[x] ?? 0) + 1;
      const name = obj.name[i] as string;
      if (f.length) {
        // Those with finalizers are the ones that hold the namespace: show them first.
        g.examples.unshift(name);
        if (g.examples.length > MAX_EXAMPLES) g.examples.pop();
      } else if (g.examples.length < MAX_EXAMPLES) g.examples.push(name);
    }
    for (const n of terminating) {
      const conditions = n.conditions.filter(
        (c) => NAMESPACE_CONDITIONS.includes(c.type) && c.status === 'True',
      );
      conditions.sort(
        (a, b) => NAMESPACE_CONDITIONS.indexOf(a.type) - NAMESPACE_CONDITIONS.indexOf(b.type),
      );
      const groups = [...(byNs.get(s.interner.namespaceIfKnown(n.name))?.values() ?? [])].sort(
        (a, b) => b.count - a.count || a.resource.localeCompare(b.resource),
      );
      const remainingTotal = groups.reduce((t, g) => t + g.count, 0);
      const parts: string[] = conditions.map((c) => `${c.type}: ${c.message ?? c.reason ?? ''}`);
      if (remainingTotal > 0) {
        parts.push(
          `${plural(remainingTotal, 'object')} remain: ${groups
            .map((g) => {
              const fins = Object.entries(g.finalizers).map(([k, v]) => `${k} ×${v}`);
              return `${g.resource} ${g.count}${fins.length ? ` (finalizers: ${fins.join(', ')})` : ''}`;
            })
            .join(', ')}`,
        );
      }
      if (
        conditions.some((c) => c.type === 'NamespaceDeletionDiscoveryFailure') &&
        unavailableRefs?.length
      )
        parts.push(`unavailable APIServices: ${unavailableRefs.map((a) => a.name).join(', ')}`);
      if (conditions.length === 0 && remainingTotal === 0)
        parts.push(
          n.specFinalizers.length
            ? `nothing is left in it, but spec.finalizers still holds ${n.specFinalizers.join(', ')}: the namespace controller (kube-controller-manager) has not finished; is it running?`
            : 'nothing is left in it; it should go momentarily',
        );
      const deleted = n.deleted || nowS;
      findings.push({
        kind: 'terminating-namespace',
        object: { apiVersion: 'v1', kind: 'Namespace', name: n.name, uid: n.uid },
        since: isoSeconds(deleted),
        ageSeconds: Math.max(0, nowS - deleted),
        sinceBasis: 'deletionTimestamp',
        reason:
          conditions[0]?.type ??
          (remainingTotal > 0
            ? 'ContentRemaining'
            : n.specFinalizers.length
              ? 'FinalizersPending'
              : 'Terminating'),
        detail: parts.join('; '),
        phase: n.phase ?? null,
        finalizers: n.finalizers,
        specFinalizers: n.specFinalizers,
        conditions,
        remaining: groups,
        remainingTotal,
        unavailableAPIServices: unavailableRefs,
      });
    }
  }
  return findings;
}
