// Odd but legal shapes (issue 32, item 6): what the API server admits that no
// controller writes, for the workload's `shape` scenario. The API server does
// not check that owner references have distinct UIDs, nor that a reference's
// name or kind matches the object with its UID; RBAC names may hold `,` `=`
// `\` and spaces (a field selector must escape them); a cluster-scoped object
// may own namespaced ones, and a cluster-scoped object may name a namespaced
// kind (upstream never collects it); a CRD may go away with its objects and
// come back; an aggregated API (which may refuse field selectors) may leave
// discovery or answer 503 while its objects own others. The choices are pure and seeded (unit-tested); the scenarios
// drive the workload's own helpers.
import { KubeError, waitUntil, type Kube, type KubeObject, type OwnerReference } from './kube.ts';
import type { Prng } from './prng.ts';
import { crdManifest } from '../../test/support/crd.ts';
import type { AggregatedOwners } from './aggregated.ts';
import { CRD_GROUP, GADGET_CRD_NAME, collectionPath, resourceDef } from './resources.ts';
import type { Obj, Workload } from './workload.ts';

export const SHAPES = {
  /** Two references with one UID: the live owner's and a name that does not exist (kept), or two bogus names (collected). */
  sharedUid: 4,
  /** A reference to the object itself (a live owner), alone or beside others. */
  selfReference: 2,
  /** A reference carrying the UID of an object of another kind (absent). */
  otherKindUid: 2,
  /** A reference with a live owner's UID and kind but another live object's name (absent). */
  nameMismatch: 2,
  /** A ClusterRole owning namespaced objects (valid). */
  clusterOwner: 3,
  /** A ClusterRole naming a namespaced kind (invalid: never collected; the workload deletes it). */
  clusterDependent: 2,
  /** Roles and ClusterRoles with names that need escaping, as owners and as dependents. */
  escapedNames: 3,
  /** Gadgets (a CRD deleted and re-created mid-run) owning objects. */
  gadgetOwner: 3,
  /**
   * The Gadget CRD deleted (its objects with it, the GC's finalizers holding it terminating)
   * and created again. Gadgets are served in v1 only, in a group whose preferred version is
   * v2: a GC that watches only a group's preferred version never sees them.
   */
  gadgetCrdFlap: 1,
  /**
   * Two AggWidgets, served by an aggregated API that refuses field selectors (aggregated.ts),
   * owning objects: one deleted (Background) seconds later, one left alive (a spare: for a flap
   * to delete, or alive to the end).
   */
  aggregatedOwner: 3,
  /**
   * The AggWidgets' APIService deleted and created again (the group leaves discovery), or their
   * server answering 503 to everything for a few seconds; at most one a minute.
   */
  apiServiceFlap: 1,
} as const;
export type Shape = keyof typeof SHAPES;

/** The characters a field selector must escape (apimachinery fields.EscapeValue), and a space. */
export const ESCAPED = [',', '=', '\\', ' '] as const;

export function pickShape(p: Prng): Shape {
  return p.weighted(SHAPES);
}

/** Shapes that take a kind away (and bring it back): they mean most once there are owners of it. */
export const TAKE_AWAY: readonly Shape[] = ['gadgetCrdFlap', 'apiServiceFlap'];

/**
 * Every shape with a weight, once, in a seeded order, those that take a kind away last: drawn
 * before the weights decide, so that a short run (CI's 3 minutes hold a dozen or so shape
 * scenarios) sees each shape, rare ones included, and its flaps find owners to take away.
 */
export function firstRound(p: Prng): Shape[] {
  const on = (Object.keys(SHAPES) as Shape[]).filter((s) => SHAPES[s] > 0);
  return [
    ...p.shuffle(on.filter((s) => !TAKE_AWAY.includes(s))),
    ...p.shuffle(on.filter((s) => TAKE_AWAY.includes(s))),
  ];
}

/**
 * A legal RBAC name that a field selector must escape: words joined by `,` `=` `\` or a
 * space, a seeded suffix to keep it unique. RBAC names need only be path segments (not `.` or
 * `..`, no `/` or `%`) of at most 253 characters. Some names look like selector clauses
 * (`x,metadata.name!=x` unescaped is a valid selector matching nothing).
 */
