// deploy/components/guardrails on the real API server. kubegc runs as its
// service account (deploy/'s RBAC) with the policy applied (the e2e global
// setup applies test/e2e/sa-overlay): every kind of collection completes and
// no write of kubegc's is refused. With kubegc's token directly, what the
// policy refuses (with a 403 naming it) and what it lets through. And kubegc
// under an RBAC that denies it one resource: it says so with a Warning event,
// keeps running, and collects everything else.
import * as k8s from '@kubernetes/client-node';
import { readAuditLog } from '../../soak/lib/audit.ts';
import { KubeClient } from '../../src/api/client.ts';
import { ApiError } from '../../src/api/errors.ts';
import { loadKubeConfig } from '../../src/api/kubeconfig.ts';
import { apiEventRecorder, type Regarding } from '../../src/shared/events.ts';
import { createLogger } from '../../src/log.ts';
import { kubegcKubeConfig, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { httpGet } from '../support/http.ts';
import { addresses, startController, type KubegcProcess } from '../support/kubegc.ts';
import {
  configMap,
  collectBlockingCycle,
  configMapNames,
  deploymentBody,
  isGone,
  ownerRef,
  pod,
  read,
  secret,
  type Ref,
} from '../support/objects.ts';
import {
  GUARDRAILS_PREFIX,
  KUBEGC_NODE_SERVICE_ACCOUNT,
  KUBEGC_SERVICE_ACCOUNT,
  KUBEGC_USER,
  mintServiceAccountKubeconfig,
  serviceAccountKubeconfig,
  serviceAccountUser,
} from '../support/service-account.ts';

const GROUP = 'guardrails.e2e.kubegc.io';
const SUFFIX = Date.now().toString(36);
const PLURAL = `gadgets${SUFFIX}`;
const KIND = `Gadget${SUFFIX}`;

const { cluster, c, namespace } = await e2e();
let ext: k8s.ApiextensionsV1Api;
let custom: k8s.CustomObjectsApi;
let gc: KubegcProcess;
/** The namespaces of this file's collection tests: no write of kubegc's there may be refused. */
const collected: string[] = [];

function crd(group: string, plural: string, kind: string): k8s.V1CustomResourceDefinition {
  return {
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: plural, kind },
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
  };
}

async function customObject(
  group: string,
  plural: string,
  kind: string,
  ns: string,
  name: string,
  owners: k8s.V1OwnerReference[] = [],
): Promise<Ref> {
  const apiVersion = `${group}/v1`;
  const o = (await custom.createNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural,
    body: { apiVersion, kind, metadata: { name, ownerReferences: owners }, spec: { size: 1 } },
  })) as k8s.KubernetesObject;
  return { apiVersion, kind, name, uid: o.metadata?.uid ?? '', namespace: ns };
}

const gadget = (ns: string, name: string, owners: k8s.V1OwnerReference[] = []): Promise<Ref> =>
  customObject(GROUP, PLURAL, KIND, ns, name, owners);

async function readCustom(
  group: string,
  plural: string,
  r: Ref,
): Promise<k8s.KubernetesObject | undefined> {
  try {
    return (await custom.getNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: r.namespace ?? '',
      plural,
      name: r.name,
    })) as k8s.KubernetesObject;
  } catch (err) {
    if (err instanceof k8s.ApiException && err.code === 404) return undefined;
    throw err;
  }
}

beforeAll(async () => {
  ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
  custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
});

