// Custom resources created while kubegc runs, in both directions of
// ownership with core objects; deleting a CRD; and a broken aggregated
// APIService that must not stop collection of everything else.
import * as k8s from '@kubernetes/client-node';
import { staysTrue, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { kubegcController, startController } from '../support/kubegc.ts';
import { configMap, configMapNames, isGone, ownerRef, type Ref } from '../support/objects.ts';

const GROUP = 'e2e.kubegc.io';
const PLURAL = `widgets${Date.now().toString(36)}`;
const KIND = `Widget${Date.now().toString(36)}`;
const API_VERSION = `${GROUP}/v1`;

const { cluster, c, namespace } = await e2e();
const ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
const custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
const gc = await kubegcController(cluster);

beforeAll(async () => {
  // The CRD appears while kubegc runs: it must be discovered and watched.
  await ext.createCustomResourceDefinition({
    body: {
      metadata: { name: `${PLURAL}.${GROUP}` },
      spec: {
        group: GROUP,
        scope: 'Namespaced',
        names: { plural: PLURAL, singular: PLURAL.slice(0, -1), kind: KIND },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
            },
          },
        ],
      },
    },
  });
  await gc.waitForLog(
    'the new resource to be watched',
    (l) => l.msg === 'started watching' && l.resource === `${PLURAL}.${GROUP}`,
    60_000,
  );
});

async function widget(ns: string, name: string, owners: k8s.V1OwnerReference[] = []): Promise<Ref> {
  const w = (await custom.createNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, ownerReferences: owners },
      spec: { size: 1 },
    },
  })) as k8s.KubernetesObject;
  return { apiVersion: API_VERSION, kind: KIND, name, uid: w.metadata?.uid ?? '', namespace: ns };
}

async function widgets(ns: string): Promise<k8s.KubernetesObject[]> {
  const list = (await custom.listNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: PLURAL,
  })) as {
    items: k8s.KubernetesObject[];
  };
  return list.items;
}

function deleteWidget(ns: string, name: string, propagationPolicy?: string): Promise<unknown> {
  return custom.deleteNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: PLURAL,
    name,
    propagationPolicy,
  });
}

test('custom resources cascade with Background, core objects included', async () => {
  const ns = await namespace('cr-cascade');
  const owner = await widget(ns, 'owner');
  for (let i = 0; i < 3; i++)
    await widget(ns, `dep-${i}`, [ownerRef(owner, { blockOwnerDeletion: true })]);
  await configMap(c, ns, 'cm-of-widget', [ownerRef(owner)]);
  await deleteWidget(ns, 'owner', 'Background');
  await waitFor(
    'the widgets and the ConfigMap owned by the widget to be collected',
    async () => (await widgets(ns)).length === 0 && (await configMapNames(c, ns)).length === 0,
  );
});

test('custom resources orphaned (JSON merge patch, strategic merge is not supported for them)', async () => {
  const ns = await namespace('cr-orphan');
  const owner = await widget(ns, 'owner');
  const other = await configMap(c, ns, 'other');
  for (let i = 0; i < 3; i++)
    await widget(ns, `dep-${i}`, [ownerRef(owner, { blockOwnerDeletion: true }), ownerRef(other)]);
  await deleteWidget(ns, 'owner', 'Orphan');
  const check = async (): Promise<boolean> => {
    const items = await widgets(ns);
    return (
      items.length === 3 &&
      items.every(
        (w) =>
          w.metadata?.ownerReferences?.length === 1 &&
          w.metadata.ownerReferences[0]?.uid === other.uid,
      )
    );
  };
  await waitFor(
    'the three dependents to keep only the ConfigMap reference, the owner gone',
    async () => (await check()) && (await isGone(c, owner).catch(() => false)),
  );
  await staysTrue('the orphaned widgets to stay', check, 3000);
});

test('a custom resource owned by a ConfigMap is collected', async () => {
  const ns = await namespace('cr-owned-by-core');
  const cm = await configMap(c, ns, 'owner');
  await widget(ns, 'dep', [ownerRef(cm)]);
  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
  await waitFor('the widget to be collected', async () => (await widgets(ns)).length === 0);
});

// Runs before the APIService test, which stops the shared kubegc.
test('deleting the CRD collects a ConfigMap owned by one of its custom resources', async () => {
  const ns = await namespace('cr-delete-crd');
  const owner = await widget(ns, 'owner');
  const cm = await configMap(c, ns, 'owned-by-widget', [ownerRef(owner)]);
  const keep = await configMap(c, ns, 'unrelated');
  await ext.deleteCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
  await waitFor('the ConfigMap owned by the custom resource to be collected', () => isGone(c, cm), {
    timeoutMs: 90_000,
  });
  expect(await isGone(c, keep)).toBe(false);
});

