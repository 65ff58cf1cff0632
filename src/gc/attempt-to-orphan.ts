// The attempt-to-orphan worker: an owner deleted with propagationPolicy
// Orphan. Its observed dependents lose their references to it, then the
// `orphan` finalizer is removed so the API server can finish the delete.
import { ApiError } from '../api/client.ts';
import { groupResource } from '../api/resources.ts';
import { ORPHAN_FINALIZER } from './decide.ts';
import { done, failed, retryAfter, type ProcessResult } from '../queue/workqueue.ts';
import { warnOnce, type GcContext } from './context.ts';

/** Dependents patched in parallel for one owner. */
const ORPHAN_PARALLELISM = 20;
export const DEFAULT_ORPHAN_WATCH_WAIT_MS = 120_000;
const WATCH_RECHECK_MS = 500;

export async function attemptToOrphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const result = await orphan(ctx, uid);
  if (result.result === 'done') ctx.state.orphanWaits.delete(uid);
  return result;
}

async function orphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const owner = ctx.graph.get(uid);
  if (!owner || owner.virtual) return done;

  // The dependents come from the graph, so the graph must hold every one that
  // exists: a dependent created while some watch was broken or being replaced
  // (a CRD's version flip, a failing conversion webhook) would otherwise keep
  // its reference, be found after the owner is gone and be deleted (upstream
  // #26120). Wait, bounded, until every watch has caught up with the owner's
  // Orphan deletion, then take the dependents.
  if (ctx.watchesBehind) {
    // When the wait began and the owner's resourceVersion then (the point every informer must have reached).
    let wait = ctx.state.orphanWaits.get(uid);
    if (!wait) {
      wait = { since: Date.now(), rv: owner.resourceVersion, logged: false };
      ctx.state.orphanWaits.set(uid, wait);
    }
    const behind = ctx.watchesBehind(owner.namespace !== '', wait.rv);
    if (behind.length > 0) {
      const waited = Date.now() - wait.since;
      const limit = ctx.orphanWatchWaitMs ?? DEFAULT_ORPHAN_WATCH_WAIT_MS;
      const at = { name: owner.name, namespace: owner.namespace || undefined, uid, behind };
      if (waited < limit) {
        if (!wait.logged) {
          wait.logged = true;
          ctx.log.info('orphan deletion waits for watches to catch up', at);
        }
        return retryAfter(WATCH_RECHECK_MS);
      }
      ctx.log.warn(
        'orphaning without every watch caught up; unseen dependents of these resources keep their reference and may be collected later',
        { ...at, waitedMs: waited },
      );
      warnOnce(
        ctx,
        uid,
        'OrphanWithoutWatch',
        `kubegc could not watch ${behind.join(', ')} for ${Math.round(waited / 1000)}s; dependents of those kinds created meanwhile may not have been orphaned`,
      );
    }
    await ctx.graphFlushed?.();
  }
  const ownerResource = ctx.mapper().resolve(owner.apiVersion, owner.kind);
  if (!ownerResource)
    return failed(new Error(`cannot resolve ${owner.apiVersion}, Kind=${owner.kind}`));
  const fields = {
    resource: groupResource(ownerResource),
    namespace: owner.namespace,
    name: owner.name,
    uid,
  };

  const errors: string[] = [];
  /** The longest Retry-After of a throttled dependent PATCH (writes are not re-sent on an old decision). */
  let throttledMs: number | undefined;
  // Each dependent is one guarded patch (a `$patch: delete` of this UID, a
  // no-op where the reference is already gone), several at a time.
  const dependents = ctx.graph.dependents(uid);
  let next = 0;
  const orphanOne = async (depUid: string): Promise<void> => {
    const dep = ctx.graph.get(depUid);
    if (!dep || dep.virtual) return;
    const r = ctx.mapper().resolve(dep.apiVersion, dep.kind);
    if (!r) {
      errors.push(`cannot resolve ${dep.apiVersion}, Kind=${dep.kind} of dependent ${dep.name}`);
      return;
    }
    const dependent = { resource: groupResource(r), name: dep.name, uid: depUid };
    if (ctx.dryRun) {
      ctx.log.info('dry run: would orphan dependent', { ...fields, dependent });
      return;
    }
    try {
      const written = await ctx.api.removeOwnerReferences(
        r,
        { uid: depUid, name: dep.name, namespace: dep.namespace || undefined },
        [uid],
      );
      if (written.outcome === 'done') {
        ctx.metrics?.orphaning?.(groupResource(r), false);
      }
    } catch (err) {
      if (err instanceof ApiError && err.status === 429) {
        throttledMs = Math.max(throttledMs ?? 0, err.retryAfterMs ?? 1000);
        return;
      }
      errors.push((err as Error).message);
      // RBAC (or an admission policy) refuses: say so where the user looks,
      // on the dependent and on the owner its orphan finalizer holds.
      if (err instanceof ApiError && err.status === 403) {
        warnOnce(
          ctx,
          depUid,
          'GarbageCollectionForbidden',
          `kubegc may not remove this object's reference to ${owner.kind} ${owner.name}: ${err.message}`,
        );
        warnOnce(
          ctx,
          uid,
          'GarbageCollectionForbidden',
          `kubegc may not orphan dependent ${dep.kind} ${dep.name}, so the orphan finalizer stays: ${err.message}`,
        );
      }
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(ORPHAN_PARALLELISM, dependents.length) }, async () => {
      while (next < dependents.length) await orphanOne(dependents[next++] as string);
    }),
  );
  if (errors.length > 0)
    return failed(new Error(`orphaning dependents failed: ${errors.join('; ')}`));
  // Throttled: the owner is looked at again (its dependents read again from the graph) after Retry-After.
  if (throttledMs !== undefined) return retryAfter(throttledMs);
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
