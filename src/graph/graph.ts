// The ownership graph: every observed object (keyed by UID), edges owner →
// dependent. Objects in some ownership relation are graphology nodes; the
// others (about half of a real cluster: ConfigMaps, Secrets, Services, ...)
// are small records beside graphology, which readers see as nodes with no
// owners and no dependents. Only the propagator writes it; workers read
// snapshots.
import { DirectedGraph } from 'graphology';
import { parseApiVersion, type OwnerReference } from '../api/resources.ts';

export interface Identity {
  apiVersion: string;
  kind: string;
  /** '' for cluster-scoped objects (and for virtual owners, the dependent's namespace). */
  namespace: string;
  name: string;
  uid: string;
}

export interface NodeAttributes extends Identity {
  /** Known only as someone's owner; not observed by an informer yet. */
  virtual: boolean;
  /** Has deletionTimestamp. */
  beingDeleted: boolean;
  /** In foreground deletion: waiting for its blocking dependents to go. */
  deletingDependents: boolean;
  /** Finalizers the GC acts on, as last observed (for "deletion starts with a finalizer"). */
  hasOrphanFinalizer: boolean;
  hasForegroundFinalizer: boolean;
  /**
   * As last observed ('' for virtual nodes): a DELETE decided from this copy
   * carries it as a precondition, so it only succeeds on exactly this state.
   */
  resourceVersion: string;
  /** Shared strings: a reference's uid and name are the owner node's own strings when it is known. */
  ownerReferences: readonly OwnerReference[];
}

export interface EdgeAttributes {
  readonly controller: boolean;
  readonly blockOwnerDeletion: boolean;
}

// Edges carry one of four shared, frozen attribute objects: with a million
// edges, one object each would cost tens of megabytes for two booleans.
const EDGE_ATTRIBUTES: readonly EdgeAttributes[] = [false, true].flatMap((blockOwnerDeletion) =>
  [false, true].map((controller) => Object.freeze({ controller, blockOwnerDeletion })),
);

export function edgeAttributes(controller: boolean, blockOwnerDeletion: boolean): EdgeAttributes {
  const a = EDGE_ATTRIBUTES[(controller ? 1 : 0) | (blockOwnerDeletion ? 2 : 0)];
  if (!a) throw new Error('unreachable');
  return a;
}

export const NO_OWNER_REFERENCES: readonly OwnerReference[] = Object.freeze([]);

export interface DependentSnapshot {
  uid: string;
  blockOwnerDeletion: boolean;
  deletingDependents: boolean;
  beingDeleted: boolean;
}

/** A copy of what a worker needs about one node, taken at one instant. */
export interface NodeSnapshot extends Identity {
  virtual: boolean;
  beingDeleted: boolean;
  deletingDependents: boolean;
  /** Carries the orphan or foregroundDeletion finalizer (even before any deletion). */
  hasGcFinalizer: boolean;
  resourceVersion: string;
  ownerReferences: readonly OwnerReference[];
  dependents: DependentSnapshot[];
}

/** Coordinates that identify an owner independent of API version: group, kind, namespace, name, uid. */
export function coordinatesKey(
  apiVersion: string,
  kind: string,
  namespace: string,
  name: string,
  uid: string,
): string {
  return `${parseApiVersion(apiVersion).group}|${kind}|${namespace}|${name}|${uid}`;
}

/** Whether two apiVersions name the same group (`apps/v1` and `apps/v1beta1` do). */
export function sameGroup(a: string, b: string): boolean {
  if (a === b) return true;
  const ia = a.indexOf('/');
  return ia === b.indexOf('/') && (ia === -1 || a.substring(0, ia) === b.substring(0, ia));
}

/**
 * coordinatesKey(a...) === coordinatesKey(b...) without building either key:
 * the propagator compares coordinates on every reference it adds.
 */
export function sameCoordinates(a: Readonly<Identity>, b: Readonly<Identity>): boolean {
  return (
    a.uid === b.uid &&
    a.name === b.name &&
    a.kind === b.kind &&
    a.namespace === b.namespace &&
    sameGroup(a.apiVersion, b.apiVersion)
  );
}