test('a broken aggregated APIService does not stop collection, even for a kubegc started after it', async () => {
  const ns = await namespace('cr-broken-apiservice');
  const reg = c.kc.makeApiClient(k8s.ApiregistrationV1Api);
  await c.core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: 'nobody' }, spec: { ports: [{ port: 443 }] } },
  });
  const name = `v1.broken${Date.now().toString(36)}.kubegc.io`;
  await reg.createAPIService({
    body: {
      metadata: { name },
      spec: {
        group: name.slice(3),
        version: 'v1',
        service: { namespace: ns, name: 'nobody', port: 443 },
        insecureSkipTLSVerify: true,
        groupPriorityMinimum: 1000,
        versionPriority: 15,
      },
    },
  });
  // Only a kubegc that starts while the APIService is broken may collect here.
  await gc.stop();
  try {
    const fresh = await startController(cluster, ['--initial-sync-timeout', '10s']);
    try {
      const owner = await configMap(c, ns, 'owner');
      await configMap(c, ns, 'dep', [ownerRef(owner)]);
      await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
      await waitFor(
        'the dependent to be collected by the new kubegc',
        async () => (await configMapNames(c, ns)).length === 0,
      );
      await fresh.waitForLog(
        'the new kubegc to report the deletion',
        (l) => l.msg === 'deleted' && l.namespace === ns,
        15_000,
      );
      // The breakage was real: kubegc saw the group fail discovery.
      await fresh.waitForLog(
        'the broken group in a discovery failure',
        (l) =>
          l.msg === 'discovery failed for some groups; keeping what was known of them' &&
          JSON.stringify(l.groups).includes(name.slice(3)),
        30_000,
      );
    } finally {
      await fresh.stop();
    }
  } finally {
    await reg.deleteAPIService({ name });
  }
});

test('a CRD whose conversion webhook is broken does not stop collection of everything else', async () => {
  const ns = await namespace('cr-broken-conversion');
  await c.core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: 'nobody' }, spec: { ports: [{ port: 443 }] } },
  });
  const plural = `gadgets${Date.now().toString(36)}`;
  const crdName = `${plural}.${GROUP}`;
  const schema = {
    openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
  };
  await ext.createCustomResourceDefinition({
    body: {
      metadata: { name: crdName },
      spec: {
        group: GROUP,
        scope: 'Namespaced',
        names: { plural, singular: plural.slice(0, -1), kind: `Gadget${plural.slice(7)}` },
        versions: [{ name: 'v1', served: true, storage: true, schema }],
      },
    },
  });
  await waitFor('the gadget resource to be served', async () => {
    await custom.listNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: ns, plural });
    return true;
  });
  await custom.createNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural,
    body: { apiVersion: `${GROUP}/v1`, kind: `Gadget${plural.slice(7)}`, metadata: { name: 'g' } },
  });
  // v2 becomes the preferred version, converted by a webhook nobody serves:
  // listing the stored v1 object through v2 fails.
  await ext.patchCustomResourceDefinition({
    name: crdName,
    body: [
      {
        op: 'replace',
        path: '/spec/versions',
        value: [
          { name: 'v1', served: true, storage: true, schema },
          { name: 'v2', served: true, storage: false, schema },
        ],
      },
      {
        op: 'add',
        path: '/spec/conversion',
        value: {
          strategy: 'Webhook',
          webhook: {
            conversionReviewVersions: ['v1'],
            clientConfig: {
              service: { namespace: ns, name: 'nobody', path: '/convert', port: 443 },
            },
          },
        },
      },
    ],
  });
  await waitFor('listing through v2 to fail', async () => {
    try {
      await custom.listNamespacedCustomObject({
        group: GROUP,
        version: 'v2',
        namespace: ns,
        plural,
      });
      return false;
    } catch {
      return true;
    }
  });
  const fresh = await startController(cluster, ['--initial-sync-timeout', '5s']);
  try {
    const started = await fresh.waitForLog(
      'the start despite an unsynced informer',
      (l) =>
        l.msg ===
        'starting before every informer synced; decisions use live reads, so this is safe',
    );
    expect(started.unsynced).toContain(crdName);
    const owner = await configMap(c, ns, 'owner');
    await configMap(c, ns, 'dep', [ownerRef(owner)]);
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    await waitFor(
      'the dependent to be collected',
      async () => (await configMapNames(c, ns)).length === 0,
    );
  } finally {
    await fresh.stop();
    await ext.deleteCustomResourceDefinition({ name: crdName });
  }
});
