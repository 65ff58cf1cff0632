// Shapes and answers the API server allows that no controller produces
// (issue 32), against the real kube-apiserver with kubegc as its users run it
// (a child process, as its real service account). Each test failed on the
// code before its fix.
import * as k8s from '@kubernetes/client-node';
import { admissionWebhook, notFound, type AdmissionRequest } from '../support/admission-webhook.ts';
import { waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { startController } from '../support/kubegc.ts';
import { configMap, isGone, ownerRef, read, type Ref } from '../support/objects.ts';
import { KUBEGC_USER } from '../support/service-account.ts';

const { cluster, c, namespace } = await e2e({ deleteNamespaces: true });
const gc = await startController(cluster);
afterFile(() => gc.stop());

const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

async function ownerNames(r: Ref): Promise<string[] | undefined> {
  const obj = await read(c, r);
  return obj && (obj.metadata?.ownerReferences ?? []).map((o) => `${o.name}/${o.uid}`);
}

/** Waits until `r` has no owner references left; fails at once if it is deleted. */
async function orphaned(r: Ref): Promise<void> {
  await waitFor(`${r.name} to have no owner references left`, async () => {
    const names = await ownerNames(r);
    if (names === undefined) throw new Error(`${r.name} was deleted`);
    return names.length === 0;
  });
}

// Item 1. apimachinery's ValidateOwnerReferences does not check UIDs for
// duplicates, nor that a reference's name is the name of the object with
// that UID. kubegc once indexed an update's references by UID and stored
// [bogus, bogus] for [cm-x, bogus]: with `bogus` known absent, both copies
// were dangling and it deleted the dependent of a live owner.
test('two references with one UID, one naming a live owner and one naming nothing known absent: kept, only the reference naming nothing removed', async () => {
  const ns = await namespace('odd-shared-uid');
  const x = await configMap(c, ns, 'cm-x');
  const other = await configMap(c, ns, 'other');
  const dependent = await configMap(c, ns, 'dependent', [ownerRef(other)]);
  const bogus = { ...x, name: 'bogus' };
  // `bogus` known absent beforehand: another object names it, kubegc reads
  // it live (404) and collects that object.
  const namer = await configMap(c, ns, 'namer', [ownerRef(bogus)]);
  await waitFor('kubegc to collect the object naming only bogus', () => isGone(c, namer));

  await c.core.patchNamespacedConfigMap(
    {
      name: dependent.name,
      namespace: ns,
      body: { metadata: { ownerReferences: [ownerRef(x), ownerRef(bogus)] } },
    },
    MERGE_PATCH,
  );

  // kubegc decides on it (the reference naming nothing goes); upstream's
  // patch by UID would remove both. Either way the object must stay.
  const after = await waitFor('kubegc to remove the reference naming nothing', async () => {
    const names = await ownerNames(dependent);
    if (names === undefined) throw new Error('the dependent of a live owner was deleted');
    return names.length === 1 ? names : undefined;
  });
  expect(after).toEqual([`cm-x/${x.uid}`]);
  expect(await read(c, x)).toBeDefined();
});

// Item 3. An admission webhook may deny a write with code 404 and the
// object's name. kubegc took a 404 on a finalizer PATCH for "gone" and never
// retried (the finalizer stayed for good), and a 404 on an orphaning PATCH for
// "the dependent is gone" (it kept its reference and was collected once the
// owner had gone). A 404 on any write now means "gone" only when a live read agrees.
const webhookNs = await namespace('odd-404');
const webhook = await admissionWebhook(c.kc, {
  name: `kubegc-e2e-odd-404-${process.pid}`,
  rules: [
    {
      operations: ['UPDATE'],
      apiGroups: [''],
      apiVersions: ['v1'],
      resources: ['configmaps'],
    },
  ],
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': webhookNs } },
});
await configMap(c, webhookNs, 'probe');
await webhook.untilCalled('the webhook to be called (a dry-run UPDATE)', () =>
  c.core.patchNamespacedConfigMap(
    { name: 'probe', namespace: webhookNs, dryRun: 'All', body: { data: { k: 'probe' } } },
    MERGE_PATCH,
  ),
);
/** kubegc's first UPDATE of the object named `name`, answered 404 naming it. */
const denyOnce = (name: string) =>
  webhook.on(
    (r: AdmissionRequest) => r.userInfo.username === KUBEGC_USER && r.name === name && !r.dryRun,
    notFound,
    { times: 1 },
  );

describe('a write of kubegc answered 404 by an admission webhook', () => {
  test('the foregroundDeletion finalizer PATCH: retried, the owner goes', async () => {
    const owner = await configMap(c, webhookNs, 'fg-owner');
    const dependent = await configMap(c, webhookNs, 'fg-dependent', [
      ownerRef(owner, { blockOwnerDeletion: true }),
    ]);
    const denied = denyOnce(owner.name);
    await c.core.deleteNamespacedConfigMap({
      name: owner.name,
      namespace: webhookNs,
      propagationPolicy: 'Foreground',
    });
    await waitFor('the dependent to be collected', () => isGone(c, dependent));
    await waitFor('the owner to be gone (its finalizer removed)', () => isGone(c, owner));
    expect(denied.matched).toBe(1);
  });

  test.each([
    ['the orphan finalizer PATCH', 'or', 'owner'],
    ["a dependent's orphaning PATCH", 'or2', 'dependent'],
  ] as const)(
    '%s: retried, the owner goes, its dependent orphaned (not collected)',
    async (_what, prefix, denied) => {
      const owner = await configMap(c, webhookNs, `${prefix}-owner`);
      const dependent = await configMap(c, webhookNs, `${prefix}-dependent`, [ownerRef(owner)]);
      const rule = denyOnce(denied === 'owner' ? owner.name : dependent.name);
      await c.core.deleteNamespacedConfigMap({
        name: owner.name,
        namespace: webhookNs,
        propagationPolicy: 'Orphan',
      });
      await waitFor('the owner to be gone (its finalizer removed)', () => isGone(c, owner));
      await orphaned(dependent);
      expect(rule.matched).toBe(1);
    },
  );
});
