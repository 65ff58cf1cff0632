// The attempt-to-orphan worker: an owner deleted with propagationPolicy
// Orphan. Its dependents lose their references to it, then the `orphan`
// finalizer is removed so the API server can finish the delete.
//
// The dependents come from the graph, so the graph must hold every one that
// exists: a dependent missed (a watch reconnecting, behind, being replaced,
// a resource discovery has not shown yet) would keep its reference, be found
// after the owner is gone and be deleted (upstream #26120). So before the
// finalizer goes:
//   1. a discovery round that began after the deletion was seen has run (a
//      CRD created just before is watched, or at least known); a group that
//      round could not discover, and of which nothing is known, holds the
//      owner as a resource that cannot be listed does;
//   2. every watched resource that could hold a dependent has shown that it
//      delivered everything up to the owner's deletion (an event or bookmark
//      at or past the owner's resourceVersion, on a stream open since; only a
//      resource whose versions count the same storage as the owner's can show
//      that, never an aggregated API's against etcd's); for those that have
//      not within a moment, a consistent LIST is read instead;
//   3. after the PATCHes, the graph's dependents are read again, and any new
//      one is orphaned too.
import { ApiError } from '../api/errors.ts';
import { groupResource, type ObjectMeta, type ResourceInfo } from '../api/resources.ts';
import { done, failed, retryAfter, type ProcessResult } from '../queue/workqueue.ts';
import { warnOnce, type GcContext } from './context.ts';
import { ORPHAN_FINALIZER } from './decide.ts';
import { refusal } from './slis.ts';

/** Dependents patched in parallel for one owner. */
const ORPHAN_PARALLELISM = 20;
export const DEFAULT_ORPHAN_WATCH_WAIT_MS = 120_000;
/** How long the watches get to show delivery past the deletion before their resources are read live. */
export const DEFAULT_ORPHAN_CATCH_UP_MS = 1500;
const WATCH_RECHECK_MS = 250;
/** Rounds of "orphan what the graph shows, then look again" before the finalizer goes. */
const MAX_ROUNDS = 5;

export async function attemptToOrphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const result = await orphan(ctx, uid);
  if (result.result === 'done') {
    ctx.state.orphanWaits.delete(uid);
    ctx.slis?.succeeded(uid);
  }
  return result;
}

interface Target {
  resource: ResourceInfo;
  meta: Pick<ObjectMeta, 'uid' | 'name' | 'namespace'>;
  kind: string;
}

