// The propagator: the ONE writer of the ownership graph. It applies informer
// events (and virtual deletes verified by workers) strictly in arrival order
// and pushes the UIDs that need a decision to the attempt-to-delete and
// attempt-to-orphan queues. Its work per event is proportional to that
// object's own references and dependents, never to the cluster size.
import {
  groupVersion,
  type ObjectMeta,
  type OwnerReference,
  type ResourceInfo,
} from '../api/resources.ts';
import type { Lane } from '../api/lanes.ts';
import { FOREGROUND_FINALIZER, ORPHAN_FINALIZER } from '../gc/decide.ts';
import type { InformerEvent } from '../informers/metadata-informer.ts';
import type { Logger } from '../log.ts';
import type { AbsentOwnerCache } from './absent-owner-cache.ts';
import {
  coordinatesKey,
  edgeAttributes,
  NO_OWNER_REFERENCES,
  refNamesOwner,
  sameCoordinates,
  StandaloneObject,
  type EdgeAttributes,
  type Identity,
  type NodeAttributes,
  type OwnershipGraph,
} from './graph.ts';

/** A worker verified with a live read that no object with this identity exists. */
export interface VirtualDeleteEvent {
  type: 'virtualDelete';
  identity: Identity;
  /** The lane of the work that verified it: the dependents it leaves without an owner are queued in it. */
  lane: Lane;
}

/**
 * No informer watches this object any more (its resource left discovery):
 * the graph can no longer vouch for it, neither alive nor gone.
 */
export interface UnobservedEvent {
  type: 'unobserved';
  uid: string;
  /** The resource (group/resource) that left discovery, for the owners' record of it. */
  resource?: string;
}

export type GraphEvent = InformerEvent | VirtualDeleteEvent | UnobservedEvent;

/**
 * Where the propagator queues work. Every call names its lane (src/api/lanes.ts):
 * which of its causes is which is the table in docs/how-it-decides.md ("Lanes").
 */
export interface PropagatorSinks {
  attemptToDelete(uid: string, lane: Lane): void;
  /** Re-check later with backoff (a virtual node whose identity is being re-verified). */
  attemptToDeleteRateLimited(uid: string, lane: Lane): void;
  attemptToOrphan(uid: string, lane: Lane): void;
  /**
   * An owner named by a dependent and not observed (a new virtual node), to
   * verify with a live read; in bulk when many wait (src/gc/bulk-verify.ts).
   * Without it, attemptToDelete.
   */
  verifyVirtualOwner?(uid: string): void;
  /** The informers saw an object deleted (or a worker verified it gone). */
  observedGone?(uid: string): void;
  /** An object no informer reports on any more (its resource left discovery): nothing more will be heard of it. */
  forgotten?(uid: string): void;
  /**
   * An object of `resource`, which left discovery, was a dependent of
   * `owner`: the graph no longer shows it, yet it may still exist and name
   * the owner (an Orphan deletion of that owner must not end without it).
   */
  departedDependent?(owner: string, resource: string): void;
}

export interface GraphChangeMetrics {
  add?(): void;
  depth?(n: number): void;
  queueLatency?(seconds: number): void;
  workDuration?(seconds: number): void;
}

function refMatches(ref: OwnerReference, id: Identity, dependentNamespace: string): boolean {
  // A verified identity's namespace is '' for cluster-scoped owners; a reference
  // carries no namespace and means the dependent's namespace when namespaced.
  return (
    coordinatesKey(
      ref.apiVersion,
      ref.kind,
      id.namespace === '' ? '' : dependentNamespace,
      ref.name,
      ref.uid,
    ) === coordinatesKey(id.apiVersion, id.kind, id.namespace, id.name, id.uid)
  );
}

function identityKey(id: Identity): string {
  return coordinatesKey(id.apiVersion, id.kind, id.namespace, id.name, id.uid);
}

/**
 * One string per distinct apiVersion, kind and namespace instead of one per
 * object: JSON.parse gives every object its own copies. Bounded, so odd
 * values in owner references cannot grow it without limit.
 */