// kubegc itself, collecting; stopped before the tests below, which must not race it.
describe('kubegc as its service account, under the guardrails', () => {
  beforeAll(async () => {
    // startController's default: kubegc's service account, under the guardrails.
    gc = await startController(cluster);
    await ext.createCustomResourceDefinition({ body: crd(GROUP, PLURAL, KIND) });
    await gc.waitForLog(
      'the custom resource to be watched',
      (l) => l.msg === 'started watching' && l.resource === `${PLURAL}.${GROUP}`,
      60_000,
    );
  });

  afterAll(async () => {
    await gc?.stop();
    await ext.deleteCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` }).catch(() => undefined);
  });

  test('under the guardrails, kubegc completes Background, Orphan and Foreground cascades', async () => {
    const ns = await namespace('guard-cascade');
    collected.push(ns);
    // Background: a ConfigMap owning a ConfigMap, a Secret and a Pod.
    const bg = await configMap(c, ns, 'bg');
    const bgDependents = [
      await configMap(c, ns, 'bg-cm', [ownerRef(bg)]),
      await secret(c, ns, 'bg-secret', [ownerRef(bg)]),
      await pod(c, ns, 'bg-pod', [ownerRef(bg)]),
    ];
    // Orphan: the dependent stays, without its reference (a PATCH of ownerReferences).
    const orphanOwner = await configMap(c, ns, 'orphan-owner');
    const orphanDependent = await configMap(c, ns, 'orphan-dep', [
      ownerRef(orphanOwner, { blockOwnerDeletion: true }),
    ]);
    // Foreground: a Deployment, its ReplicaSet and Pods (made by kube-controller-manager).
    await c.apps.createNamespacedDeployment({ namespace: ns, body: deploymentBody('web', 2) });
    const made = await waitFor('the ReplicaSet and 2 Pods', async () => {
      const [rs, pods] = await Promise.all([
        c.apps.listNamespacedReplicaSet({ namespace: ns }),
        c.core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' }),
      ]);
      return rs.items.length === 1 && pods.items.length === 2 ? [...rs.items, ...pods.items] : null;
    });

    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'bg',
      propagationPolicy: 'Background',
    });
    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'orphan-owner',
      propagationPolicy: 'Orphan',
    });
    await c.apps.deleteNamespacedDeployment({
      namespace: ns,
      name: 'web',
      propagationPolicy: 'Foreground',
    });

    for (const r of bgDependents)
      await waitFor(`${r.kind} ${r.name} to be collected`, () => isGone(c, r));
    await waitFor('the Orphan owner to be gone', () => isGone(c, orphanOwner));
    const kept = await read(c, orphanDependent);
    expect(kept?.metadata?.ownerReferences ?? []).toEqual([]);
    expect(kept?.metadata?.deletionTimestamp).toBeUndefined();
    await waitFor(
      'the Deployment, its ReplicaSet and Pods to be gone',
      async () => {
        const [ds, rs, pods] = await Promise.all([
          c.apps.listNamespacedDeployment({ namespace: ns }),
          c.apps.listNamespacedReplicaSet({ namespace: ns }),
          c.core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' }),
        ]);
        return ds.items.length + rs.items.length + pods.items.length === 0;
      },
      { timeoutMs: 90_000 },
    );

    // The audit log: these deletes were kubegc's, made with its service account's token.
    const deletes = (await readAuditLog(cluster.auditLog ?? '')).filter(
      (e) =>
        e.verb === 'delete' &&
        e.objectRef?.namespace === ns &&
        e.responseStatus?.code === 200 &&
        (e.userAgent ?? '').startsWith('kubegc'),
    );
    expect(new Set(deletes.map((e) => e.user.username))).toEqual(new Set([KUBEGC_USER]));
    expect(deletes.map((e) => e.objectRef?.name)).toEqual(
      expect.arrayContaining([
        'bg-cm',
        'bg-secret',
        'bg-pod',
        ...made.map((o) => o.metadata?.name ?? ''),
      ]),
    );
  });

  test('under the guardrails, custom resources cascade with Foreground and Orphan', async () => {
    const ns = await namespace('guard-cr');
    collected.push(ns);
    // Foreground: kubegc deletes the blocking dependents, then removes the
    // owner's foregroundDeletion finalizer (a JSON merge patch on a custom resource).
    const fg = await gadget(ns, 'fg');
    const fgDependents = [
      await gadget(ns, 'fg-dep-0', [ownerRef(fg, { blockOwnerDeletion: true })]),
      await gadget(ns, 'fg-dep-1', [ownerRef(fg, { blockOwnerDeletion: true })]),
    ];
    const fgConfigMap = await configMap(c, ns, 'fg-cm', [
      ownerRef(fg, { blockOwnerDeletion: true }),
    ]);
    // Orphan: the custom-resource dependent loses its reference (strategic merge
    // is refused with 415 for custom resources; kubegc sends a JSON merge patch).
    const orphanOwner = await gadget(ns, 'orphan-owner');
    const orphanDependent = await gadget(ns, 'orphan-dep', [
      ownerRef(orphanOwner, { blockOwnerDeletion: true }),
    ]);
    for (const [name, propagationPolicy] of [
      ['fg', 'Foreground'],
      ['orphan-owner', 'Orphan'],
    ] as const)
      await custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: PLURAL,
        name,
        propagationPolicy,
      });
    await waitFor(
      'the Foreground owner and its dependents to be gone',
      async () =>
        (await readCustom(GROUP, PLURAL, fg)) === undefined &&
        (await Promise.all(fgDependents.map((r) => readCustom(GROUP, PLURAL, r)))).every(
          (x) => x === undefined,
        ) &&
        (await isGone(c, fgConfigMap)),
      { timeoutMs: 90_000 },
    );
    await waitFor(
      'the Orphan owner to be gone',
      async () => (await readCustom(GROUP, PLURAL, orphanOwner)) === undefined,
    );
    const kept = await readCustom(GROUP, PLURAL, orphanDependent);
    expect(kept?.metadata?.ownerReferences ?? []).toEqual([]);
    expect(kept?.metadata?.deletionTimestamp).toBeUndefined();
  });

  test('under the guardrails, a cycle of three blocking references is collected', async () => {
    const ns = await namespace('guard-cycle');
    collected.push(ns);
    // kubegc unblocks a reference (a PATCH of blockOwnerDeletion) to break it.
    await collectBlockingCycle(c, ns);
  });

  test('no write of kubegc in the collection tests was refused (audit log)', async () => {
    expect(collected.length).toBe(3);
    const refused = (await readAuditLog(cluster.auditLog ?? '')).filter(
      (e) =>
        e.user.username === KUBEGC_USER &&
        collected.includes(e.objectRef?.namespace ?? '') &&
        // Refusals (RBAC, admission). Not 404 or 409, answers kubegc expects (gone,
        // preconditions), nor 415, a custom resource refusing a strategic merge
        // patch, which kubegc then sends as a JSON merge patch.
        (e.responseStatus?.code === 403 || e.responseStatus?.code === 422),
    );
    expect(refused.map((e) => `${e.verb} ${e.objectRef?.name} ${e.responseStatus?.code}`)).toEqual(
      [],
    );
    expect(gc.lines.filter((l) => JSON.stringify(l).includes(GUARDRAILS_PREFIX))).toEqual([]);
  });
});

/** The status and message of a refused call; fails if the call succeeds. */
async function refusal(call: () => Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await call();
  } catch (err) {
    if (!(err instanceof k8s.ApiException)) throw err;
    const body: unknown = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
    const message = (body as { message?: string } | undefined)?.message ?? String(err.body);
    return { code: err.code, message };
  }
  throw new Error('expected the API server to refuse the request; it was allowed');
}

const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const strategic = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);

describe("kubegc's token, directly", () => {
  let ns: string;
  let asKubegc: { core: k8s.CoreV1Api; apps: k8s.AppsV1Api };

  beforeAll(async () => {
    ns = await namespace('guard-token');
    const kc = await kubegcKubeConfig(cluster);
    asKubegc = { core: kc.makeApiClient(k8s.CoreV1Api), apps: kc.makeApiClient(k8s.AppsV1Api) };
  });

  test('DELETE of an object without owner references: 403 naming the policy; the object stays', async () => {
    const lone = await configMap(c, ns, 'lone');
    const r = await refusal(() =>
      asKubegc.core.deleteNamespacedConfigMap({ namespace: ns, name: 'lone' }),
    );
    expect(r.code).toBe(403);
    expect(r.message).toContain(
      `${GUARDRAILS_PREFIX} DELETE of configmaps ${ns}/lone refused: it has no ownerReferences`,
    );
    expect(await isGone(c, lone)).toBe(false);
  });

  test('DELETE of an object with an owner reference: allowed', async () => {
    const owner = await configMap(c, ns, 'owner-of-owned');
    const owned = await configMap(c, ns, 'owned', [ownerRef(owner)]);
    await asKubegc.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owned' });
    await waitFor('the owned ConfigMap to be gone', () => isGone(c, owned));
  });

  test("PATCH of labels, of a ConfigMap's data, of a Deployment's spec.replicas: 403, saying what changed", async () => {
    await configMap(c, ns, 'data');
    await c.apps.createNamespacedDeployment({ namespace: ns, body: deploymentBody('web', 0) });
    const label = await refusal(() =>
      asKubegc.core.patchNamespacedConfigMap(
        { namespace: ns, name: 'data', body: { metadata: { labels: { x: 'y' } } } },
        merge,
      ),
    );
    expect(label.code).toBe(403);
    expect(label.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of configmaps ${ns}/data refused: it changes metadata.labels`,
    );
    const data = await refusal(() =>
      asKubegc.core.patchNamespacedConfigMap(
        { namespace: ns, name: 'data', body: { data: { k: 'changed' } } },
        merge,
      ),
    );
    expect(data.code).toBe(403);
    expect(data.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of configmaps ${ns}/data refused: it changes data`,
    );
    const replicas = await refusal(() =>
      asKubegc.apps.patchNamespacedDeployment(
        { namespace: ns, name: 'web', body: { spec: { replicas: 5 } } },
        merge,
      ),
    );
    expect(replicas.code).toBe(403);
    expect(replicas.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of deployments.apps ${ns}/web refused: it changes spec`,
    );
    // The scale subresource is refused too.
    const scale = await refusal(() =>
      asKubegc.apps.patchNamespacedDeploymentScale(
        { namespace: ns, name: 'web', body: { spec: { replicas: 5 } } },
        merge,
      ),
    );
    expect(scale.code).toBe(403);
    expect(scale.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of deployments/scale.apps ${ns}/web`,
    );
    const cm = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'data' });
    expect(cm.metadata?.labels).toBeUndefined();
    expect(cm.data).toEqual({ k: 'v' });
    const d = await c.apps.readNamespacedDeployment({ namespace: ns, name: 'web' });
    expect(d.spec?.replicas).toBe(0);
  });

  test('PATCHes that only remove an owner reference, unblock one, or remove a GC finalizer: allowed', async () => {
    // Two live owners: nothing here for a collector to collect.
    const o1 = await configMap(c, ns, 'o1');
    const o2 = await configMap(c, ns, 'o2');
    const dep = await configMap(c, ns, 'dep', [
      ownerRef(o1, { blockOwnerDeletion: true }),
      ownerRef(o2, { blockOwnerDeletion: true }),
    ]);
    // kubegc's own patch for a dangling reference: strategic merge, $patch: delete by UID.
    await asKubegc.core.patchNamespacedConfigMap(
      {
        namespace: ns,
        name: 'dep',
        body: { metadata: { ownerReferences: [{ $patch: 'delete', uid: o2.uid }], uid: dep.uid } },
      },
      strategic,
    );
    // The cycle breaker's: blockOwnerDeletion to false.
    await asKubegc.core.patchNamespacedConfigMap(
      {
        namespace: ns,
        name: 'dep',
        body: { metadata: { ownerReferences: [ownerRef(o1, { blockOwnerDeletion: false })] } },
      },
      merge,
    );
    let now = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
    expect(now.metadata?.ownerReferences).toEqual([ownerRef(o1, { blockOwnerDeletion: false })]);
    // The orphan finalizer (the server adds it on an Orphan DELETE; here an admin did).
    await c.core.patchNamespacedConfigMap(
      {
        namespace: ns,
        name: 'dep',
        body: { metadata: { finalizers: ['example.com/keep', 'orphan'] } },
      },
      merge,
    );
    await asKubegc.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'dep', body: { metadata: { finalizers: ['example.com/keep'] } } },
      merge,
    );
    now = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'dep' });
    expect(now.metadata?.finalizers).toEqual(['example.com/keep']);
    await c.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'dep', body: { metadata: { finalizers: null } } },
      merge,
    );
  });

  test('PATCHes that add an owner reference or a finalizer, or remove a foreign finalizer: 403', async () => {
    // Adding a reference would make any object deletable in two steps.
    const owner = await configMap(c, ns, 'would-be-owner');
    await configMap(c, ns, 'target');
    const addRef = await refusal(() =>
      asKubegc.core.patchNamespacedConfigMap(
        {
          namespace: ns,
          name: 'target',
          body: { metadata: { ownerReferences: [ownerRef(owner)] } },
        },
        merge,
      ),
    );
    expect(addRef.code).toBe(403);
    expect(addRef.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of configmaps ${ns}/target refused: it adds or alters owner references`,
    );
    const addFinalizer = await refusal(() =>
      asKubegc.core.patchNamespacedConfigMap(
        { namespace: ns, name: 'target', body: { metadata: { finalizers: ['example.com/x'] } } },
        merge,
      ),
    );
    expect(addFinalizer.code).toBe(403);
    expect(addFinalizer.message).toContain(
      `${GUARDRAILS_PREFIX} UPDATE of configmaps ${ns}/target refused: it adds finalizers`,
    );
    // Removing another controller's finalizer would finish a deletion it still holds.
    await c.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'target', body: { metadata: { finalizers: ['example.com/keep'] } } },
      merge,
    );
    const removeForeign = await refusal(() =>
      asKubegc.core.patchNamespacedConfigMap(
        { namespace: ns, name: 'target', body: { metadata: { finalizers: null } } },
        merge,
      ),
    );
    expect(removeForeign.code).toBe(403);
    expect(removeForeign.message).toContain('removes others than orphan and foregroundDeletion');
    await c.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'target', body: { metadata: { finalizers: null } } },
      merge,
    );
  });

  test('CREATE of a ConfigMap: refused by RBAC, and by the policy where RBAC would allow it', async () => {
    const body = { metadata: { name: 'created' } };
    const byRbac = await refusal(() =>
      asKubegc.core.createNamespacedConfigMap({ namespace: ns, body }),
    );
    expect(byRbac.code).toBe(403);
    expect(byRbac.message).toContain('cannot create resource "configmaps"');
    // Grant it, as a too-broad Role might: the policy still refuses.
    await c.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'create-configmaps' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create'] }],
      },
    });
    await c.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'create-configmaps' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'create-configmaps' },
        subjects: [{ kind: 'ServiceAccount', ...KUBEGC_SERVICE_ACCOUNT }],
      },
    });
    const byPolicy = await waitFor(
      'RBAC to allow the CREATE, and the policy to refuse it',
      async () => {
        const r = await refusal(() =>
          asKubegc.core.createNamespacedConfigMap({ namespace: ns, body }),
        );
        return r.message.includes(GUARDRAILS_PREFIX) ? r : undefined;
      },
    );
    expect(byPolicy.code).toBe(403);
    expect(byPolicy.message).toContain(
      `${GUARDRAILS_PREFIX} CREATE of configmaps ${ns}/created refused: kubegc creates only Events`,
    );
    expect(await configMapNames(c, ns)).not.toContain('created');
  });

  test("CONNECT (a DELETE through pods/proxy, which RBAC's delete on */* allows): 403 naming the policy", async () => {
    await pod(c, ns, 'target-pod');
    const r = await refusal(() =>
      asKubegc.core.connectDeleteNamespacedPodProxy({ namespace: ns, name: 'target-pod' }),
    );
    expect(r.code).toBe(403);
    expect(r.message).toContain(
      `${GUARDRAILS_PREFIX} CONNECT to pods/proxy ${ns}/target-pod refused`,
    );
  });
});

