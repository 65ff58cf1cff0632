// The API calls that carry decisions out: metadata reads, guarded deletes and
// owner-reference / finalizer patches. Every write is guarded: DELETE carries
// UID (and resourceVersion) preconditions, JSON merge patches carry the
// resourceVersion they were computed from.
import { type KubeClient } from '../api/client.ts';
import { ApiError, isConflict, isObjectNotFound } from '../api/errors.ts';
import { METADATA_ACCEPT, METADATA_LIST_ACCEPT } from '../api/request.ts';
import { fieldEquals } from '../api/field-selector.ts';
import { PROTOBUF_METADATA_LIST_ACCEPT, type MetadataList } from '../api/protobuf-meta.ts';
import {
  collectionPath,
  groupResource,
  objectPath,
  trimMeta,
  type ObjectMeta,
  type OwnerReference,
  type RawMeta,
  type ResourceInfo,
} from '../api/resources.ts';
import { decodeMetadataList } from '../informers/metadata-informer.ts';
import { NotLeaderError, tenureRequestOptions, type WriteTenure } from '../leader/lease.ts';
import type { Logger } from '../log.ts';
import { removalByUidIsExact, withoutReferences, type DeletionPropagation } from './decide.ts';

/**
 * A write's decision no longer holds, found right before the write would go
 * on the wire (see GcApi.delete's `stillValid`): nothing was sent.
 */
export class StaleDecisionError extends Error {}

/**
 * What every write answers: 'done'; 'gone' (a 404 naming the object, or its
 * name now holds another UID); 'conflict' (409: the object changed since the
 * version the write was computed from).
 */
export type WriteOutcome = { outcome: 'done' } | { outcome: 'gone' } | { outcome: 'conflict' };
/** The unblock PATCH also hands back the object as it left it, to guard the DELETE that follows. */
export type UnblockOutcome =
  { outcome: 'done'; meta: ObjectMeta } | { outcome: 'gone' } | { outcome: 'conflict' };
/** A DELETE's preconditions: the UID alone, or the UID and the resourceVersion decided on. */
export type DeletePreconditions = 'uid' | 'uidAndResourceVersion';

/**
 * A LIST that cannot be shown to be complete and of one snapshot (see
 * GcApi.listSnapshot): nothing may be concluded from what it lacks.
 */
export class IncompleteListError extends Error {}

/** What GcApi.listSnapshot read: the items it kept, the snapshot's resourceVersion, the pages it took. */
export interface ListSnapshot {
  resourceVersion: string;
  items: ObjectMeta[];
  pages: number;
}

export interface ListSnapshotOptions {
  pageSize: number;
  /** More pages than this: given up (a server that pages for ever). */
  maxPages: number;
  /** Called before each page is requested (for the metrics). */
  onPage?: () => void;
}

/**
 * A LIST by `fieldSelector=metadata.name=` that the server refused because it
 * does not support that selector: a 400 whose Status message speaks of the
 * field selector or of a field label ("field label not supported:
 * metadata.name", "fieldSelector is not supported"), as some aggregated API
 * servers answer. Only that: another 400 (a request kubegc should not have
 * sent), a 403, 404, 406 or 5xx is an error as it would be for any read, and a
 * switch to GET on it could take a resource out of reach for good (kubegc's
 * ClusterRole grants no `get` on `*`). Never a reason to conclude anything
 * about the object.
 */
export function refusesFieldSelector(err: unknown): boolean {
  if (!(err instanceof ApiError) || err.status !== 400) return false;
  let message = err.body;
  try {
    const status = JSON.parse(err.body) as { message?: unknown };
    if (typeof status.message === 'string') message = status.message;
  } catch {
    /* not a Status: the body as it came */
  }
  return /field\s*selector|field label/i.test(message);
}

const DONE: WriteOutcome = { outcome: 'done' };
const GONE: WriteOutcome = { outcome: 'gone' };
const CONFLICT: WriteOutcome = { outcome: 'conflict' };

/** A resource's key in GcApi.readByGet: one version's server may support what another's does not. */
function resourceKey(r: ResourceInfo): string {
  return `${r.group}/${r.version}/${r.resource}`;
}

