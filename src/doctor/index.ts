// The index every doctor rule reads, built once per snapshot: an object's
// reference and resource, its owner kinds resolved (once per kind), and one
// pass over every owner reference that gathers what the rules need (who
// blocks whom, how many dependents each object being deleted has, the
// dependents whose owners are not all there). The rules of the garbage
// collector (../shared/reference/gc-semantics.md): an owner is looked up by
// UID and by its coordinates (resource, namespace, name), a namespaced
// dependent's namespaced owner only in its own namespace, and nothing is
// concluded absent from a resource that was not listed to the end.
import {
  RestMapper,
  groupResource,
  groupVersion,
  parseApiVersion,
  type ResourceInfo,
} from '../api/resources.ts';
import { FOREGROUND_FINALIZER } from '../gc/decide.ts';
import type { ApiServiceRef, ObjectRef, OwnerInfo, OwnerState } from './findings.ts';
import {
  REF_BLOCK_OWNER_DELETION,
  REF_CONTROLLER,
  type ApiServiceInfo,
  type ResourceEntry,
  type Snapshot,
} from './snapshot.ts';

export type TypeResolution =
  | { state: 'unresolvable'; detail: string }
  | { state: 'not-scanned'; detail: string }
  | { state: 'resolved'; res: number; namespaced: boolean; resource: string };

/**
 * A dependent, not itself being deleted, whose owners are not all present,
 * and which one of the owner rules reports (at least one of the flags).
 */
export interface UnsettledDependent {
  /** The dependent's index in the snapshot. */
  i: number;
  /** Each reference's state, in the order of its owner references. */
  states: OwnerState[];
  /** Where each present or other-namespace owner was found (-1: nowhere). */
  foundAt: number[];
  /** An owner in another namespace, or a namespaced owner of a cluster-scoped object. */
  invalid: boolean;
  /** An owner kind no API serves. */
  unresolvable: boolean;
  /** Every owner absent (none unresolved), and the dependent older than the scan. */
  leaked: boolean;
}

export interface SnapshotIndex {
  readonly s: Snapshot;
  /** The analysis's now, and the scan's start, in seconds since the epoch. */
  readonly nowS: number;
  readonly startedS: number;
  ref(i: number): ObjectRef;
  infoOf(i: number): ResourceInfo;
  finalizersOf(i: number): readonly string[];
  resolveType(t: number): TypeResolution;
  /** Group/resource → its index in s.resources. */
  readonly listedByGr: ReadonlyMap<string, number>;
  /** Every unavailable APIService; null when they could not be read. */
  readonly unavailableRefs: ApiServiceRef[] | null;
  /** UID of an object in foreground deletion → its dependents with a blocking reference to it. */
  readonly blockingDeps: ReadonlyMap<string, number[]>;
  /** UID of an object being deleted → how many dependents name it. */
  readonly dependentCount: ReadonlyMap<string, number>;
  /** Blocking references between present objects that have owners (for cycles): dependent → owners. */
  readonly blockingEdges: Map<number, number[]>;
  readonly unsettled: readonly UnsettledDependent[];
  /** The full account of a dependent's references (one array per dependent, shared by its findings). */
  ownersOf(d: UnsettledDependent): OwnerInfo[];
}

function apiServiceRef(a: ApiServiceInfo): ApiServiceRef {
  return {
    name: a.name,
    service: a.service?.name ? `${a.service.namespace ?? ''}/${a.service.name}` : null,
    reason: a.reason ?? null,
    message: a.message ?? null,
  };
}

export function buildIndex(s: Snapshot, now: number): SnapshotIndex {
  const objects = objectAccessors(s);
  const types = typeResolver(s);
  const refs = referenceClassifier(s, types.resolveType);
  const byReference = indexReferences(s, refs);
  const owners = new Map<UnsettledDependent, OwnerInfo[]>();
  return {
    s,
    nowS: Math.floor(now / 1000),
    startedS: Math.floor(s.startedAt / 1000),
    ...objects,
    resolveType: types.resolveType,
    listedByGr: types.listedByGr,
    unavailableRefs: s.apiServices ? types.unavailable.map(apiServiceRef) : null,
    ...byReference,
    ownersOf(d) {
      let list = owners.get(d);
      if (!list) {
        const start = s.objects.refStart(d.i);
        list = d.states.map((st, n) => refs.ownerInfo(d.i, start + n, st, d.foundAt[n] as number));
        owners.set(d, list);
      }
      return list;
    },
  };
}

