// `kubegc explain`: why an object is or is not being collected, read from the
// cluster alone (not from a running controller). It reuses the decision
// functions of src/gc/decide.ts, so it says what kubegc would do.
import { type KubeClient } from '../api/client.ts';
import { METADATA_LIST_ACCEPT } from '../api/request.ts';
import { discover } from '../api/discovery.ts';
import {
  RestMapper,
  collectionPath,
  groupResource,
  groupVersion,
  isDeletable,
  type ObjectMeta,
  type OwnerReference,
  type ResourceInfo,
} from '../api/resources.ts';
import { GcApi } from '../gc/operations.ts';
import { UnresolvableKindError } from '../gc/context.ts';
import {
  FOREGROUND_FINALIZER,
  ORPHAN_FINALIZER,
  decide,
  type ClassifiedOwner,
} from '../gc/decide.ts';
import { readOwnerLive, type OwnerReadLive } from '../gc/owners.ts';
import { trimMeta } from '../api/resources.ts';

export interface ExplainedOwner {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
  blockOwnerDeletion: boolean;
  /** solid, dangling, waiting, invalid, unresolvable */
  state: string;
  detail: string;
  /** The owner's own explanation, up the chain (absent when it is gone or unresolvable). */
  object?: ExplainedObject;
}

export interface ExplainedObject {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
  finalizers: string[];
  deletionTimestamp?: string;
  /** In plain words: what happens to it, and what blocks it. */
  status: string;
  owners: ExplainedOwner[];
  /** Down the tree; blockOwnerDeletion is that of the dependent's reference to this object. */
  dependents: (ExplainedObject & { blockOwnerDeletion: boolean })[];
}

export class ExplainError extends Error {}

const MAX_DEPTH = 10;

/** Finds the resource an operator means by `deploy`, `deployment`, `deployments`, `deployments.apps`... */
export function findResource(resources: ResourceInfo[], text: string): ResourceInfo | undefined {
  const t = text.toLowerCase();
  const dot = t.indexOf('.');
  const [name, group] = dot === -1 ? [t, undefined] : [t.slice(0, dot), t.slice(dot + 1)];
  const matches = resources.filter(
    (r) =>
      (group === undefined || r.group === group) &&
      (r.resource === name || r.kind.toLowerCase() === name || (r.names ?? []).includes(name)),
  );
  // Prefer the core group and then the built-in groups, as kubectl does.
  return (
    matches.find((r) => r.group === '') ?? matches.find((r) => !r.group.includes('.')) ?? matches[0]
  );
}

function describeRef(r: { apiVersion: string; kind: string; name: string }): string {
  return `${r.kind} ${r.name} (${r.apiVersion})`;
}

export async function explain(
  client: KubeClient,
  resourceText: string,
  name: string,
  namespace: string | undefined,
): Promise<ExplainedObject> {
  const d = await discover(client);
  if (d.all.length === 0) throw new ExplainError('discovery returned no resources');
  const resource = findResource(d.preferred, resourceText);
  if (!resource)
    throw new ExplainError(`the server doesn't have a resource type "${resourceText}"`);
  const ns = resource.namespaced ? (namespace ?? 'default') : undefined;
  const api = new GcApi(client, () => false);
  const live = await api.getMeta(resource, ns, name);
  if (!live)
    throw new ExplainError(
      `${groupResource(resource)} "${name}" not found${ns ? ` in namespace ${ns}` : ''}`,
    );
  const dependents = await dependentsByOwner(client, d.preferred, ns);
  const explainer = new Explainer(new RestMapper(d.all), api, dependents);
  return explainer.describe(resource, live, 0, true);
}

type DependentsByOwner = Map<string, { r: ResourceInfo; meta: ObjectMeta }[]>;

interface Dependents {
  byOwner: DependentsByOwner;
  /**
   * Resources whose LIST failed (403, a timeout...), with the error: their
   * objects may reference the object, so no answer about its dependents is
   * complete without them.
   */
  unlisted: string[];
}

/**
 * Everything that may reference the object, by owner UID: the namespace's
 * objects (for a namespaced object) or the whole cluster's (for a
 * cluster-scoped one).
 */
async function dependentsByOwner(
  client: KubeClient,
  preferred: ResourceInfo[],
  ns: string | undefined,
): Promise<Dependents> {
  const byOwner: DependentsByOwner = new Map();
  const unlisted: string[] = [];
  const listable = preferred.filter(isDeletable).filter((r) => (ns ? r.namespaced : true));
  await Promise.all(
    listable.map(async (r) => {
      let cont: string | undefined;
      do {
        const page = await client
          .request<{
            metadata?: { continue?: string };
            items?: { metadata?: Parameters<typeof trimMeta>[0] }[];
          }>('GET', collectionPath(r, ns), {
            accept: METADATA_LIST_ACCEPT,
            query: { limit: 500, continue: cont },
            verb: 'LIST',
          })
          .catch((err: unknown) => {
            unlisted.push(`${groupResource(r)} (${(err as Error).message.slice(0, 200)})`);
            return { items: [], metadata: { continue: undefined } };
          });
        for (const item of page.items ?? []) {
          const meta = trimMeta(item.metadata);
          for (const ref of meta?.ownerReferences ?? []) {
            if (!meta) continue;
            const list = byOwner.get(ref.uid) ?? [];
            list.push({ r, meta });
            byOwner.set(ref.uid, list);
          }
        }
        cont = page.metadata?.continue || undefined;
      } while (cont);
    }),
  );
  return { byOwner, unlisted: unlisted.sort() };
}