export class GcApi {
  readonly client: KubeClient;
  private readonly allowWrites: () => boolean;
  private readonly tenure: WriteTenure | undefined;
  private readonly log: Logger | undefined;
  /**
   * The resources (group/version/resource) whose server refused the field
   * selector of a live read: read with a GET from then on, without asking
   * again (each refused LIST would be one more request per read).
   */
  private readonly readByGet = new Set<string>();
  /**
   * `allowWrites`: the write guard. `tenure` (leader election): what bounds
   * each write once it is on the wire. `log`: where a resource read by GET
   * from now on is reported, once.
   */
  constructor(
    client: KubeClient,
    allowWrites: () => boolean = () => true,
    tenure?: WriteTenure,
    log?: Logger,
  ) {
    this.client = client;
    this.allowWrites = allowWrites;
    this.tenure = tenure;
    this.log = log;
  }

  /**
   * The write guard: a replica that lost its lease (or is stopping) writes
   * nothing more. Not called before a write but passed as its `beforeSend`:
   * the client runs it after the rate limiter and before every attempt (429
   * retries included), so a write that waited in the token bucket, a
   * Retry-After sleep or a stalled event loop is checked again at the moment
   * it would go on the wire.
   */
  private guard(): void {
    if (!this.allowWrites()) throw new NotLeaderError('not the leader: writes are stopped');
  }

  /**
   * What every PATCH and DELETE is sent with. The write guard as its
   * `beforeSend`; and no re-send after a 429: every write here carries a
   * decision made before the wait (an owner may have been switched to Orphan
   * since), so the 429 goes back to the work queue and the object is decided
   * again after the server's Retry-After.
   *
   * With leader election, also the tenure's signal and a timeout no longer
   * than leaseDuration − renewDeadline: the guard bounds when a write is
   * sent, these bound when it can take effect. A write still in flight when
   * the tenure ends is cancelled on the wire and rejects (an ApiError the
   * work queue retries); one sent at the last moment of the tenure is over
   * before a standby can take the lease. (A getter: each write gets the
   * current tenure's signal.)
   */
  private get writeOptions(): {
    beforeSend: () => void;
    retryThrottled: false;
    signal?: AbortSignal;
    timeoutMs?: number;
  } {
    return {
      beforeSend: (): void => this.guard(),
      retryThrottled: false as const,
      ...tenureRequestOptions(this.tenure),
    };
  }

  /**
   * Live metadata of one object, or undefined if it does not exist.
   *
   * A LIST of the one name (`fieldSelector=metadata.name=NAME`), not a GET:
   * the API server serves it as a read of that one key, as consistent as a
   * GET, and it needs only the `list` verb. So kubegc's ClusterRole grants no
   * `get` on `*`, and with it none on the subresources `*` also matches:
   * `nodes/proxy` (the kubelet's API, exec included), `pods/log`,
   * `pods/exec`, `services/proxy`. A resource that cannot be listed is read
   * with a GET, and so is one whose server refuses the field selector
   * (`refusesFieldSelector`: some aggregated API servers support none):
   * remembered per resource, so its later reads go straight to the GET. That
   * GET needs the `get` verb on the resource, which the shipped ClusterRole
   * does not grant: without it the read fails (403), and a failed read is
   * never "absent".
   *
   * The name is escaped in the selector (names of some kinds, RBAC's among
   * them, may hold `,` `=` `\`). The answer is taken strictly: absent only
   * for zero items and no continue token. More than one item, an item of
   * another name, or a continue token (a server, an aggregated API say, that
   * ignored the selector and paged) throw: "absent" would let kubegc delete
   * the dependents of an owner that exists.
   */
  async getMeta(
    r: ResourceInfo,
    namespace: string | undefined,
    name: string,
  ): Promise<ObjectMeta | undefined> {
    if (!r.verbs.includes('list')) return this.getMetaByGet(r, namespace, name);
    if (this.readByGet.has(resourceKey(r))) return this.getMetaByGet(r, namespace, name, true);
    let list: {
      metadata?: { continue?: string };
      items?: { metadata?: Parameters<typeof trimMeta>[0] }[];
    };
    try {
      list = await this.client.request(
        'GET',
        collectionPath(r, r.namespaced ? namespace : undefined),
        {
          query: { fieldSelector: fieldEquals('metadata.name', name) },
          accept: METADATA_LIST_ACCEPT,
          verb: 'GET',
        },
      );
    } catch (err) {
      if (!refusesFieldSelector(err)) throw err;
      if (!this.readByGet.has(resourceKey(r))) {
        this.readByGet.add(resourceKey(r));
        this.log?.info(
          'the server refuses field selectors: reading this resource by GET from now on',
          {
            resource: groupResource(r),
            version: r.version,
            answer: (err as Error).message.slice(0, 300),
          },
        );
      }
      return this.getMetaByGet(r, namespace, name, true);
    }
    const items = list.items ?? [];
    const what = `${groupResource(r)} ${namespace && r.namespaced ? `${namespace}/` : ''}${name}`;
    const unexpected = (why: string): Error =>
      new Error(`live read of ${what} by field selector: ${why}; cannot tell whether it exists`);
    if (list.metadata?.continue)
      throw unexpected(
        `the answer has a continue token (${items.length} item(s) on its first page)`,
      );
    if (items.length > 1) throw unexpected(`the answer has ${items.length} items, not one`);
    const [item] = items;
    if (!item) return undefined;
    if (item.metadata?.name !== name)
      throw unexpected(`the answer is an object named ${JSON.stringify(item.metadata?.name)}`);
    if (r.namespaced && namespace && item.metadata.namespace !== namespace)
      throw unexpected(
        `the answer is an object in namespace ${JSON.stringify(item.metadata.namespace)}`,
      );
    const meta = trimMeta(item.metadata);
    if (!meta) throw unexpected('the item has no usable metadata');
    return meta;
  }

