// What `kubegc doctor` concludes from a Snapshot: pure functions, no API
// calls, so every rule below is unit-tested on hand-made snapshots. The rules
// are the garbage collector's (../shared/reference/gc-semantics.md): an owner
// is looked up by UID and by its coordinates (resource, namespace, name), a
// namespaced dependent's namespaced owner only in its own namespace, and
// nothing is concluded absent from a resource that was not listed to the end.
import {
  RestMapper,
  groupResource,
  groupVersion,
  parseApiVersion,
  type ResourceInfo,
} from '../api/resources.ts';
import { FOREGROUND_FINALIZER, ORPHAN_FINALIZER } from '../gc/decide.ts';
import {
  REF_BLOCK_OWNER_DELETION,
  REF_CONTROLLER,
  isoSeconds,
  type ApiServiceInfo,
  type NamespaceCondition,
  type NotScanned,
  type ResourceEntry,
  type Snapshot,
} from './snapshot.ts';
import type { GcView } from './gc-metrics.ts';

export const SCHEMA_VERSION = 1;

/** In the order the report groups them. */
export const FINDING_KINDS = [
  'stuck-deletion',
  'terminating-namespace',
  'leaked-dependent',
  'cross-namespace-reference',
  'unresolvable-owner-kind',
  'blocking-cycle',
] as const;
export type FindingKind = (typeof FINDING_KINDS)[number];

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
}

interface FindingBase {
  kind: FindingKind;
  object: ObjectRef;
  /** When the condition began, or the earliest it can have begun (see sinceBasis). */
  since: string;
  ageSeconds: number;
  /**
   * deletionTimestamp: since is when the deletion began. creationTimestamp:
   * the object's (for a cycle, its youngest member's) creation, the earliest
   * the condition can have begun: a leak begins when the last owner goes,
   * which no object records.
   */
  sinceBasis: 'deletionTimestamp' | 'creationTimestamp';
  /** A stable code. */
  reason: string;
  /** The same in plain words. */
  detail: string;
}

export interface Holder {
  object: ObjectRef;
  /** Its finalizers other than the garbage collector's (orphan, foregroundDeletion). */
  finalizers: string[];
  /** It has a deletionTimestamp: the finalizers are what keeps it. */
  deleting: boolean;
  /** Its deletionTimestamp; null when it is not being deleted. */
  deletingSince: string | null;
}

export type BlockerState =
  /** The end of the chain carries a finalizer that is not the garbage collector's. */
  | 'foreign-finalizer'
  /** A blocking dependent nobody has deleted yet: the garbage collector's job. */
  | 'not-deleted'
  /** A dependent in foreground deletion with no blocking dependent left: the garbage collector's job. */
  | 'awaiting-gc'
  /** A dependent being deleted with Orphan: the garbage collector's job. */
  | 'orphaning'
  /** Being deleted, no finalizers (a Pod waiting for its kubelet). */
  | 'graceful'
  /** The chain came back to an object already on it. */
  | 'cycle'
  /** The chain is longer than doctor follows. */
  | 'too-deep';

export interface Blocker {
  /** From the stuck object (first) down to the object that holds it (last). */
  chain: ObjectRef[];
  state: BlockerState;
  heldBy: Holder | null;
}

export interface StuckDeletion extends FindingBase {
  kind: 'stuck-deletion';
  finalizers: string[];
  gcFinalizers: string[];
  foreignFinalizers: string[];
  /** Dependents whose reference to this object has blockOwnerDeletion. */
  blockingDependents: number;
  /** Every dependent (what an orphan deletion waits to orphan). */
  dependents: number;
  /** Where each blocking chain ends, the ones held by foreign finalizers first (at most 20). */
  blockers: Blocker[];
  blockersTotal: number;
  /** blockers[0]'s, or [object] and its own foreign finalizers when nothing blocks it from below. */
  chain: ObjectRef[];
  heldBy: Holder | null;
}

export interface RemainingResource {
  resource: string;
  apiVersion: string;
  kind: string;
  count: number;
  deleting: number;
  /** Finalizer → how many of these objects carry it. */
  finalizers: Record<string, number>;
  /** A few names, those with finalizers first. */
  examples: string[];
}

export interface ApiServiceRef {
  name: string;
  service: string | null;
  reason: string | null;
  message: string | null;
}