/**
 * Whether a dependent's reference names exactly this observed owner (same
 * group, kind, name and UID; same namespace unless the owner is cluster-scoped).
 */
export function refNamesOwner(
  ref: OwnerReference,
  owner: Readonly<Identity>,
  dependentNamespace: string,
): boolean {
  return (
    ref.uid === owner.uid &&
    ref.name === owner.name &&
    ref.kind === owner.kind &&
    (owner.namespace === '' || owner.namespace === dependentNamespace) &&
    sameGroup(ref.apiVersion, owner.apiVersion)
  );
}

/**
 * An observed object that takes no part in ownership: no owner references,
 * no dependents, no orphan or foregroundDeletion finalizer, no
 * deletionTimestamp. It is still remembered (not forgotten): a dependent
 * that names it later must find an observed owner, not create a virtual one
 * that costs a live read. A graphology node with its attributes costs about
 * four times this record.
 */
export class StandaloneObject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  resourceVersion: string;
  constructor(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
    resourceVersion: string,
  ) {
    this.apiVersion = apiVersion;
    this.kind = kind;
    this.namespace = namespace;
    this.name = name;
    this.resourceVersion = resourceVersion;
  }
}

/** What a standalone object looks like to readers: a node with no owners and no dependents. */
function standaloneAttributes(uid: string, s: StandaloneObject): NodeAttributes {
  // Frozen: a reader writing to it would otherwise change nothing, silently.
  return Object.freeze({
    apiVersion: s.apiVersion,
    kind: s.kind,
    namespace: s.namespace,
    name: s.name,
    uid,
    virtual: false,
    beingDeleted: false,
    deletingDependents: false,
    hasOrphanFinalizer: false,
    hasForegroundFinalizer: false,
    resourceVersion: s.resourceVersion,
    ownerReferences: NO_OWNER_REFERENCES,
  });
}

export class OwnershipGraph {
  /** The ownership DAG: objects with owners or dependents (or a GC finalizer, or being deleted). */
  readonly g = new DirectedGraph<NodeAttributes, EdgeAttributes>({ allowSelfLoops: true });
  /** Observed objects outside `g`; a UID is never in both. */
  private readonly standalone = new Map<string, StandaloneObject>();

  /** Whether the object is known (a graphology node or a standalone object). */
  has(uid: string): boolean {
    return this.g.hasNode(uid) || this.standalone.has(uid);
  }

  /** The object as readers see it; for a standalone object, a frozen copy. */
  get(uid: string): NodeAttributes | undefined {
    const a = this.nodes.get(uid)?.attributes;
    if (a) return a;
    const s = this.standalone.get(uid);
    return s && standaloneAttributes(uid, s);
  }

  /** The graphology node's own attributes (the propagator writes to them); undefined for standalone objects. */
  node(uid: string): NodeAttributes | undefined {
    // One Map lookup instead of hasNode + getNodeAttributes (two): this is the
    // propagator's hottest call. graphology keeps node data in `_nodes`.
    return this.nodes.get(uid)?.attributes;
  }

  private readonly nodes = (
    this.g as unknown as { _nodes: Map<string, { attributes: NodeAttributes }> }
  )._nodes;

  standaloneObject(uid: string): StandaloneObject | undefined {
    return this.standalone.get(uid);
  }

  /** `uid` must not be a graphology node. */
  addStandalone(uid: string, s: StandaloneObject): void {
    this.standalone.set(uid, s);
  }

  dropStandalone(uid: string): void {
    this.standalone.delete(uid);
  }

  /** Every known object: graphology nodes and standalone objects. */
  get order(): number {
    return this.g.order + this.standalone.size;
  }

  get standaloneCount(): number {
    return this.standalone.size;
  }

  /** Every known object's UID: graphology nodes first, then standalone objects. */
  *uids(): Generator<string, void, undefined> {
    yield* this.nodes.keys();
    yield* this.standalone.keys();
  }

  /** graphology's someInNeighbor; false for a standalone or unknown object (it has no owners). */
  someOwner(uid: string, fn: (owner: string) => boolean): boolean {
    return this.g.hasNode(uid) && this.g.someInNeighbor(uid, fn);
  }