interface Classified {
  owner: ClassifiedOwner | undefined;
  ownerResource?: ResourceInfo;
  ownerMeta?: ObjectMeta;
  detail: string;
}

/**
 * One owner reference, classified by the workers' own code (gc/owners.ts) from
 * a live read: explain has no graph nor absent-owner cache, so it always reads
 * the owner.
 */
async function classify(
  mapper: RestMapper,
  api: GcApi,
  obj: ObjectMeta,
  ref: OwnerReference,
): Promise<Classified> {
  let read: OwnerReadLive;
  try {
    read = await readOwnerLive(mapper, api, obj, ref);
  } catch (err) {
    if (!(err instanceof UnresolvableKindError)) throw err;
    return {
      owner: undefined,
      detail: `owner kind ${ref.apiVersion} ${ref.kind} is not served: kept`,
    };
  }
  const { owner, resource: r, meta } = read;
  if (owner.state === 'invalid') return { owner, detail: 'invalid reference: never collected' };
  const detail =
    owner.state === 'dangling'
      ? owner.detail === 'uid-mismatch'
        ? `owner ${describeRef(ref)} was replaced (another UID has its name)`
        : `owner ${describeRef(ref)} not found`
      : owner.state === 'waiting'
        ? `owner ${describeRef(ref)} is deleting its dependents in the foreground`
        : `owner ${describeRef(ref)} exists`;
  return {
    owner,
    ownerResource: r,
    ownerMeta: meta && meta.uid === ref.uid ? meta : undefined,
    detail,
  };
}

const unknownDependents = (unlisted: readonly string[]): string =>
  unlisted.length ? `; dependents in ${unlisted.join(', ')} are unknown: that list failed` : '';

/**
 * What happens to an object being deleted, and what it waits for. `unlisted`:
 * resources that could not be listed, whose dependents are unknown (a failed
 * list is not an empty one).
 */
export function deletionStatus(
  obj: ObjectMeta,
  dependents: ExplainedObject['dependents'],
  unlisted: readonly string[] = [],
): string {
  const finalizers = obj.finalizers ?? [];
  const unknown = unknownDependents(unlisted);
  if (finalizers.includes(FOREGROUND_FINALIZER)) {
    const blocking = dependents.filter((x) => x.blockOwnerDeletion);
    if (blocking.length === 0)
      return unknown
        ? `deleting its dependents in the foreground: no blocking dependent among the resources listed${unknown}`
        : 'deleting its dependents in the foreground: no blocking dependent left, the foregroundDeletion finalizer will be removed';
    return `waiting for ${blocking.length} blocking dependent${blocking.length === 1 ? '' : 's'}: ${blocking.map((x) => `${x.kind} ${x.name}${x.finalizers.length ? ` (finalizers: ${x.finalizers.join(', ')})` : ''}`).join(', ')}${unknown}`;
  }
  if (finalizers.includes(ORPHAN_FINALIZER))
    return `being deleted with Orphan: ${dependents.length} dependent(s) will lose their reference, then it goes${unknown}`;
  return finalizers.length
    ? `being deleted; waiting for finalizers: ${finalizers.join(', ')}`
    : 'being deleted';
}

/** In plain words: what the garbage collector does with the object (decide(), as the workers do). */
export function statusOf(
  obj: ObjectMeta,
  owners: ExplainedOwner[],
  dependents: ExplainedObject['dependents'],
  unlisted: readonly string[],
): string {
  if (obj.deletionTimestamp) return deletionStatus(obj, dependents, unlisted);
  if (owners.length === 0) return 'no owner references: the garbage collector never deletes it';
  const unresolvable = owners.find((o) => o.state === 'unresolvable');
  if (unresolvable) return `${unresolvable.detail}`;
  const decision = decide({
    live: obj,
    owners: owners.map((o) => ({
      ref: o as OwnerReference,
      state: o.state as ClassifiedOwner['state'],
      detail: o.detail,
    })),
    dependents: dependents.map((x) => ({
      uid: x.uid,
      blockOwnerDeletion: x.blockOwnerDeletion,
      deletingDependents: x.finalizers.includes(FOREGROUND_FINALIZER) && !!x.deletionTimestamp,
      beingDeleted: !!x.deletionTimestamp,
    })),
  });
  const reasons = owners.filter((o) => o.state !== 'solid').map((o) => o.detail);
  switch (decision.action) {
    case 'none':
      return owners.some((o) => o.state === 'invalid')
        ? 'a cluster-scoped object naming a namespaced owner kind: never collected'
        : 'all owners exist: kept';
    case 'removeOwnerReferences':
      return `${reasons.join('; ')}: that reference will be removed, the object kept (another owner exists)`;
    case 'delete':
      // The policy depends on the object's blocking dependents, some of which may be unseen.
      return `${reasons.join('; ')}: will be collected (DELETE with propagationPolicy ${decision.policy})${unknownDependents(unlisted)}`;
  }
}

