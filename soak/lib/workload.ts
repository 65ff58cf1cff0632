// The seeded, concurrent workload: a few actors, each with its own PRNG
// stream, build ownership forests in a few namespaces and tear them down in
// every way the GC has to get right (see SCENARIOS). Every request goes
// through one rate-limited client; every write's revision feeds the clock
// that ties the audit log's times to etcd revisions.
import type { AggregatedOwners } from './aggregated.ts';
import type { History, RevisionClock } from './history.ts';
import { KubeError, statusOf, type Kube, type KubeObject, type OwnerReference } from './kube.ts';
import type { Prng } from './prng.ts';
import { Shapes } from './shapes.ts';
import {
  AGGREGATED,
  CRD_GROUP,
  HOLD,
  SOAK_LABEL,
  apiVersionOf,
  collectionPath,
  objectPath,
  resourceDef,
  type ResourceDef,
} from './resources.ts';

export interface Obj {
  r: ResourceDef;
  ns: string;
  name: string;
  uid: string;
}

type Policy = 'Background' | 'Foreground' | 'Orphan' | undefined;

export const SCENARIOS = {
  /** A forest under one root (blocking and non-blocking, several owners), root deleted with a random policy. */
  tree: 30,
  /** Owner deleted and recreated under the same name; old, new and stale dependents. */
  recreateOwner: 12,
  /** References added to and removed from live objects, also during foreground deletion. */
  adoptRelease: 14,
  /** A cycle of blocking references, deleted Foreground or Background. */
  cycle: 8,
  /** References to owners in another namespace (collected as absent). */
  crossNamespace: 6,
  /** Foreground, then Orphan on the same owner within seconds. */
  foregroundThenOrphan: 12,
  /** Deployments, Jobs and CronJobs, whose controllers make the dependents. */
  builtin: 12,
  /** Odd but legal shapes (shapes.ts): shared UIDs, self-references, names needing escaping, cluster scope, a CRD that goes, an aggregated API that flaps. */
  shape: 14,
  /** Deletes objects left without owners (keeps the population bounded). */
  janitor: 6,
} as const;
type Scenario = keyof typeof SCENARIOS;

const SIMPLE = ['configmaps', 'secrets', 'widgets'] as const;
const LABEL = SOAK_LABEL;
const IMAGE = 'registry.invalid/soak:1';