/** An object's reference (as findings name it), resource and finalizers, by its index. */
function objectAccessors(s: Snapshot): Pick<SnapshotIndex, 'ref' | 'infoOf' | 'finalizersOf'> {
  const obj = s.objects;
  const nsNames = s.interner.namespaces;
  const infoOf = (i: number): ResourceInfo => (s.resources[obj.res.get(i)] as ResourceEntry).info;
  return {
    infoOf,
    finalizersOf: (i) => obj.finalizers.get(i) ?? [],
    ref(i) {
      const r = infoOf(i);
      const ns = obj.ns.get(i);
      // Keys in the documented order, whether or not there is a namespace.
      return ns
        ? {
            apiVersion: groupVersion(r),
            kind: r.kind,
            namespace: nsNames[ns] as string,
            name: obj.name[i] as string,
            uid: obj.uid[i] as string,
          }
        : {
            apiVersion: groupVersion(r),
            kind: r.kind,
            name: obj.name[i] as string,
            uid: obj.uid[i] as string,
          };
    },
  };
}

/** Owner kinds resolved to the resources that were listed, once per kind. */
function typeResolver(s: Snapshot): {
  resolveType: (t: number) => TypeResolution;
  listedByGr: Map<string, number>;
  unavailable: ApiServiceInfo[];
} {
  const mapper = new RestMapper(s.served);
  const listedByGr = new Map<string, number>();
  s.resources.forEach((e, i) => listedByGr.set(`${e.info.group}/${e.info.resource}`, i));
  const unavailable = (s.apiServices ?? []).filter((a) => !a.available);

  /** Why nothing serves this kind: a discovery or an APIService that failed says "no conclusion". */
  const unserved = (apiVersion: string, kind: string): TypeResolution => {
    const { group, version } = parseApiVersion(apiVersion);
    const down = unavailable.find((a) => a.group === group && a.version === version);
    if (s.failedGroups.includes(group))
      return { state: 'not-scanned', detail: `discovery of group ${group} failed: no conclusion` };
    if (down)
      return {
        state: 'not-scanned',
        detail: `${apiVersion} is served by APIService ${down.name}, which is unavailable: no conclusion`,
      };
    return {
      state: 'unresolvable',
      detail: `no API serves ${kind} in ${apiVersion}${s.apiServices ? '' : ' (the APIServices could not be read)'}`,
    };
  };

  const resolve = (t: number): TypeResolution => {
    const { apiVersion, kind } = s.interner.types[t] as { apiVersion: string; kind: string };
    const r = mapper.resolve(apiVersion, kind);
    if (!r) return unserved(apiVersion, kind);
    const gr = groupResource(r);
    const res = listedByGr.get(`${r.group}/${r.resource}`);
    const entry = res === undefined ? undefined : s.resources[res];
    if (res === undefined || !entry?.listed)
      return {
        state: 'not-scanned',
        detail: `${gr} was not listed${entry?.error ? ` (${entry.error})` : ' (not a listable and deletable resource of its preferred version)'}: no conclusion`,
      };
    return { state: 'resolved', res, namespaced: r.namespaced, resource: gr };
  };

  const cache: (TypeResolution | undefined)[] = [];
  return {
    resolveType: (t) => (cache[t] ??= resolve(t)),
    listedByGr,
    unavailable,
  };
}

interface ReferenceClassifier {
  /** Classifies one reference of dependent `dep` without allocating (the common case is "present"). */
  stateOf(dep: number, k: number): OwnerState;
  /** The owner's index when the last stateOf() answered present or other-namespace. */
  found: number;
  /** The full account of one reference, for the objects that make a finding. */
  ownerInfo(dep: number, k: number, state: OwnerState, foundAt: number): OwnerInfo;
}