export function escapedName(p: Prng, prefix: string): string {
  const words = [prefix, 'reader', 'writer', 'a=b', 'metadata.name!=x', 'x'];
  const parts = [prefix];
  for (let i = p.int(1, 3); i > 0; i--) parts.push(p.pick(ESCAPED), p.pick(words.slice(1)));
  // At least one character that needs escaping, whatever the words drew.
  return `${parts.join('')}${p.pick(ESCAPED)}${p.suffix(6)}`;
}

/** apimachinery's path.IsValidPathSegmentName, which RBAC names must pass. */
export function isValidPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

/** A name that no object has (a seeded suffix under a prefix the workload never uses). */
export function bogusName(p: Prng): string {
  return `bogus-${p.suffix(8)}`;
}

/**
 * References sharing `live`'s UID. 'live+bogus': `live` itself and the same kind under a name
 * that does not exist (the object stays: the live one is solid); 'bogus+bogus': two names that
 * do not exist (the object is collected). Order seeded: the graph must not care.
 */
export function sharedUidRefs(
  p: Prng,
  live: OwnerReference,
  variant: 'live+bogus' | 'bogus+bogus',
): OwnerReference[] {
  const bogus = { ...live, name: bogusName(p) };
  const refs = variant === 'live+bogus' ? [live, bogus] : [bogus, { ...live, name: bogusName(p) }];
  // Only one reference may be the controller (ValidateOwnerReferences).
  return p.shuffle(refs).map((r, i) => (i === 0 ? r : { ...r, controller: undefined }));
}