/**
 * Runs `test` against kubegc as a service account of its own (in a new
 * namespace), bound to deploy/controller/rbac.yaml's ClusterRole as applied
 * except that `verb` ('delete', or 'list' with 'watch') is granted only on the
 * API groups served now, so not on `group`, whose CRD is created right after
 * kubegc starts (RBAC cannot subtract a group from '*'). Cleans up after.
 */
async function withLimitedKubegc(
  prefix: string,
  crdNames: { group: string; plural: string; kind: string },
  verb: 'delete' | 'list',
  test: (proc: KubegcProcess, ns: string, user: string) => Promise<void>,
): Promise<void> {
  const { group, plural, kind } = crdNames;
  const ns = await namespace(prefix);
  const sa = { namespace: ns, name: 'kubegc-limited' };
  const role = `kubegc-limited-${ns}`;
  let limited: KubegcProcess | undefined;
  try {
    const narrowed = verb === 'list' ? ['list', 'watch'] : ['delete'];
    await c.core.createNamespacedServiceAccount({
      namespace: ns,
      body: { metadata: { name: sa.name } },
    });
    const groups = (await c.kc.makeApiClient(k8s.ApisApi).getAPIVersions()).groups.map(
      (g) => g.name,
    );
    expect(groups).not.toContain(group);
    const shipped = await c.rbac.readClusterRole({ name: 'kubegc-controller' });
    const rules = (shipped.rules ?? []).flatMap((r): k8s.V1PolicyRule[] =>
      r.verbs.includes(narrowed[0] ?? '') && (r.apiGroups ?? []).includes('*')
        ? [
            { ...r, verbs: r.verbs.filter((v) => !narrowed.includes(v)) },
            { ...r, apiGroups: ['', ...groups], verbs: narrowed },
          ]
        : [r],
    );
    expect(rules.length).toBe((shipped.rules ?? []).length + 1);
    await c.rbac.createClusterRole({ body: { metadata: { name: role }, rules } });
    await c.rbac.createClusterRoleBinding({
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', ...sa }],
      },
    });
    // Another service account than kubegc's: RBAC, not the guardrails, refuses here.
    limited = await startController(cluster, [], {
      kubeconfig: await serviceAccountKubeconfig(cluster, sa),
    });
    await ext.createCustomResourceDefinition({ body: crd(group, plural, kind) });
    await test(limited, ns, serviceAccountUser(sa));
  } finally {
    await limited?.stop();
    await c.rbac.deleteClusterRoleBinding({ name: role }).catch(() => undefined);
    await c.rbac.deleteClusterRole({ name: role }).catch(() => undefined);
    await ext.deleteCustomResourceDefinition({ name: `${plural}.${group}` }).catch(() => undefined);
  }
}