class Interner {
  private readonly strings = new Map<string, string>();
  private readonly capacity: number;
  constructor(capacity: number) {
    this.capacity = capacity;
  }
  get(s: string): string {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    if (this.strings.size < this.capacity) this.strings.set(s, s);
    return s;
  }
}

/** The apiVersion of a resource, built once per resource rather than once per event. */
const apiVersions = new WeakMap<ResourceInfo, string>();
function apiVersionOf(r: ResourceInfo): string {
  let v = apiVersions.get(r);
  if (v === undefined) {
    v = groupVersion(r);
    apiVersions.set(r, v);
  }
  return v;
}

function sameReference(a: OwnerReference, b: OwnerReference): boolean {
  return (
    a.uid === b.uid &&
    a.name === b.name &&
    a.kind === b.kind &&
    a.apiVersion === b.apiVersion &&
    a.controller === b.controller &&
    a.blockOwnerDeletion === b.blockOwnerDeletion
  );
}

/**
 * The edge from each owner UID to a dependent, from all of the dependent's
 * references with that UID. The API server accepts two references with one
 * UID (it does not check UIDs for duplicates): the edge is controlling or
 * blocking if any of them is, as upstream's blockingDependents asks of each
 * reference in turn.
 */
function edgesByOwner(refs: readonly OwnerReference[]): Map<string, EdgeAttributes> {
  const edges = new Map<string, EdgeAttributes>();
  for (const r of refs) {
    const was = edges.get(r.uid);
    edges.set(
      r.uid,
      edgeAttributes(
        r.controller === true || was?.controller === true,
        r.blockOwnerDeletion === true || was?.blockOwnerDeletion === true,
      ),
    );
  }
  return edges;
}

/** Every field of a reference, as a key: two references are the same one only if all agree. */
function referenceKey(r: OwnerReference): string {
  return `${r.uid}|${r.apiVersion}|${r.kind}|${r.name}|${r.controller === true ? 1 : r.controller === false ? 0 : '-'}|${r.blockOwnerDeletion === true ? 1 : r.blockOwnerDeletion === false ? 0 : '-'}`;
}

/** Same references in the same order: the common update (status, labels) changes none. */
function sameReferences(a: readonly OwnerReference[], b: readonly OwnerReference[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (!x || !y || !sameReference(x, y)) return false;
  }
  return true;
}

function newNode(
  apiVersion: string,
  kind: string,
  namespace: string,
  name: string,
  uid: string,
  virtual: boolean,
): NodeAttributes {
  // Every node is built here, so all share one hidden class.
  return {
    apiVersion,
    kind,
    namespace,
    name,
    uid,
    virtual,
    beingDeleted: false,
    deletingDependents: false,
    hasOrphanFinalizer: false,
    hasForegroundFinalizer: false,
    resourceVersion: '',
    ownerReferences: NO_OWNER_REFERENCES,
  };
}

export class Propagator {
  private readonly graph: OwnershipGraph;
  private readonly absent: AbsentOwnerCache;
  private readonly sinks: PropagatorSinks;
  private readonly log: Logger;
  private readonly metrics: GraphChangeMetrics;
  private readonly timed: boolean;
  // Two parallel arrays rather than one {event, at} object per event.
  private readonly pending: (GraphEvent | undefined)[] = [];
  private readonly pushedAt: number[] = [];
  private head = 0;
  private scheduled = false;
  private idleWaiters: (() => void)[] = [];
  /** Events pushed / taken off the queue since start; for flushed(). */
  private pushedTotal = 0;
  private takenTotal = 0;
  private flushWaiters: { upTo: number; resolve: () => void }[] = [];
  private readonly interned = new Interner(10_000);
  /** The references addOwnerEdges stored last, for the next sibling. */
  private lastStoredReferences: readonly OwnerReference[] = NO_OWNER_REFERENCES;
  /** Events applied since start (for benchmarks and the debug endpoint). */
  applied = 0;

