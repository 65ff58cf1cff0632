// Building blocks for ownership trees in e2e tests.
import * as k8s from '@kubernetes/client-node';
import type { Clients } from './cluster.ts';
import { statusOf, waitFor } from './cluster.ts';

export interface Ref {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  namespace?: string;
}

export function ownerRef(
  owner: Ref,
  opts: { controller?: boolean; blockOwnerDeletion?: boolean } = {},
): k8s.V1OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.name,
    uid: owner.uid,
    ...opts,
  };
}

/** The Ref of an object the API server answered a create with. */
export function refOf(apiVersion: string, kind: string, meta: k8s.V1ObjectMeta | undefined): Ref {
  if (!meta?.uid || !meta.name) throw new Error(`created ${kind} has no uid/name`);
  return { apiVersion, kind, name: meta.name, uid: meta.uid, namespace: meta.namespace };
}

export async function configMap(
  c: Clients,
  namespace: string,
  name: string,
  owners: k8s.V1OwnerReference[] = [],
): Promise<Ref> {
  const cm = await c.core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name, ownerReferences: owners }, data: { k: 'v' } },
  });
  return refOf('v1', 'ConfigMap', cm.metadata);
}

export async function secret(
  c: Clients,
  namespace: string,
  name: string,
  owners: k8s.V1OwnerReference[] = [],
): Promise<Ref> {
  const s = await c.core.createNamespacedSecret({
    namespace,
    body: { metadata: { name, ownerReferences: owners } },
  });
  return refOf('v1', 'Secret', s.metadata);
}

/** A bare, never-scheduled Pod (no kubelet needed; deleted at once when collected). */
export async function pod(
  c: Clients,
  namespace: string,
  name: string,
  owners: k8s.V1OwnerReference[] = [],
): Promise<Ref> {
  const p = await c.core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, ownerReferences: owners },
      spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] },
    },
  });
  return refOf('v1', 'Pod', p.metadata);
}

/**
 * A Node object (no kubelet behind it) for the enclosing describe block:
 * created before its tests, deleted after them. Pods name it in spec.nodeName
 * for a node GC run to read; its Events name its uid.
 */
export function nodeObject(c: Clients, prefix: string): { readonly name: string; uid: string } {
  const node = { name: `${prefix}-${process.pid}-${Date.now().toString(36)}`, uid: '' };
  beforeAll(async () => {
    const made = await c.core.createNode({ body: { metadata: { name: node.name } } });
    node.uid = made.metadata?.uid ?? '';
  });
  afterAll(async () => {
    await c.core.deleteNode({ name: node.name });
  });
  return node;
}

/** Runs `fn(i)` for i in [0, n) with at most `concurrency` in flight. */
export async function times<T>(
  n: number,
  fn: (i: number) => Promise<T>,
  concurrency = 20,
): Promise<T[]> {
  const out: T[] = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** Reads any object of these built-in kinds; undefined if it does not exist. */
export async function read(c: Clients, r: Ref): Promise<k8s.KubernetesObject | undefined> {
  try {
    return await c.objects.read({
      apiVersion: r.apiVersion,
      kind: r.kind,
      metadata: { name: r.name, namespace: r.namespace },
    });
  } catch (err) {
    if (statusOf(err) === 404) return undefined;
    throw err;
  }
}

export async function isGone(c: Clients, r: Ref): Promise<boolean> {
  return (await read(c, r)) === undefined;
}

/** Removes every finalizer of a ConfigMap (a test's own, holding it in deletion); one already gone is fine. */
export async function releaseConfigMap(c: Clients, namespace: string, name: string): Promise<void> {
  await c.core
    .patchNamespacedConfigMap(
      { name, namespace, body: { metadata: { finalizers: null } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    )
    .catch(() => undefined);
}

/** Lists the ConfigMaps of a namespace by name (without the root CA ConfigMap every namespace has). */
export async function configMapNames(c: Clients, namespace: string): Promise<string[]> {
  const list = await c.core.listNamespacedConfigMap({ namespace });
  return list.items
    .map((i) => i.metadata?.name ?? '')
    .filter((n) => n !== 'kube-root-ca.crt')
    .sort();
}

/** A Deployment of pause containers (never pulled: no kubelet runs), labelled app=<name>. */
export function deploymentBody(name: string, replicas: number): k8s.V1Deployment {
  const labels = { app: name };
  return {
    metadata: { name, labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: { containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10' }] },
      },
    },
  };
}

/**
 * ConfigMaps a ← b ← c ← a in `namespace`, every reference blocking, then `a`
 * deleted with Foreground: only kubegc's cycle breaker (unblocking a
 * reference) lets the three go. Resolves once they are all gone.
 */
export async function collectBlockingCycle(c: Clients, namespace: string): Promise<void> {
  const a = await configMap(c, namespace, 'a');
  const b = await configMap(c, namespace, 'b', [ownerRef(a, { blockOwnerDeletion: true })]);
  const cc = await configMap(c, namespace, 'c', [ownerRef(b, { blockOwnerDeletion: true })]);
  await c.core.patchNamespacedConfigMap({
    namespace,
    name: 'a',
    body: [
      {
        op: 'add',
        path: '/metadata/ownerReferences',
        value: [ownerRef(cc, { blockOwnerDeletion: true })],
      },
    ],
  });
  await c.core.deleteNamespacedConfigMap({ namespace, name: 'a', propagationPolicy: 'Foreground' });
  await waitFor(
    'all three to be gone',
    async () => (await configMapNames(c, namespace)).length === 0,
    {
      timeoutMs: 90_000,
    },
  );
}

/**
 * Points a CRD's conversion at a webhook on a closed port of this machine, so
 * that its stored objects can no longer be served: a watch of the resource
 * stalls (what the stalled-watch alert and its runbook are about).
 */
export async function breakConversion(ext: k8s.ApiextensionsV1Api, crdName: string): Promise<void> {
  await ext.patchCustomResourceDefinition(
    {
      name: crdName,
      body: {
        spec: {
          conversion: {
            strategy: 'Webhook',
            webhook: {
              conversionReviewVersions: ['v1'],
              clientConfig: { url: 'https://127.0.0.1:1/convert' },
            },
          },
        },
      },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}