function referenceClassifier(
  s: Snapshot,
  resolveType: (t: number) => TypeResolution,
): ReferenceClassifier {
  const obj = s.objects;
  const nsNames = s.interner.namespaces;
  const c: ReferenceClassifier = {
    found: -1,
    stateOf(dep, k) {
      const tr = resolveType(obj.refType(k));
      if (tr.state !== 'resolved') return tr.state;
      const depNs = obj.ns.get(dep);
      if (tr.namespaced && depNs === 0) return 'namespaced-owner-of-cluster-scoped';
      const j = s.indexOf(obj.refUid[k] as string);
      // By UID and by coordinates: the garbage collector reads the owner by
      // name and compares UIDs, so a UID under another name or kind is gone.
      if (j === undefined || obj.res.get(j) !== tr.res || obj.name[j] !== obj.refName[k])
        return 'absent';
      c.found = j;
      return tr.namespaced && obj.ns.get(j) !== depNs ? 'other-namespace' : 'present';
    },
    ownerInfo(dep, k, state, foundAt) {
      const t = s.interner.types[obj.refType(k)] as { apiVersion: string; kind: string };
      const name = obj.refName[k] as string;
      const uid = obj.refUid[k] as string;
      const flags = obj.refFlags(k);
      const info: OwnerInfo = {
        apiVersion: t.apiVersion,
        kind: t.kind,
        name,
        uid,
        controller: (flags & REF_CONTROLLER) !== 0,
        blockOwnerDeletion: (flags & REF_BLOCK_OWNER_DELETION) !== 0,
        state,
        detail: 'exists',
      };
      const tr = resolveType(obj.refType(k));
      if (tr.state !== 'resolved') info.detail = tr.detail;
      else if (state === 'namespaced-owner-of-cluster-scoped')
        info.detail = `a cluster-scoped object cannot have a namespaced owner (${tr.resource}): the garbage collector never collects it`;
      else if (state === 'other-namespace') {
        info.foundInNamespace = nsNames[obj.ns.get(foundAt)] ?? '';
        info.detail = `the owner is in namespace ${info.foundInNamespace}, not the dependent's: the garbage collector treats it as absent`;
      } else if (state === 'absent')
        info.detail = `no ${tr.resource} ${tr.namespaced ? `${nsNames[obj.ns.get(dep)] ?? ''}/` : ''}${name} with uid ${uid}`;
      return info;
    },
  };
  return c;
}

type ReferenceIndex = Pick<
  SnapshotIndex,
  'blockingDeps' | 'dependentCount' | 'blockingEdges' | 'unsettled'
>;

/** One pass over every owner reference. */
function indexReferences(s: Snapshot, refs: ReferenceClassifier): ReferenceIndex {
  const obj = s.objects;
  const foreground = new Set<string>();
  /** Every object being deleted, for its dependents count. */
  const deletingUids = new Set<string>();
  for (let i = 0; i < obj.length; i++) {
    if (!obj.deleted.get(i)) continue;
    if ((obj.finalizers.get(i) ?? []).includes(FOREGROUND_FINALIZER))
      foreground.add(obj.uid[i] as string);
    deletingUids.add(obj.uid[i] as string);
  }
  const out = {
    blockingDeps: new Map<string, number[]>(),
    dependentCount: new Map<string, number>(),
    blockingEdges: new Map<number, number[]>(),
    unsettled: [] as UnsettledDependent[],
  };
  const push = <K>(m: Map<K, number[]>, key: K, v: number): void => {
    const list = m.get(key);
    if (list) list.push(v);
    else m.set(key, [v]);
  };

  // Scratch for one dependent's references: the common case (every owner
  // present) allocates nothing.
  const states: OwnerState[] = [];
  const foundAt: number[] = [];
  for (let i = 0; i < obj.length; i++) {
    const start = obj.refStart(i);
    const end = obj.refEnd(i);
    if (start === end) continue;
    let present = 0;
    let absent = 0;
    let elsewhere = 0;
    let other = 0;
    states.length = 0;
    foundAt.length = 0;
    for (let k = start; k < end; k++) {
      const uid = obj.refUid[k] as string;
      const block = (obj.refFlags(k) & REF_BLOCK_OWNER_DELETION) !== 0;
      if (deletingUids.has(uid))
        out.dependentCount.set(uid, (out.dependentCount.get(uid) ?? 0) + 1);
      if (block && foreground.has(uid)) push(out.blockingDeps, uid, i);
      refs.found = -1;
      const st = refs.stateOf(i, k);
      const found = refs.found;
      states.push(st);
      foundAt.push(found);
      if (st === 'present') {
        present++;
        // An owner with no owners of its own cannot be on a cycle: keeping
        // only the others leaves the edge map small (Pods → ReplicaSets, not
        // ReplicaSets → Deployments).
        if (block && obj.refStart(found) !== obj.refEnd(found)) push(out.blockingEdges, i, found);
      } else if (st === 'absent') absent++;
      else if (st === 'other-namespace') elsewhere++;
      else other++;
    }
    if (present === end - start) continue;
    // An object being deleted is reported as such; what its owners do no longer matters.
    if (obj.deleted.get(i)) continue;
    const invalid = elsewhere > 0 || states.includes('namespaced-owner-of-cluster-scoped');
    const unresolvable = states.includes('unresolvable');
    // Created after the scan began: its owner may have been created after
    // the owner's resource was listed, so its absence proves nothing.
    const leaked =
      present === 0 &&
      other === 0 &&
      absent > 0 &&
      obj.created.get(i) <= Math.floor(s.startedAt / 1000);
    if (!invalid && !unresolvable && !leaked) continue;
    out.unsettled.push({
      i,
      states: [...states],
      foundAt: [...foundAt],
      invalid,
      unresolvable,
      leaked,
    });
  }
  return out;
}
