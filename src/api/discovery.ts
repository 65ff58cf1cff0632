// Discovery: every served resource (all versions, for the RESTMapper) and the
// preferred version of each group (what gets watched). Uses aggregated
// discovery (apidiscovery.k8s.io/v2, two requests) and falls back to the
// legacy per-group-version endpoints on servers without it. A group that
// fails (an APIService that does not answer, a stale aggregated entry) is
// reported in `failedGroups` so callers keep what they had for it.
import type { KubeClient } from './client.ts';
import type { ResourceInfo } from './resources.ts';

export interface DiscoveryResult {
  /** Every served resource in every version, preferred versions first within a group. */
  all: ResourceInfo[];
  /** The resources of each group's preferred version. */
  preferred: ResourceInfo[];
  /** Groups ('' = core) whose discovery failed this round. */
  failedGroups: string[];
}

const AGGREGATED_ACCEPT =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json';

interface AggregatedList {
  kind?: string;
  items?: {
    metadata?: { name?: string };
    versions?: {
      version: string;
      freshness?: string;
      resources?: {
        resource: string;
        responseKind?: { group?: string; version?: string; kind?: string };
        scope?: string;
        verbs?: string[];
        shortNames?: string[];
        singularResource?: string;
      }[];
    }[];
  }[];
}

interface LegacyResourceList {
  resources?: {
    name: string;
    kind: string;
    namespaced: boolean;
    verbs?: string[];
    shortNames?: string[];
    singularName?: string;
  }[];
}
interface LegacyGroupList {
  groups?: {
    name: string;
    versions: { version: string }[];
    preferredVersion?: { version: string };
  }[];
}

export async function discover(client: KubeClient): Promise<DiscoveryResult> {
  const result: DiscoveryResult = { all: [], preferred: [], failedGroups: [] };
  for (const root of ['/api', '/apis']) {
    let list: AggregatedList;
    try {
      list = await client.request<AggregatedList>('GET', root, {
        accept: AGGREGATED_ACCEPT,
        verb: 'DISCOVERY',
      });
    } catch {
      // The whole root failed: nothing from it can be trusted this round.
      result.failedGroups.push(root === '/api' ? '' : '*');
      continue;
    }
    if (list.kind !== 'APIGroupDiscoveryList') {
      await legacy(client, root, result);
      continue;
    }
    for (const g of list.items ?? []) {
      const group = g.metadata?.name ?? '';
      const versions = g.versions ?? [];
      if (versions.length === 0 || versions.some((v) => v.freshness === 'Stale')) {
        result.failedGroups.push(group);
        continue;
      }
      // A resource's preferred version is the first of the group's versions (in preference
      // order) that serves it, as client-go's ServerPreferredResources: a resource served only
      // in a version other than the group's preferred one (a second CRD of a group whose other
      // CRD has a newer version) is still watched.
      const seen = new Set<string>();
      versions.forEach((v) => {
        for (const r of v.resources ?? []) {
          if (r.resource.includes('/')) continue;
          const info: ResourceInfo = {
            group,
            version: v.version,
            resource: r.resource,
            kind: r.responseKind?.kind ?? '',
            namespaced: r.scope === 'Namespaced',
            verbs: r.verbs ?? [],
            names: [...(r.shortNames ?? []), ...(r.singularResource ? [r.singularResource] : [])],
          };
          if (!info.kind) continue;
          result.all.push(info);
          if (!seen.has(info.resource)) result.preferred.push(info);
          seen.add(info.resource);
        }
      });
    }
  }
  return result;
}

function legacyResources(group: string, version: string, list: LegacyResourceList): ResourceInfo[] {
  return (list.resources ?? [])
    .filter((r) => !r.name.includes('/'))
    .map((r) => ({
      group,
      version,
      resource: r.name,
      kind: r.kind,
      namespaced: r.namespaced,
      verbs: r.verbs ?? [],
      names: [...(r.shortNames ?? []), ...(r.singularName ? [r.singularName] : [])],
    }));
}

