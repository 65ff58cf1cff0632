// A prototype, NOT used by kubegc: the OwnershipGraph interface on plain
// classes instead of graphology, to measure what replacing graphology would
// buy (bench/graph.ts --graph compact). Nodes live in one Map by UID; an edge
// is one object referenced from its owner's `out` array (removed by swapping
// with the last, through the index it keeps) and its dependent's `in` array
// (one or two owners: a scan is cheapest). apiVersion, kind and namespace are
// interned, and an owner reference's uid and name strings are replaced by the
// owner node's own when they are equal, so 1,000 dependents do not hold 1,000
// copies of their owner's UID.
import type { OwnerReference } from '../../src/api/resources.ts';
import type {
  DependentSnapshot,
  EdgeAttributes,
  NodeAttributes,
  NodeSnapshot,
} from '../../src/graph/graph.ts';

class Edge implements EdgeAttributes {
  readonly owner: Node;
  readonly dependent: Node;
  controller: boolean;
  blockOwnerDeletion: boolean;
  /** Position in owner.out, for O(1) removal from owners with many dependents. */
  outIndex: number;
  constructor(owner: Node, dependent: Node, attrs: EdgeAttributes, outIndex: number) {
    this.owner = owner;
    this.dependent = dependent;
    this.controller = attrs.controller;
    this.blockOwnerDeletion = attrs.blockOwnerDeletion;
    this.outIndex = outIndex;
  }
}

class Node implements NodeAttributes {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
  virtual: boolean;
  beingDeleted: boolean;
  deletingDependents: boolean;
  hasOrphanFinalizer: boolean;
  hasForegroundFinalizer: boolean;
  ownerReferences: OwnerReference[];
  in: Edge[] | null = null;
  out: Edge[] | null = null;
  constructor(a: NodeAttributes, intern: (s: string) => string, refs: OwnerReference[]) {
    this.apiVersion = intern(a.apiVersion);
    this.kind = intern(a.kind);
    this.namespace = intern(a.namespace);
    this.name = a.name;
    this.uid = a.uid;
    this.virtual = a.virtual;
    this.beingDeleted = a.beingDeleted;
    this.deletingDependents = a.deletingDependents;
    this.hasOrphanFinalizer = a.hasOrphanFinalizer;
    this.hasForegroundFinalizer = a.hasForegroundFinalizer;
    this.ownerReferences = refs;
  }
}

const NO_REFS: OwnerReference[] = [];

export class CompactGraph {
  private readonly nodes = new Map<string, Node>();
  private readonly strings = new Map<string, string>();

  private intern = (s: string): string => {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    this.strings.set(s, s);
    return s;
  };

  /** The owner's own uid and name strings where equal (the common case), interned type strings. */
  private compactRefs(refs: OwnerReference[]): OwnerReference[] {
    if (refs.length === 0) return NO_REFS;
    for (const r of refs) {
      const owner = this.nodes.get(r.uid);
      if (owner) {
        r.uid = owner.uid;
        if (owner.name === r.name) r.name = owner.name;
      }
      r.apiVersion = this.intern(r.apiVersion);
      r.kind = this.intern(r.kind);
    }
    return refs;
  }

  has(uid: string): boolean {
    return this.nodes.has(uid);
  }

  get(uid: string): NodeAttributes | undefined {
    return this.nodes.get(uid);
  }

  get order(): number {
    return this.nodes.size;
  }

  countVirtual(): number {
    let n = 0;
    for (const node of this.nodes.values()) if (node.virtual) n++;
    return n;
  }

  addNode(attrs: NodeAttributes): void {
    if (this.nodes.has(attrs.uid)) throw new Error(`node ${attrs.uid} exists`);
    this.nodes.set(
      attrs.uid,
      new Node(attrs, this.intern, this.compactRefs(attrs.ownerReferences)),
    );
  }

  dropNode(uid: string): void {
    const node = this.nodes.get(uid);
    if (!node) throw new Error(`no node ${uid}`);
    for (const e of node.in ?? []) this.unlinkOut(e);
    for (const e of node.out ?? []) unlinkIn(e);
    this.nodes.delete(uid);
  }

  setEdge(owner: string, dependent: string, attrs: EdgeAttributes): void {
    const d = this.nodes.get(dependent);
    const o = this.nodes.get(owner);
    if (!d || !o) throw new Error(`edge ${owner} → ${dependent}: missing node`);
    const e = d.in?.find((x) => x.owner === o);
    if (e) {
      e.controller = attrs.controller;
      e.blockOwnerDeletion = attrs.blockOwnerDeletion;
      return;
    }
    o.out ??= [];
    const edge = new Edge(o, d, attrs, o.out.length);
    o.out.push(edge);
    (d.in ??= []).push(edge);
  }

  dropEdge(owner: string, dependent: string): void {
    const d = this.nodes.get(dependent);
    const e = d?.in?.find((x) => x.owner.uid === owner);
    if (!e) return;
    this.unlinkOut(e);
    unlinkIn(e);
  }

  private unlinkOut(e: Edge): void {
    const out = e.owner.out;
    if (!out) return;
    const last = out.pop();
    if (last && last !== e) {
      out[e.outIndex] = last;
      last.outIndex = e.outIndex;
    }
    if (out.length === 0) e.owner.out = null;
  }

  dependents(uid: string): string[] {
    return this.nodes.get(uid)?.out?.map((e) => e.dependent.uid) ?? [];
  }

  owners(uid: string): string[] {
    return this.nodes.get(uid)?.in?.map((e) => e.owner.uid) ?? [];
  }

  hasDependents(uid: string): boolean {
    return (this.nodes.get(uid)?.out?.length ?? 0) > 0;
  }

  edge(owner: string, dependent: string): EdgeAttributes | undefined {
    return this.nodes.get(dependent)?.in?.find((e) => e.owner.uid === owner);
  }

  snapshot(uid: string): NodeSnapshot | undefined {
    const a = this.nodes.get(uid);
    if (!a) return undefined;
    const dependents: DependentSnapshot[] = (a.out ?? []).map((e) => ({
      uid: e.dependent.uid,
      blockOwnerDeletion: e.blockOwnerDeletion,
      deletingDependents: e.dependent.deletingDependents,
      beingDeleted: e.dependent.beingDeleted,
    }));
    return {
      apiVersion: a.apiVersion,
      kind: a.kind,
      namespace: a.namespace,
      name: a.name,
      uid: a.uid,
      virtual: a.virtual,
      beingDeleted: a.beingDeleted,
      deletingDependents: a.deletingDependents,
      ownerReferences: a.ownerReferences,
      dependents,
    };
  }
}

function unlinkIn(e: Edge): void {
  const list = e.dependent.in;
  if (!list) return;
  const i = list.indexOf(e);
  if (i !== -1) list.splice(i, 1);
  if (list.length === 0) e.dependent.in = null;
}