  /**
   * A GET by name: absent only for a 404 whose Status names the object.
   * `selectorRefused`: the resource is read this way because its server
   * refused the field selector; a 403 then says what to grant.
   */
  private async getMetaByGet(
    r: ResourceInfo,
    namespace: string | undefined,
    name: string,
    selectorRefused = false,
  ): Promise<ObjectMeta | undefined> {
    let obj: { metadata?: Parameters<typeof trimMeta>[0] };
    try {
      obj = await this.client.request('GET', objectPath(r, namespace, name), {
        accept: METADATA_ACCEPT,
        verb: 'GET',
      });
    } catch (err) {
      if (isObjectNotFound(err, name)) return undefined;
      // Still the ApiError it was (a 403 is reported as GarbageCollectionForbidden), with the remedy in it.
      if (selectorRefused && err instanceof ApiError && err.status === 403)
        err.message += `; the server of ${groupResource(r)} refuses field selectors, so kubegc reads its objects with a GET: grant kubegc's service account \`get\` on ${groupResource(r)} (docs/security.md)`;
      throw err;
    }
    const meta = trimMeta(obj.metadata);
    // An object without a uid or name cannot be told apart from another: an error, not "absent".
    if (!meta)
      throw new Error(
        `live read of ${groupResource(r)} ${namespace && r.namespaced ? `${namespace}/` : ''}${name} by GET: the answer has no usable metadata; cannot tell whether it exists`,
      );
    if (meta.name !== name)
      throw new Error(
        `live read of ${groupResource(r)} ${namespace && r.namespaced ? `${namespace}/` : ''}${name} by GET: the answer is an object named ${JSON.stringify(meta.name)}`,
      );
    return meta;
  }