// deploy/node/rbac.yaml and kubegc-node-guardrails: the node DaemonSet's token
// creates Events about its Node in `default`, and nothing else. Written with
// kubegc's own API client, Events shaped as src/shared/events.ts shapes them, as
// server dry runs: they pass RBAC and admission as the real write would, and
// leave nothing behind.
describe("the node DaemonSet's token, directly", () => {
  const NODE_USER = serviceAccountUser(KUBEGC_NODE_SERVICE_ACCOUNT);
  const nodeA = `guard-node-a-${SUFFIX}`;
  const nodeB = `guard-node-b-${SUFFIX}`;
  let asNode: KubeClient;

  const client = async (kubeconfig: string): Promise<KubeClient> =>
    KubeClient.create(await loadKubeConfig(kubeconfig), { userAgent: 'kubegc-e2e guardrails' });

  /** An Event as src/shared/events.ts writes it. */
  const event = (namespace: string, regarding: Regarding, reportingController = 'kubegc') => ({
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: `guard.${Date.now().toString(16)}`, namespace },
    // MicroTime: the API server wants six digits of fraction.
    eventTime: new Date().toISOString().replace(/(\.\d{3})Z$/, '$1000Z'),
    reportingController,
    reportingInstance: 'kubegc-guard',
    action: 'ImageGarbageCollect',
    reason: 'FreeDiskSpaceFailed',
    type: 'Warning',
    note: 'guardrails e2e',
    regarding,
  });
  const aboutNode = (name: string): Regarding => ({
    apiVersion: 'v1',
    kind: 'Node',
    name,
    uid: name,
  });

  /** A server dry run of the write: its status (201/200 when allowed) and the server's message. */
  async function write(
    as: KubeClient,
    method: 'POST' | 'PATCH',
    path: string,
    body: unknown,
  ): Promise<{ status: number; message: string }> {
    try {
      await as.request(method, path, {
        body,
        query: { dryRun: 'All' },
        ...(method === 'PATCH' ? { contentType: 'application/merge-patch+json' } : {}),
      });
      return { status: 200, message: '' };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return { status: err.status, message: err.message };
    }
  }
  const createEvent = (as: KubeClient, namespace: string, body: unknown) =>
    write(as, 'POST', `/apis/events.k8s.io/v1/namespaces/${namespace}/events`, body);

  beforeAll(async () => {
    asNode = await client(await serviceAccountKubeconfig(cluster, KUBEGC_NODE_SERVICE_ACCOUNT));
    // The global setup waited for the controller's policy; this one loads on its own time.
    await waitFor('kubegc-node-guardrails to be in force', async () => {
      const pod = { apiVersion: 'v1', kind: 'Pod', namespace: 'default', name: 'x', uid: 'x' };
      const r = await createEvent(asNode, 'default', event('default', pod));
      return r.message.includes(GUARDRAILS_PREFIX);
    });
  });

  test('an Event about a Node in default: allowed; about a Pod, or reported by another controller: 403 naming the policy', async () => {
    expect(await createEvent(asNode, 'default', event('default', aboutNode(nodeA)))).toEqual({
      status: 200,
      message: '',
    });
    const pod = await createEvent(
      asNode,
      'default',
      event('default', {
        apiVersion: 'v1',
        kind: 'Pod',
        namespace: 'default',
        name: 'web',
        uid: 'u1',
      }),
    );
    expect(pod.status).toBe(403);
    expect(pod.message).toContain(
      `${GUARDRAILS_PREFIX} CREATE of an Event in namespace default about Pod default/web refused: kubegc node records Events only about Nodes`,
    );
    const foreign = await createEvent(
      asNode,
      'default',
      event('default', aboutNode(nodeA), 'kubelet'),
    );
    expect(foreign.status).toBe(403);
    expect(foreign.message).toContain('as reportingController kubegc');
  });

  test('Events elsewhere, core Events, a PATCH of an Event: refused by RBAC (a Role in default, create only)', async () => {
    const ns = await namespace('guard-node');
    const elsewhere = await createEvent(asNode, ns, event(ns, aboutNode(nodeA)));
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.message).toContain(
      `User "${NODE_USER}" cannot create resource "events" in API group "events.k8s.io" in the namespace "${ns}"`,
    );
    const core = await write(asNode, 'POST', '/api/v1/namespaces/default/events', {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `guard.${Date.now().toString(16)}` },
      involvedObject: aboutNode(nodeA),
      reason: 'FreeDiskSpaceFailed',
    });
    expect(core.status).toBe(403);
    expect(core.message).toContain('cannot create resource "events" in API group ""');
    const patch = await write(
      asNode,
      'PATCH',
      '/apis/events.k8s.io/v1/namespaces/default/events/anything',
      { note: 'x' },
    );
    expect(patch.status).toBe(403);
    expect(patch.message).toContain('cannot patch resource "events"');
  });

  test("a token bound to the DaemonSet's pod on one node: Events about that Node only", async () => {
    // A Node object (no kubelet behind it) and a pod bound to it that never runs.
    await c.core.createNode({ body: { metadata: { name: nodeA } } });
    const pod = await c.core.createNamespacedPod({
      namespace: KUBEGC_NODE_SERVICE_ACCOUNT.namespace,
      body: {
        metadata: { name: `guard-${SUFFIX}` },
        spec: {
          serviceAccountName: KUBEGC_NODE_SERVICE_ACCOUNT.name,
          automountServiceAccountToken: false,
          nodeName: nodeA,
          containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
        },
      },
    });
    try {
      const bound = await client(
        await mintServiceAccountKubeconfig(cluster, KUBEGC_NODE_SERVICE_ACCOUNT, 600, {
          name: pod.metadata?.name ?? '',
          uid: pod.metadata?.uid ?? '',
        }),
      );
      expect(await createEvent(bound, 'default', event('default', aboutNode(nodeA)))).toEqual({
        status: 200,
        message: '',
      });
      const other = await createEvent(bound, 'default', event('default', aboutNode(nodeB)));
      expect(other.status).toBe(403);
      expect(other.message).toContain(
        `${GUARDRAILS_PREFIX} CREATE of an Event about Node ${nodeB} refused: this token is of a pod on Node ${nodeA}, and kubegc node records Events only about its own Node`,
      );
      // kubegc's own recorder with that token, for real: its Node's event is
      // recorded in default, the other one refused (and logged, not thrown).
      const logged: string[] = [];
      const recorder = apiEventRecorder(
        bound,
        createLogger('warn', (l) => void logged.push(l)),
        'guard',
      );
      const note = `guardrails e2e ${SUFFIX}`;
      recorder.warning(aboutNode(nodeA), 'FreeDiskSpaceFailed', 'ImageGarbageCollect', note);
      recorder.warning(aboutNode(nodeB), 'FreeDiskSpaceFailed', 'ImageGarbageCollect', note);
      await recorder.drain?.();
      const recorded = (
        await c.kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: 'default' })
      ).items.filter((e) => e.note === note);
      expect(recorded.map((e) => e.regarding?.name)).toEqual([nodeA]);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain('could not record event');
      expect(logged[0]).toContain(`this token is of a pod on Node ${nodeA}`);
      for (const e of recorded)
        await c.kc
          .makeApiClient(k8s.EventsV1Api)
          .deleteNamespacedEvent({ namespace: 'default', name: e.metadata?.name ?? '' });
    } finally {
      await c.core.deleteNamespacedPod({
        namespace: KUBEGC_NODE_SERVICE_ACCOUNT.namespace,
        name: pod.metadata?.name ?? '',
        gracePeriodSeconds: 0,
      });
      await c.core.deleteNode({ name: nodeA });
    }
  });
});

