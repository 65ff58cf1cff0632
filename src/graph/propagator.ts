// The propagator: the ONE writer of the ownership graph. It applies informer
// events (and virtual deletes verified by workers) strictly in arrival order
// and pushes the UIDs that need a decision to the attempt-to-delete and
// attempt-to-orphan queues. Its work per event is proportional to that
// object's own references and dependents, never to the cluster size.
import { groupVersion, type ObjectMeta, type OwnerReference } from '../api/resources.ts';
import type { InformerEvent } from '../informers/metadata-informer.ts';
import type { Logger } from '../log.ts';
import type { AbsentOwnerCache } from './absent-owner-cache.ts';
import {
  coordinatesKey,
  type Identity,
  type NodeAttributes,
  type OwnershipGraph,
} from './graph.ts';

export const ORPHAN_FINALIZER = 'orphan';
export const FOREGROUND_FINALIZER = 'foregroundDeletion';

/** A worker verified with a live read that no object with this identity exists. */
export interface VirtualDeleteEvent {
  type: 'virtualDelete';
  identity: Identity;
}

export type GraphEvent = InformerEvent | VirtualDeleteEvent;

export interface PropagatorSinks {
  attemptToDelete(uid: string): void;
  /** Re-check later with backoff (a virtual node whose identity is being re-verified). */
  attemptToDeleteRateLimited(uid: string): void;
  attemptToOrphan(uid: string): void;
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

export class Propagator {
  private readonly graph: OwnershipGraph;
  private readonly absent: AbsentOwnerCache;
  private readonly sinks: PropagatorSinks;
  private readonly log: Logger;
  private readonly metrics: GraphChangeMetrics;
  private readonly pending: { event: GraphEvent; at: number }[] = [];
  private head = 0;
  private scheduled = false;
  private idleWaiters: (() => void)[] = [];
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
  }

