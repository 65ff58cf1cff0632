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
import type { NodeAttributes } from '../graph/graph.ts';
import { warnOnce, type GcContext, type OrphanWait } from './context.ts';
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

/** One owner being orphaned: what every step reads. */
interface Job {
  ctx: GcContext;
  uid: string;
  owner: NodeAttributes;
  ownerResource: ResourceInfo;
  /** The owner, as the log lines name it. */
  fields: { resource: string; namespace: string; name: string; uid: string };
  /** When the wait began and the owner's resourceVersion then (the point every informer must have reached). */
  wait: OrphanWait;
  /** How long it has waited, and how long it waits for what it cannot read. */
  waited: number;
  limit: number;
}

/** A step that either lets the next one run (`undefined`) or ends this attempt. */
type Step<T = undefined> = T | ProcessResult;
const isResult = (x: unknown): x is ProcessResult =>
  typeof x === 'object' && x !== null && 'result' in x;

async function orphan(ctx: GcContext, uid: string): Promise<ProcessResult> {
  const owner = ctx.graph.get(uid);
  if (!owner || owner.virtual) return done;
  const ownerResource = ctx.mapper().resolve(owner.apiVersion, owner.kind);
  if (!ownerResource)
    return failed(new Error(`cannot resolve ${owner.apiVersion}, Kind=${owner.kind}`));
  let wait = ctx.state.orphanWaits.get(uid);
  if (!wait) {
    wait = { since: Date.now(), rv: owner.resourceVersion, logged: false };
    ctx.state.orphanWaits.set(uid, wait);
  }
  const job: Job = {
    ctx,
    uid,
    owner,
    ownerResource,
    fields: {
      resource: groupResource(ownerResource),
      namespace: owner.namespace,
      name: owner.name,
      uid,
    },
    wait,
    waited: Date.now() - wait.since,
    limit: ctx.orphanWatchWaitMs ?? DEFAULT_ORPHAN_WATCH_WAIT_MS,
  };
  const listed = await readWhatWatchesMissed(job);
  if (isResult(listed)) return listed;
  const held = waitForDepartedResources(job);
  if (held) return held;
  const patched = await orphanDependents(job, listed);
  if (patched) return patched;
  if (ctx.dryRun) return done;
  const throttled = await removeOrphanFinalizer(job);
  if (throttled) return throttled;
  ctx.log.info('orphaned dependents and removed the orphan finalizer', job.fields);
  return done;
}

/** How long to wait before looking again at what cannot be read. */
const recheckMs = (job: Job): number => Math.min(5_000, Math.max(WATCH_RECHECK_MS, job.limit / 20));

/**
 * Steps 1 and 2 of the header: the dependents found by consistent LISTs of the
 * resources whose watches have not shown delivery past the deletion; a wait
 * while they may still catch up, or while a resource can be neither watched
 * nor listed (until --orphan-watch-timeout, then a warning and on).
 */
async function readWhatWatchesMissed(job: Job): Promise<Step<Target[]>> {
  const { ctx, owner, uid, wait, waited, limit } = job;
  const listed: Target[] = [];
  if (!ctx.watchesBehind) return listed;
  const undiscovered = (await ctx.discoveredSince?.(wait.since)) ?? [];
  const behind = ctx.watchesBehind(owner.namespace !== '', wait.rv, job.ownerResource);
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
      ...job.fields,
      behind: behind.map(groupResource),
      found: listed.length,
    });
  wait.unreadable = unreadable.length > 0 ? unreadable : undefined;
  if (unreadable.length === 0) return listed;
  const at = { ...job.fields, unreadable };
  if (waited < limit) {
    if (!wait.logged) {
      wait.logged = true;
      ctx.log.info('orphan deletion waits for resources it can neither watch nor list', at);
    }
    return retryAfter(recheckMs(job));
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
  return listed;
}

/**
 * A resource that left discovery while holding a dependent of this owner:
 * the dependent may still exist and name the owner, and nothing can patch
 * it now. Released, the owner would be gone when the resource comes back,
 * and the dependent collected. Held, as upstream holds it (its orphaning
 * PATCH fails until then), however long: after --orphan-watch-timeout a
 * Warning event says what it waits for.
 */
function waitForDepartedResources(job: Job): ProcessResult | undefined {
  const { ctx, uid, wait } = job;
  const departed = ctx.departedHolding?.(uid) ?? [];
  if (departed.length === 0 || ctx.dryRun) return undefined;
  const at = { ...job.fields, departed };
  wait.unreadable = departed.map((r) => `${r} (gone from discovery)`);
  if (!wait.logged) {
    wait.logged = true;
    ctx.log.info(
      'orphan deletion waits for resources that left discovery holding its dependents',
      at,
    );
  }
  if (job.waited >= job.limit) {
    ctx.log.warn('orphan deletion still waits for resources that left discovery', {
      ...at,
      waitedMs: job.waited,
    });
    warnOnce(
      ctx,
      uid,
      'OrphanWaitingForResource',
      `${departed.join(', ')} left discovery while holding dependents of this object; the orphan finalizer stays until they are served again (or is removed by hand)`,
    );
  }
  return retryAfter(recheckMs(job));
}

