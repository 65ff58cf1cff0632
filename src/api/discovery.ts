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
      versions.forEach((v, index) => {
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
          if (index === 0) result.preferred.push(info);
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
          if (v.version === preferred) result.preferred.push(...rs);
        }
      } catch {
        result.failedGroups.push(g.name);
      }
    }),
  );
}