  /** graphology's someOutNeighbor; false for a standalone or unknown object (it has no dependents). */
  someDependent(uid: string, fn: (dependent: string) => boolean): boolean {
    return this.g.hasNode(uid) && this.g.someOutNeighbor(uid, fn);
  }

  /** Each edge from an owner to `dependent`; none for a standalone or unknown object. */
  forEachOwnerEdge(dependent: string, fn: (owner: string, e: EdgeAttributes) => void): void {
    if (this.g.hasNode(dependent)) this.g.forEachInEdge(dependent, (_e, e, owner) => fn(owner, e));
  }

  /** Virtual nodes, counted as they come and go (a scrape reads this; no walk over the graph). */
  private virtualNodes = 0;

  countVirtual(): number {
    return this.virtualNodes;
  }

  /** Stores `attrs` itself: the propagator keeps writing to the object it added. `uid` must not be standalone. */
  addNode(attrs: NodeAttributes): void {
    this.g.addNode(attrs.uid, attrs);
    if (attrs.virtual) this.virtualNodes++;
  }

  dropNode(uid: string): void {
    if (this.nodes.get(uid)?.attributes.virtual) this.virtualNodes--;
    this.g.dropNode(uid);
  }

  /** The one writer of `virtual` on a node in the graph: keeps the count. */
  setVirtual(node: NodeAttributes, virtual: boolean): void {
    if (node.virtual === virtual) return;
    node.virtual = virtual;
    if (this.nodes.get(node.uid)?.attributes === node) this.virtualNodes += virtual ? 1 : -1;
  }

  // Edge keys from a counter: graphology's own generator builds a longer
  // string and probes the edge index for each one.
  private nextEdgeKey = 0;

  /** An edge known not to exist yet (a dependent just added). */
  addEdge(owner: string, dependent: string, attrs: EdgeAttributes): void {
    this.g.addDirectedEdgeWithKey((this.nextEdgeKey++).toString(36), owner, dependent, attrs);
  }

  /** `attrs` must come from edgeAttributes() (shared objects, compared by identity). */
  setEdge(owner: string, dependent: string, attrs: EdgeAttributes): void {
    if (!this.g.hasEdge(owner, dependent)) this.addEdge(owner, dependent, attrs);
    else if (this.g.getEdgeAttributes(owner, dependent) !== attrs)
      this.g.replaceEdgeAttributes(owner, dependent, attrs);
  }

  dropEdge(owner: string, dependent: string): void {
    if (this.g.hasEdge(owner, dependent)) this.g.dropEdge(owner, dependent);
  }

  dependents(uid: string): string[] {
    return this.g.hasNode(uid) ? this.g.outNeighbors(uid) : [];
  }

  owners(uid: string): string[] {
    return this.g.hasNode(uid) ? this.g.inNeighbors(uid) : [];
  }

  hasDependents(uid: string): boolean {
    return this.g.hasNode(uid) && this.g.outDegree(uid) > 0;
  }

  edge(owner: string, dependent: string): EdgeAttributes | undefined {
    return this.g.hasEdge(owner, dependent)
      ? this.g.getEdgeAttributes(owner, dependent)
      : undefined;
  }

  snapshot(uid: string): NodeSnapshot | undefined {
    const a = this.get(uid);
    if (!a) return undefined;
    const dependents: DependentSnapshot[] = [];
    if (this.g.hasNode(uid))
      this.g.forEachOutEdge(uid, (_e, attrs, _s, target, _sa, targetAttrs) => {
        dependents.push({
          uid: target,
          blockOwnerDeletion: attrs.blockOwnerDeletion,
          deletingDependents: targetAttrs.deletingDependents,
          beingDeleted: targetAttrs.beingDeleted,
        });
      });
    return {
      apiVersion: a.apiVersion,
      kind: a.kind,
      namespace: a.namespace,
      name: a.name,
      uid: a.uid,
      virtual: a.virtual,
      beingDeleted: a.beingDeleted,
      deletingDependents: a.deletingDependents,
      hasGcFinalizer: a.hasOrphanFinalizer || a.hasForegroundFinalizer,
      resourceVersion: a.resourceVersion,
      ownerReferences: a.ownerReferences,
      dependents,
    };
  }
}
