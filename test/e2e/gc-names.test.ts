// Owners whose names hold field selector syntax (issue 19, item 3). kubegc
// reads an object live with a LIST of its name (src/gc/operations.ts getMeta);
// RBAC names need only be valid path segments, so `,` `=` `\` are legal in
// them. Unescaped, `reader,writer` was a malformed selector (400 on every
// read: its Foreground deletion never finished), and `x,metadata.name!=x` a
// valid one matching nothing (a live owner taken for gone, its dependents
// deleted). The collector runs in this process, as kubegc's service account
// (deploy/'s RBAC and the guardrails); each test failed before the fix.
import * as k8s from '@kubernetes/client-node';
import { statusOf, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { inProcessGc } from '../support/in-process-gc.ts';
import { configMap, isGone, ownerRef, read, refOf } from '../support/objects.ts';

const RBAC = 'rbac.authorization.k8s.io/v1';

const { cluster, c, namespace } = await e2e();
const g = await inProcessGc(cluster, { userAgent: 'kubegc-e2e-names' });
const { gc, observed } = g;

/** Removes a ClusterRole left by an earlier run of this file (finalizers first), as the admin. */
async function removeClusterRole(name: string): Promise<void> {
  try {
    await c.rbac.patchClusterRole(
      { name, body: { metadata: { finalizers: null } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await c.rbac.deleteClusterRole({ name });
  } catch (err) {
    if (statusOf(err) !== 404) throw err;
  }
  await waitFor(`the leftover ClusterRole ${name} to be gone`, async () => {
    try {
      await c.rbac.readClusterRole({ name });
      return false;
    } catch (err) {
      return statusOf(err) === 404;
    }
  });
}

test('a ClusterRole named "reader,writer" deleted with Foreground: its blocking dependent and then it are collected', async () => {
  const name = 'reader,writer';
  await removeClusterRole(name);
  const ns = await namespace('names-fg');
  try {
    // No rules: nothing for RBAC's escalation check to weigh.
    const cr = await c.rbac.createClusterRole({ body: { metadata: { name }, rules: [] } });
    const owner = refOf(RBAC, 'ClusterRole', cr.metadata);
    // A namespaced dependent of a cluster-scoped owner is valid.
    const d = await configMap(c, ns, 'dependent', [ownerRef(owner, { blockOwnerDeletion: true })]);
    await observed(owner, d);
    await c.rbac.deleteClusterRole({ name, body: { propagationPolicy: 'Foreground' } });
    await waitFor('the dependent to be collected', () => isGone(c, d), { timeoutMs: 30_000 });
    await waitFor('the ClusterRole to be gone', () => isGone(c, owner), { timeoutMs: 30_000 });
  } finally {
    await removeClusterRole(name);
  }
});

test('a live Role named "x,metadata.name!=x": its dependent, decided from a live read of it, is kept', async () => {
  const ns = await namespace('names-live');
  const name = 'x,metadata.name!=x';
  // The Role lives: it has an owner of its own, which exists.
  const keeper = await configMap(c, ns, 'keeper');
  const role = await c.rbac.createNamespacedRole({
    namespace: ns,
    body: { metadata: { name, ownerReferences: [ownerRef(keeper)] }, rules: [] },
  });
  const owner = refOf(RBAC, 'Role', role.metadata);
  const d = await configMap(c, ns, 'dependent', [ownerRef(owner, { blockOwnerDeletion: true })]);
  await observed(keeper, owner, d);

  // kubegc's live read of the Role: a LIST of the roles in ns by its name.
  let asked = 0;
  g.intercept = (r) => {
    if (
      r.method === 'GET' &&
      r.verb === 'GET' &&
      r.path.endsWith(`/apis/${RBAC}/namespaces/${ns}/roles`) &&
      String(r.query?.fieldSelector ?? '').startsWith('metadata.name=x')
    )
      asked++;
  };
  // An update event (as the reproduction), and the dependent queued for a decision.
  const patched = await c.core.patchNamespacedConfigMap(
    {
      name: 'dependent',
      namespace: ns,
      body: { metadata: { ownerReferences: [ownerRef(owner, { blockOwnerDeletion: false })] } },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  gc.deleteQueue.add(d.uid, 'user');
  await waitFor('the graph to see the update', () =>
    Promise.resolve(gc.graph.get(d.uid)?.resourceVersion === patched.metadata?.resourceVersion),
  );
  await waitFor('kubegc to read the Role live', () => Promise.resolve(asked > 0));
  await g.decided();
  const dep = await read(c, d);
  expect(dep).toBeDefined();
  expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
  expect(await read(c, owner)).toBeDefined();
});