/** What the PATCHes of one owner's dependents met. */
interface PatchOutcome {
  errors: string[];
  /** The longest Retry-After of a throttled dependent PATCH (writes are not re-sent on an old decision). */
  throttledMs?: number;
}

/**
 * Step 3 of the header: the listed dependents and the graph's, patched; then
 * the graph read again (after it has taken in what was delivered), and any
 * new dependent patched too, until a round finds none. Undefined when every
 * dependent is orphaned.
 */
async function orphanDependents(job: Job, listed: Target[]): Promise<ProcessResult | undefined> {
  const { ctx } = job;
  const outcome: PatchOutcome = { errors: [] };
  const orphaned = new Set<string>();
  for (let round = 0; ; round++) {
    await ctx.graphFlushed?.();
    const targets = newTargets(job, round === 0 ? listed : [], orphaned, outcome.errors);
    if (targets.length === 0) break;
    if (round >= MAX_ROUNDS)
      return failed(new Error('dependents keep appearing while orphaning; will look again'));
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(ORPHAN_PARALLELISM, targets.length) }, async () => {
        while (next < targets.length) await orphanOne(job, targets[next++] as Target, outcome);
      }),
    );
    if (outcome.errors.length > 0)
      return failed(new Error(`orphaning dependents failed: ${outcome.errors.join('; ')}`));
    // Throttled: the owner is looked at again (its dependents read again from the graph) after Retry-After.
    if (outcome.throttledMs !== undefined) return retryAfter(outcome.throttledMs);
    if (ctx.dryRun) return done;
  }
  if (outcome.errors.length > 0)
    return failed(new Error(`orphaning dependents failed: ${outcome.errors.join('; ')}`));
  return undefined;
}

/** This round's dependents: the listed ones (first round) and the graph's, none patched before. */
function newTargets(job: Job, listed: Target[], orphaned: Set<string>, errors: string[]): Target[] {
  const { ctx, uid } = job;
  const targets: Target[] = [];
  const add = (t: Target): void => {
    if (orphaned.has(t.meta.uid)) return;
    orphaned.add(t.meta.uid);
    targets.push(t);
  };
  listed.forEach(add);
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
  return targets;
}

/**
 * One dependent: one guarded patch (a `$patch: delete` of the owner's UID, a
 * no-op where the reference is already gone).
 */
async function orphanOne(job: Job, t: Target, outcome: PatchOutcome): Promise<void> {
  const { ctx, uid, owner } = job;
  const dependent = { resource: groupResource(t.resource), name: t.meta.name, uid: t.meta.uid };
  if (ctx.dryRun) {
    ctx.log.info('dry run: would orphan dependent', { ...job.fields, dependent });
    return;
  }
  try {
    const written = await ctx.api.removeOwnerReferences(t.resource, t.meta, [uid]);
    if (written.outcome === 'done') ctx.metrics?.orphaning?.(groupResource(t.resource), false);
    // A 404 naming the dependent may be an admission webhook's denial: the
    // dependent is taken for gone only when a live read agrees. Otherwise it
    // would keep its reference, and be collected once the owner has gone.
    else if (written.outcome === 'gone' && (await stillThere(ctx, t)))
      outcome.errors.push(
        `PATCH of dependent ${t.kind} ${t.meta.name} answered 404, but a live read finds it`,
      );
  } catch (err) {
    if (err instanceof ApiError && err.status === 429) {
      outcome.throttledMs = Math.max(outcome.throttledMs ?? 0, err.retryAfterMs ?? 1000);
      return;
    }
    outcome.errors.push((err as Error).message);
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
}

/**
 * The last write: the `orphan` finalizer removed, so the API server can finish
 * the delete. A retry after Retry-After when throttled; other failures throw.
 */
async function removeOrphanFinalizer(job: Job): Promise<ProcessResult | undefined> {
  const { ctx, uid, owner } = job;
  try {
    await ctx.api.removeFinalizer(
      job.ownerResource,
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
  return undefined;
}

/** Whether the dependent decided on still exists under its name and UID (a live read). */
async function stillThere(ctx: GcContext, t: Target): Promise<boolean> {
  const live = await ctx.api.getMeta(t.resource, t.meta.namespace, t.meta.name);
  return live !== undefined && live.uid === t.meta.uid;
}
