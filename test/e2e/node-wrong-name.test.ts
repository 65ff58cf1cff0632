// `kubegc node --once` on a real kubelet node with a wrong node name: a name
// the API has no Node of, and the name of another Node, both answer a pod
// LIST by spec.nodeName with none of this node's pods. Neither may make them
// look deleted: a Succeeded pod's dead container, its sandbox and its
// /var/log/pods directory stay, and the right name lists them again. kubegc
// runs from source on the host, against the node's containerd (as a systemd
// unit or a `--once` by hand would, without the DaemonSet's NODE_NAME), as
// the node's service account (deploy/node/rbac.yaml: the Node is read with it).
// Its own control plane and node (.cluster-e2e-wrong-name), taken down at the end.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, down, up, type Cluster } from '../../cluster/controlplane.ts';
import { CONTAINERD, downNode, upNode } from '../../cluster/node.ts';
import { hostToolsLayer, type ImageSpec } from '../../cluster/oci-image.ts';
import { CriClient } from '../../src/node/cri/client.ts';
import { POD_UID_LABEL } from '../../src/node/container-gc-policy.ts';
import { clients, testNamespace, waitFor } from '../support/cluster.ts';
import { runKubegc } from '../support/kubegc.ts';
import {
  applyKubegcServiceAccount,
  mintServiceAccountKubeconfig,
} from '../support/service-account.ts';
import { wrap, type NodeRun } from '../support/kubegc-node.ts';
import { importNodeImages, podReady } from '../support/local-node.ts';

const DIR = path.join(REPO_ROOT, '.cluster-e2e-wrong-name');
const POD_LOGS = '/var/log/pods';
const JOB: ImageSpec = {
  name: 'kubegc.test/wn-job:1',
  layers: [hostToolsLayer(['/bin/sleep', '/bin/true'])],
  entrypoint: ['/bin/true'],
};
const log = (l: string): void => void process.stderr.write(`\nnode-wrong-name: ${l}`);

let cluster: Cluster;
let core: k8s.CoreV1Api;
let nodeName = '';
let cri: CriClient;
/** deploy/node/rbac.yaml's ServiceAccount. */
let nodeKubeconfig = '';

/**
 * `kubegc node --once` on the node's containerd and log directories, with the
 * image pass off (high threshold 100, no maximum age: the node's images are
 * not this test's) and pressure reclaim off: only the container pass runs.
 */
async function once(name: string): Promise<NodeRun> {
  const proc = runKubegc(
    [
      'node',
      '--once',
      '--kubeconfig',
      nodeKubeconfig,
      '--node-name',
      name,
      '--cri-endpoint',
      `unix://${CONTAINERD.socket}`,
      '--pod-logs-dir',
      POD_LOGS,
      '--container-logs-dir',
      '/var/log/containers',
      '--image-gc-high-threshold',
      '100',
      '--image-gc-low-threshold',
      '99',
      '--pressure-check-period',
      '0',
      '--metrics-bind-address',
      '0',
      '--health-probe-bind-address',
      '0',
    ],
    { ...process.env, KUBERNETES_SERVICE_HOST: '', NODE_NAME: '' },
  );
  const closed = new Promise<number | null>((resolve) => proc.child.on('close', resolve));
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 120_000);
  const code = await closed;
  clearTimeout(timer);
  return wrap(code, proc);
}

/** A pod's containers and sandboxes in the node's containerd, by the kubelet's pod UID label. */
async function onNode(uid: string): Promise<{ containers: string[]; sandboxes: string[] }> {
  const [containers, sandboxes] = await Promise.all([cri.listContainers(), cri.listSandboxes()]);
  return {
    containers: containers.filter((c) => c.labels[POD_UID_LABEL] === uid).map((c) => c.id),
    sandboxes: sandboxes.filter((s) => s.labels[POD_UID_LABEL] === uid).map((s) => s.id),
  };
}

