// leaked-dependent: every owner gone (absent by UID and coordinates, none
// unresolved or unlisted), the dependent older than the scan. An owner whose
// name another object has now was replaced: still gone, and said so.
import type { LeakedDependent, OwnerInfo } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { dependentBase } from './dependent.ts';

export function leakedDependents(ix: SnapshotIndex): LeakedDependent[] {
  const obj = ix.s.objects;
  const out: LeakedDependent[] = [];
  /** Absent references to re-check for `replaced`: key (resource, namespace, name) → infos. */
  const absentByCoordinates = new Map<string, OwnerInfo[]>();
  for (const d of ix.unsettled) {
    if (!d.leaked) continue;
    const owners = ix.ownersOf(d);
    const start = obj.refStart(d.i);
    d.states.forEach((st, n) => {
      const k = start + n;
      const tr = ix.resolveType(obj.refType(k));
      if (st !== 'absent' || tr.state !== 'resolved') return;
      const key = `${tr.res}\0${tr.namespaced ? obj.ns.get(d.i) : 0}\0${obj.refName[k] as string}`;
      const x = owners[n] as OwnerInfo;
      const list = absentByCoordinates.get(key);
      if (list) list.push(x);
      else absentByCoordinates.set(key, [x]);
    });
    out.push({
      kind: 'leaked-dependent',
      ...dependentBase(ix, d.i),
      reason: 'owners-gone',
      detail: '',
      owners,
    });
  }

  // Owners absent by UID whose name another object now has: the owner was
  // replaced (deleted and created again), which is still "gone".
  if (absentByCoordinates.size > 0) {
    const wanted = new Set<number>();
    for (const key of absentByCoordinates.keys())
      wanted.add(Number(key.slice(0, key.indexOf('\0'))));
    for (let j = 0; j < obj.length; j++) {
      const res = obj.res.get(j);
      if (!wanted.has(res)) continue;
      const infos = absentByCoordinates.get(`${res}\0${obj.ns.get(j)}\0${obj.name[j] as string}`);
      for (const x of infos ?? []) {
        x.state = 'replaced';
        x.detail = `${x.detail}; another object has that name now (uid ${obj.uid[j] as string})`;
      }
    }
  }
  for (const f of out)
    f.detail = `every owner is gone: ${f.owners.map((x) => `${x.kind} ${x.name} (uid ${x.uid}) ${x.state === 'replaced' ? 'was replaced by another object of that name' : x.state === 'other-namespace' ? `is in namespace ${x.foundInNamespace ?? ''} (invalid)` : 'not found'}`).join('; ')}; the garbage collector deletes it (is one running?)`;
  return out;
}