  /** Queues an event; events are applied in the order they are pushed. */
  push(event: GraphEvent): void {
    this.pending.push({ event, at: performance.now() });
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

  private drain(): void {
    // Apply in slices so the event loop keeps serving sockets and workers.
    const sliceEnd = performance.now() + 20;
    while (this.head < this.pending.length && performance.now() < sliceEnd) {
      const item = this.pending[this.head];
      this.pending[this.head] = undefined as unknown as (typeof this.pending)[number];
      this.head++;
      if (!item) continue;
      const start = performance.now();
      this.metrics.queueLatency?.((start - item.at) / 1000);
      try {
        this.apply(item.event);
      } catch (err) {
        this.log.error('graph update failed', {
          error: (err as Error).message,
          event: item.event.type,
        });
      }
      this.applied++;
      this.metrics.workDuration?.((performance.now() - start) / 1000);
    }
    if (this.head > 4096 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      this.head = 0;
    }
    this.metrics.depth?.(this.depth);
    if (this.head < this.pending.length) {
      setImmediate(() => this.drain());
      return;
    }
    this.pending.length = 0;
    this.head = 0;
    this.scheduled = false;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Applies one event synchronously (exposed for unit tests and benchmarks). */
  apply(event: GraphEvent): void {
    switch (event.type) {
      case 'upsert':
        this.upsert(groupVersion(event.resource), event.resource.kind, event.meta);
        return;
      case 'delete':
        this.removeObserved(event.meta.uid);
        return;
      case 'virtualDelete':
        this.virtualDelete(event.identity);
        return;
    }
  }

  private upsert(apiVersion: string, kind: string, meta: ObjectMeta): void {
    const uid = meta.uid;
    const refs = meta.ownerReferences ?? [];
    const finalizers = meta.finalizers ?? [];
    const next = {
      apiVersion,
      kind,
      namespace: meta.namespace ?? '',
      name: meta.name,
      uid,
      beingDeleted: meta.deletionTimestamp !== undefined,
      hasOrphanFinalizer: finalizers.includes(ORPHAN_FINALIZER),
      hasForegroundFinalizer: finalizers.includes(FOREGROUND_FINALIZER),
      ownerReferences: refs,
    };
    const existing = this.graph.get(uid);
    if (!existing) {
      this.graph.addNode({ ...next, virtual: false, deletingDependents: false });
      this.addOwnerEdges(uid, next.namespace, refs);
      this.processDeletionTransitions(undefined, this.graph.get(uid));
      return;
    }
    const old = { ...existing };
    if (existing.virtual) {
      // First observation of a node we only knew as an owner. If its real
      // coordinates differ from what dependents claimed, those dependents'
      // references may be invalid: have them checked.
      const observedKey = coordinatesKey(apiVersion, kind, next.namespace, next.name, uid);
      for (const dep of this.graph.dependents(uid)) {
        const depAttrs = this.graph.get(dep);
        const ref = depAttrs?.ownerReferences.find((r) => r.uid === uid);
        if (!depAttrs || !ref) continue;
        const claimed = coordinatesKey(
          ref.apiVersion,
          ref.kind,
          next.namespace === '' ? '' : depAttrs.namespace,
          ref.name,
          uid,
        );
        if (claimed !== observedKey) this.sinks.attemptToDelete(dep);
      }
      existing.virtual = false;
    }
    existing.apiVersion = apiVersion;
    existing.kind = kind;
    existing.namespace = next.namespace;
    existing.name = next.name;
    existing.beingDeleted = next.beingDeleted;
    existing.hasOrphanFinalizer = next.hasOrphanFinalizer;
    existing.hasForegroundFinalizer = next.hasForegroundFinalizer;
    // Foreground deletion is over once the finalizer is gone (the object may
    // linger for other finalizers); a repeated Foreground DELETE starts it again.
    if (!existing.beingDeleted || !existing.hasForegroundFinalizer)
      existing.deletingDependents = false;
    this.diffOwners(uid, next.namespace, old.ownerReferences, refs);
    existing.ownerReferences = refs;
    this.processDeletionTransitions(old, existing);
  }

  /** Adds edges from each owner (creating virtual owners we have not seen) to `uid`. */
  private addOwnerEdges(uid: string, namespace: string, refs: OwnerReference[]): void {
    for (const ref of refs) {
      const owner = this.graph.get(ref.uid);
      if (!owner) {
        this.graph.addNode({
          apiVersion: ref.apiVersion,
          kind: ref.kind,
          namespace,
          name: ref.name,
          uid: ref.uid,
          virtual: true,
          beingDeleted: false,
          deletingDependents: false,
          hasOrphanFinalizer: false,
          hasForegroundFinalizer: false,
          ownerReferences: [],
        });
        // Unseen owner: a worker checks it live, and if it is gone, its
        // dependents are queued when the virtual delete comes back.
        this.sinks.attemptToDelete(ref.uid);
      } else if (!owner.virtual) {
        const observed = coordinatesKey(
          owner.apiVersion,
          owner.kind,
          owner.namespace,
          owner.name,
          owner.uid,
        );
        const claimed = coordinatesKey(
          ref.apiVersion,
          ref.kind,
          owner.namespace === '' ? '' : namespace,
          ref.name,
          ref.uid,
        );
        // The reference disagrees with the owner we observed (other namespace,
        // kind or name): the dependent needs a live decision.
        if (observed !== claimed) this.sinks.attemptToDelete(uid);
        // An owner in foreground deletion waits for its new dependent too.
        else if (owner.deletingDependents) this.sinks.attemptToDelete(uid);
      }
      this.graph.setEdge(ref.uid, uid, {
        controller: ref.controller === true,
        blockOwnerDeletion: ref.blockOwnerDeletion === true,
      });
    }
  }

  private diffOwners(
    uid: string,
    namespace: string,
    before: OwnerReference[],
    after: OwnerReference[],
  ): void {
    if (before === after) return;
    const afterByUid = new Map(after.map((r) => [r.uid, r]));
    const beforeByUid = new Map(before.map((r) => [r.uid, r]));
    for (const old of before) {
      const now = afterByUid.get(old.uid);
      if (!now) {
        this.graph.dropEdge(old.uid, uid);
        // The owner may be waiting for this dependent (foreground deletion).
        if (old.blockOwnerDeletion) this.sinks.attemptToDelete(old.uid);
        this.dropVirtualIfUnreferenced(old.uid);
      } else if (old.blockOwnerDeletion && !now.blockOwnerDeletion) {
        this.sinks.attemptToDelete(old.uid);
      }
    }
    const added = after.filter((r) => !beforeByUid.has(r.uid));
    this.addOwnerEdges(uid, namespace, added);
    for (const r of after) {
      // An unchanged reference may name an owner whose node is gone (deleted:
      // its dependents were queued then); there is no edge to update.
      if (beforeByUid.has(r.uid) && this.graph.has(r.uid)) {
        this.graph.setEdge(r.uid, uid, {
          controller: r.controller === true,
          blockOwnerDeletion: r.blockOwnerDeletion === true,
        });
      }
    }
  }

  /** A virtual node nobody references any more carries no information. */
  private dropVirtualIfUnreferenced(uid: string): void {
    const n = this.graph.get(uid);
    if (n?.virtual && !this.graph.hasDependents(uid)) this.graph.dropNode(uid);
  }

  private processDeletionTransitions(
    old: NodeAttributes | undefined,
    now: NodeAttributes | undefined,
  ): void {
    if (!now || !now.beingDeleted) return;
    const startsWith = (flag: 'hasOrphanFinalizer' | 'hasForegroundFinalizer'): boolean =>
      now[flag] && (!old || !old.beingDeleted || !old[flag]);
    if (startsWith('hasOrphanFinalizer')) this.sinks.attemptToOrphan(now.uid);
    if (startsWith('hasForegroundFinalizer')) {
      now.deletingDependents = true;
      for (const dep of this.graph.dependents(now.uid)) this.sinks.attemptToDelete(dep);
      this.sinks.attemptToDelete(now.uid);
    }
  }

  /** An informer saw the object go (or a re-list no longer has it). */
  private removeObserved(uid: string): void {
    const node = this.graph.get(uid);
    if (!node) return;
    this.removeNode(node);
  }

  private removeNode(node: NodeAttributes): void {
    const dependents = this.graph.dependents(node.uid);
    const owners = this.graph.owners(node.uid);
    if (dependents.length > 0) {
      this.absent.add(identityKey(node));
      for (const dep of dependents) this.sinks.attemptToDelete(dep);
    }
    for (const o of owners) {
      // An owner in foreground deletion may have been waiting for this one.
      if (this.graph.get(o)?.deletingDependents) this.sinks.attemptToDelete(o);
    }
    this.graph.dropNode(node.uid);
    for (const o of owners) this.dropVirtualIfUnreferenced(o);
  }

  /** A worker verified `identity` does not exist (upstream: a virtual delete event). */
  private virtualDelete(identity: Identity): void {
    const node = this.graph.get(identity.uid);
    if (!node) return;
    const verifiedKey = identityKey(identity);
    const matching: string[] = [];
    const nonMatching: { uid: string; ref: OwnerReference; namespace: string }[] = [];
    for (const dep of this.graph.dependents(identity.uid)) {
      const d = this.graph.get(dep);
      const ref = d?.ownerReferences.find((r) => r.uid === identity.uid);
      if (!d || !ref) continue;
      if (refMatches(ref, identity, d.namespace)) matching.push(dep);
      else nonMatching.push({ uid: dep, ref, namespace: d.namespace });
    }
    if (!node.virtual) {
      // Observed by an informer: only its delete event removes it. If the
      // verified-absent coordinates are not the observed ones, dependents that
      // used them point at nothing.
      if (identityKey(node) !== verifiedKey) {
        if (matching.length > 0) this.absent.add(verifiedKey);
        for (const dep of matching) this.sinks.attemptToDelete(dep);
        return;
      }
      this.removeNode(node);
      return;
    }
    if (nonMatching.length === 0) {
      if (this.graph.hasDependents(node.uid)) this.absent.add(verifiedKey);
      for (const dep of matching) this.sinks.attemptToDelete(dep);
      this.graph.dropNode(node.uid);
      return;
    }
    // Dependents disagree on this owner's coordinates: those that match are
    // decided now; the node stays, re-verified under another claimed identity.
    if (matching.length > 0) this.absent.add(verifiedKey);
    for (const dep of matching) this.sinks.attemptToDelete(dep);
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
      this.sinks.attemptToDeleteRateLimited(node.uid);
    }
    this.log.debug('virtual owner claimed under several identities', { uid: node.uid });
  }
}
