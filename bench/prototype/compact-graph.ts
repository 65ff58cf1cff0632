// A prototype, NOT used by kubegc: the OwnershipGraph interface on plain
// classes instead of graphology, to measure what replacing graphology would
// buy (bench/graph.ts --graph compact). Nodes live in one Map by UID; an edge
// is one object referenced from its owner's `out` array (removed by swapping
// with the last, through the index it keeps) and its dependent's `in` array
// (one or two owners: a scan is cheapest). Node attributes are the
// propagator's objects (it interns their strings).
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

/** The propagator's own attributes object (it keeps writing to it), plus adjacency. */
class Node {
  readonly attrs: NodeAttributes;
  in: Edge[] | null = null;
  out: Edge[] | null = null;
  constructor(attrs: NodeAttributes) {
    this.attrs = attrs;
  }
  get uid(): string {
    return this.attrs.uid;
  }
}

export class CompactGraph {
  private readonly nodes = new Map<string, Node>();

  has(uid: string): boolean {
    return this.nodes.has(uid);
  }

  get(uid: string): NodeAttributes | undefined {
    return this.nodes.get(uid)?.attrs;
  }

  get order(): number {
    return this.nodes.size;
  }

  countVirtual(): number {
    let n = 0;
    for (const node of this.nodes.values()) if (node.attrs.virtual) n++;
    return n;
  }

  addNode(attrs: NodeAttributes): void {
    if (this.nodes.has(attrs.uid)) throw new Error(`node ${attrs.uid} exists`);
    this.nodes.set(attrs.uid, new Node(attrs));
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
    const n = this.nodes.get(uid);
    if (!n) return undefined;
    const a = n.attrs;
    const dependents: DependentSnapshot[] = (n.out ?? []).map((e) => ({
      uid: e.dependent.uid,
      blockOwnerDeletion: e.blockOwnerDeletion,
      deletingDependents: e.dependent.attrs.deletingDependents,
      beingDeleted: e.dependent.attrs.beingDeleted,
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
      hasGcFinalizer: a.hasOrphanFinalizer || a.hasForegroundFinalizer,
      resourceVersion: a.resourceVersion,
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
