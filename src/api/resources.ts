// What the API server serves: resources, their kinds and scopes, and the
// mapping from an owner reference's apiVersion/kind to a resource.

export interface ResourceInfo {
  group: string;
  version: string;
  /** Plural resource name, e.g. `replicasets`. */
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: readonly string[];
  /** Short names and the singular name, for command-line lookups (`deploy`, `deployment`). */
  names?: readonly string[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** The metadata kubegc reads: what a metadata-only list/watch/get returns, trimmed. */
export interface ObjectMeta {
  uid: string;
  name: string;
  namespace?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

/** Metadata as the API server sends it (the fields kubegc may read). */
export interface RawMeta {
  annotations?: Record<string, string>;
  uid?: string;
  name?: string;
  namespace?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

/** Keeps only the fields the GC needs (drops labels, annotations, managedFields...). */
export function trimMeta(m: RawMeta | undefined): ObjectMeta | undefined {
  if (!m?.uid || m.name === undefined) return undefined;
  const out: ObjectMeta = { uid: m.uid, name: m.name };
  if (m.namespace) out.namespace = m.namespace;
  if (m.resourceVersion) out.resourceVersion = m.resourceVersion;
  if (m.deletionTimestamp) out.deletionTimestamp = m.deletionTimestamp;
  if (m.finalizers?.length) out.finalizers = m.finalizers;
  if (m.ownerReferences?.length) out.ownerReferences = m.ownerReferences;
  return out;
}

export function groupVersion(r: Pick<ResourceInfo, 'group' | 'version'>): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** `apps/v1` → {group: 'apps', version: 'v1'}; `v1` → {group: '', version: 'v1'}. */
export function parseApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash === -1
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

/** `replicasets.apps`, `pods` (core): the form --ignored-resources takes. */
export function groupResource(r: Pick<ResourceInfo, 'group' | 'resource'>): string {
  return r.group ? `${r.resource}.${r.group}` : r.resource;
}

/** Normalises a --ignored-resources entry: `events.` and `events` both mean core events. */
export function normaliseGroupResource(text: string): string {
  return text.endsWith('.') ? text.slice(0, -1) : text;
}

export function collectionPath(r: ResourceInfo, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return r.namespaced && namespace
    ? `${base}/namespaces/${encodeURIComponent(namespace)}/${r.resource}`
    : `${base}/${r.resource}`;
}

export function objectPath(r: ResourceInfo, namespace: string | undefined, name: string): string {
  return `${collectionPath(r, r.namespaced ? namespace : undefined)}/${encodeURIComponent(name)}`;
}

export function isDeletable(r: ResourceInfo): boolean {
  return ['list', 'watch', 'delete'].every((v) => r.verbs.includes(v));
}

/**
 * Resolves an owner reference's apiVersion + kind to a served resource, as
 * upstream's RESTMapper does: the exact group, version and kind must be served
 * (any version, not only the preferred one). Unresolvable → undefined, and the
 * GC must never delete on that basis.
 */
export class RestMapper {
  private readonly byGvk = new Map<string, ResourceInfo>();

  constructor(resources: Iterable<ResourceInfo>) {
    for (const r of resources) {
      const key = `${r.group}/${r.version}/${r.kind}`;
      // Several resources may share a kind (rare); keep the first, which discovery lists first.
      if (!this.byGvk.has(key)) this.byGvk.set(key, r);
    }
  }

  resolve(apiVersion: string, kind: string): ResourceInfo | undefined {
    const { group, version } = parseApiVersion(apiVersion);
    return this.byGvk.get(`${group}/${version}/${kind}`);
  }

  get size(): number {
    return this.byGvk.size;
  }
}