export interface TerminatingNamespace extends FindingBase {
  kind: 'terminating-namespace';
  phase: string | null;
  finalizers: string[];
  specFinalizers: string[];
  /** The namespace controller's conditions that are True, as it wrote them. */
  conditions: NamespaceCondition[];
  remaining: RemainingResource[];
  remainingTotal: number;
  /** Every unavailable APIService (they stop every namespace's deletion); null: not readable. */
  unavailableAPIServices: ApiServiceRef[] | null;
}

export type OwnerState =
  | 'present'
  /** No object of the owner's kind has its UID with its name (in the right namespace). */
  | 'absent'
  /** Absent, and another object (another UID) now has its name. */
  | 'replaced'
  /** Found, but in another namespace: invalid, the garbage collector treats it as absent. */
  | 'other-namespace'
  /** A cluster-scoped dependent names a namespaced owner kind: invalid, never collected. */
  | 'namespaced-owner-of-cluster-scoped'
  /** No API serves the owner's apiVersion/kind. */
  | 'unresolvable'
  /** Its resource was not (or not completely) listed: no conclusion. */
  | 'not-scanned';

export interface OwnerInfo {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
  blockOwnerDeletion: boolean;
  state: OwnerState;
  /** Where an other-namespace owner was found. */
  foundInNamespace?: string;
  detail: string;
}

export interface LeakedDependent extends FindingBase {
  kind: 'leaked-dependent';
  owners: OwnerInfo[];
}
export interface CrossNamespaceReference extends FindingBase {
  kind: 'cross-namespace-reference';
  owners: OwnerInfo[];
}
export interface UnresolvableOwnerKind extends FindingBase {
  kind: 'unresolvable-owner-kind';
  owners: OwnerInfo[];
}
export interface BlockingCycle extends FindingBase {
  kind: 'blocking-cycle';
  /** Each member has a blocking reference to the next; the last to the first. */
  chain: ObjectRef[];
  /** Objects in the strongly connected component (may exceed the one cycle shown). */
  members: number;
}

export type Finding =
  | StuckDeletion
  | TerminatingNamespace
  | LeakedDependent
  | CrossNamespaceReference
  | UnresolvableOwnerKind
  | BlockingCycle;

export interface Report {
  schemaVersion: typeof SCHEMA_VERSION;
  scannedAt: string;
  durationSeconds: number;
  scope: { namespace: string | null; olderThanSeconds: number | null };
  findings: Finding[];
  notScanned: NotScanned[];
  unavailableAPIServices: ApiServiceRef[] | null;
  /** With --gc-metrics: the running controller's work queues by lane (gc-metrics.ts). */
  gc?: GcView;
  summary: {
    findings: number;
    byKind: Record<FindingKind, number>;
    /** Findings younger than --older-than, left out. */
    hiddenByOlderThan: number;
    notScanned: number;
    objects: number;
    resources: number;
  };
}

export interface AnalyzeOptions {
  /** ms since the epoch. */
  now: number;
  olderThanSeconds?: number;
}

const GC_FINALIZERS = new Set([FOREGROUND_FINALIZER, ORPHAN_FINALIZER]);
const MAX_BLOCKERS = 20;
const MAX_CHAIN = 50;
/** Objects visited below one stuck object (a Deployment in foreground deletion with 100k Pods). */
const WALK_BUDGET = 100_000;
const MAX_EXAMPLES = 5;
const NAMESPACE_CONDITIONS = [
  'NamespaceDeletionDiscoveryFailure',
  'NamespaceDeletionContentFailure',
  'NamespaceFinalizersRemaining',
  'NamespaceContentRemaining',
];
const BLOCKER_ORDER: Record<BlockerState, number> = {
  'foreign-finalizer': 0,
  cycle: 1,
  'not-deleted': 2,
  orphaning: 3,
  graceful: 4,
  'awaiting-gc': 5,
  'too-deep': 6,
};

type TypeResolution =
  | { state: 'unresolvable'; detail: string }
  | { state: 'not-scanned'; detail: string }
  | { state: 'resolved'; res: number; namespaced: boolean; resource: string };

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** 3d4h, 5m12s, 40s: kubectl's style, two units at most. */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d > 0) return h ? `${d}d${h}h` : `${d}d`;
  if (h > 0) return m ? `${h}h${m}m` : `${h}h`;
  if (m > 0) return sec ? `${m}m${sec}s` : `${m}m`;
  return `${sec}s`;
}

function apiServiceRef(a: ApiServiceInfo): ApiServiceRef {
  return {
    name: a.name,
    service: a.service?.name ? `${a.service.namespace ?? ''}/${a.service.name}` : null,
    reason: a.reason ?? null,
    message: a.message ?? null,
  };
}

