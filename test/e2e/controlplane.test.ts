// Proves the local control plane is real: a real apiserver answers, a real
// kube-controller-manager creates dependents, and its garbage collector is off
// (which is why kubegc exists) unless we start one that runs it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import { CONTROLLERS_GC_ONLY, startExtraControllerManager } from '../../cluster/controlplane.ts';
import { exists, staysTrue, testNamespace, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { deploymentBody } from '../support/objects.ts';

const execFileAsync = promisify(execFile);

const { cluster, c } = await e2e();

/** Creates a Deployment and waits until kube-controller-manager made its ReplicaSet and Pods. */
async function deploymentWithDependents(
  namespace: string,
  name: string,
): Promise<{ rs: k8s.V1ReplicaSet; rsName: string; pods: k8s.V1Pod[] }> {
  const d = await c.apps.createNamespacedDeployment({ namespace, body: deploymentBody(name, 2) });
  const rs = await waitFor('the ReplicaSet made by the deployment controller', async () => {
    const list = await c.apps.listNamespacedReplicaSet({ namespace });
    return list.items.find((r) =>
      r.metadata?.ownerReferences?.some((o) => o.uid === d.metadata?.uid),
    );
  });
  const pods = await waitFor('2 Pods made by the replicaset controller', async () => {
    const list = await c.core.listNamespacedPod({ namespace });
    const owned = list.items.filter((p) =>
      p.metadata?.ownerReferences?.some((o) => o.uid === rs.metadata?.uid),
    );
    return owned.length === 2 ? owned : undefined;
  });
  return { rs, rsName: rs.metadata?.name ?? '', pods };
}

test('kube-apiserver is ready, as the built kubectl sees it', async () => {
  const { stdout } = await execFileAsync(cluster.kubectl, [
    '--kubeconfig',
    cluster.kubeconfig,
    'get',
    '--raw',
    '/readyz',
  ]);
  expect(stdout.trim()).toBe('ok');
  const { stdout: version } = await execFileAsync(cluster.kubectl, [
    '--kubeconfig',
    cluster.kubeconfig,
    'version',
    '-o',
    'json',
  ]);
  expect(
    (JSON.parse(version) as { serverVersion: { gitVersion: string } }).serverVersion.gitVersion,
  ).toBe(cluster.version);
});

test('without a garbage collector, a Background delete of a Deployment leaves its ReplicaSet and Pods', async () => {
  const namespace = await testNamespace(c.core, 'cp-nogc');
  const { rs, rsName, pods } = await deploymentWithDependents(namespace, 'web');
  expect(rs.metadata?.ownerReferences?.[0]).toMatchObject({
    kind: 'Deployment',
    name: 'web',
    controller: true,
  });

  await c.apps.deleteNamespacedDeployment({
    namespace,
    name: 'web',
    propagationPolicy: 'Background',
  });
  await waitFor(
    'the Deployment to be gone',
    async () => !(await exists(() => c.apps.readNamespacedDeployment({ namespace, name: 'web' }))),
  );

  // Nothing will ever collect them: the ReplicaSet and Pods must stay for a
  // while longer than the built-in GC needs (it collects within ~2 s, below).
  await staysTrue(
    'the ReplicaSet to exist',
    () => exists(() => c.apps.readNamespacedReplicaSet({ namespace, name: rsName })),
    10_000,
  );
  const left = await c.core.listNamespacedPod({ namespace });
  expect(left.items.map((p) => p.metadata?.uid).sort()).toEqual(
    pods.map((p) => p.metadata?.uid).sort(),
  );
});

test('with the built-in garbage collector running, the same delete collects the ReplicaSet and Pods', async () => {
  const namespace = await testNamespace(c.core, 'cp-builtin-gc');
  const gc = await startExtraControllerManager(
    cluster,
    'kube-controller-manager-gc-only',
    CONTROLLERS_GC_ONLY,
  );
  try {
    const { rsName } = await deploymentWithDependents(namespace, 'web');
    await c.apps.deleteNamespacedDeployment({
      namespace,
      name: 'web',
      propagationPolicy: 'Background',
    });
    await waitFor(
      'the built-in GC to collect the ReplicaSet and its Pods',
      async () => {
        const rsLeft = await exists(() =>
          c.apps.readNamespacedReplicaSet({ namespace, name: rsName }),
        );
        const pods = await c.core.listNamespacedPod({ namespace });
        return !rsLeft && pods.items.length === 0;
      },
      { timeoutMs: 120_000 },
    );
  } finally {
    await gc.stop();
  }
});
