// The objects of the one-million-object scenario (bench/scale.ts): a
// realistic mix, created by the harness in units of 100, and the counts that
// prove a garbage collector deleted nothing when it started on them.
//
// One unit, in one namespace (unit u lives in namespace u mod NAMESPACES):
//
//   kind        objects  owned  owner
//   Deployment        1      0  -
//   ReplicaSet        1      1  its Deployment (controller, blockOwnerDeletion)
//   Pod               8      8  the ReplicaSet (blockOwnerDeletion, not controller: see below)
//   Pod              15     15  a top Widget (controller): an operator's pods, 3 each for 5 Widgets
//   Widget           20     10  10 top-level Widgets, each owning one child Widget
//   ConfigMap        35     11  24 standalone; 3 owned by the Deployment, 8 by a top Widget
//   Secret           20      5  15 standalone; 5 owned by a top Widget
//   total           100     50  (50% owned; 10% Deployment → ReplicaSet → Pods, 15% other
//                                Pods, 35% ConfigMaps, 20% Secrets, 20% custom resources)
//
// Every object is small: 2-4 labels, an annotation, tens of bytes of data.
// Every owner exists (owners are created first, and each reference carries
// the owner's real UID), so a garbage collector starting on the mix has
// nothing to collect. Deployments are kept to 1% of the objects because each
// one costs the cluster's own (20 QPS) controllers about three writes after
// it is created (below): at 1,000,000 objects that is 10,000 Deployments,
// whose writes drain in about the time the creation takes.
//
// How the mix stays at a known, stable count although the cluster's own
// kube-controller-manager runs the deployment and replicaset controllers
// (cluster/controlplane.ts: every controller except the garbage collector):
//
// - Letting the controllers make the ReplicaSets and Pods is not an option: the
//   cluster's controllers run at kcm's default 20 QPS, so 80,000 Pods would
//   take more than an hour, and the count would depend on when they caught up.
// - A ReplicaSet with replicas k whose k Pods the harness creates races its
//   controller: the RS exists before its Pods (they need its UID), and the
//   controller creates Pods of its own in that gap, then deletes the surplus.
//   With replicas 0 it would delete the harness's Pods instead.
// - So: Deployments are created paused with replicas 0 (a paused Deployment
//   never creates a ReplicaSet: the controller syncs it with
//   createIfNotExisted=false). Each gets one ReplicaSet made by the harness,
//   with the Deployment's template plus a pod-template-hash label and a
//   controller reference to it, and replicas 0: the deployment controller
//   finds it as its (only, current) ReplicaSet and has nothing to scale. The
//   Pods reference the ReplicaSet as owner (blockOwnerDeletion, as a real Pod
//   does) but not as controller, and their labels lack the pod-template-hash,
//   so the ReplicaSet's selector does not match them: the replicaset
//   controller neither adopts, releases, counts nor deletes them (a Pod owned
//   by it as controller but outside its selector would be released, one
//   matching it would be counted against replicas 0 and deleted). For both
//   garbage collectors an owner reference is an owner reference: the
//   `controller` flag only matters to them in foreground deletion.
// - The Widgets' Pods have a controller reference to their Widget: the
//   replicaset controller ignores a Pod controlled by something else.
// - Pods have no node and there is no scheduler: they stay Pending, which the
//   pod GC controller leaves alone. automountServiceAccountToken is false, so
//   no token volume is added; the namespace's `default` ServiceAccount must
//   exist first (the ServiceAccount admission plugin requires it).
// - What the cluster's controllers still write after creation, at 20 QPS each
//   (every controller has its own client): two status updates per Deployment
//   (before and after its ReplicaSet's status), with the odd 409 retried, and
//   one per ReplicaSet. The harness waits until those writes have stopped before it
//   starts a GC. Two more writes per Deployment are avoided: the ReplicaSet
//   carries the Deployment's annotations (the controller would copy them
//   over), and the Deployment has no progress deadline
//   (progressDeadlineSeconds MaxInt32), without which the controller writes a
//   "DeploymentPaused" condition first, and a second status write then
//   conflicts (409) and is retried.
import type { KubeClient } from '../../src/api/client.ts';
import type { OwnerReference } from '../../src/api/resources.ts';
import { delay } from '../../cluster/controlplane.ts';
import { pool, WIDGET_GROUP } from './kube.ts';