  /**
   * The objects of resource `r` (in `namespace`, or everywhere) that name
   * `ownerUid` among their owner references, from a consistent read: a
   * paginated metadata-only LIST without resourceVersion, which etcd answers
   * as of now (every page from the first page's snapshot). What the orphan
   * worker reads for a resource whose watch cannot yet show that it has
   * delivered everything up to an owner's deletion.
   */
  async listDependents(
    r: ResourceInfo,
    namespace: string | undefined,
    ownerUid: string,
  ): Promise<ObjectMeta[]> {
    const found: ObjectMeta[] = [];
    let cont: string | undefined;
    do {
      const page = await this.client.request<{
        metadata?: { continue?: string };
        items?: { metadata?: RawMeta }[];
      }>('GET', collectionPath(r, r.namespaced ? namespace : undefined), {
        query: { limit: 500, continue: cont },
        accept: METADATA_LIST_ACCEPT,
        verb: 'LIST',
      });
      for (const item of page.items ?? []) {
        const meta = trimMeta(item.metadata);
        if (meta?.ownerReferences?.some((o) => o.uid === ownerUid)) found.push(meta);
      }
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return found;
  }

  /**
   * The objects of `r` in `namespace` (all namespaces when undefined) that
   * `keep` picks, from ONE consistent snapshot: a paginated metadata-only
   * LIST (protobuf first, as the informers list) without resourceVersion,
   * which the API server serves as a consistent read (as of the moment it
   * is served, as a live read by name is), every later page from the first
   * page's snapshot (its continue token carries it). Complete only when the
   * continue token runs out and every page names the same resourceVersion;
   * an error on any page, a page of another resourceVersion, an item
   * without uid or name, an item outside `namespace`, or more than
   * `maxPages` pages throw (IncompleteListError, or the ApiError as it
   * came). A continue token expired (410) starts the list again once, from
   * a new snapshot (still not older than anything observed before it).
   */
  async listSnapshot(
    r: ResourceInfo,
    namespace: string | undefined,
    keep: (meta: ObjectMeta) => boolean,
    opts: ListSnapshotOptions,
  ): Promise<ListSnapshot> {
    const path = collectionPath(r, r.namespaced ? namespace : undefined);
    const what = `${groupResource(r)}${r.namespaced && namespace ? ` in ${namespace}` : ''}`;
    for (let restarts = 0; ; restarts++) {
      const snapshot: ListSnapshot = { resourceVersion: '', items: [], pages: 0 };
      let cont: string | undefined;
      try {
        do {
          if (snapshot.pages >= opts.maxPages)
            throw new IncompleteListError(`LIST of ${what}: more than ${opts.maxPages} pages`);
          opts.onPage?.();
          const page = await this.client.request<MetadataList>('GET', path, {
            accept: PROTOBUF_METADATA_LIST_ACCEPT,
            query: { limit: opts.pageSize, continue: cont },
            verb: 'LIST',
            decode: decodeMetadataList,
          });
          snapshot.pages++;
          this.checkPage(page, snapshot, what, r.namespaced ? namespace : undefined);
          for (const meta of page.items) if (keep(meta)) snapshot.items.push(meta);
          cont = page.continue || undefined;
        } while (cont);
        return snapshot;
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 410 && cont && restarts === 0)) throw err;
      }
    }
  }

  /** One page of listSnapshot: of the snapshot's resourceVersion, every item whole and where it was asked for. */
  private checkPage(
    page: MetadataList,
    snapshot: ListSnapshot,
    what: string,
    namespace: string | undefined,
  ): void {
    const incomplete = (why: string): IncompleteListError =>
      new IncompleteListError(`LIST of ${what}, page ${snapshot.pages}: ${why}`);
    if (!page.resourceVersion) throw incomplete('the answer has no resourceVersion');
    if (snapshot.pages === 1) snapshot.resourceVersion = page.resourceVersion;
    else if (page.resourceVersion !== snapshot.resourceVersion)
      throw incomplete(
        `resourceVersion ${page.resourceVersion}, not the first page's ${snapshot.resourceVersion}`,
      );
    if (page.dropped) throw incomplete(`${page.dropped} item(s) without a uid or name`);
    if (namespace !== undefined)
      for (const meta of page.items)
        if (meta.namespace !== namespace)
          throw incomplete(`an object in namespace ${JSON.stringify(meta.namespace ?? '')}`);
  }

  /**
   * DELETE with preconditions (409 'conflict': the object changed since the
   * version in `meta`). `stillValid`, if given, runs with the write guard,
   * right before the request goes on the wire (after the rate limiter and
   * any header refresh): a reason there means the decision no longer holds,
   * and the DELETE is not sent (StaleDecisionError).
   */
  async delete(
    r: ResourceInfo,
    meta: ObjectMeta,
    policy: DeletionPropagation,
    guard: DeletePreconditions,
    stillValid?: () => string | undefined,
  ): Promise<WriteOutcome> {
    const preconditions: { uid: string; resourceVersion?: string } = { uid: meta.uid };
    if (guard === 'uidAndResourceVersion' && meta.resourceVersion)
      preconditions.resourceVersion = meta.resourceVersion;
    const options = this.writeOptions;
    try {
      await this.client.request('DELETE', objectPath(r, meta.namespace, meta.name), {
        body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: policy, preconditions },
        verb: 'DELETE',
        ...options,
        beforeSend: () => {
          options.beforeSend();
          const why = stillValid?.();
          if (why) throw new StaleDecisionError(why);
        },
      });
      return DONE;
    } catch (err) {
      if (isObjectNotFound(err, meta.name)) return GONE;
      if (isConflict(err)) return CONFLICT;
      throw err;
    }
  }

  /**
   * Removes the owner references with these UIDs and nothing else. Strategic
   * merge patch (a `$patch: delete` per UID, guarded by the object's UID); for
   * custom resources, which do not support it (415), a JSON merge patch of the
   * filtered list guarded by resourceVersion. 'done' or 'gone'.
   */
  async removeOwnerReferences(
    r: ResourceInfo,
    target: Pick<ObjectMeta, 'uid' | 'name' | 'namespace'>,
    uids: readonly string[],
  ): Promise<WriteOutcome> {
    const path = objectPath(r, target.namespace, target.name);
    try {
      await this.client.request('PATCH', path, {
        contentType: 'application/strategic-merge-patch+json',
        body: {
          metadata: {
            ownerReferences: uids.map((uid) => ({ $patch: 'delete', uid })),
            uid: target.uid,
          },
        },
        accept: METADATA_ACCEPT,
        verb: 'PATCH',
        ...this.writeOptions,
      });
      return DONE;
    } catch (err) {
      if (isObjectNotFound(err, target.name)) return GONE;
      if (!(err instanceof ApiError && err.status === 415)) throw err;
    }
    // The merge patch replaces the whole list: compute it from a fresh read.
    const fresh = await this.getMeta(r, target.namespace, target.name);
    if (!fresh || fresh.uid !== target.uid) return GONE;
    return this.mergePatchOwnerReferences(r, fresh, (refs) =>
      refs.filter((o) => !uids.includes(o.uid)),
    );
  }

  /**
   * Removes exactly the references `remove` (each by its whole identity)
   * from exactly the version of the object in `meta` (the graph's copy, or a
   * live read): the patch carries its uid and resourceVersion, so the API
   * server applies it only to that version and answers 409 otherwise
   * ('conflict': the caller decides again from a live read).
   *
   * A strategic merge patch deletes by UID, its merge key: that is exact
   * only when no other reference shares one of those UIDs (the API server
   * accepts two references with one UID, one of them naming a live owner).
   * Otherwise, and for custom resources (415), a JSON merge patch of the
   * list without `remove`, computed from the same copy and equally guarded.
   */
  async removeOwnerReferencesAt(
    r: ResourceInfo,
    meta: ObjectMeta,
    remove: readonly OwnerReference[],
  ): Promise<WriteOutcome> {
    if (!meta.resourceVersion) throw new Error('removeOwnerReferencesAt needs a resourceVersion');
    const path = objectPath(r, meta.namespace, meta.name);
    const guard = { uid: meta.uid, resourceVersion: meta.resourceVersion };
    const refs = meta.ownerReferences ?? [];
    const uids = [...new Set(remove.map((x) => x.uid))];
    const strategic = {
      contentType: 'application/strategic-merge-patch+json',
      metadata: { ...guard, ownerReferences: uids.map((uid) => ({ $patch: 'delete', uid })) },
    };
    const merge = {
      contentType: 'application/merge-patch+json',
      metadata: { ...guard, ownerReferences: withoutReferences(refs, remove) },
    };
    const bodies = removalByUidIsExact(refs, remove) ? [strategic, merge] : [merge];
    for (const { contentType, metadata } of bodies) {
      try {
        await this.client.request('PATCH', path, {
          contentType,
          body: { metadata },
          accept: METADATA_ACCEPT,
          verb: 'PATCH',
          ...this.writeOptions,
        });
        return DONE;
      } catch (err) {
        if (isObjectNotFound(err, meta.name)) return GONE;
        if (isConflict(err)) return CONFLICT;
        if (!(err instanceof ApiError && err.status === 415)) throw err;
      }
    }
    return CONFLICT;
  }

  /**
   * Sets blockOwnerDeletion=false on all of the object's owner references
   * (breaks foreground cycles): one JSON merge patch guarded by the
   * resourceVersion the decision was made on. A conflict is handed back, not
   * retried: the references may have changed (a new live owner), and only the
   * caller can tell whether its decision still stands. On success, the
   * object as the PATCH left it, so the DELETE that follows can be guarded by
   * exactly that resourceVersion.
   */
  async unblockOwnerReferences(r: ResourceInfo, meta: ObjectMeta): Promise<UnblockOutcome> {
    try {
      const res = await this.client.request<{ metadata?: Parameters<typeof trimMeta>[0] }>(
        'PATCH',
        objectPath(r, meta.namespace, meta.name),
        {
          contentType: 'application/merge-patch+json',
          body: {
            metadata: {
              uid: meta.uid,
              resourceVersion: meta.resourceVersion,
              ownerReferences: (meta.ownerReferences ?? []).map((o) =>
                o.blockOwnerDeletion ? { ...o, blockOwnerDeletion: false } : o,
              ),
            },
          },
          accept: METADATA_ACCEPT,
          verb: 'PATCH',
          ...this.writeOptions,
        },
      );
      const patched = trimMeta(res?.metadata);
      // Without the answer's resourceVersion the DELETE could not be guarded: decide again.
      if (!patched?.resourceVersion || patched.uid !== meta.uid) return { outcome: 'conflict' };
      return { outcome: 'done', meta: patched };
    } catch (err) {
      if (isObjectNotFound(err, meta.name)) return { outcome: 'gone' };
      if (isConflict(err)) return { outcome: 'conflict' };
      throw err;
    }
  }

  private async mergePatchOwnerReferences(
    r: ResourceInfo,
    meta: ObjectMeta,
    change: (
      refs: NonNullable<ObjectMeta['ownerReferences']>,
    ) => NonNullable<ObjectMeta['ownerReferences']>,
  ): Promise<WriteOutcome> {
    let current: ObjectMeta | undefined = meta;
    for (let attempt = 0; attempt < 5 && current; attempt++) {
      try {
        await this.client.request('PATCH', objectPath(r, current.namespace, current.name), {
          contentType: 'application/merge-patch+json',
          body: {
            metadata: {
              uid: current.uid,
              resourceVersion: current.resourceVersion,
              ownerReferences: change(current.ownerReferences ?? []),
            },
          },
          accept: METADATA_ACCEPT,
          verb: 'PATCH',
          ...this.writeOptions,
        });
        return DONE;
      } catch (err) {
        if (isObjectNotFound(err, current.name)) return GONE;
        if (!isConflict(err)) throw err;
        const fresh: ObjectMeta | undefined = await this.getMeta(
          r,
          current.namespace,
          current.name,
        );
        current = fresh?.uid === meta.uid ? fresh : undefined;
      }
    }
    if (current)
      throw new Error(
        `ownerReferences of ${meta.namespace ?? ''}/${meta.name} kept changing; will retry`,
      );
    return GONE;
  }

  /**
   * Removes one finalizer: read, JSON merge patch of the finalizers with the
   * resourceVersion read, retried on conflict. 'gone': a live read found no
   * such object (nothing under the name, or another UID); 'done' also when
   * the finalizer was already gone. A PATCH answered 404 is not taken for
   * "gone" (an admission webhook may deny with that code and the object's
   * name): it is read again, and the PATCH retried while the read finds it.
   */
  async removeFinalizer(
    r: ResourceInfo,
    namespace: string | undefined,
    name: string,
    uid: string,
    finalizer: string,
  ): Promise<WriteOutcome> {
    let notFound: string | undefined;
    for (let attempt = 0; attempt < 5; attempt++) {
      const meta = await this.getMeta(r, namespace, name);
      if (!meta || meta.uid !== uid) return GONE;
      if (!meta.finalizers?.includes(finalizer)) return DONE;
      try {
        await this.client.request('PATCH', objectPath(r, namespace, name), {
          contentType: 'application/merge-patch+json',
          body: {
            metadata: {
              uid,
              resourceVersion: meta.resourceVersion,
              finalizers: meta.finalizers.filter((f) => f !== finalizer),
            },
          },
          accept: METADATA_ACCEPT,
          verb: 'PATCH',
          ...this.writeOptions,
        });
        return DONE;
      } catch (err) {
        if (isObjectNotFound(err, name)) {
          notFound = (err as Error).message;
          continue;
        }
        if (!isConflict(err)) throw err;
      }
    }
    throw new Error(
      `finalizer ${finalizer} of ${namespace ?? ''}/${name}: ${notFound ? `PATCH answered 404 though a live read finds the object (${notFound})` : 'conflicts on every attempt'}; will retry`,
    );
  }
}