async function legacy(client: KubeClient, root: string, result: DiscoveryResult): Promise<void> {
  if (root === '/api') {
    try {
      const rs = legacyResources(
        '',
        'v1',
        await client.request<LegacyResourceList>('GET', '/api/v1', { verb: 'DISCOVERY' }),
      );
      result.all.push(...rs);
      result.preferred.push(...rs);
    } catch {
      result.failedGroups.push('');
    }
    return;
  }
  let groups: LegacyGroupList;
  try {
    groups = await client.request<LegacyGroupList>('GET', '/apis', { verb: 'DISCOVERY' });
  } catch {
    result.failedGroups.push('*');
    return;
  }
  await Promise.all(
    (groups.groups ?? []).map(async (g) => {
      const preferred = g.preferredVersion?.version ?? g.versions[0]?.version;
      const ordered = [...g.versions].sort(
        (a, b) => Number(b.version === preferred) - Number(a.version === preferred),
      );
      // The first version (the preferred one first) serving each resource, as above.
      const seen = new Set<string>();
      try {
        for (const v of ordered) {
          const rs = legacyResources(
            g.name,
            v.version,
            await client.request<LegacyResourceList>('GET', `/apis/${g.name}/${v.version}`, {
              verb: 'DISCOVERY',
            }),
          );
          result.all.push(...rs);
          for (const r of rs) if (!seen.has(r.resource)) result.preferred.push(r);
          for (const r of rs) seen.add(r.resource);
        }
      } catch {
        result.failedGroups.push(g.name);
      }
    }),
  );
}

/**
 * The storage of kube-apiserver's own resources (built-in groups and custom
 * resources): one etcd, whose revisions are the resourceVersions of every one
 * of them, so they compare across resources.
 */
export const KUBE_APISERVER_STORAGE = 'kube-apiserver';

interface ApiServiceList {
  items?: { spec?: { group?: string; version?: string; service?: unknown } }[];
}

/**
 * The group-versions ('v1' for the core group, 'apps/v1'...) that
 * kube-apiserver serves itself: those whose APIService has no `spec.service`
 * ("Local": built-in groups, and custom resources once their APIService is
 * registered). Every other group-version is proxied to an aggregated API
 * server with a storage of its own. Throws when the APIServices cannot be
 * listed: the caller must then count nothing as kube-apiserver's own.
 */
export async function localGroupVersions(client: KubeClient): Promise<Set<string>> {
  const list = await client.request<ApiServiceList>(
    'GET',
    '/apis/apiregistration.k8s.io/v1/apiservices',
    { verb: 'LIST' },
  );
  const local = new Set<string>();
  for (const item of list.items ?? []) {
    const spec = item.spec;
    if (!spec?.version || spec.service) continue;
    local.add(spec.group ? `${spec.group}/${spec.version}` : spec.version);
  }
  return local;
}

/**
 * Which storage's counter a resource's resourceVersions are: kube-apiserver's
 * etcd for a group-version it serves itself (`local`, from
 * localGroupVersions; undefined when that is not known), else the resource's
 * own. Two resourceVersions compare only when their storages are equal: any
 * two of kube-apiserver's own resources, or one resource of an aggregated API
 * server with itself (one watch orders its events), never across servers, nor
 * across resources or versions of an aggregated server (each may have its own
 * storage). What this cannot see: a kube-apiserver resource moved to another
 * etcd with --etcd-servers-overrides looks like the others.
 */
export function resourceVersionStorage(
  r: Pick<ResourceInfo, 'group' | 'version' | 'resource'>,
  local: ReadonlySet<string> | undefined,
): string {
  const gv = r.group ? `${r.group}/${r.version}` : r.version;
  return local?.has(gv) ? KUBE_APISERVER_STORAGE : `${gv}/${r.resource}`;
}