beforeAll(async () => {
  cluster = await up({ dir: DIR, log });
  const node = await upNode(cluster, { log });
  nodeName = node.name;
  core = clients(cluster).core;
  await applyKubegcServiceAccount(cluster, log);
  nodeKubeconfig = await mintServiceAccountKubeconfig(cluster, {
    namespace: 'kubegc-system',
    name: 'kubegc-node',
  });
  cri = new CriClient(`unix://${CONTAINERD.socket}`, { timeoutMs: 30_000 });
  await importNodeImages([JOB]);
}, 1_800_000);

afterAll(async () => {
  cri?.close();
  await downNode(DIR, log).catch((err: unknown) => log(`node teardown: ${String(err)}`));
  await down(DIR);
}, 300_000);

test("--node-name wrong, or another Node's name: a Succeeded pod's dead container, sandbox and log directory stay; the right name lists the pod again", async () => {
  const ns = await testNamespace(core, 'wrong-name');
  const pod = (name: string, command: string[], restartPolicy: string): k8s.V1Pod => ({
    metadata: { name },
    spec: {
      restartPolicy,
      containers: [{ name: 'main', image: JOB.name, imagePullPolicy: 'Never', command }],
    },
  });
  const done = await core.createNamespacedPod({
    namespace: ns,
    body: pod('done', ['/bin/true'], 'Never'),
  });
  // A pod that runs here while kubegc looks: its sandbox is READY.
  await core.createNamespacedPod({
    namespace: ns,
    body: pod('runs', ['/bin/sleep', '3600'], 'Always'),
  });
  await waitFor('the pod that runs to be ready', async () =>
    podReady(await core.readNamespacedPod({ namespace: ns, name: 'runs' })),
  );
  await waitFor('the completed pod to succeed', async () => {
    const p = await core.readNamespacedPod({ namespace: ns, name: 'done' });
    return p.status?.phase === 'Succeeded';
  });
  const uid = done.metadata?.uid ?? '';
  const logDirectory = path.join(POD_LOGS, `${ns}_done_${uid}`);
  // The kubelet stops a finished pod's sandbox shortly after its last container exits.
  await waitFor('its sandbox to stop', async () => {
    const sandboxes = await cri.listSandboxes();
    return sandboxes.some((s) => s.labels[POD_UID_LABEL] === uid && s.state === 'notready');
  });
  const before = await onNode(uid);
  expect(before.containers).toHaveLength(1);
  expect(before.sandboxes).toHaveLength(1);
  expect(existsSync(logDirectory)).toBe(true);
  const stays = async (): Promise<void> => {
    expect(await onNode(uid)).toEqual(before);
    expect(existsSync(logDirectory)).toBe(true);
  };

  // No Node of that name: the pod list is [] (the pods are bound to nodeName).
  const wrong = await once('wrong');
  await stays();
  expect(wrong.code).toBe(0);
  expect(wrong.logged('container GC pass done')[0]?.podsKnown).toBe(false);
  expect(wrong.lines.filter((l) => l.level === 'error')).toEqual([
    expect.objectContaining({
      msg: expect.stringMatching(/no Node "wrong"/),
      nameFrom: '--node-name',
    }),
    expect.objectContaining({ node: 'wrong', reason: 'node-not-found' }),
  ]);

  // A Node that exists, but not this one: its list names none of the pods running here.
  const other = `kubegc-e2e-other-${process.pid}`;
  await core.createNode({ body: { metadata: { name: other } } });
  try {
    const elsewhere = await once(other);
    await stays();
    expect(elsewhere.code).toBe(0);
    expect(elsewhere.logged('container GC pass done')[0]?.podsKnown).toBe(false);
    expect(elsewhere.lines.filter((l) => l.level === 'error')).toEqual([
      expect.objectContaining({ node: other, reason: 'ready-pods-unlisted' }),
    ]);
  } finally {
    await core.deleteNode({ name: other });
  }

  // The right name: the list is complete; the Pod exists, so its newest dead
  // container stays (`kubectl logs --previous`), as on the kubelet.
  const right = await once(nodeName);
  expect(right.code).toBe(0);
  expect(right.logged('container GC pass done')[0]?.podsKnown).toBe(true);
  await stays();
  await core.deleteNamespace({ name: ns });
});