export const UNIT_OBJECTS = 100;
/** Owned objects per unit (for the report). */
export const UNIT_OWNED = 50;
/** The unit in words (for the report). */
export const UNIT_TEXT =
  '1 Deployment → 1 ReplicaSet → 8 Pods; 10 top-level Widgets, each owning a child Widget, 5 of them owning 3 Pods each; ' +
  '35 ConfigMaps (3 owned by the Deployment, 8 by Widgets); 20 Secrets (5 owned by Widgets)';

/** The kinds of the mix, with their cluster-wide collection paths (for counting). */
export const KINDS = {
  deployments: { apiVersion: 'apps/v1', kind: 'Deployment', path: '/apis/apps/v1' },
  replicasets: { apiVersion: 'apps/v1', kind: 'ReplicaSet', path: '/apis/apps/v1' },
  pods: { apiVersion: 'v1', kind: 'Pod', path: '/api/v1' },
  widgets: { apiVersion: `${WIDGET_GROUP}/v1`, kind: 'Widget', path: `/apis/${WIDGET_GROUP}/v1` },
  configmaps: { apiVersion: 'v1', kind: 'ConfigMap', path: '/api/v1' },
  secrets: { apiVersion: 'v1', kind: 'Secret', path: '/api/v1' },
} as const;
export type KindName = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as KindName[];

/** Objects of each kind in one unit. */
export const PER_UNIT: Record<KindName, number> = {
  deployments: 1,
  replicasets: 1,
  pods: 23,
  widgets: 20,
  configmaps: 35,
  secrets: 20,
};

export const namespaceName = (i: number): string => `scale-${String(i).padStart(3, '0')}`;

/** A counting semaphore: at most `limit` holders at once. */
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

export interface CreateContext {
  client: KubeClient;
  namespaces: number;
  /** Requests in flight, across all units. */
  inflight: Semaphore;
  /** Objects that already existed (409 on a resumed run): fetched for their UID. */
  existed: { n: number };
  /** Retried failures (network, 5xx), for the report. */
  retries: { n: number };
}

interface Created {
  metadata: { name: string; uid: string };
}

const status = (err: unknown): number | undefined => (err as { status?: number }).status;

/**
 * POSTs one object and returns its UID. A 409 (a resumed run meeting an object
 * it made before) reads the object instead; network errors, 5xx and 429s the
 * client gave up on are retried with backoff; anything else is a bug in the
 * body and fails the run.
 */
async function create(
  ctx: CreateContext,
  collection: string,
  body: Record<string, unknown> & { metadata: { name: string } & Record<string, unknown> },
): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    try {
      const made = await ctx.inflight.run(() =>
        ctx.client.request<Created>('POST', collection, { body }),
      );
      return made.metadata.uid;
    } catch (err) {
      const code = status(err);
      if (code === 409) {
        const got = await ctx.inflight.run(() =>
          ctx.client.request<Created>('GET', `${collection}/${body.metadata.name}`),
        );
        ctx.existed.n++;
        return got.metadata.uid;
      }
      const transient = code === undefined || code === 0 || code === 429 || code >= 500;
      if (!transient || attempt >= 6) throw err;
      ctx.retries.n++;
      await delay(500 * 2 ** attempt);
    }
  }
}

const ref = (
  k: KindName,
  name: string,
  uid: string,
  opts: { controller?: boolean; block?: boolean } = {},
): OwnerReference => ({
  apiVersion: KINDS[k].apiVersion,
  kind: KINDS[k].kind,
  name,
  uid,
  ...(opts.controller ? { controller: true } : {}),
  blockOwnerDeletion: opts.block ?? false,
});

const TEAMS = ['payments', 'search', 'platform', 'checkout', 'identity', 'data'];
const TIERS = ['frontend', 'backend', 'worker', 'cache'];

/** The Deployment's pod template; its ReplicaSet's is the same plus the pod-template-hash label. */
function podTemplate(labels: Record<string, string>): Record<string, unknown> {
  return {
    metadata: { labels },
    spec: {
      automountServiceAccountToken: false,
      containers: [
        {
          name: 'app',
          image: 'registry.k8s.io/pause:3.10',
          resources: { requests: { cpu: '10m', memory: '16Mi' } },
        },
      ],
    },
  };
}