  constructor(
    graph: OwnershipGraph,
    absent: AbsentOwnerCache,
    sinks: PropagatorSinks,
    log: Logger,
    metrics: GraphChangeMetrics = {},
  ) {
    this.graph = graph;
    this.absent = absent;
    this.sinks = sinks;
    this.log = log;
    this.metrics = metrics;
    this.timed = metrics.queueLatency !== undefined || metrics.workDuration !== undefined;
  }

  /** Queues an event; events are applied in the order they are pushed. */
  push(event: GraphEvent): void {
    this.pending.push(event);
    this.pushedTotal++;
    if (this.timed) this.pushedAt.push(performance.now());
    this.metrics.add?.();
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.drain());
    }
  }

  get depth(): number {
    return this.pending.length - this.head;
  }

  /** Resolves when every pushed event has been applied. */
  onIdle(): Promise<void> {
    if (this.depth === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /**
   * Resolves when every event pushed so far has been applied (later ones need
   * not be: unlike onIdle(), this ends under a steady stream of events).
   */
  flushed(): Promise<void> {
    if (this.depth === 0) return Promise.resolve();
    const upTo = this.pushedTotal;
    return new Promise((resolve) => this.flushWaiters.push({ upTo, resolve }));
  }

  private drain(): void {
    // Apply in slices so the event loop keeps serving sockets and workers.
    const sliceEnd = performance.now() + 20;
    let n = 0;
    while (this.head < this.pending.length) {
      // performance.now() costs as much as a small event: look at the clock every 64 events.
      if ((++n & 63) === 0 && performance.now() >= sliceEnd) break;
      const i = this.head++;
      this.takenTotal++;
      const event = this.pending[i];
      this.pending[i] = undefined;
      if (!event) continue;
      if (this.timed) this.applyTimed(event, this.pushedAt[i] ?? 0);
      else this.applySafely(event);
      this.applied++;
    }
    if (this.head > 4096 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      if (this.timed) this.pushedAt.splice(0, this.head);
      this.head = 0;
    }
    this.metrics.depth?.(this.depth);
    if (this.flushWaiters.length > 0) {
      const waiting = this.flushWaiters;
      this.flushWaiters = [];
      for (const w of waiting)
        if (this.takenTotal >= w.upTo) w.resolve();
        else this.flushWaiters.push(w);
    }
    if (this.head < this.pending.length) {
      setImmediate(() => this.drain());
      return;
    }
    this.pending.length = 0;
    this.pushedAt.length = 0;
    this.head = 0;
    this.scheduled = false;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  private applyTimed(event: GraphEvent, at: number): void {
    const start = performance.now();
    this.metrics.queueLatency?.((start - at) / 1000);
    this.applySafely(event);
    this.metrics.workDuration?.((performance.now() - start) / 1000);
  }

  private applySafely(event: GraphEvent): void {
    try {
      this.apply(event);
    } catch (err) {
      this.log.error('graph update failed', {
        error: (err as Error).message,
        event: event.type,
      });
    }
  }

  /** Applies one event synchronously (exposed for unit tests and benchmarks). */
  apply(event: GraphEvent): void {
    switch (event.type) {
      case 'upsert':
        this.upsert(event.resource, event.meta);
        return;
      case 'delete':
        this.removeObserved(event.meta.uid);
        return;
      case 'virtualDelete':
        this.virtualDelete(event.identity, event.lane);
        return;
      case 'unobserved':
        this.unobserve(event.uid, event.resource);
        return;
    }
  }

  /**
   * An object no informer reports on any more. With dependents it becomes a
   * virtual node (decisions about them read it live; it is queued to be
   * verified, which keeps them while its kind cannot be resolved); without,
   * it leaves the graph. Never "gone": nothing says it was deleted.
   */
  private unobserve(uid: string, resource = ''): void {
    this.sinks.forgotten?.(uid);
    const node = this.graph.node(uid);
    if (!node) {
      this.graph.dropStandalone(uid);
      return;
    }
    const owners = this.graph.owners(uid);
    for (const o of owners) this.sinks.departedDependent?.(o, resource);
    if (this.graph.hasDependents(uid)) {
      this.makeVirtual(node, owners);
      // Verifies what was there: nothing says it changed.
      this.sinks.attemptToDelete(uid, 'housekeeping');
    } else this.graph.dropNode(uid);
    for (const o of owners) this.settleOwner(o);
  }

  private upsert(resource: ResourceInfo, meta: ObjectMeta): void {
    const uid = meta.uid;
    const apiVersion = apiVersionOf(resource);
    const kind = resource.kind;
    const namespace = meta.namespace === undefined ? '' : this.interned.get(meta.namespace);
    const finalizers = meta.finalizers;
    const refs = meta.ownerReferences ?? NO_OWNER_REFERENCES;
    const inNoRelation =
      refs.length === 0 &&
      meta.deletionTimestamp === undefined &&
      (finalizers === undefined ||
        (!finalizers.includes(ORPHAN_FINALIZER) && !finalizers.includes(FOREGROUND_FINALIZER)));
    // A UID is a standalone object or a graphology node, never both: look
    // first where this event's object most likely is.
    if (inNoRelation) {
      const alone = this.graph.standaloneObject(uid);
      if (alone) {
        alone.apiVersion = apiVersion;
        alone.kind = kind;
        alone.namespace = namespace;
        if (alone.name !== meta.name) alone.name = meta.name;
        alone.resourceVersion = meta.resourceVersion ?? '';
        return;
      }
    }
    let node = this.graph.node(uid);
    // Deletion state before this event, for "deletion starts with a finalizer".
    let wasBeingDeleted = false;
    let hadOrphanFinalizer = false;
    let hadForegroundFinalizer = false;
    if (!node) {
      if (inNoRelation) {
        this.graph.addStandalone(
          uid,
          new StandaloneObject(apiVersion, kind, namespace, meta.name, meta.resourceVersion ?? ''),
        );
        return;
      }
      // A standalone object that gained owner references, a GC finalizer or
      // a deletionTimestamp: a node from now on. It had none of them, so its
      // earlier deletion state is "not being deleted, no finalizer".
      this.graph.dropStandalone(uid);
      node = newNode(apiVersion, kind, namespace, meta.name, uid, false);
      this.graph.addNode(node);
      if (refs.length > 0) node.ownerReferences = this.addOwnerEdges(node, refs, true);
    } else {
      wasBeingDeleted = node.beingDeleted;
      hadOrphanFinalizer = node.hasOrphanFinalizer;
      hadForegroundFinalizer = node.hasForegroundFinalizer;
      if (node.virtual) this.observeVirtual(node, apiVersion, kind, namespace, meta.name);
      if (node.apiVersion !== apiVersion) node.apiVersion = apiVersion;
      node.kind = kind;
      node.namespace = namespace;
      if (node.name !== meta.name) node.name = meta.name;
      if (!sameReferences(node.ownerReferences, refs))
        node.ownerReferences = this.diffOwners(node, refs);
    }
    node.resourceVersion = meta.resourceVersion ?? '';
    node.beingDeleted = meta.deletionTimestamp !== undefined;
    node.hasOrphanFinalizer = finalizers !== undefined && finalizers.includes(ORPHAN_FINALIZER);
    node.hasForegroundFinalizer =
      finalizers !== undefined && finalizers.includes(FOREGROUND_FINALIZER);
    // Foreground deletion is over once the finalizer is gone (the object may
    // linger for other finalizers); a repeated Foreground DELETE starts it again.
    if (!node.beingDeleted || !node.hasForegroundFinalizer) node.deletingDependents = false;
    if (!node.beingDeleted) {
      this.demoteIfInNoRelation(node);
      return;
    }
    // A deletion someone asked for, waiting on the GC (found at start-up too).
    if (node.hasOrphanFinalizer && (!wasBeingDeleted || !hadOrphanFinalizer))
      this.sinks.attemptToOrphan(uid, 'user');
    if (node.hasForegroundFinalizer && (!wasBeingDeleted || !hadForegroundFinalizer)) {
      node.deletingDependents = true;
      for (const dep of this.graph.dependents(uid)) this.sinks.attemptToDelete(dep, 'user');
      this.sinks.attemptToDelete(uid, 'user');
    }
  }

  /**
   * First observation of a node we only knew as an owner. If its real
   * coordinates differ from what dependents claimed, those dependents'
   * references may be invalid: have them checked.
   */
  private observeVirtual(
    node: NodeAttributes,
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
  ): void {
    const observed: Identity = { apiVersion, kind, namespace, name, uid: node.uid };
    for (const dep of this.graph.dependents(node.uid)) {
      const depAttrs = this.graph.node(dep);
      if (!depAttrs) continue;
      const claimedNamespace = namespace === '' ? '' : depAttrs.namespace;
      // Every reference with this UID: a dependent may name it twice, once wrongly.
      const disagrees = depAttrs.ownerReferences.some(
        (r) =>
          r.uid === node.uid && !sameCoordinates({ ...r, namespace: claimedNamespace }, observed),
      );
      if (disagrees) this.sinks.attemptToDelete(dep, 'user');
    }
    this.graph.setVirtual(node, false);
  }

  /** A reference as the graph keeps it: strings shared with the owner's node and the interner. */
  private storedReference(ref: OwnerReference, owner: NodeAttributes | undefined): OwnerReference {
    // All six fields in one literal: one hidden class and no out-of-object
    // property store (an absent flag stays undefined, as in the object).
    return {
      apiVersion: this.interned.get(ref.apiVersion),
      kind: this.interned.get(ref.kind),
      name: owner !== undefined && owner.name === ref.name ? owner.name : ref.name,
      uid: owner !== undefined ? owner.uid : ref.uid,
      controller: ref.controller,
      blockOwnerDeletion: ref.blockOwnerDeletion,
    };
  }

  /**
   * Adds edges from each owner (creating virtual owners we have not seen) to
   * `dependent`; returns the references as the graph stores them: every one
   * the object has, in its order, two with one UID included. `isNew`: the
   * dependent was just added, so none of these edges can exist yet.
   */
  private addOwnerEdges(
    dependent: NodeAttributes,
    refs: readonly OwnerReference[],
    isNew: boolean,
  ): readonly OwnerReference[] {
    // A new dependent has no edges yet, unless it names one owner twice.
    const edgesAreNew = isNew && refs.length === 1;
    // One edge per owner UID, from all the references with that UID.
    const edges = refs.length === 1 ? undefined : edgesByOwner(refs);
    const edgeOf = (ref: OwnerReference): EdgeAttributes =>
      edges?.get(ref.uid) ??
      edgeAttributes(ref.controller === true, ref.blockOwnerDeletion === true);
    // Siblings (the Pods of one ReplicaSet, listed together) carry the same
    // references: they share one stored array (never written to in place).
    const last = this.lastStoredReferences;
    if (sameReferences(last, refs)) {
      for (const ref of refs) this.addOwnerEdge(dependent, ref, edgeOf(ref), edgesAreNew, false);
      return last;
    }
    // map(), not push(): an exactly sized array (push() reserves 17 slots).
    const stored = refs.map(
      (ref) => this.addOwnerEdge(dependent, ref, edgeOf(ref), edgesAreNew, true) as OwnerReference,
    );
    this.lastStoredReferences = stored;
    return stored;
  }

  /** Returns the reference as the graph stores it when `build`. */
  private addOwnerEdge(
    dependent: NodeAttributes,
    ref: OwnerReference,
    attrs: EdgeAttributes,
    edgeIsNew: boolean,
    build: boolean,
  ): OwnerReference | undefined {
    const uid = dependent.uid;
    const namespace = dependent.namespace;
    let owner = this.graph.node(ref.uid) ?? this.promoteStandalone(ref.uid);
    let stored: OwnerReference | undefined;
    if (!owner) {
      stored = this.storedReference(ref, undefined);
      owner = newNode(stored.apiVersion, stored.kind, namespace, stored.name, stored.uid, true);
      this.graph.addNode(owner);
      // Unseen owner: it is checked live (in bulk when many wait), and if
      // it is gone, its dependents are queued when the virtual delete comes
      // back (in the same lane). Housekeeping: after a restart every owner
      // listed after its dependents is one, and nothing about it has changed.
      if (this.sinks.verifyVirtualOwner) this.sinks.verifyVirtualOwner(ref.uid);
      else this.sinks.attemptToDelete(ref.uid, 'housekeeping');
    } else {
      if (build) stored = this.storedReference(ref, owner);
      this.checkReference(dependent, ref, owner, edgeIsNew);
    }
    if (edgeIsNew) this.graph.addEdge(owner.uid, uid, attrs);
    else this.graph.setEdge(owner.uid, uid, attrs);
    return stored;
  }

  /** A reference to a known owner that the dependent newly carries: does it need a decision? */
  private checkReference(
    dependent: NodeAttributes,
    ref: OwnerReference,
    owner: NodeAttributes,
    edgeIsNew: boolean,
  ): void {
    const uid = dependent.uid;
    if (!owner.virtual) {
      // The reference disagrees with the owner we observed (other namespace,
      // kind or name): the dependent needs a live decision.
      if (!refNamesOwner(ref, owner, dependent.namespace)) this.sinks.attemptToDelete(uid, 'user');
      // An owner in foreground deletion waits for its new dependent too.
      else if (owner.deletingDependents) this.sinks.attemptToDelete(uid, 'user');
    }
    // An owner deleted while its dependents still named it (kept virtual,
    // recorded absent): a dependent created naming it now is decided too.
    // Without this it never was (found by the soak's net-reset run).
    else if ((edgeIsNew || !this.graph.edge(ref.uid, uid)) && this.absent.has(identityKey(owner)))
      this.sinks.attemptToDelete(uid, 'user');
  }

  /**
   * Applies a change of owner references; returns the references as the
   * graph stores them. Edges are per owner UID, references are kept exactly:
   * two references with one UID (the API server accepts them) are both
   * stored, each as it is, never one in place of the other.
   */
  private diffOwners(
    dependent: NodeAttributes,
    after: readonly OwnerReference[],
  ): readonly OwnerReference[] {
    const uid = dependent.uid;
    const before = dependent.ownerReferences;
    const edgesBefore = edgesByOwner(before);
    const edgesAfter = edgesByOwner(after);
    for (const [ownerUid, was] of edgesBefore) {
      const now = edgesAfter.get(ownerUid);
      if (!now) {
        this.graph.dropEdge(ownerUid, uid);
        // The owner may be waiting for this dependent (foreground deletion).
        if (was.blockOwnerDeletion) this.sinks.attemptToDelete(ownerUid, 'user');
        this.settleOwner(ownerUid);
      } else if (was.blockOwnerDeletion && !now.blockOwnerDeletion) {
        this.sinks.attemptToDelete(ownerUid, 'user');
      }
    }
    // The stored copies of references that stay exactly as they were.
    const kept = new Map<string, OwnerReference>();
    for (const r of before) kept.set(referenceKey(r), r);
    const stored: OwnerReference[] = [];
    for (const r of after) {
      const same = kept.get(referenceKey(r));
      if (same) {
        stored.push(same);
        continue;
      }
      const attrs = edgesAfter.get(r.uid) ?? edgeAttributes(false, false);
      if (!edgesBefore.has(r.uid)) {
        // A new owner UID: its edge (and a virtual owner if unseen).
        stored.push(this.addOwnerEdge(dependent, r, attrs, false, true) as OwnerReference);
        continue;
      }
      // Another reference under a UID the dependent already named (changed
      // flags, or another name or kind: the API server does not check that
      // a reference names the object with that UID). An unchanged reference
      // may name an owner whose node is gone (deleted: its dependents were
      // queued then); there is no edge to update. An owner observed again
      // since then may be standalone: it has a dependent.
      const owner = this.graph.node(r.uid) ?? this.promoteStandalone(r.uid);
      stored.push(this.storedReference(r, owner));
      if (owner) this.checkReference(dependent, r, owner, false);
    }
    // Edges of owner UIDs named before and after: their flags from all
    // references now. The owner's node may be gone (deleted, its dependents
    // queued then: no edge to update) or observed again since as a
    // standalone object (it has a dependent again).
    for (const [ownerUid, attrs] of edgesAfter) {
      if (!edgesBefore.has(ownerUid)) continue;
      if (this.graph.node(ownerUid) ?? this.promoteStandalone(ownerUid))
        this.graph.setEdge(ownerUid, uid, attrs);
    }
    return stored;
  }

  /**
   * An owner just lost a dependent. A virtual node nobody references any
   * more carries no information; an observed one left in no relation becomes
   * a standalone object.
   */
  private settleOwner(uid: string): void {
    const n = this.graph.node(uid);
    if (!n || this.graph.hasDependents(uid)) return;
    if (n.virtual) this.graph.dropNode(uid);
    else this.demoteIfInNoRelation(n);
  }

  /**
   * An observed node with no edges, no deletionTimestamp and no GC finalizer
   * becomes a standalone object: everything a reader or a later promotion
   * needs (identity, resourceVersion) moves with it.
   */
  private demoteIfInNoRelation(node: NodeAttributes): void {
    if (
      node.virtual ||
      node.beingDeleted ||
      node.hasOrphanFinalizer ||
      node.hasForegroundFinalizer ||
      node.ownerReferences.length > 0 ||
      this.graph.g.degree(node.uid) > 0
    )
      return;
    this.graph.dropNode(node.uid);
    this.graph.addStandalone(
      node.uid,
      new StandaloneObject(
        node.apiVersion,
        node.kind,
        node.namespace,
        node.name,
        node.resourceVersion,
      ),
    );
  }

  /**
   * A dependent names a standalone object: it becomes an observed node, as
   * if it had always been one (it has no owners and, so far, no dependents).
   */
  private promoteStandalone(uid: string): NodeAttributes | undefined {
    const s = this.graph.standaloneObject(uid);
    if (!s) return undefined;
    this.graph.dropStandalone(uid);
    const node = newNode(s.apiVersion, s.kind, s.namespace, s.name, uid, false);
    node.resourceVersion = s.resourceVersion;
    this.graph.addNode(node);
    return node;
  }

  /** An informer saw the object go (or a re-list no longer has it). */
  private removeObserved(uid: string): void {
    this.sinks.observedGone?.(uid);
    const node = this.graph.node(uid);
    if (node) this.removeNode(node, 'user');
    // In no relation: nothing depends on it and nothing is queued for it.
    else this.graph.dropStandalone(uid);
  }

  /** `lane`: of what found it gone (an observed delete is the user's; a worker's verification, its item's). */
  private removeNode(node: NodeAttributes, lane: Lane): void {
    const dependents = this.graph.dependents(node.uid);
    const owners = this.graph.owners(node.uid);
    if (dependents.length > 0) {
      this.absent.add(identityKey(node));
      for (const dep of dependents) this.sinks.attemptToDelete(dep, lane);
    }
    for (const o of owners) {
      // An owner in foreground deletion may have been waiting for this one.
      if (this.graph.node(o)?.deletingDependents) this.sinks.attemptToDelete(o, 'user');
    }
    if (dependents.length > 0) {
      // Its dependents still name it: it stays as a virtual node (an owner
      // known only from them), so that if it is observed again (the delete
      // was spurious: a restored etcd, a relist that missed it) its
      // dependents are still attached and its real delete queues them.
      this.makeVirtual(node, owners);
    } else this.graph.dropNode(node.uid);
    for (const o of owners) this.settleOwner(o);
  }

  /** An observed node becomes an owner known only from its dependents: its own edges and state go. */
  private makeVirtual(node: NodeAttributes, owners: readonly string[]): void {
    for (const o of owners) this.graph.dropEdge(o, node.uid);
    this.graph.setVirtual(node, true);
    node.beingDeleted = false;
    node.deletingDependents = false;
    node.hasOrphanFinalizer = false;
    node.hasForegroundFinalizer = false;
    node.resourceVersion = '';
    node.ownerReferences = NO_OWNER_REFERENCES;
  }

  /** A worker verified `identity` does not exist (upstream: a virtual delete event). */
  private virtualDelete(identity: Identity, lane: Lane): void {
    const node = this.graph.node(identity.uid);
    if (!node) {
      // Observed, in no relation: as for an observed node, only the exact
      // identity verified absent removes it (it has no dependents to queue).
      const s = this.graph.standaloneObject(identity.uid);
      if (s && identityKey({ ...s, uid: identity.uid }) === identityKey(identity))
        this.graph.dropStandalone(identity.uid);
      return;
    }
    const verifiedKey = identityKey(identity);
    const matching: string[] = [];
    const nonMatching: { uid: string; ref: OwnerReference; namespace: string }[] = [];
    for (const dep of this.graph.dependents(identity.uid)) {
      const d = this.graph.node(dep);
      if (!d) continue;
      // Each of its references with this UID: one dependent may claim the
      // owner under two identities (the API server accepts both); it is
      // decided now for the one verified, and the other is verified too.
      let matched = false;
      for (const ref of d.ownerReferences) {
        if (ref.uid !== identity.uid) continue;
        if (refMatches(ref, identity, d.namespace)) matched = true;
        else nonMatching.push({ uid: dep, ref, namespace: d.namespace });
      }
      if (matched) matching.push(dep);
    }
    if (!node.virtual) {
      // Observed by an informer: only its delete event removes it. If the
      // verified-absent coordinates are not the observed ones, dependents that
      // used them point at nothing.
      if (identityKey(node) !== verifiedKey) {
        if (matching.length > 0) this.absent.add(verifiedKey);
        for (const dep of matching) this.sinks.attemptToDelete(dep, lane);
        return;
      }
      this.sinks.observedGone?.(node.uid);
      this.removeNode(node, lane);
      return;
    }
    if (nonMatching.length === 0) {
      if (this.graph.hasDependents(node.uid)) this.absent.add(verifiedKey);
      for (const dep of matching) this.sinks.attemptToDelete(dep, lane);
      this.graph.dropNode(node.uid);
      return;
    }
    // Dependents disagree on this owner's coordinates: those that match are
    // decided now; the node stays, re-verified under another claimed identity.
    if (matching.length > 0) this.absent.add(verifiedKey);
    for (const dep of matching) this.sinks.attemptToDelete(dep, lane);
    // Cycle through the claimed identities in a fixed order (as upstream's
    // getAlternateOwnerIdentity does) so that every one of them gets verified.
    if (identityKey(node) !== verifiedKey) return;
    const claims = nonMatching
      .map((d) => ({
        ...d,
        key: coordinatesKey(d.ref.apiVersion, d.ref.kind, d.namespace, d.ref.name, d.ref.uid),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const alt = claims.find((cl) => cl.key > verifiedKey) ?? claims[0];
    if (alt) {
      node.apiVersion = alt.ref.apiVersion;
      node.kind = alt.ref.kind;
      node.name = alt.ref.name;
      node.namespace = alt.namespace;
      this.sinks.attemptToDeleteRateLimited(node.uid, 'housekeeping');
    }
    this.log.debug('virtual owner claimed under several identities', { uid: node.uid });
  }
}
