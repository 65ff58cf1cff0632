// The resources the soak creates, watches and reasons about.

export interface ResourceDef {
  /** Plural resource name, as in the audit log's objectRef.resource. */
  resource: string;
  group: string;
  /** The version the soak itself reads and writes (the CRD's storage version for widgets). */
  version: string;
  kind: string;
}

export const CRD_GROUP = 'soak.kubegc.io';
export const CRD_NAME = `widgets.${CRD_GROUP}`;

export const RESOURCES: readonly ResourceDef[] = [
  { resource: 'configmaps', group: '', version: 'v1', kind: 'ConfigMap' },
  { resource: 'secrets', group: '', version: 'v1', kind: 'Secret' },
  { resource: 'pods', group: '', version: 'v1', kind: 'Pod' },
  { resource: 'deployments', group: 'apps', version: 'v1', kind: 'Deployment' },
  { resource: 'replicasets', group: 'apps', version: 'v1', kind: 'ReplicaSet' },
  { resource: 'jobs', group: 'batch', version: 'v1', kind: 'Job' },
  { resource: 'cronjobs', group: 'batch', version: 'v1', kind: 'CronJob' },
  { resource: 'widgets', group: CRD_GROUP, version: 'v1', kind: 'Widget' },
];

export function resourceDef(resource: string): ResourceDef {
  const r = RESOURCES.find((x) => x.resource === resource);
  if (!r) throw new Error(`unknown soak resource ${resource}`);
  return r;
}

export function apiVersionOf(r: ResourceDef): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** The collection path, in a namespace or across all of them. */
export function collectionPath(r: ResourceDef, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return namespace ? `${base}/namespaces/${namespace}/${r.resource}` : `${base}/${r.resource}`;
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