/** A stable 10-character "pod-template-hash" for unit u (only has to look like one). */
const templateHash = (u: number): string =>
  ((u * 2654435761) >>> 0).toString(36).padStart(7, '0').slice(0, 7) + 'bd8';

/** Creates the 100 objects of unit `u`, owners before their dependents. */
export async function createUnit(ctx: CreateContext, u: number): Promise<void> {
  const ns = namespaceName(u % ctx.namespaces);
  const core = `/api/v1/namespaces/${ns}`;
  const apps = `/apis/apps/v1/namespaces/${ns}`;
  const crs = `/apis/${WIDGET_GROUP}/v1/namespaces/${ns}/widgets`;
  const team = TEAMS[u % TEAMS.length] ?? 'platform';
  const tier = TIERS[u % TIERS.length] ?? 'backend';
  const app = `app-${u}`;
  const common = { 'app.kubernetes.io/part-of': `shop-${u % 50}`, team };
  const annotations = { 'bench.kubegc.io/unit': String(u) };
  const configMap = (name: string, labels: Record<string, string>, more: object, data: string) =>
    create(ctx, `${core}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels, annotations, ...more },
      data: { 'app.properties': data },
    });
  const secret = (name: string, labels: Record<string, string>, more: object, value: string) =>
    create(ctx, `${core}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name, labels, annotations, ...more },
      data: { token: Buffer.from(value).toString('base64') },
    });

  // Level 0: the roots. The Deployment and the 10 top Widgets own the rest.
  const deployment = create(ctx, `${apps}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: app, labels: { app, tier, ...common }, annotations },
    spec: {
      replicas: 0,
      paused: true,
      // No progress deadline: else the controller adds a "DeploymentPaused" condition in a write of its own.
      progressDeadlineSeconds: 2147483647,
      selector: { matchLabels: { app } },
      template: podTemplate({ app, tier }),
    },
  });
  const topWidgets = Array.from({ length: 10 }, (_, i) => {
    const name = `w-${u}-${i}`;
    return create(ctx, crs, {
      apiVersion: KINDS.widgets.apiVersion,
      kind: 'Widget',
      metadata: { name, labels: { widget: name, ...common }, annotations },
      spec: { size: 'small', replicas: 1 + (i % 3) },
    }).then((uid) => ({ name, uid }));
  });
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < 24; i++)
    all.push(
      configMap(
        `cm-${u}-${i}`,
        { app, ...common },
        {},
        `log.level=info\nfeature.${i}=true\npool.size=${8 + i}\n`,
      ),
    );
  for (let i = 0; i < 15; i++)
    all.push(secret(`secret-${u}-${i}`, { app, ...common }, {}, `tok-${u}-${i}-0123456789abcdef`));

  // Level 1: the Deployment's ReplicaSet and ConfigMaps; the Widgets' children, Pods, ConfigMaps and Secrets.
  const dUid = await deployment;
  const hash = templateHash(u);
  const rsName = `${app}-${hash}`;
  const replicaSet = create(ctx, `${apps}/replicasets`, {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: rsName,
      labels: { app, tier, 'pod-template-hash': hash },
      // The Deployment's annotations too, as its controller copies them: else it updates the RS.
      annotations: {
        ...annotations,
        'deployment.kubernetes.io/revision': '1',
        'deployment.kubernetes.io/desired-replicas': '0',
        'deployment.kubernetes.io/max-replicas': '0',
      },
      ownerReferences: [ref('deployments', app, dUid, { controller: true, block: true })],
    },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app, 'pod-template-hash': hash } },
      template: podTemplate({ app, tier, 'pod-template-hash': hash }),
    },
  });
  const byDeployment = { ownerReferences: [ref('deployments', app, dUid, { block: true })] };
  for (let i = 0; i < 3; i++)
    all.push(configMap(`${app}-config-${i}`, { app }, byDeployment, `replicas=3\nrevision=${i}\n`));
  const tops = await Promise.all(topWidgets);
  for (const [i, w] of tops.entries()) {
    const byWidget = { ownerReferences: [ref('widgets', w.name, w.uid, { controller: true })] };
    const labels = { widget: w.name };
    all.push(
      create(ctx, crs, {
        apiVersion: KINDS.widgets.apiVersion,
        kind: 'Widget',
        metadata: { name: `${w.name}-child`, labels, annotations, ...byWidget },
        spec: { size: 'tiny', replicas: 1 },
      }),
    );
    if (i < 5)
      for (let j = 0; j < 3; j++)
        all.push(
          create(ctx, `${core}/pods`, {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: `${w.name}-runner-${j}`, labels, annotations, ...byWidget },
            spec: podTemplate({}).spec,
          }),
        );
    if (i < 8) all.push(configMap(`${w.name}-config`, labels, byWidget, `index=${i}\n`));
    if (i < 5)
      all.push(secret(`${w.name}-credentials`, labels, byWidget, `pw-${w.uid.slice(0, 8)}`));
  }

  // Level 2: the ReplicaSet's Pods (labels outside its selector: see the header).
  const rsUid = await replicaSet;
  const byReplicaSet = { ownerReferences: [ref('replicasets', rsName, rsUid, { block: true })] };
  for (let i = 0; i < 8; i++)
    all.push(
      create(ctx, `${core}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${rsName}-${i.toString(36).padStart(5, 'x')}`,
          labels: { app, tier },
          annotations,
          ...byReplicaSet,
        },
        spec: podTemplate({}).spec,
      }),
    );
  await Promise.all(all);
}

/** Creates units [from, to), `unitsInFlight` at a time (their requests share ctx.inflight). */
export async function createUnits(
  ctx: CreateContext,
  from: number,
  to: number,
  unitsInFlight = 64,
): Promise<void> {
  const units = Array.from({ length: to - from }, (_, i) => from + i);
  await pool(units, unitsInFlight, (u) => createUnit(ctx, u));
}

/** Creates the mix's namespaces (existing ones are kept) and waits for each one's `default` ServiceAccount. */
export async function ensureNamespaces(client: KubeClient, n: number): Promise<void> {
  const names = Array.from({ length: n }, (_, i) => namespaceName(i));
  await pool(names, 20, async (name) => {
    await client
      .request('POST', '/api/v1/namespaces', {
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
      })
      .catch((err: unknown) => {
        if (status(err) !== 409) throw err;
      });
  });
  await pool(names, 10, async (name) => {
    for (const deadline = Date.now() + 180_000; ;) {
      const ok = await client
        .request('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)
        .then(() => true)
        .catch(() => false);
      if (ok) return;
      if (Date.now() > deadline)
        throw new Error(
          `no default ServiceAccount in ${name} within 180 s (service-account controller)`,
        );
      await delay(500);
    }
  });
}

interface ListMeta {
  metadata: { continue?: string; remainingItemCount?: number };
  items: unknown[];
}

/**
 * Objects of one kind in the whole cluster: a LIST with limit 1 and its
 * remainingItemCount; when the server leaves that out, a paginated
 * metadata-only LIST, counted.
 */
export async function countKind(client: KubeClient, k: KindName): Promise<number> {
  const url = `${KINDS[k].path}/${k}`;
  const accept =
    'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
  const first = await client.request<ListMeta>('GET', url, { query: { limit: 1 }, accept });
  if (first.metadata.remainingItemCount !== undefined || !first.metadata.continue)
    return first.items.length + (first.metadata.remainingItemCount ?? 0);
  let n = 0;
  let cont: string | undefined;
  do {
    const page: ListMeta = await client.request<ListMeta>('GET', url, {
      query: { limit: 5000, ...(cont ? { continue: cont } : {}) },
      accept,
      timeoutMs: 300_000,
    });
    n += page.items.length;
    cont = page.metadata.continue || undefined;
  } while (cont);
  return n;
}

export type Counts = Record<KindName, number>;

export async function countAll(client: KubeClient): Promise<Counts> {
  const out = {} as Counts;
  for (const k of KIND_NAMES) out[k] = await countKind(client, k);
  return out;
}

export const total = (c: Counts): number => KIND_NAMES.reduce((s, k) => s + c[k], 0);

/** Kinds whose count differs between `a` and `b`, as "kind a→b". */
export function countDiff(a: Counts, b: Counts): string[] {
  return KIND_NAMES.filter((k) => a[k] !== b[k]).map((k) => `${k} ${a[k]}→${b[k]}`);
}

/** What `units` units add to each kind. */
export function expectedCounts(units: number): Counts {
  const out = {} as Counts;
  for (const k of KIND_NAMES) out[k] = PER_UNIT[k] * units;
  return out;
}