async function orphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const owner = ctx.graph.get(uid);
  if (!owner || owner.virtual) return done;
  const ownerResource = ctx.mapper().resolve(owner.apiVersion, owner.kind);
  if (!ownerResource)
    return failed(new Error(`cannot resolve ${owner.apiVersion}, Kind=${owner.kind}`));
  const fields = {
    resource: groupResource(ownerResource),
    namespace: owner.namespace,
    name: owner.name,
    uid,
  };
  let wait = ctx.state.orphanWaits.get(uid);
  if (!wait) {
    // When the wait began and the owner's resourceVersion then (the point every informer must have reached).
    wait = { since: Date.now(), rv: owner.resourceVersion, logged: false };
    ctx.state.orphanWaits.set(uid, wait);
  }
  const waited = Date.now() - wait.since;
  const limit = ctx.orphanWatchWaitMs ?? DEFAULT_ORPHAN_WATCH_WAIT_MS;

  /** Dependents found by consistent LISTs of the resources whose watches are behind. */
  const listed: Target[] = [];
  if (ctx.watchesBehind) {
    const undiscovered = (await ctx.discoveredSince?.(wait.since)) ?? [];
    const behind = ctx.watchesBehind(owner.namespace !== '', wait.rv, ownerResource);
    if (behind.length > 0 && waited < (ctx.orphanCatchUpMs ?? DEFAULT_ORPHAN_CATCH_UP_MS))
      return retryAfter(WATCH_RECHECK_MS);
    // A group whose discovery failed and of which nothing is known may serve
    // dependents nobody watches: as unreadable as a resource that cannot be listed.
    const unreadable: string[] = undiscovered.map((g) =>
      g === '*'
        ? 'every API group (discovery of /apis failed)'
        : `group ${JSON.stringify(g)} (discovery failed)`,
    );
    for (const r of behind) {
      try {
        for (const meta of await ctx.api.listDependents(r, owner.namespace || undefined, uid))
          listed.push({ resource: r, meta, kind: r.kind });
      } catch (err) {
        if (err instanceof ApiError && err.status === 429)
          return retryAfter(err.retryAfterMs ?? 1000);
        unreadable.push(`${groupResource(r)} (${(err as Error).message.slice(0, 200)})`);
      }
    }
    if (behind.length > 0)
      ctx.log.debug('orphan deletion read live the resources whose watches are behind', {
        ...fields,
        behind: behind.map(groupResource),
        found: listed.length,
      });
    wait.unreadable = unreadable.length > 0 ? unreadable : undefined;
    if (unreadable.length > 0) {
      const at = { ...fields, unreadable };
      if (waited < limit) {
        if (!wait.logged) {
          wait.logged = true;
          ctx.log.info('orphan deletion waits for resources it can neither watch nor list', at);
        }
        return retryAfter(Math.min(5_000, Math.max(WATCH_RECHECK_MS, limit / 20)));
      }
      ctx.log.warn(
        'orphaning without every resource read; unseen dependents of these resources keep their reference and may be collected later',
        { ...at, waitedMs: waited },
      );
      warnOnce(
        ctx,
        uid,
        'OrphanWithoutWatch',
        `kubegc could neither watch nor list ${unreadable.join(', ')} for ${Math.round(waited / 1000)}s; dependents of those kinds created meanwhile may not have been orphaned`,
      );
    }
  }

  // A resource that left discovery while holding a dependent of this owner:
  // the dependent may still exist and name the owner, and nothing can patch
  // it now. Released, the owner would be gone when the resource comes back,
  // and the dependent collected. Held, as upstream holds it (its orphaning
  // PATCH fails until then), however long: after --orphan-watch-timeout a
  // Warning event says what it waits for.
  const departed = ctx.departedHolding?.(uid) ?? [];
  if (departed.length > 0 && !ctx.dryRun) {
    const at = { ...fields, departed };
    wait.unreadable = departed.map((r) => `${r} (gone from discovery)`);
    if (!wait.logged) {
      wait.logged = true;
      ctx.log.info(
        'orphan deletion waits for resources that left discovery holding its dependents',
        at,
      );
    }
    if (waited >= limit) {
      ctx.log.warn('orphan deletion still waits for resources that left discovery', {
        ...at,
        waitedMs: waited,
      });
      warnOnce(
        ctx,
        uid,
        'OrphanWaitingForResource',
        `${departed.join(', ')} left discovery while holding dependents of this object; the orphan finalizer stays until they are served again (or is removed by hand)`,
      );
    }
    return retryAfter(Math.min(5_000, Math.max(WATCH_RECHECK_MS, limit / 20)));
  }

  const errors: string[] = [];
  /** The longest Retry-After of a throttled dependent PATCH (writes are not re-sent on an old decision). */
  let throttledMs: number | undefined;
  const orphaned = new Set<string>();
  // Each dependent is one guarded patch (a `$patch: delete` of this UID, a
  // no-op where the reference is already gone), several at a time.
  const orphanOne = async (t: Target): Promise<void> => {
    const dependent = { resource: groupResource(t.resource), name: t.meta.name, uid: t.meta.uid };
    if (ctx.dryRun) {
      ctx.log.info('dry run: would orphan dependent', { ...fields, dependent });
      return;
    }
    try {
      const written = await ctx.api.removeOwnerReferences(t.resource, t.meta, [uid]);
      if (written.outcome === 'done') ctx.metrics?.orphaning?.(groupResource(t.resource), false);
      // A 404 naming the dependent may be an admission webhook's denial: the
      // dependent is taken for gone only when a live read agrees. Otherwise it
      // would keep its reference, and be collected once the owner has gone.
      else if (written.outcome === 'gone' && (await stillThere(ctx, t)))
        errors.push(
          `PATCH of dependent ${t.kind} ${t.meta.name} answered 404, but a live read finds it`,
        );
    } catch (err) {
      if (err instanceof ApiError && err.status === 429) {
        throttledMs = Math.max(throttledMs ?? 0, err.retryAfterMs ?? 1000);
        return;
      }
      errors.push((err as Error).message);
      // RBAC (or an admission policy) refuses: say so where the user looks,
      // on the dependent and on the owner its orphan finalizer holds.
      const refused = refusal(err);
      if (refused) ctx.slis?.failed(uid, `orphaning ${t.kind} ${t.meta.name}: ${refused}`);
      if (err instanceof ApiError && err.status === 403) {
        warnOnce(
          ctx,
          t.meta.uid,
          'GarbageCollectionForbidden',
          `kubegc may not remove this object's reference to ${owner.kind} ${owner.name}: ${err.message}`,
        );
        warnOnce(
          ctx,
          uid,
          'GarbageCollectionForbidden',
          `kubegc may not orphan dependent ${t.kind} ${t.meta.name}, so the orphan finalizer stays: ${err.message}`,
        );
      }
    }
  };
  for (let round = 0; ; round++) {
    await ctx.graphFlushed?.();
    const targets: Target[] = [];
    const add = (t: Target): void => {
      if (orphaned.has(t.meta.uid)) return;
      orphaned.add(t.meta.uid);
      targets.push(t);
    };
    if (round === 0) listed.forEach(add);
    for (const depUid of ctx.graph.dependents(uid)) {
      const dep = ctx.graph.get(depUid);
      if (!dep || dep.virtual || orphaned.has(depUid)) continue;
      const r = ctx.mapper().resolve(dep.apiVersion, dep.kind);
      if (!r) {
        errors.push(`cannot resolve ${dep.apiVersion}, Kind=${dep.kind} of dependent ${dep.name}`);
        continue;
      }
      add({
        resource: r,
        meta: { uid: depUid, name: dep.name, namespace: dep.namespace || undefined },
        kind: dep.kind,
      });
    }
    if (targets.length === 0) break;
    if (round >= MAX_ROUNDS)
      return failed(new Error('dependents keep appearing while orphaning; will look again'));
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(ORPHAN_PARALLELISM, targets.length) }, async () => {
        while (next < targets.length) await orphanOne(targets[next++] as Target);
      }),
    );
    if (errors.length > 0)
      return failed(new Error(`orphaning dependents failed: ${errors.join('; ')}`));
    // Throttled: the owner is looked at again (its dependents read again from the graph) after Retry-After.
    if (throttledMs !== undefined) return retryAfter(throttledMs);
    if (ctx.dryRun) return done;
  }
  if (errors.length > 0)
    return failed(new Error(`orphaning dependents failed: ${errors.join('; ')}`));
  if (ctx.dryRun) return done;
  try {
    await ctx.api.removeFinalizer(
      ownerResource,
      owner.namespace || undefined,
      owner.name,
      uid,
      ORPHAN_FINALIZER,
    );
  } catch (err) {
    if (err instanceof ApiError && err.status === 429) return retryAfter(err.retryAfterMs ?? 1000);
    const refused = refusal(err);
    if (refused) ctx.slis?.failed(uid, refused);
    if (err instanceof ApiError && err.status === 403)
      warnOnce(
        ctx,
        uid,
        'GarbageCollectionForbidden',
        `kubegc may not remove the orphan finalizer: ${err.message}`,
      );
    throw err;
  }
  ctx.log.info('orphaned dependents and removed the orphan finalizer', fields);
  return done;
}

/** Whether the dependent decided on still exists under its name and UID (a live read). */
async function stillThere(ctx: GcContext, t: Target): Promise<boolean> {
  const live = await ctx.api.getMeta(t.resource, t.meta.namespace, t.meta.name);
  return live !== undefined && live.uid === t.meta.uid;
}
