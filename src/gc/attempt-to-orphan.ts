// The attempt-to-orphan worker: an owner deleted with propagationPolicy
// Orphan. Its observed dependents lose their references to it, then the
// `orphan` finalizer is removed so the API server can finish the delete.
import { groupResource } from '../api/resources.ts';
import { ORPHAN_FINALIZER } from '../graph/propagator.ts';
import { done, failed, type ProcessResult } from '../queue/workqueue.ts';
import type { GcContext } from './attempt-to-delete.ts';

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
  for (const depUid of ctx.graph.dependents(uid)) {
    const dep = ctx.graph.get(depUid);
    if (!dep || dep.virtual) continue;
    const r = ctx.mapper().resolve(dep.apiVersion, dep.kind);
    if (!r) {
      errors.push(`cannot resolve ${dep.apiVersion}, Kind=${dep.kind} of dependent ${dep.name}`);
      continue;
    }
    if (ctx.dryRun) {
      ctx.log.info('dry run: would orphan dependent', {
        ...fields,
        dependent: { resource: groupResource(r), name: dep.name, uid: depUid },
      });
      continue;
    }
    try {
      const live = await ctx.api.getMeta(r, dep.namespace, dep.name);
      if (!live || live.uid !== depUid) continue;
      if (!live.ownerReferences?.some((o) => o.uid === uid)) continue;
      await ctx.api.removeOwnerReferences(r, live, [uid]);
      ctx.metrics?.orphaning?.(groupResource(r), false);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
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