describe('kubegc under an RBAC that denies it one resource', () => {
  test('RBAC that denies kubegc one resource: a Warning event on the object, no crash, everything else collected', async () => {
    // A second custom resource, whose group the limited role may not delete in.
    const group = `denied.${GROUP}`;
    const plural = `widgets${SUFFIX}`;
    const kind = `Widget${SUFFIX}`;
    await withLimitedKubegc(
      'guard-rbac',
      { group, plural, kind },
      'delete',
      async (proc, ns, user) => {
        await proc.waitForLog(
          'the denied resource to be watched',
          (l) => l.msg === 'started watching' && l.resource === `${plural}.${group}`,
          60_000,
        );

        const owner = await configMap(c, ns, 'owner');
        const denied = await customObject(group, plural, kind, ns, 'denied', [ownerRef(owner)]);
        const allowed = await configMap(c, ns, 'allowed', [ownerRef(owner)]);
        await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
        await waitFor('the allowed dependent to be collected', () => isGone(c, allowed));

        const event = await waitFor(
          'a GarbageCollectionForbidden Warning event on the denied object',
          async () => {
            const events = await c.kc
              .makeApiClient(k8s.EventsV1Api)
              .listNamespacedEvent({ namespace: ns });
            return events.items.find(
              (e) => e.reason === 'GarbageCollectionForbidden' && e.regarding?.uid === denied.uid,
            );
          },
        );
        expect(event.type).toBe('Warning');
        expect(event.reportingController).toBe('kubegc');
        expect(event.regarding).toMatchObject({ kind, name: 'denied', namespace: ns });
        expect(event.note).toContain(user);
        expect(event.note).toContain('cannot delete resource');
        expect(await readCustom(group, plural, denied)).toBeDefined();

        // Still running, still live, and still collecting everything else.
        expect(proc.child.exitCode).toBeNull();
        expect(proc.child.signalCode).toBeNull();
        expect((await httpGet(addresses(proc).health, '/healthz')).status).toBe(200);
        const owner2 = await configMap(c, ns, 'owner-2');
        const later = [
          await configMap(c, ns, 'later-cm', [ownerRef(owner2)]),
          await secret(c, ns, 'later-secret', [ownerRef(owner2)]),
        ];
        await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner-2' });
        for (const r of later)
          await waitFor(`${r.kind} ${r.name} to be collected`, () => isGone(c, r));
        expect(proc.child.exitCode).toBeNull();
        expect((await httpGet(addresses(proc).health, '/healthz')).status).toBe(200);
      },
    );
  });
  test('RBAC that denies kubegc list/watch of one resource: a WatchForbidden Warning event on its APIService within a discovery period, no crash, everything else collected', async () => {
    const group = `unlisted.${GROUP}`;
    const plural = `doodads${SUFFIX}`;
    const kind = `Doodad${SUFFIX}`;
    await withLimitedKubegc(
      'guard-rbac-list',
      { group, plural, kind },
      'list',
      async (proc, ns) => {
        // startController's --discovery-period is 5 s: the first round after the CRD
        // starts the informer, whose LIST is refused; the next one reports it.
        const event = await waitFor(
          'a WatchForbidden Warning event on the APIService',
          async () => {
            const events = await c.kc
              .makeApiClient(k8s.EventsV1Api)
              .listNamespacedEvent({ namespace: 'default' });
            // This run's resource (a reused cluster keeps earlier runs' events on the same APIService).
            return events.items.find(
              (e) =>
                e.reason === 'WatchForbidden' &&
                e.regarding?.name === `v1.${group}` &&
                e.note?.includes(`${plural}.${group}`),
            );
          },
          { timeoutMs: 60_000 },
        );
        expect(event.type).toBe('Warning');
        expect(event.note).toContain(`${plural}.${group}`);
        expect(event.note).toContain('grant list and watch');
        await proc.waitForLog(
          'the "watch forbidden" log line',
          (l) => l.msg === 'watch forbidden' && l.resource === `${plural}.${group}`,
          15_000,
        );

        // Still running and collecting everything else.
        const owner = await configMap(c, ns, 'owner');
        const dep = await configMap(c, ns, 'dep', [ownerRef(owner)]);
        await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
        await waitFor('the dependent to be collected', () => isGone(c, dep));
        expect(proc.child.exitCode).toBeNull();
        expect((await httpGet(addresses(proc).health, '/healthz')).status).toBe(200);
      },
    );
  });
});
