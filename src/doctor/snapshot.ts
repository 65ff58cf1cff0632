// What `kubegc doctor` keeps of a cluster: a lean, columnar copy of every
// listed object's metadata, plus the few namespaces and APIServices it reads
// in full. At 200,000 objects a row per object (a JS object with a dozen
// fields, timestamps boxed as HeapNumbers) would cost several times what the
// columns do; the analysis (analyze.ts) reads only these columns.
import type { OwnerReference, ResourceInfo } from '../api/resources.ts';

/** Bit flags of a compact owner reference. */
export const REF_CONTROLLER = 1;
export const REF_BLOCK_OWNER_DELETION = 2;

/** An owner reference's flags and interned type share one 32-bit cell: type << REF_TYPE_SHIFT | flags. */
export const REF_TYPE_SHIFT = 2;

/** The metadata fields doctor reads from a LIST item (full or metadata-only). */
export interface ItemMeta {
  uid?: string;
  name?: string;
  namespace?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

/** RFC 3339 (what the API server writes) to whole seconds since the epoch; 0 when absent or unparsable. */
export function toSeconds(ts: string | undefined): number {
  if (!ts) return 0;
  const ms = Date.parse(ts);
  // Seconds fit a 32-bit column (until 2106 unsigned, 2038 signed: Int32 would not).
  return Number.isFinite(ms) && ms > 0 ? Math.floor(ms / 1000) : 0;
}

/** Seconds since the epoch to the API server's own form (no fractional part). */
export function isoSeconds(s: number): string {
  return new Date(s * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * Strings that repeat across objects, stored once: namespaces, owner
 * apiVersion/kind pairs and finalizer lists. Shared by every list in flight
 * (one event loop, so no locking).
 */
export class Interner {
  readonly namespaces: string[] = [''];
  private readonly namespaceIndex = new Map<string, number>([['', 0]]);
  readonly types: { apiVersion: string; kind: string }[] = [];
  private readonly typeIndex = new Map<string, number>();
  private readonly finalizerSets = new Map<string, readonly string[]>();

  namespace(ns: string | undefined): number {
    if (!ns) return 0;
    let i = this.namespaceIndex.get(ns);
    if (i === undefined) {
      i = this.namespaces.length;
      this.namespaces.push(ns);
      this.namespaceIndex.set(ns, i);
    }
    return i;
  }

  /** The index of a namespace already seen, or -1 (a namespace no object lives in). */
  namespaceIfKnown(ns: string): number {
    return this.namespaceIndex.get(ns) ?? -1;
  }

  type(apiVersion: string, kind: string): number {
    const key = `${apiVersion}\0${kind}`;
    let i = this.typeIndex.get(key);
    if (i === undefined) {
      i = this.types.length;
      this.types.push({ apiVersion, kind });
      this.typeIndex.set(key, i);
    }
    return i;
  }

  finalizers(list: readonly string[]): readonly string[] {
    const key = list.join('\n');
    let set = this.finalizerSets.get(key);
    if (!set) {
      set = Object.freeze([...list]);
      this.finalizerSets.set(key, set);
    }
    return set;
  }
}

/** A growable Uint32Array: 4 bytes per object instead of a JS array's 8. */
class U32Column {
  private data = new Uint32Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Uint32Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  get(i: number): number {
    return this.data[i] as number;
  }
  appendFrom(other: U32Column): void {
    for (let i = 0; i < other.length; i++) this.push(other.get(i));
  }
}

/**
 * Objects in columns; index i is one object. A resource's list fills a
 * Columns of its own, committed into the snapshot only once the list is
 * complete, so that a list restarted after 410 Expired leaves nothing behind.
 */
export class Columns {
  readonly uid: string[] = [];
  readonly name: string[] = [];
  readonly ns = new U32Column();
  readonly res = new U32Column();
  readonly created = new U32Column();
  /** 0: not being deleted. */
  readonly deleted = new U32Column();
  /** Sparse: most objects have no finalizers. */
  readonly finalizers = new Map<number, readonly string[]>();
  /**
   * Owner references, flattened: object i's are [refStart(i), refEnd(i)) in
   * the ref* columns. Half the objects of a cluster have one; an array and
   * an object per reference would cost about 140 bytes each, these 20.
   */
  private readonly refStartCol = new U32Column();
  /** Per reference: interned type << REF_TYPE_SHIFT | REF_* flags. */
  readonly refTypeFlags = new U32Column();
  readonly refName: string[] = [];
  readonly refUid: string[] = [];

  get length(): number {
    return this.uid.length;
  }

  refStart(i: number): number {
    return this.refStartCol.get(i);
  }

  refEnd(i: number): number {
    return i + 1 < this.uid.length ? this.refStartCol.get(i + 1) : this.refUid.length;
  }

  refType(k: number): number {
    return this.refTypeFlags.get(k) >>> REF_TYPE_SHIFT;
  }

  refFlags(k: number): number {
    return this.refTypeFlags.get(k) & ((1 << REF_TYPE_SHIFT) - 1);
  }

  add(interner: Interner, res: number, m: ItemMeta | undefined): void {
    if (!m?.uid || m.name === undefined) return;
    const i = this.uid.length;
    this.uid.push(m.uid);
    this.name.push(m.name);
    this.ns.push(interner.namespace(m.namespace));
    this.res.push(res);
    this.created.push(toSeconds(m.creationTimestamp));
    this.deleted.push(toSeconds(m.deletionTimestamp));
    if (m.finalizers?.length) this.finalizers.set(i, interner.finalizers(m.finalizers));
    this.refStartCol.push(this.refUid.length);
    for (const r of m.ownerReferences ?? []) {
      this.refTypeFlags.push(
        (interner.type(r.apiVersion, r.kind) << REF_TYPE_SHIFT) |
          (r.controller ? REF_CONTROLLER : 0) |
          (r.blockOwnerDeletion ? REF_BLOCK_OWNER_DELETION : 0),
      );
      this.refName.push(r.name);
      this.refUid.push(r.uid);
    }
  }

  append(other: Columns): void {
    const offset = this.uid.length;
    const refOffset = this.refUid.length;
    for (let i = 0; i < other.length; i++) {
      this.uid.push(other.uid[i] as string);
      this.name.push(other.name[i] as string);
      this.refStartCol.push(other.refStart(i) + refOffset);
    }
    this.ns.appendFrom(other.ns);
    this.res.appendFrom(other.res);
    this.created.appendFrom(other.created);
    this.deleted.appendFrom(other.deleted);
    this.refTypeFlags.appendFrom(other.refTypeFlags);
    for (let k = 0; k < other.refUid.length; k++) {
      this.refName.push(other.refName[k] as string);
      this.refUid.push(other.refUid[k] as string);
    }
    for (const [i, f] of other.finalizers) this.finalizers.set(offset + i, f);
  }
}

export interface NamespaceCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** A namespace as read in full (its status is not in the metadata). */
export interface NamespaceInfo {
  name: string;
  uid: string;
  phase?: string;
  /** Seconds since the epoch; 0: not being deleted. */
  deleted: number;
  finalizers: string[];
  specFinalizers: string[];
  conditions: NamespaceCondition[];
}

export interface ApiServiceInfo {
  name: string;
  group: string;
  version: string;
  /** undefined: served by kube-apiserver itself (a local APIService). */
  service?: { namespace?: string; name?: string };
  available: boolean;
  reason?: string;
  message?: string;
}

/** One resource doctor meant to list, and whether it could. */
export interface ResourceEntry {
  info: ResourceInfo;
  /** Listed to the end (in the scan's scope): absence among its objects is meaningful. */
  listed: boolean;
  error?: string;
}

export interface NotScanned {
  /** `resource.group` (`*.group` for a whole group whose discovery failed). */
  resource: string;
  error: string;
}

export class Snapshot {
  readonly interner = new Interner();
  readonly objects = new Columns();
  /** Index = the `res` column's value. */
  readonly resources: ResourceEntry[] = [];
  /** Every served resource in every version (discovery's `all`), for owner kinds. */
  served: ResourceInfo[] = [];
  /** Groups whose discovery failed: kinds in them are unknown, not unserved. */
  failedGroups: string[] = [];
  namespaces: NamespaceInfo[] | undefined;
  /** undefined: the APIServices could not be read. */
  apiServices: ApiServiceInfo[] | undefined;
  readonly notScanned: NotScanned[] = [];
  /** Only namespaced objects of this namespace were listed (cluster-scoped ones everywhere). */
  namespace: string | undefined;
  startedAt = 0;
  finishedAt = 0;
  private uidIndex: Map<string, number> | undefined;

  addResource(info: ResourceInfo): number {
    this.resources.push({ info, listed: false });
    return this.resources.length - 1;
  }

  commit(res: number, cols: Columns): void {
    this.objects.append(cols);
    (this.resources[res] as ResourceEntry).listed = true;
  }

  fail(res: number, error: string, resourceName: string): void {
    const entry = this.resources[res] as ResourceEntry;
    entry.listed = false;
    entry.error = error;
    this.notScanned.push({ resource: resourceName, error });
  }

  /**
   * Builds the UID index and points every owner reference at the owner's own
   * uid and name strings, so that each is held once however many dependents
   * name it.
   */
  finish(): void {
    const index = new Map<string, number>();
    const o = this.objects;
    for (let i = 0; i < o.length; i++) {
      const uid = o.uid[i] as string;
      // The same object served by two resources (rare): the first listed wins.
      if (!index.has(uid)) index.set(uid, i);
    }
    for (let k = 0; k < o.refUid.length; k++) {
      const j = index.get(o.refUid[k] as string);
      if (j === undefined) continue;
      o.refUid[k] = o.uid[j] as string;
      if (o.name[j] === o.refName[k]) o.refName[k] = o.name[j] as string;
    }
    this.uidIndex = index;
  }

  indexOf(uid: string): number | undefined {
    if (!this.uidIndex) this.finish();
    return (this.uidIndex as Map<string, number>).get(uid);
  }
}