/** The reference `ref` with another kind (an object of that kind with its UID never exists). */
export function withKind(ref: OwnerReference, kind: 'ConfigMap' | 'Secret'): OwnerReference {
  return { ...ref, apiVersion: 'v1', kind };
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const GADGET_CRD = crdManifest({ group: CRD_GROUP, plural: 'gadgets', kind: 'Gadget' });

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** Creates the Gadget CRD if it is absent and waits (with a deadline) until it is served. */
export async function ensureGadgetCrd(kube: Kube, timeoutMs = 90_000): Promise<void> {
  await waitUntil(
    'the Gadget CRD to be served',
    async () => {
      const got = await kube.raw('GET', `${CRD_PATH}/${GADGET_CRD_NAME}`);
      if (got.status === 404) {
        const res = await kube.raw('POST', CRD_PATH, { body: GADGET_CRD });
        if (res.status !== 201 && res.status !== 409)
          throw new KubeError('POST', CRD_PATH, res.status, res.text);
        return false;
      }
      if (got.status !== 200) return false;
      // A CRD still terminating (its objects held by finalizers) is not back: it cannot be
      // created again until it is gone, and no Gadget can be created meanwhile.
      if ((JSON.parse(got.text) as KubeObject).metadata.deletionTimestamp) return false;
      const gadgets = collectionPath(resourceDef('gadgets'), 'soak-a');
      return (await kube.raw('GET', gadgets)).status === 200;
    },
    timeoutMs,
    500,
  );
}

export class Shapes {
  private flapping = false;
  private lastFlap = 0;

  private readonly w: Workload;
  private readonly kube: Kube;
  private readonly namespaces: readonly string[];
  /** Undefined: no aggregated API in this run (its shapes do nothing). */
  private readonly agg: AggregatedOwners | undefined;
  private readonly unseen: Shape[];

  constructor(
    w: Workload,
    kube: Kube,
    namespaces: readonly string[],
    agg: AggregatedOwners | undefined,
    p: Prng,
  ) {
    this.w = w;
    this.kube = kube;
    this.namespaces = namespaces;
    this.agg = agg;
    this.unseen = firstRound(p);
  }

  /** The next shape: the first round's (firstRound), then one by weight. */
  pick(p: Prng): Shape {
    return this.unseen.shift() ?? pickShape(p);
  }

  private simple(p: Prng): string {
    return p.pick(['configmaps', 'secrets', 'widgets']);
  }

  async run(shape: Shape, p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    const w = this.w;
    const mk = async (
      resource: string,
      namespace: string,
      owners: OwnerReference[] = [],
      name?: string,
    ): Promise<Obj> => {
      const o = await w.create(p, resource, namespace, owners, name ? { name } : {});
      made.push(o);
      return o;
    };
    try {
      switch (shape) {
        case 'sharedUid': {
          const owner = await mk(this.simple(p), ns);
          const live = w.ref(owner, p, { block: p.chance(0.5) });
          const variant = p.chance(0.6) ? 'live+bogus' : 'bogus+bogus';
          const refs = sharedUidRefs(p, live, variant);
          // The bogus name read absent first (by the GC, for another object naming it alone):
          // the path to a wrongful delete in issue 32 (1) needs it in the absent-owner cache.
          const bogus = refs.find((r) => r.name !== owner.name) as OwnerReference;
          await mk(this.simple(p), ns, [{ ...bogus, blockOwnerDeletion: undefined }]);
          await pause(p.int(500, 3000));
          if (p.chance(0.5)) await mk(this.simple(p), ns, refs);
          else {
            // Patched to the two references (an update: the graph's diff of references).
            const dep = await mk(this.simple(p), ns, [live]);
            await pause(p.int(200, 1500));
            await w.edit(dep, 'shape: share a UID', (m) => {
              m.ownerReferences = refs;
              return true;
            });
          }
          await pause(p.int(2000, 6000));
          await w.del(owner, w.policyOf(p));
          return;
        }
        case 'selfReference': {
          const other = p.chance(0.5) ? await mk(this.simple(p), ns) : undefined;
          const me = await mk(this.simple(p), ns, other ? [w.ref(other, p)] : []);
          // Non-blocking: a blocking self-reference would hold its own foreground deletion.
          await w.edit(me, 'shape: self-reference', (m) => {
            m.ownerReferences.push(w.ref(me, p));
            if (p.chance(0.3)) m.ownerReferences.push({ ...w.ref(me, p), name: bogusName(p) });
            return true;
          });
          await pause(p.int(2000, 6000));
          if (other) await w.del(other, w.policyOf(p));
          await pause(p.int(500, 3000));
          await w.del(me, p.chance(0.7) ? 'Background' : 'Orphan');
          return;
        }
        case 'otherKindUid': {
          const secret = await mk('secrets', ns);
          const cm = await mk('configmaps', ns);
          const live = p.chance(0.5) ? await mk(this.simple(p), ns) : undefined;
          const refs: OwnerReference[] = [
            // A ConfigMap reference with the Secret's UID, under the Secret's name or a live
            // ConfigMap's (which has another UID): absent either way.
            withKind(
              { ...w.ref(secret, p), name: p.chance(0.5) ? secret.name : cm.name },
              'ConfigMap',
            ),
          ];
          if (live) refs.push(w.ref(live, p));
          await mk(this.simple(p), ns, refs);
          await pause(p.int(2000, 6000));
          if (live) await w.del(live, w.policyOf(p));
          await w.del(secret, 'Background');
          await w.del(cm, 'Background');
          return;
        }
        case 'nameMismatch': {
          const kind = this.simple(p);
          const a = await mk(kind, ns);
          const b = await mk(kind, ns);
          // a's UID under b's name: neither a (wrong name) nor b (wrong UID).
          const dep = await mk(this.simple(p), ns, [{ ...w.ref(a, p), name: b.name }]);
          if (p.chance(0.5)) await w.adopt(dep, w.ref(b, p));
          await pause(p.int(2000, 6000));
          await w.del(b, w.policyOf(p));
          await w.del(a, 'Background');
          return;
        }
        case 'clusterOwner': {
          const name = p.chance(0.5) ? escapedName(p, 'soak-owner') : undefined;
          const owner = await mk('clusterroles', '', [], name);
          for (let i = p.int(1, 3); i > 0; i--) {
            const where = p.pick(this.namespaces);
            await mk(p.pick(['configmaps', 'secrets', 'widgets', 'roles']), where, [
              w.ref(owner, p, { block: p.chance(0.5) }),
            ]);
          }
          // A cluster-scoped dependent too.
          if (p.chance(0.5)) await mk('clusterroles', '', [w.ref(owner, p)]);
          await pause(p.int(1000, 5000));
          await w.del(owner, w.policyOf(p));
          return;
        }
        case 'clusterDependent': {
          const cm = await mk('configmaps', ns);
          const refs: OwnerReference[] = [w.ref(cm, p)];
          if (p.chance(0.5))
            refs.push({ ...w.ref(cm, p), name: bogusName(p), uid: `bogus-uid-${p.suffix(8)}` });
          const name = p.chance(0.5) ? escapedName(p, 'soak-invalid') : undefined;
          const cr = await mk('clusterroles', '', refs, name);
          await pause(p.int(500, 2000));
          // Its namespaced "owner" goes: still never collected (upstream refuses to decide).
          await w.del(cm, 'Background');
          await pause(p.int(3000, 10_000));
          await w.del(cr, 'Background');
          return;
        }
        case 'escapedNames': {
          const role = await mk('roles', ns, [], escapedName(p, 'soak-role'));
          const cm = await mk('configmaps', ns, [w.ref(role, p, { block: p.chance(0.5) })]);
          // A Role owned by a ConfigMap and by the Role (names needing escaping on both sides).
          await mk('roles', ns, [w.ref(cm, p), w.ref(role, p)], escapedName(p, 'soak-dep'));
          const cr = await mk('clusterroles', '', [], escapedName(p, 'soak-cr'));
          await mk(
            'clusterroles',
            '',
            [w.ref(cr, p, { block: p.chance(0.5) })],
            escapedName(p, 'soak-crdep'),
          );
          await mk(this.simple(p), ns, [w.ref(cr, p), w.ref(role, p)]);
          await pause(p.int(1000, 5000));
          await w.del(role, w.policyOf(p));
          await pause(p.int(200, 2000));
          await w.del(cr, w.policyOf(p));
          return;
        }
        case 'gadgetOwner': {
          const g = await mk('gadgets', ns);
          for (let i = p.int(1, 3); i > 0; i--)
            await mk(this.simple(p), ns, [w.ref(g, p, { block: p.chance(0.4) })]);
          await pause(p.int(2000, 8000));
          // Half the time left for a CRD flap to take away (with the CRD).
          if (p.chance(0.5)) await w.del(g, w.policyOf(p));
          return;
        }
        case 'gadgetCrdFlap':
          return await this.flap(p);
        case 'aggregatedOwner': {
          const agg = this.agg;
          if (!agg) return;
          const dependents = async (owner: Obj, n: number): Promise<void> => {
            for (let i = n; i > 0; i--)
              await mk(p.pick(['configmaps', 'secrets', 'widgets', 'roles']), ns, [
                w.ref(owner, p, { block: p.chance(0.4) }),
              ]);
          };
          // A spare: alive to the end (its dependents kept with it), unless a flap deletes it.
          const spare = await agg.create(p, ns);
          agg.keep(spare);
          const owner = await agg.create(p, ns);
          try {
            await dependents(owner, p.int(1, 3));
            await dependents(spare, p.int(1, 2));
            await pause(p.int(2000, 8000));
          } finally {
            // Background only: the aggregated server's finalizer handling is simple.
            await agg.delete(owner);
          }
          return;
        }
        case 'apiServiceFlap':
          return await this.agg?.flap(p);
      }
    } finally {
      w.release(made);
    }
  }

  /** Deletes the Gadget CRD (its objects go with it), waits until it is gone, creates it again. */
  private async flap(p: Prng): Promise<void> {
    // One flap at a time, at most one a minute: the CRD is away for a moment, not for good.
    if (this.flapping || Date.now() - this.lastFlap < 60_000) return;
    this.flapping = true;
    try {
      const res = await this.kube.raw('DELETE', `${CRD_PATH}/${GADGET_CRD_NAME}`);
      this.w.countOp('shape: Gadget CRD deleted');
      if (res.status >= 300 && res.status !== 404)
        throw new KubeError('DELETE', CRD_PATH, res.status, res.text);
      // Gone once its objects are (the CRD's cleanup finalizer waits for the holds).
      await waitUntil(
        'the Gadget CRD to go',
        async () => (await this.kube.raw('GET', `${CRD_PATH}/${GADGET_CRD_NAME}`)).status === 404,
        90_000,
        500,
      ).catch(() => undefined);
      await pause(p.int(1000, 8000));
    } finally {
      this.lastFlap = Date.now();
      // Whatever happened, the CRD comes back: dependents naming Gadgets wait for the kind.
      await ensureGadgetCrd(this.kube).finally(() => {
        this.flapping = false;
      });
      this.w.countOp('shape: Gadget CRD created again');
    }
  }
}
