// The attempt-to-orphan worker: an owner deleted with propagationPolicy
// Orphan. Its observed dependents lose their references to it, then the
// `orphan` finalizer is removed so the API server can finish the delete.
import { groupResource } from '../api/resources.ts';
import { ORPHAN_FINALIZER } from '../graph/propagator.ts';
import { done, failed, type ProcessResult } from '../queue/workqueue.ts';
import type { GcContext } from './attempt-to-delete.ts';

/** Dependents patched in parallel for one owner. */
const ORPHAN_PARALLELISM = 20;

export async function attemptToOrphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
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

  const errors: string[] = [];
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
      if (
        await ctx.api.removeOwnerReferences(
          r,
          { uid: depUid, name: dep.name, namespace: dep.namespace || undefined },
          [uid],
        )
      ) {
        ctx.metrics?.orphaning?.(groupResource(r), false);
      }
    } catch (err) {
      errors.push((err as Error).message);
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(ORPHAN_PARALLELISM, dependents.length) }, async () => {
      while (next < dependents.length) await orphanOne(dependents[next++] as string);
    }),
  );
  if (errors.length > 0)
    return failed(new Error(`orphaning dependents failed: ${errors.join('; ')}`));
  if (ctx.dryRun) return done;
  await ctx.api.removeFinalizer(
    ownerResource,
    owner.namespace || undefined,
    owner.name,
    uid,
    ORPHAN_FINALIZER,
  );
  ctx.log.info('orphaned dependents and removed the orphan finalizer', fields);
  return done;
}