/** Walks up the owner chain and down the dependents tree, each object once. */
class Explainer {
  private readonly seen = new Set<string>();
  private readonly mapper: RestMapper;
  private readonly api: GcApi;
  private readonly dependents: Dependents;

  constructor(mapper: RestMapper, api: GcApi, dependents: Dependents) {
    this.mapper = mapper;
    this.api = api;
    this.dependents = dependents;
  }

  async describe(
    r: ResourceInfo,
    obj: ObjectMeta,
    depth: number,
    up: boolean,
  ): Promise<ExplainedObject> {
    this.seen.add(obj.uid);
    const owners: ExplainedOwner[] = [];
    for (const ref of obj.ownerReferences ?? []) owners.push(await this.owner(obj, ref, depth, up));
    const dependents = up && depth > 0 ? [] : await this.down(obj, depth);
    return {
      apiVersion: groupVersion(r),
      kind: r.kind,
      namespace: obj.namespace,
      name: obj.name,
      uid: obj.uid,
      finalizers: obj.finalizers ?? [],
      deletionTimestamp: obj.deletionTimestamp,
      status: statusOf(obj, owners, dependents, this.dependents.unlisted),
      owners,
      dependents,
    };
  }

  /** One owner reference of `obj`, and (going up) the owner's own explanation. */
  private async owner(
    obj: ObjectMeta,
    ref: OwnerReference,
    depth: number,
    up: boolean,
  ): Promise<ExplainedOwner> {
    const c = await classify(this.mapper, this.api, obj, ref);
    const o: ExplainedOwner = {
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      name: ref.name,
      uid: ref.uid,
      controller: ref.controller === true,
      blockOwnerDeletion: ref.blockOwnerDeletion === true,
      state: c.owner?.state ?? 'unresolvable',
      detail: c.detail,
    };
    if (
      up &&
      depth < MAX_DEPTH &&
      c.ownerResource &&
      c.ownerMeta &&
      !this.seen.has(c.ownerMeta.uid)
    )
      o.object = await this.describe(c.ownerResource, c.ownerMeta, depth + 1, true);
    return o;
  }

  private async down(obj: ObjectMeta, depth: number): Promise<ExplainedObject['dependents']> {
    if (depth > MAX_DEPTH) return [];
    const out: ExplainedObject['dependents'] = [];
    for (const dep of this.dependents.byOwner.get(obj.uid) ?? []) {
      if (this.seen.has(dep.meta.uid)) continue;
      this.seen.add(dep.meta.uid);
      // Any of its references with this UID may block (two may share it).
      const blocking = (dep.meta.ownerReferences ?? []).some(
        (x) => x.uid === obj.uid && x.blockOwnerDeletion === true,
      );
      const explained = await this.describe(dep.r, dep.meta, depth + 1, false);
      out.push({ ...explained, blockOwnerDeletion: blocking });
    }
    return out;
  }
}

/** Human-readable rendering: the owner chain up, then the dependents tree down. */
export function renderExplanation(e: ExplainedObject): string {
  const lines: string[] = [];
  const head = (o: ExplainedObject): string =>
    `${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name}${o.deletionTimestamp ? ` [deleting since ${o.deletionTimestamp}]` : ''}${o.finalizers.length ? ` [finalizers: ${o.finalizers.join(', ')}]` : ''}`;
  lines.push(head(e));
  lines.push(`  status: ${e.status}`);
  const ups = (o: ExplainedObject, indent: string): void => {
    for (const ow of o.owners) {
      const flags = [
        ow.controller ? 'controller' : '',
        ow.blockOwnerDeletion ? 'blockOwnerDeletion' : '',
      ]
        .filter(Boolean)
        .join(', ');
      lines.push(
        `${indent}↑ owner ${ow.kind} ${ow.name}${flags ? ` (${flags})` : ''}: ${ow.detail}`,
      );
      if (ow.object) {
        lines.push(`${indent}  ${head(ow.object)}: ${ow.object.status}`);
        ups(ow.object, `${indent}  `);
      }
    }
  };
  if (e.owners.length) {
    lines.push('owners:');
    ups(e, '  ');
  }
  const downs = (o: ExplainedObject, indent: string): void => {
    for (const d of o.dependents) {
      lines.push(
        `${indent}↓ ${head(d)}${d.blockOwnerDeletion ? ' (blockOwnerDeletion)' : ''}: ${d.status}`,
      );
      downs(d, `${indent}  `);
    }
  };
  if (e.dependents.length) {
    lines.push('dependents:');
    downs(e, '  ');
  }
  return `${lines.join('\n')}\n`;
}