export function analyze(s: Snapshot, o: AnalyzeOptions): Report {
  const nowS = Math.floor(o.now / 1000);
  const startedS = Math.floor(s.startedAt / 1000);
  const obj = s.objects;
  const nsNames = s.interner.namespaces;
  const types = s.interner.types;
  const finalizersOf = (i: number): readonly string[] => obj.finalizers.get(i) ?? [];

  const infoOf = (i: number): ResourceInfo => (s.resources[obj.res.get(i)] as ResourceEntry).info;
  const ref = (i: number): ObjectRef => {
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
  };

  // --- owner kinds -------------------------------------------------------
  const mapper = new RestMapper(s.served);
  const listedByGr = new Map<string, number>();
  s.resources.forEach((e, i) => listedByGr.set(`${e.info.group}/${e.info.resource}`, i));
  const unavailable = (s.apiServices ?? []).filter((a) => !a.available);
  const typeCache: (TypeResolution | undefined)[] = [];
  const resolveType = (t: number): TypeResolution => {
    const cached = typeCache[t];
    if (cached) return cached;
    const { apiVersion, kind } = types[t] as { apiVersion: string; kind: string };
    let out: TypeResolution;
    const r = mapper.resolve(apiVersion, kind);
    if (!r) {
      const { group, version } = parseApiVersion(apiVersion);
      const down = unavailable.find((a) => a.group === group && a.version === version);
      if (s.failedGroups.includes(group))
        out = { state: 'not-scanned', detail: `discovery of group ${group} failed: no conclusion` };
      else if (down)
        out = {
          state: 'not-scanned',
          detail: `${apiVersion} is served by APIService ${down.name}, which is unavailable: no conclusion`,
        };
      else
        out = {
          state: 'unresolvable',
          detail: `no API serves ${kind} in ${apiVersion}${s.apiServices ? '' : ' (the APIServices could not be read)'}`,
        };
    } else {
      const gr = groupResource(r);
      const res = listedByGr.get(`${r.group}/${r.resource}`);
      const entry = res === undefined ? undefined : s.resources[res];
      if (res === undefined || !entry?.listed)
        out = {
          state: 'not-scanned',
          detail: `${gr} was not listed${entry?.error ? ` (${entry.error})` : ' (not a listable and deletable resource of its preferred version)'}: no conclusion`,
        };
      else out = { state: 'resolved', res, namespaced: r.namespaced, resource: gr };
    }
    typeCache[t] = out;
    return out;
  };

  /** The owner's index when the last stateOf() answered present or other-namespace. */
  let found = -1;
  /** Classifies one reference of dependent `dep` without allocating (the common case is "present"). */
  const stateOf = (dep: number, k: number): OwnerState => {
    const tr = resolveType(obj.refType(k));
    if (tr.state !== 'resolved') return tr.state;
    const depNs = obj.ns.get(dep);
    if (tr.namespaced && depNs === 0) return 'namespaced-owner-of-cluster-scoped';
    const j = s.indexOf(obj.refUid[k] as string);
    // By UID and by coordinates: the garbage collector reads the owner by
    // name and compares UIDs, so a UID under another name or kind is gone.
    if (j === undefined || obj.res.get(j) !== tr.res || obj.name[j] !== obj.refName[k])
      return 'absent';
    found = j;
    return tr.namespaced && obj.ns.get(j) !== depNs ? 'other-namespace' : 'present';
  };

  /** The full account of one reference, for the objects that make a finding. */
  const ownerInfo = (dep: number, k: number, state: OwnerState, foundAt: number): OwnerInfo => {
    const t = types[obj.refType(k)] as { apiVersion: string; kind: string };
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
  };

  // --- one pass over the owner references --------------------------------
  const foreground = new Set<string>();
  /** Every object being deleted, for its dependents count. */
  const deletingUids = new Set<string>();
  for (let i = 0; i < obj.length; i++) {
    if (!obj.deleted.get(i)) continue;
    const f = finalizersOf(i);
    if (f.includes(FOREGROUND_FINALIZER)) foreground.add(obj.uid[i] as string);
    deletingUids.add(obj.uid[i] as string);
  }
  const blockingDeps = new Map<string, number[]>();
  const dependentCount = new Map<string, number>();
  const ownerFindings: Finding[] = [];
  /** Absent references to re-check for `replaced`: key (resource, namespace, name) → infos. */
  const absentByCoordinates = new Map<string, OwnerInfo[]>();
  /** Blocking edges between present objects (for cycles): dependent → owners. */
  const blockingEdges = new Map<number, number[]>();

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
      if (deletingUids.has(uid)) dependentCount.set(uid, (dependentCount.get(uid) ?? 0) + 1);
      if (block && foreground.has(uid)) {
        const list = blockingDeps.get(uid);
        if (list) list.push(i);
        else blockingDeps.set(uid, [i]);
      }
      found = -1;
      const st = stateOf(i, k);
      states.push(st);
      foundAt.push(found);
      if (st === 'present') {
        present++;
        // An owner with no owners of its own cannot be on a cycle: keeping
        // only the others leaves the edge map small (Pods → ReplicaSets, not
        // ReplicaSets → Deployments).
        if (block && obj.refStart(found) !== obj.refEnd(found)) {
          const list = blockingEdges.get(i);
          if (list) list.push(found);
          else blockingEdges.set(i, [found]);
        }
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
    const created = obj.created.get(i);
    const leaked = present === 0 && other === 0 && absent > 0 && created <= startedS;
    if (!invalid && !unresolvable && !leaked) continue;
    const owners: OwnerInfo[] = [];
    for (let k = start; k < end; k++)
      owners.push(ownerInfo(i, k, states[k - start] as OwnerState, foundAt[k - start] as number));
    const base = {
      object: ref(i),
      since: isoSeconds(created),
      ageSeconds: Math.max(0, nowS - created),
      sinceBasis: 'creationTimestamp' as const,
    };
    if (invalid) {
      const bad = owners.filter(
        (x) => x.state === 'other-namespace' || x.state === 'namespaced-owner-of-cluster-scoped',
      );
      ownerFindings.push({
        kind: 'cross-namespace-reference',
        ...base,
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
    if (unresolvable) {
      ownerFindings.push({
        kind: 'unresolvable-owner-kind',
        ...base,
        reason: 'unresolvable-owner-kind',
        detail: `${owners
          .filter((x) => x.state === 'unresolvable')
          .map((x) => `owner ${x.kind} ${x.name}: ${x.detail}`)
          .join('; ')}: the garbage collector never deletes it on that basis`,
        owners,
      });
    }
    if (leaked) {
      for (let k = start; k < end; k++) {
        const tr = resolveType(obj.refType(k));
        if (states[k - start] !== 'absent' || tr.state !== 'resolved') continue;
        const key = `${tr.res}\0${tr.namespaced ? obj.ns.get(i) : 0}\0${obj.refName[k] as string}`;
        const x = owners[k - start] as OwnerInfo;
        const list = absentByCoordinates.get(key);
        if (list) list.push(x);
        else absentByCoordinates.set(key, [x]);
      }
      ownerFindings.push({
        kind: 'leaked-dependent',
        ...base,
        reason: 'owners-gone',
        detail: '',
        owners,
      });
    }
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
  for (const f of ownerFindings) {
    if (f.kind !== 'leaked-dependent') continue;
    f.detail = `every owner is gone: ${f.owners.map((x) => `${x.kind} ${x.name} (uid ${x.uid}) ${x.state === 'replaced' ? 'was replaced by another object of that name' : x.state === 'other-namespace' ? `is in namespace ${x.foundInNamespace ?? ''} (invalid)` : 'not found'}`).join('; ')}; the garbage collector deletes it (is one running?)`;
  }

  // --- stuck in deletion --------------------------------------------------
  const holder = (i: number, finalizers: string[]): Holder => {
    const deleted = obj.deleted.get(i);
    return {
      object: ref(i),
      finalizers,
      deleting: deleted > 0,
      deletingSince: deleted > 0 ? isoSeconds(deleted) : null,
    };
  };
  const blockersOf = (root: number): { blockers: Blocker[]; total: number } => {
    const found: Blocker[] = [];
    let total = 0;
    let visits = 0;
    const path: number[] = [root];
    const onPath = new Set<number>([root]);
    const done = new Set<number>();
    const leaf = (state: BlockerState, heldBy: Holder | null): void => {
      total++;
      // Keep the best MAX_BLOCKERS; sorted at the end.
      found.push({ chain: path.map(ref), state, heldBy });
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
        const f = finalizersOf(d);
        const foreign = f.filter((x) => !GC_FINALIZERS.has(x));
        const deleting = obj.deleted.get(d) > 0;
        const heldBy = foreign.length ? holder(d, foreign) : null;
        if (deleting && f.includes(FOREGROUND_FINALIZER)) {
          const kids = blockingDeps.get(obj.uid[d] as string) ?? [];
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
    for (const d of blockingDeps.get(obj.uid[root] as string) ?? []) visit(d);
    found.sort(compareBlockers);
    return { blockers: found.slice(0, MAX_BLOCKERS), total };
  };

  const findings: Finding[] = [];
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
    const own = foreign.length ? holder(i, foreign) : null;
    const { blockers, total } = f.includes(FOREGROUND_FINALIZER)
      ? blockersOf(i)
      : { blockers: [], total: 0 };
    const first = blockers[0];
    let reason: string;
    let detail: string;
    const ownPart = foreign.length
      ? `held by ${foreign.length === 1 ? 'finalizer' : 'finalizers'} ${foreign.join(', ')} for ${formatAge(age)} (since its deletionTimestamp): whatever controller owns ${foreign.length === 1 ? 'it' : 'them'} has not removed ${foreign.length === 1 ? 'it' : 'them'}`
      : '';
    if (f.includes(FOREGROUND_FINALIZER)) {
      if (first) {
        reason = 'waiting-for-dependents';
        detail = `foregroundDeletion: waiting for ${plural(blockingDeps.get(uid)?.length ?? 0, 'blocking dependent')}; ${describeBlocker(first)}${total > 1 ? ` (and ${total - 1} more)` : ''}`;
      } else {
        reason = 'foreground-no-blockers';
        detail =
          'foregroundDeletion with no blocking dependent left: the garbage collector removes that finalizer (is one running?)';
      }
      if (ownPart) detail += `; then ${ownPart}`;
    } else if (f.includes(ORPHAN_FINALIZER)) {
      reason = 'orphaning';
      detail = `orphan: the garbage collector removes the references of its ${plural(dependentCount.get(uid) ?? 0, 'dependent')}, then this finalizer (is one running?)`;
      if (ownPart) detail += `; then ${ownPart}`;
    } else if (foreign.length) {
      reason = 'foreign-finalizers';
      detail = ownPart;
    } else {
      reason = 'graceful';
      detail =
        'no finalizers: a graceful deletion still running (a Pod waits for its kubelet to confirm)';
    }
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

  // --- terminating namespaces ---------------------------------------------
  const unavailableRefs = s.apiServices ? unavailable.map(apiServiceRef) : null;
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

  findings.push(...ownerFindings);
  findings.push(...blockingCycles(blockingEdges, obj.created, ref, nowS));

  // --- scope, age, order ----------------------------------------------------
  const inScope = (f: Finding): boolean =>
    !s.namespace ||
    (f.kind === 'terminating-namespace'
      ? f.object.name === s.namespace
      : f.object.namespace === s.namespace);
  const scoped = findings.filter(inScope);
  const minAge = o.olderThanSeconds ?? 0;
  const kept = scoped.filter((f) => f.ageSeconds >= minAge);
  kept.sort(compareFindings);
  const byKind = Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])) as Record<
    FindingKind,
    number
  >;
  for (const f of kept) byKind[f.kind]++;
  return {
    schemaVersion: SCHEMA_VERSION,
    scannedAt: new Date(s.startedAt).toISOString(),
    durationSeconds: Math.round((s.finishedAt - s.startedAt) / 10) / 100,
    scope: { namespace: s.namespace ?? null, olderThanSeconds: o.olderThanSeconds ?? null },
    findings: kept,
    notScanned: [...s.notScanned].sort((a, b) => a.resource.localeCompare(b.resource)),
    unavailableAPIServices: unavailableRefs,
    summary: {
      findings: kept.length,
      byKind,
      hiddenByOlderThan: scoped.length - kept.length,
      notScanned: s.notScanned.length,
      objects: obj.length,
      resources: s.resources.filter((r) => r.listed).length,
    },
  };
}

function describeObject(r: ObjectRef): string {
  return `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
}

export function describeBlocker(b: Blocker): string {
  const path = b.chain.slice(1).map(describeObject).join(' → ');
  const last = b.chain[b.chain.length - 1] as ObjectRef;
  const held = b.heldBy
    ? `finalizer${b.heldBy.finalizers.length === 1 ? '' : 's'} ${b.heldBy.finalizers.join(', ')}`
    : '';
  switch (b.state) {
    case 'foreign-finalizer':
      return `${path}: held by ${held}${b.heldBy?.deletingSince ? ` (deleting since ${b.heldBy.deletingSince})` : ''}`;
    case 'not-deleted':
      return `${path}: not being deleted yet; the garbage collector deletes it first (is one running?)${held ? `, then its ${held} will hold it` : ''}`;
    case 'awaiting-gc':
      return `${path}: in foreground deletion with no blocking dependent left; the garbage collector removes its foregroundDeletion (is one running?)`;
    case 'orphaning':
      return `${path}: being deleted with Orphan; the garbage collector removes its orphan finalizer (is one running?)`;
    case 'graceful':
      return `${path}: being deleted gracefully (a Pod waits for its kubelet)`;
    case 'cycle':
      return `${path}: a cycle of blocking references back to ${describeObject(last)} (the garbage collector breaks it by unblocking a reference; is one running?)`;
    case 'too-deep':
      return `${path}: the chain goes deeper than ${MAX_CHAIN} objects`;
  }
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

function compareObjects(a: ObjectRef, b: ObjectRef): number {
  return (
    (a.namespace ?? '').localeCompare(b.namespace ?? '') ||
    a.kind.localeCompare(b.kind) ||
    a.name.localeCompare(b.name) ||
    a.uid.localeCompare(b.uid)
  );
}

function compareFindings(a: Finding, b: Finding): number {
  return (
    FINDING_KINDS.indexOf(a.kind) - FINDING_KINDS.indexOf(b.kind) ||
    a.since.localeCompare(b.since) ||
    compareObjects(a.object, b.object)
  );
}

/**
 * Strongly connected components of the blocking references between objects
 * that exist (Tarjan's, iterative: an ownership chain can be long). Each
 * component of two or more objects, or one object that blocks on itself,
 * is a cycle a foreground deletion can never finish without a garbage
 * collector breaking it.
 */
function blockingCycles(
  edges: Map<number, number[]>,
  created: { get(i: number): number },
  ref: (i: number) => ObjectRef,
  nowS: number,
): BlockingCycle[] {
  const index = new Map<number, number>();
  const low = new Map<number, number>();
  const onStack = new Set<number>();
  const stack: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  for (const start of edges.keys()) {
    if (index.has(start)) continue;
    const work: { v: number; next: number }[] = [{ v: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const top = work[work.length - 1] as { v: number; next: number };
      const out = edges.get(top.v) ?? [];
      if (top.next < out.length) {
        const w = out[top.next++] as number;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, next: 0 });
        } else if (onStack.has(w)) {
          low.set(top.v, Math.min(low.get(top.v) as number, index.get(w) as number));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent)
        low.set(parent.v, Math.min(low.get(parent.v) as number, low.get(top.v) as number));
      if (low.get(top.v) === index.get(top.v)) {
        const comp: number[] = [];
        let w: number;
        do {
          w = stack.pop() as number;
          onStack.delete(w);
          comp.push(w);
        } while (w !== top.v);
        if (comp.length > 1 || (edges.get(top.v) ?? []).includes(top.v)) components.push(comp);
      }
    }
  }
  return components.map((comp) => {
    const members = new Set(comp);
    const refs = comp.map((i) => ({ i, r: ref(i) }));
    refs.sort((a, b) => compareObjects(a.r, b.r));
    const rep = (refs[0] as { i: number }).i;
    // The shortest cycle through the representative, by breadth-first search.
    const prev = new Map<number, number>();
    const queue = [rep];
    let closing = -1;
    for (let q = 0; q < queue.length && closing === -1; q++) {
      const v = queue[q] as number;
      for (const w of edges.get(v) ?? []) {
        if (!members.has(w)) continue;
        if (w === rep) {
          closing = v;
          break;
        }
        if (!prev.has(w)) {
          prev.set(w, v);
          queue.push(w);
        }
      }
    }
    const cycle: number[] = [];
    for (let v = closing; v !== rep && v !== -1; v = prev.get(v) ?? -1) cycle.unshift(v);
    cycle.unshift(rep);
    const youngest = Math.max(...comp.map((i) => created.get(i)));
    const chain = cycle.map(ref);
    return {
      kind: 'blocking-cycle' as const,
      object: chain[0] as ObjectRef,
      since: isoSeconds(youngest),
      ageSeconds: Math.max(0, nowS - youngest),
      sinceBasis: 'creationTimestamp' as const,
      reason: 'blocking-cycle',
      detail: `${[...chain, chain[0] as ObjectRef].map(describeObject).join(' → ')}: every reference has blockOwnerDeletion, so a foreground deletion of any of them waits on itself until a garbage collector unblocks a reference`,
      chain,
      members: comp.length,
    };
  });
}

export function exitCode(r: Report): number {
  return r.findings.length > 0 ? 1 : 0;
}
