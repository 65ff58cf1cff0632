// The resources the soak creates, watches and reasons about.

export interface ResourceDef {
  /** Plural resource name, as in the audit log's objectRef.resource. */
  resource: string;
  group: string;
  /** The version the soak itself reads and writes (the CRD's storage version for widgets). */
  version: string;
  kind: string;
  /** False for cluster-scoped kinds (ClusterRoles): their objects and references have no namespace. */
  namespaced: boolean;
}

export const CRD_GROUP = 'soak.kubegc.io';
export const CRD_NAME = `widgets.${CRD_GROUP}`;
/** A second CRD of the group, deleted and re-created mid-run (shapes.ts): owners of a kind that leaves discovery. */
export const GADGET_CRD_NAME = `gadgets.${CRD_GROUP}`;
export const RBAC_GROUP = 'rbac.authorization.k8s.io';

/** The etcd-backed resources, each watched through kube-apiserver by the recorder (history.ts). */
export const RESOURCES: readonly ResourceDef[] = [
  { resource: 'configmaps', group: '', version: 'v1', kind: 'ConfigMap', namespaced: true },
  { resource: 'secrets', group: '', version: 'v1', kind: 'Secret', namespaced: true },
  { resource: 'pods', group: '', version: 'v1', kind: 'Pod', namespaced: true },
  { resource: 'deployments', group: 'apps', version: 'v1', kind: 'Deployment', namespaced: true },
  { resource: 'replicasets', group: 'apps', version: 'v1', kind: 'ReplicaSet', namespaced: true },
  { resource: 'jobs', group: 'batch', version: 'v1', kind: 'Job', namespaced: true },
  { resource: 'cronjobs', group: 'batch', version: 'v1', kind: 'CronJob', namespaced: true },
  { resource: 'widgets', group: CRD_GROUP, version: 'v1', kind: 'Widget', namespaced: true },
  { resource: 'gadgets', group: CRD_GROUP, version: 'v1', kind: 'Gadget', namespaced: true },
  // RBAC names need only be path segments: `,` `=` `\\` and spaces are legal (field-selector escaping).
  { resource: 'roles', group: RBAC_GROUP, version: 'v1', kind: 'Role', namespaced: true },
  {
    resource: 'clusterroles',
    group: RBAC_GROUP,
    version: 'v1',
    kind: 'ClusterRole',
    namespaced: false,
  },
];

/**
 * Owners served by the soak's own aggregated API server (aggregated.ts), in a group of their own
 * and under a plural no CRD uses (the history keys its streams by plural). Not in RESOURCES: the
 * recorder does not watch them through kube-apiserver, because their resourceVersions count on
 * a clock of that server's and mean nothing next to etcd revisions; the soak, their only writer,
 * records them itself, in etcd revisions.
 */
export const AGGREGATED: ResourceDef = {
  resource: 'aggwidgets',
  group: 'agg.soak.kubegc.io',
  version: 'v1',
  kind: 'AggWidget',
  namespaced: true,
};

/** Every kind the soak creates or references, watched or not. */
const KNOWN: readonly ResourceDef[] = [...RESOURCES, AGGREGATED];

export function resourceDef(resource: string): ResourceDef {
  const r = KNOWN.find((x) => x.resource === resource);
  if (!r) throw new Error(`unknown soak resource ${resource}`);
  return r;
}

/**
 * Whether a reference's kind (by group and kind, any version) is namespaced, for the kinds the
 * soak knows; undefined for any other kind.
 */
export function namespacedKind(group: string, kind: string): boolean | undefined {
  return KNOWN.find((x) => x.group === group && x.kind === kind)?.namespaced;
}

export function apiVersionOf(r: ResourceDef): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** The collection path, in a namespace or across all of them. */
export function collectionPath(r: ResourceDef, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return namespace && r.namespaced
    ? `${base}/namespaces/${namespace}/${r.resource}`
    : `${base}/${r.resource}`;
}

export function objectPath(r: ResourceDef, namespace: string, name: string): string {
  return `${collectionPath(r, namespace)}/${encodeURIComponent(name)}`;
}

/** The group of an ownerReference's apiVersion ("" for the core group). */
export function groupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i === -1 ? '' : apiVersion.slice(0, i);
}

/** Finalizers the API server and the GC use, and the soak's own. */
export const ORPHAN = 'orphan';
export const FOREGROUND = 'foregroundDeletion';
export const HOLD = 'soak.kubegc.io/hold';
/** The label on every object the workload makes (cluster-scoped ones are recorded by it). */
export const SOAK_LABEL = 'soak.kubegc.io/object';