export interface WorkloadOptions {
  kube: Kube;
  history: History;
  clock: RevisionClock;
  prng: Prng;
  namespaces: string[];
  actors: number;
  /** Live objects above which actors only clean up. */
  maxObjects: number;
  log: (line: string) => void;
  /** The AggWidgets' writer (the aggregated shapes); undefined: none in this run. */
  aggregated?: AggregatedOwners;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class Workload {
  /** Requests by operation ("create configmaps", "delete Foreground", "adopt", ...). */
  readonly ops = new Map<string, number>();
  readonly scenarios = new Map<string, number>();
  readonly errors = new Map<string, number>();
  /** The first message of each kind of error. */
  readonly errorSamples = new Map<string, string>();
  private readonly o: WorkloadOptions;
  private readonly holds = new Map<string, { obj: Obj; at: number }>();
  private readonly inUse = new Map<string, number>();
  private deadline = 0;
  private names = 0;
  private readonly shapes: Shapes;

  constructor(o: WorkloadOptions) {
    this.o = o;
    this.shapes = new Shapes(
      this,
      o.kube,
      o.namespaces,
      o.aggregated,
      o.prng.fork('shapes/first-round'),
    );
  }

  countOp(op: string): void {
    this.count(this.ops, op);
  }

  private count(map: Map<string, number>, key: string, n = 1): void {
    map.set(key, (map.get(key) ?? 0) + n);
  }

  /** Runs the actors until `until` (ms since the epoch); each finishes the scenario it is in. */
  async run(until: number, phase: number): Promise<void> {
    this.deadline = until;
    const actors = Array.from({ length: this.o.actors }, (_, i) =>
      this.actor(this.o.prng.fork(`phase-${phase}/actor-${i}`)),
    );
    const releaser = this.releaser(until);
    await Promise.all(actors);
    await releaser;
    await this.releaseAllHolds();
  }

  private async actor(p: Prng): Promise<void> {
    while (Date.now() < this.deadline) {
      const crowded = this.o.history.live().length > this.o.maxObjects;
      const s: Scenario = crowded ? 'janitor' : p.weighted(SCENARIOS);
      const ns = p.pick(this.o.namespaces);
      this.count(this.scenarios, s);
      try {
        await this.scenario(s, p.fork(`${s}-${this.names++}`), ns);
      } catch (err) {
        const status = statusOf(err);
        const key = status === undefined ? (err as Error).message.slice(0, 80) : `HTTP ${status}`;
        this.count(this.errors, key);
        if (!this.errorSamples.has(key))
          this.errorSamples.set(key, (err as Error).message.slice(0, 300));
        // The API server may be restarting (a fault): give it a moment.
        if (status === 0) await pause(1000);
      }
      // Pacing between scenarios keeps the request rate modest.
      await pause(p.int(100, 800));
    }
  }

  // -------------------------------------------------------------------------
  // API helpers

  private name(p: Prng, prefix: string): string {
    return `${prefix}-${p.suffix(6)}`;
  }

  private use(o: Obj): Obj {
    this.inUse.set(o.uid, (this.inUse.get(o.uid) ?? 0) + 1);
    return o;
  }

  release(objs: Obj[]): void {
    for (const o of objs) {
      const n = (this.inUse.get(o.uid) ?? 1) - 1;
      if (n <= 0) this.inUse.delete(o.uid);
      else this.inUse.set(o.uid, n);
    }
  }

  ref(o: Obj, p: Prng, opts: { block?: boolean; controller?: boolean } = {}): OwnerReference {
    // Widgets are referenced in either served version (Gadgets have only v1).
    const apiVersion =
      o.r.resource === 'widgets' ? `${CRD_GROUP}/${p.pick(['v1', 'v2'])}` : apiVersionOf(o.r);
    return {
      apiVersion,
      kind: o.r.kind,
      name: o.name,
      uid: o.uid,
      ...(opts.block ? { blockOwnerDeletion: true } : {}),
      ...(opts.controller ? { controller: true } : {}),
    };
  }

  private body(
    r: ResourceDef,
    name: string,
    owners: OwnerReference[],
    hold: boolean,
    p: Prng,
  ): Record<string, unknown> {
    const metadata = {
      name,
      labels: { [LABEL]: 'true' },
      ...(owners.length ? { ownerReferences: owners } : {}),
      ...(hold ? { finalizers: [HOLD] } : {}),
    };
    const base = { apiVersion: apiVersionOf(r), kind: r.kind, metadata };
    const podSpec = (restartPolicy: string) => ({
      restartPolicy,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image: IMAGE }],
    });
    switch (r.resource) {
      case 'configmaps':
        return { ...base, data: { n: String(p.int(0, 999)) } };
      case 'secrets':
        return { ...base, type: 'Opaque', stringData: { n: String(p.int(0, 999)) } };
      case 'widgets':
        return { ...base, spec: { size: p.int(1, 9) } };
      case 'gadgets':
        return { ...base, spec: { n: p.int(0, 999) } };
      case 'roles':
      case 'clusterroles':
        // No rules: nothing to escalate (the GC may patch it without holding any permission).
        return { ...base, rules: [] };
      case 'deployments':
        return {
          ...base,
          spec: {
            replicas: p.int(1, 2),
            revisionHistoryLimit: 2,
            selector: { matchLabels: { 'soak-app': name } },
            template: {
              metadata: { labels: { 'soak-app': name, [LABEL]: 'true' } },
              spec: podSpec('Always'),
            },
          },
        };
      case 'jobs':
        return {
          ...base,
          spec: {
            backoffLimit: 0,
            template: { metadata: { labels: { [LABEL]: 'true' } }, spec: podSpec('Never') },
          },
        };
      case 'cronjobs':
        return {
          ...base,
          spec: {
            schedule: '*/1 * * * *',
            concurrencyPolicy: 'Forbid',
            startingDeadlineSeconds: 30,
            jobTemplate: {
              spec: {
                backoffLimit: 0,
                template: { metadata: { labels: { [LABEL]: 'true' } }, spec: podSpec('Never') },
              },
            },
          },
        };
      default:
        throw new Error(`no body for ${r.resource}`);
    }
  }

  /** Creates an object; a hold finalizer is released by the workload a few seconds later. */
  async create(
    p: Prng,
    resource: string,
    ns: string,
    owners: OwnerReference[] = [],
    o: { hold?: boolean; name?: string } = {},
  ): Promise<Obj> {
    const r = resourceDef(resource);
    const name = o.name ?? this.name(p, resource.slice(0, 3));
    const sent = Date.now();
    const created = await this.o.kube.request<KubeObject>('POST', collectionPath(r, ns), {
      body: this.body(r, name, owners, o.hold ?? false, p),
    });
    this.o.clock.write(sent, Date.now(), Number(created.metadata.resourceVersion));
    this.count(this.ops, `create ${resource}`);
    const obj = this.use({ r, ns, name, uid: created.metadata.uid });
    if (o.hold) this.holds.set(obj.uid, { obj, at: Date.now() + p.int(1_000, 6_000) });
    return obj;
  }

  /** DELETE with a policy (undefined: the resource's default) and the UID as precondition. 404/409 are fine. */
  async del(o: Obj, policy: Policy): Promise<number> {
    const res = await this.o.kube.raw('DELETE', objectPath(o.r, o.ns, o.name), {
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        preconditions: { uid: o.uid },
        ...(policy ? { propagationPolicy: policy } : {}),
      },
    });
    this.count(this.ops, `delete ${policy ?? '(default)'}`);
    if (res.status >= 300 && res.status !== 404 && res.status !== 409)
      throw new KubeError('DELETE', objectPath(o.r, o.ns, o.name), res.status, res.text);
    return res.status;
  }

  /**
   * Read-modify-write of an object's owner references and finalizers, guarded
   * by resourceVersion (a JSON merge patch), retried on conflict. False if the
   * object is gone or `change` declines.
   */
  async edit(
    o: Obj,
    op: string,
    change: (meta: { ownerReferences: OwnerReference[]; finalizers: string[] }) => boolean,
  ): Promise<boolean> {
    const path = objectPath(o.r, o.ns, o.name);
    for (let attempt = 0; attempt < 5; attempt++) {
      const res = await this.o.kube.raw('GET', path);
      if (res.status === 404) return false;
      if (res.status !== 200) throw new KubeError('GET', path, res.status, res.text);
      const cur = JSON.parse(res.text) as KubeObject;
      if (cur.metadata.uid !== o.uid) return false;
      const meta = {
        ownerReferences: [...(cur.metadata.ownerReferences ?? [])],
        finalizers: [...(cur.metadata.finalizers ?? [])],
      };
      if (!change(meta)) return false;
      const sent = Date.now();
      const patched = await this.o.kube.raw('PATCH', path, {
        contentType: 'application/merge-patch+json',
        body: {
          metadata: {
            resourceVersion: cur.metadata.resourceVersion,
            ownerReferences: meta.ownerReferences.length ? meta.ownerReferences : null,
            finalizers: meta.finalizers.length ? meta.finalizers : null,
          },
        },
      });
      this.count(this.ops, op);
      if (patched.status === 200) {
        // A patch that removes the last finalizer of a deleting object deletes it and answers
        // with the object as it was: only a new resourceVersion is a write at that revision.
        const rev = Number((JSON.parse(patched.text) as KubeObject).metadata.resourceVersion);
        if (rev > Number(cur.metadata.resourceVersion)) this.o.clock.write(sent, Date.now(), rev);
        return true;
      }
      if (patched.status === 404) return false;
      if (patched.status !== 409) throw new KubeError('PATCH', path, patched.status, patched.text);
    }
    return false;
  }

  adopt(dep: Obj, ref: OwnerReference): Promise<boolean> {
    return this.edit(dep, 'adopt', (m) => {
      if (m.ownerReferences.some((r) => r.uid === ref.uid)) return false;
      m.ownerReferences.push(ref);
      return true;
    });
  }

  releaseRef(dep: Obj, ownerUid: string): Promise<boolean> {
    return this.edit(dep, 'release', (m) => {
      const before = m.ownerReferences.length;
      m.ownerReferences = m.ownerReferences.filter((r) => r.uid !== ownerUid);
      return m.ownerReferences.length !== before;
    });
  }

  private async dropHold(o: Obj): Promise<void> {
    try {
      await this.edit(o, 'release hold', (m) => {
        if (!m.finalizers.includes(HOLD)) return false;
        m.finalizers = m.finalizers.filter((f) => f !== HOLD);
        return true;
      });
      this.holds.delete(o.uid);
    } catch (err) {
      // The API server may be away (a fault): try again in a second.
      this.holds.set(o.uid, { obj: o, at: Date.now() + 1000 });
      throw err;
    }
  }

  /** Releases hold finalizers when due, until `until`. */
  private async releaser(until: number): Promise<void> {
    while (Date.now() < until) {
      const now = Date.now();
      for (const h of [...this.holds.values()])
        if (h.at <= now)
          await this.dropHold(h.obj).catch((err: unknown) => {
            this.count(this.errors, `release hold: HTTP ${statusOf(err) ?? '?'}`);
          });
      await pause(500);
    }
  }

  /** Drops every hold finalizer the workload set (those it knows of, and any the history still shows). */
  async releaseAllHolds(): Promise<void> {
    for (let round = 0; round < 5; round++) {
      const pending = new Map<string, Obj>();
      for (const h of this.holds.values()) pending.set(h.obj.uid, h.obj);
      for (const rec of this.o.history.live()) {
        if (this.o.history.current(rec)?.finalizers.includes(HOLD))
          pending.set(rec.uid, {
            r: resourceDef(rec.resource),
            ns: rec.namespace,
            name: rec.name,
            uid: rec.uid,
          });
      }
      if (pending.size === 0) return;
      for (const o of pending.values()) await this.dropHold(o).catch(() => undefined);
      await pause(500);
    }
  }

  /** Waits (with a deadline) until the history shows a live dependent of `owner`. */
  private async dependentAppears(owner: Obj, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.o.history.dependentsOf(owner.uid).length > 0) return true;
      await pause(250);
    }
    return false;
  }

  /** A deletion policy with the usual weights (for shapes.ts). */
  policyOf(p: Prng): Policy {
    return this.policy(p);
  }

  private policy(
    p: Prng,
    weights = { Background: 4, Foreground: 3, Orphan: 2, default: 1 },
  ): Policy {
    const k = p.weighted(weights);
    return k === 'default' ? undefined : k;
  }

  /** Creates an object of the same kind and name as `o` (gone or going), retrying while the name is taken. */
  private async recreate(p: Prng, o: Obj, timeoutMs = 15_000): Promise<Obj | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        return await this.create(p, o.r.resource, o.ns, [], { name: o.name });
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
        this.count(this.ops, 'recreate (name still taken)');
      }
      await pause(500);
    }
    return undefined;
  }

  // -------------------------------------------------------------------------
  // Scenarios

  private scenario(s: Scenario, p: Prng, ns: string): Promise<void> {
    switch (s) {
      case 'tree':
        return this.tree(p, ns);
      case 'recreateOwner':
        return this.recreateOwner(p, ns);
      case 'adoptRelease':
        return this.adoptRelease(p, ns);
      case 'cycle':
        return this.cycle(p, ns);
      case 'crossNamespace':
        return this.crossNamespace(p, ns);
      case 'foregroundThenOrphan':
        return this.foregroundThenOrphan(p, ns);
      case 'builtin':
        return this.builtin(p, ns);
      case 'shape': {
        const shape = this.shapes.pick(p);
        this.count(this.scenarios, `shape: ${shape}`);
        return this.shapes.run(shape, p, ns);
      }
      case 'janitor':
        return this.janitor(p);
    }
  }

  async tree(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const root = await this.create(
        p,
        p.pick(['configmaps', 'secrets', 'widgets', 'deployments']),
        ns,
      );
      made.push(root);
      const nodes: { o: Obj; depth: number }[] = [{ o: root, depth: 0 }];
      for (let i = p.int(2, 6); i > 0; i--) {
        const parents = nodes.filter((n) => n.depth < 3);
        const parent = p.pick(parents);
        const owners = [this.ref(parent.o, p, { block: p.chance(0.5) })];
        if (nodes.length > 1 && p.chance(0.2)) {
          const other = p.pick(nodes.filter((n) => n !== parent));
          owners.push(this.ref(other.o, p, { block: p.chance(0.5) }));
        }
        const child = await this.create(p, p.pick(SIMPLE), ns, owners, { hold: p.chance(0.1) });
        made.push(child);
        nodes.push({ o: child, depth: parent.depth + 1 });
      }
      await pause(p.int(200, 3000));
      const policy = this.policy(p);
      await this.del(root, policy);
      if (policy === 'Orphan' && p.chance(0.5)) {
        // The owner comes back under the same name and takes its orphans back.
        const again = await this.recreate(p, root);
        if (again) {
          made.push(again);
          for (const n of nodes.slice(1).filter(() => p.chance(0.6)))
            await this.adopt(n.o, this.ref(again, p, { block: p.chance(0.5) }));
          await pause(p.int(500, 3000));
          await this.del(
            again,
            this.policy(p, { Background: 3, Foreground: 2, Orphan: 0, default: 0 }),
          );
        }
      }
    } finally {
      this.release(made);
    }
  }

  async recreateOwner(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const kind = p.pick(SIMPLE);
      const owner = await this.create(p, kind, ns);
      made.push(owner);
      for (let i = p.int(2, 4); i > 0; i--)
        made.push(
          await this.create(p, p.pick(SIMPLE), ns, [this.ref(owner, p, { block: p.chance(0.4) })]),
        );
      await pause(p.int(100, 1500));
      await this.del(owner, p.chance(0.7) ? 'Background' : 'Foreground');
      const again = await this.recreate(p, owner);
      if (!again) return;
      made.push(again);
      for (let i = p.int(1, 3); i > 0; i--)
        made.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(again, p)]));
      // A dependent that names the old owner: same name, the old UID.
      made.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(owner, p)]));
      await pause(p.int(1000, 4000));
      await this.del(
        again,
        this.policy(p, { Background: 3, Foreground: 2, Orphan: 1, default: 0 }),
      );
    } finally {
      this.release(made);
    }
  }

  async adoptRelease(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const a = await this.create(p, p.pick(SIMPLE), ns);
      const b = await this.create(p, p.pick(SIMPLE), ns);
      made.push(a, b);
      const d = await this.create(p, p.pick(SIMPLE), ns, [this.ref(a, p, { block: true })], {
        hold: p.chance(0.3),
      });
      made.push(d);
      await pause(p.int(100, 1000));
      await this.adopt(d, this.ref(b, p, { block: p.chance(0.5) }));
      const variant = p.int(0, 2);
      if (variant === 0) {
        // One owner goes (d keeps the other), then d is released from the other too.
        await this.del(a, 'Background');
        await pause(p.int(500, 3000));
        await this.releaseRef(d, b.uid);
      } else if (variant === 1) {
        // Released while its owner waits in foreground deletion for it.
        await this.del(a, 'Foreground');
        await pause(p.int(0, 800));
        await this.releaseRef(d, a.uid);
      } else {
        // Adopted by an owner already in foreground deletion.
        await this.del(a, 'Foreground');
        await pause(p.int(0, 800));
        const e = await this.create(p, p.pick(SIMPLE), ns);
        made.push(e);
        await this.adopt(e, this.ref(a, p, { block: p.chance(0.7) }));
      }
      await pause(p.int(500, 3000));
      await this.del(b, this.policy(p));
    } finally {
      this.release(made);
    }
  }

  async cycle(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const n = p.int(2, 3);
      for (let i = 0; i < n; i++)
        made.push(await this.create(p, p.pick(['configmaps', 'widgets']), ns));
      for (let i = 0; i < n; i++)
        await this.adopt(made[i] as Obj, this.ref(made[(i + 1) % n] as Obj, p, { block: true }));
      await pause(p.int(200, 2000));
      await this.del(made[0] as Obj, p.chance(0.7) ? 'Foreground' : 'Background');
    } finally {
      this.release(made);
    }
  }

  async crossNamespace(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const other = p.pick(this.o.namespaces.filter((x) => x !== ns));
      const owner = await this.create(p, p.pick(SIMPLE), other);
      const local = await this.create(p, p.pick(SIMPLE), ns);
      made.push(owner, local);
      // Owned only from another namespace: collected as if the owner were absent.
      made.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(owner, p)]));
      // A valid owner and an invalid one: kept, the invalid reference removed.
      made.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(owner, p), this.ref(local, p)]));
      await pause(p.int(1000, 4000));
      await this.del(local, 'Background');
      await this.del(owner, this.policy(p));
    } finally {
      this.release(made);
    }
  }

  async foregroundThenOrphan(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const owner = await this.create(p, p.pick([...SIMPLE, 'deployments']), ns);
      made.push(owner);
      const deps: Obj[] = [];
      for (let i = p.int(2, 5); i > 0; i--) {
        const d = await this.create(
          p,
          p.pick(SIMPLE),
          ns,
          [this.ref(owner, p, { block: p.chance(0.7) })],
          {
            hold: p.chance(0.3),
          },
        );
        deps.push(d);
        // Some dependents have dependents of their own (the GC deletes those Foreground).
        if (p.chance(0.3))
          deps.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(d, p, { block: true })]));
      }
      made.push(...deps);
      await pause(p.int(200, 1500));
      await this.del(owner, 'Foreground');
      await pause(p.int(100, 3000));
      await this.del(owner, 'Orphan');
    } finally {
      this.release(made);
    }
  }

  async builtin(p: Prng, ns: string): Promise<void> {
    const made: Obj[] = [];
    try {
      const kind = p.weighted({ deployments: 3, jobs: 2, cronjobs: 1 });
      const owner = await this.create(p, kind, ns);
      made.push(owner);
      if (kind !== 'cronjobs') await this.dependentAppears(owner, 20_000);
      await pause(p.int(500, 4000));
      const policy =
        kind === 'jobs'
          ? this.policy(p, { Background: 3, Foreground: 2, Orphan: 1, default: 2 })
          : this.policy(p);
      await this.del(owner, policy);
      if (kind === 'deployments' && (policy === 'Orphan' || p.chance(0.3))) {
        // Recreated under the same name: its controller adopts the orphaned ReplicaSets.
        const again = await this.recreate(p, owner);
        if (again) {
          made.push(again);
          await pause(p.int(2000, 6000));
          await this.del(
            again,
            this.policy(p, { Background: 3, Foreground: 2, Orphan: 0, default: 1 }),
          );
        }
      }
    } finally {
      this.release(made);
    }
  }

  /** One owner with `n` dependents, deleted Background: a cascade for the GC (used during a squeeze). */
  async burst(p: Prng, ns: string, n: number): Promise<string> {
    const made: Obj[] = [];
    try {
      const owner = await this.create(p, 'configmaps', ns);
      made.push(owner);
      for (let i = 0; i < n; i++)
        made.push(await this.create(p, p.pick(SIMPLE), ns, [this.ref(owner, p)]));
      await this.del(owner, 'Background');
      return `a cascade of ${n} dependents started in ${ns}`;
    } finally {
      this.release(made);
    }
  }

  async janitor(p: Prng): Promise<void> {
    const cutoff = Date.now() - 10_000;
    const candidates = this.o.history.live().filter((rec) => {
      const snap = this.o.history.current(rec);
      return (
        snap !== undefined &&
        // AggWidgets are written by their own writer only (aggregated.ts): it records each write.
        rec.resource !== AGGREGATED.resource &&
        snap.refs.length === 0 &&
        !snap.deleting &&
        !this.inUse.has(rec.uid) &&
        (rec.segments[0]?.seenAt ?? Date.now()) < cutoff
      );
    });
    for (const rec of p.shuffle(candidates).slice(0, 8)) {
      await this.del(
        { r: resourceDef(rec.resource), ns: rec.namespace, name: rec.name, uid: rec.uid },
        'Background',
      );
    }
  }
}
