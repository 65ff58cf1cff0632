// Shapes the API server accepts that no controller writes (issue 32), against
// the real kube-apiserver with kubegc as its users run it (a child process, as
// its real service account). Each test failed on the code before its fix.
import * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';
import { clients, e2eCluster, testNamespace, waitFor, type Clients } from '../support/cluster.ts';
import { startController, type KubegcProcess } from '../support/kubegc.ts';
import { configMap, isGone, ownerRef, read, type Ref } from '../support/objects.ts';

let cluster: Cluster;
let c: Clients;
let gc: KubegcProcess;

beforeAll(async () => {
  cluster = await e2eCluster();
  c = clients(cluster);
  gc = await startController(cluster);
});

afterAll(async () => {
  await gc?.stop();
});

const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

async function ownerNames(r: Ref): Promise<string[] | undefined> {
  const obj = await read(c, r);
  return obj && (obj.metadata?.ownerReferences ?? []).map((o) => `${o.name}/${o.uid}`);
}

// Item 1. apimachinery's ValidateOwnerReferences does not check UIDs for
// duplicates, nor that a reference's name is the name of the object with
// that UID. kubegc once indexed an update's references by UID and stored
// [bogus, bogus] for [cm-x, bogus]: with `bogus` known absent, both copies
// were dangling and it deleted the dependent of a live owner.
test('two references with one UID, one naming a live owner and one naming nothing known absent: kept, only the reference naming nothing removed', async () => {
  const ns = await testNamespace(c.core, 'odd-shared-uid');
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
