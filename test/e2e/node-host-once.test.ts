// `kubegc node --once` on a real kubelet node with a wrong node name: a name
// the API has no Node of, and the name of another Node, both answer a pod
// LIST by spec.nodeName with none of this node's pods. Neither may make them
// look deleted: a Succeeded pod's dead container, its sandbox and its
// /var/log/pods directory stay, and the right name lists them again. kubegc
// runs from source on the host, against the node's containerd (as a systemd
// unit or a `--once` by hand would, without the DaemonSet's NODE_NAME), as
// the node's service account (deploy/node/rbac.yaml: the Node is read with it).
//
// And the kubelet's pulled-image records (KEP-2535, KubeletEnsureSecretPulledImages,
// beta and on by default in v1.35) after kubegc removes a private image: the
// kubelet recorded which Secret pulled it; kubegc removes the image over CRI
// and leaves the record (docs/node-gc.md, "The kubelet's pulled-image
// records"); a pod without the Secret then cannot have the image (the
// kubelet pulls with the pod's own credentials, and the registry refuses), as
// after the kubelet's own removal, and a pod with the Secret pulls it again.
// The private registry is an authenticating proxy of this file's own in front
// of the node's registry, on the node address.
//
// Both run `kubegc node --once` on the host against one control plane and
// node of their own (.cluster-e2e-host-once), taken down at the end.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { NODE_IP, REPO_ROOT, down, up, type Cluster } from '../../cluster/controlplane.ts';
import { CONTAINERD, downNode, upNode } from '../../cluster/node.ts';
import { hostToolsLayer, randomLayer, type ImageSpec } from '../../cluster/oci-image.ts';
import { REGISTRY_PORT, hostsToml, pushImageSpec, registryPaths } from '../../cluster/registry.ts';
import { CriClient } from '../../src/node/cri/client.ts';
import { POD_UID_LABEL } from '../../src/node/container-gc-policy.ts';
import { clients, testNamespace, waitFor } from '../support/cluster.ts';
import { runKubegc } from '../support/kubegc.ts';
import {
  applyKubegcServiceAccount,
  mintServiceAccountKubeconfig,
} from '../support/service-account.ts';
import { EVERY_UNPROTECTED_IMAGE, wrap, type NodeRun } from '../support/kubegc-node.ts';
import { importNodeImages, podReady } from '../support/local-node.ts';

const DIR = path.join(REPO_ROOT, '.cluster-e2e-host-once');
const POD_LOGS = '/var/log/pods';
const JOB: ImageSpec = {
  name: 'kubegc.test/wn-job:1',
  layers: [hostToolsLayer(['/bin/sleep', '/bin/true'])],
  entrypoint: ['/bin/true'],
};
const PRIVATE_PORT = 5443;
const PRIVATE_HOST = `${NODE_IP}:${PRIVATE_PORT}`;
const USER = 'puller';
const PASSWORD = 'kubegc-test-password';
const REPO = 'private/app';
const IMAGE = `${PRIVATE_HOST}/${REPO}:1`;
const APP: ImageSpec = {
  name: 'unused',
  layers: [hostToolsLayer(['/bin/sleep']), randomLayer(1 << 20)],
  entrypoint: ['/bin/sleep', '3600'],
};
const log = (l: string): void => void process.stderr.write(`\nnode-host-once: ${l}`);

let cluster: Cluster;
let core: k8s.CoreV1Api;
let nodeName = '';
let cri: CriClient;
/** deploy/node/rbac.yaml's ServiceAccount. */
let nodeKubeconfig = '';
let proxy: https.Server | undefined;
let kubeletRoot = '';
let privateHostsDir = '';

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

/**
 * A registry that asks for Basic credentials and passes every authorised
 * request to the node's registry: what a private registry looks like to
 * containerd (a 401 with a Basic challenge, then the pull with the
 * credentials the kubelet hands it from the pod's Secret).
 */
async function startPrivateRegistry(nodeDir: string, caFile: string): Promise<https.Server> {
  const r = registryPaths(nodeDir);
  const expected = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
  const ca = readFileSync(caFile);
  const server = https.createServer(
    {
      cert: readFileSync(path.join(r.pki, 'registry.crt')),
      key: readFileSync(path.join(r.pki, 'registry.key')),
    },
    (req, res) => {
      if (req.headers.authorization !== expected) {
        res.writeHead(401, { 'www-authenticate': `Basic realm="${PRIVATE_HOST}"` }).end();
        return;
      }
      const upstream = https.request(
        {
          host: NODE_IP,
          port: REGISTRY_PORT,
          path: req.url,
          method: req.method,
          headers: { ...req.headers, host: `${NODE_IP}:${REGISTRY_PORT}` },
          ca,
        },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', () => res.writeHead(502).end());
      req.pipe(upstream);
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(PRIVATE_PORT, NODE_IP, resolve);
  });
  // containerd reads a host's directory at each pull: trust the cluster CA for it.
  const dir = path.join(r.hostsDir, PRIVATE_HOST);
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(
    path.join(dir, 'hosts.toml'),
    hostsToml(caFile).replaceAll(`${NODE_IP}:${REGISTRY_PORT}`, PRIVATE_HOST),
  );
  privateHostsDir = dir;
  return server;
}

/** The kubelet's record file for an image ID (pullmanager's fs_pullrecords.go naming). */
function pulledRecordFile(imageId: string): string {
  return path.join(
    kubeletRoot,
    'image_manager',
    'pulled',
    `sha256-${createHash('sha256').update(imageId).digest('hex')}`,
  );
}

/** The image ID the runtime gives a reference (CRI ListImages), or undefined once it is gone. */
async function imageId(ref: string): Promise<string | undefined> {
  const cri = new CriClient(`unix://${CONTAINERD.socket}`, { timeoutMs: 30_000 });
  try {
    return (await cri.listImages()).find((i) => i.repoTags.includes(ref))?.id;
  } finally {
    cri.close();
  }
}

async function pod(ns: string, name: string, withSecret: boolean): Promise<void> {
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name },
      spec: {
        ...(withSecret ? { imagePullSecrets: [{ name: 'private' }] } : {}),
        containers: [{ name: 'app', image: IMAGE, imagePullPolicy: 'IfNotPresent' }],
        terminationGracePeriodSeconds: 0,
      },
    },
  });
}

/** Running, or the reason its container waits (ErrImagePull, ImagePullBackOff...). */
async function podState(ns: string, name: string): Promise<string> {
  const p = await core.readNamespacedPod({ namespace: ns, name });
  if (p.status?.phase === 'Running') return 'Running';
  return p.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? p.status?.phase ?? '';
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
  kubeletRoot = path.join(path.resolve(DIR), 'node', 'kubelet');
  await pushImageSpec(node.registryCa, APP, REPO, '1');
  proxy = await startPrivateRegistry(node.dir, node.registryCa);
}, 1_800_000);

afterAll(async () => {
  cri?.close();
  await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
  if (privateHostsDir) await fs.rm(privateHostsDir, { recursive: true, force: true });
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

/**
 * `kubegc node --once` on the node's containerd as the node's service
 * account, pressure reclaim off and the endpoints off, with `extra` (its
 * image GC flags and pins), to its exit. For the image tests; the wrong-name
 * test has its own (`once`), with the image pass off.
 */
async function imageOnce(extra: string[]): Promise<NodeRun> {
  const proc = runKubegc(
    [
      'node',
      '--once',
      '--cri-endpoint',
      `unix://${CONTAINERD.socket}`,
      '--node-name',
      nodeName,
      '--kubeconfig',
      nodeKubeconfig,
      '--metrics-bind-address',
      '0',
      '--health-probe-bind-address',
      '0',
      '--pressure-check-period',
      '0',
      '--root-dir',
      kubeletRoot,
      ...extra,
    ],
    { ...process.env, KUBERNETES_SERVICE_HOST: '', NODE_NAME: '' },
  );
  const code = await new Promise<number | null>((r) => proc.child.on('close', r));
  return wrap(code, proc);
}

test("a private image pulled with a Secret, removed by kubegc: the kubelet's record stays, a pod without the Secret cannot have the image (as after the kubelet's own removal), a pod with it pulls it again", async () => {
  const ns = await testNamespace(core, 'pulled');
  await core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: 'private' },
      type: 'kubernetes.io/dockerconfigjson',
      stringData: {
        '.dockerconfigjson': JSON.stringify({
          auths: { [PRIVATE_HOST]: { username: USER, password: PASSWORD } },
        }),
      },
    },
  });

  // The registry refuses a pull without credentials: a pod without the Secret waits.
  await pod(ns, 'first-without', false);
  await waitFor(
    'the pod without the Secret to fail its pull',
    async () => /ErrImagePull|ImagePullBackOff/.test(await podState(ns, 'first-without')),
    { timeoutMs: 120_000 },
  );

  await pod(ns, 'with-secret', true);
  await waitFor(
    'the pod with the Secret to run',
    async () => (await podState(ns, 'with-secret')) === 'Running',
    { timeoutMs: 120_000 },
  );
  const id = (await imageId(IMAGE)) ?? '';
  expect(id).toMatch(/^sha256:/);
  const record = pulledRecordFile(id);
  await waitFor('the kubelet to write its pulled record', () =>
    Promise.resolve(existsSync(record)),
  );
  const recorded = JSON.parse(await fs.readFile(record, 'utf8')) as {
    imageRef?: string;
    credentialMapping?: Record<string, unknown>;
  };
  expect(recorded.imageRef).toBe(id);
  log(`the kubelet's record for ${id}: ${JSON.stringify(recorded)}`);

  // No pod uses it any more; kubegc (one pass, as the node's own agent would
  // run it, with API access) removes it. Everything else on the node is pinned.
  for (const name of ['with-secret', 'first-without'])
    await core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
  await waitFor(
    'the pods to be gone',
    async () => (await core.listNamespacedPod({ namespace: ns })).items.length === 0,
    { timeoutMs: 120_000 },
  );
  const args = [
    '--minimum-container-ttl-duration',
    '0s',
    '--pinned-images',
    `registry.k8s.io/*,${NODE_IP}:${REGISTRY_PORT}/*,kubegc.test/*,docker.io/*`,
    ...EVERY_UNPROTECTED_IMAGE,
  ];
  // A deleted pod's dead containers keep the image until the container pass
  // of the same run removes them; the image goes in that pass or the next.
  await waitFor(
    'kubegc node --once to remove the private image',
    async () => {
      await imageOnce(args);
      return (await imageId(IMAGE)) === undefined;
    },
    { timeoutMs: 120_000, intervalMs: 1000 },
  );
  expect(await imageId(IMAGE)).toBeUndefined();
  // The record stays: the kubelet prunes records of absent images in its own
  // GC and reclaim only, and answers from memory meanwhile.
  expect(existsSync(record)).toBe(true);

  // Without the Secret: absent, so the kubelet pulls with no credentials and the registry refuses.
  await pod(ns, 'after-without', false);
  await waitFor(
    'the pod without the Secret to fail its pull after the removal',
    async () => /ErrImagePull|ImagePullBackOff/.test(await podState(ns, 'after-without')),
    { timeoutMs: 120_000 },
  );
  expect(await imageId(IMAGE)).toBeUndefined();
  // With it: pulled again.
  await pod(ns, 'after-with', true);
  await waitFor(
    'the pod with the Secret to run again',
    async () => (await podState(ns, 'after-with')) === 'Running',
    { timeoutMs: 120_000 },
  );
  expect(await imageId(IMAGE)).toBe(id);
}, 900_000);

/** Images of this test alone: every other image on the node is pinned in its runs. */
const EB_DEPLOY: ImageSpec = {
  name: 'kubegc.test/eb-deploy:1',
  layers: [hostToolsLayer(['/bin/sleep']), randomLayer(1 << 20)],
  entrypoint: ['/bin/sleep', '3600'],
};
const EB_BARE: ImageSpec = {
  name: 'kubegc.test/eb-bare:1',
  layers: [hostToolsLayer(['/bin/sleep']), randomLayer(1 << 20)],
  entrypoint: ['/bin/sleep', '3600'],
};

test("images expected back, read on the real API as the node reads them: a Deployment scaled to 0 keeps its image through the maximum-age pass (its pod, ReplicaSet and Deployment by GET), a bare pod's image goes; with --expected-back-images=false it goes too", async () => {
  const ns = await testNamespace(core, 'expected-back');
  const { apps } = clients(cluster);
  await importNodeImages([EB_DEPLOY, EB_BARE]);
  const spec = (image: string): k8s.V1PodSpec => ({
    terminationGracePeriodSeconds: 0,
    containers: [{ name: 'main', image, imagePullPolicy: 'Never' }],
  });
  await apps.createNamespacedDeployment({
    namespace: ns,
    body: {
      metadata: { name: 'keep' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'keep' } },
        template: { metadata: { labels: { app: 'keep' } }, spec: spec(EB_DEPLOY.name) },
      },
    },
  });
  await core.createNamespacedPod({
    namespace: ns,
    body: { metadata: { name: 'bare' }, spec: spec(EB_BARE.name) },
  });
  await waitFor(
    'the Deployment pod and the bare pod to run',
    async () =>
      (await core.listNamespacedPod({ namespace: ns })).items.filter(podReady).length === 2,
    { timeoutMs: 120_000 },
  );
  const state = path.join(DIR, 'expected-back-state.json');
  const pins = `registry.k8s.io/*,${NODE_IP}:${REGISTRY_PORT}/*,${PRIVATE_HOST}/*,docker.io/*,kubegc.test/wn-*`;
  const run = (extra: string[]): Promise<NodeRun> =>
    imageOnce([
      '--state-file',
      state,
      '--pinned-images',
      pins,
      // No space pass: only the maximum age removes images here.
      '--image-gc-high-threshold',
      '100',
      '--image-gc-low-threshold',
      '99',
      ...extra,
    ]);
  const present = async (name: string): Promise<boolean> =>
    (await cri.listImages()).some((i) => i.repoTags.includes(name));

  // While both run: the state file records each image's last user. (A
  // maximum age, far off, keeps the image pass on: high threshold 100 without
  // one is the kubelet's "image GC off".)
  expect((await run(['--image-maximum-gc-age', '1000h'])).code).toBe(0);
  const recorded = JSON.parse(await fs.readFile(state, 'utf8')) as {
    images: Record<string, { lastUser?: { namespace: string; owner: { kind: string } } }>;
  };
  const users = Object.values(recorded.images).flatMap((r) => (r.lastUser ? [r.lastUser] : []));
  expect(users).toEqual([
    { namespace: ns, owner: expect.objectContaining({ kind: 'ReplicaSet' }) },
  ]);

  // The Deployment scaled to 0 (it still names its image), the bare pod deleted.
  const d = await apps.readNamespacedDeployment({ namespace: ns, name: 'keep' });
  if (!d.spec) throw new Error('the Deployment came back without a spec');
  d.spec.replicas = 0;
  await apps.replaceNamespacedDeployment({ namespace: ns, name: 'keep', body: d });
  await core.deleteNamespacedPod({ namespace: ns, name: 'bare', gracePeriodSeconds: 0 });
  await waitFor(
    'the pods to be gone',
    async () => (await core.listNamespacedPod({ namespace: ns })).items.length === 0,
    { timeoutMs: 120_000 },
  );

  // A maximum age of 1 ms (counted from the state file's load, the run's
  // start): every unused image is past it. The dead containers go first
  // (their pods are deleted), so the image may go in the next run.
  const ageOut = [
    '--image-minimum-gc-age',
    '0s',
    '--image-maximum-gc-age',
    '1ms',
    '--minimum-container-ttl-duration',
    '0s',
  ];
  const runs: NodeRun[] = [];
  await waitFor(
    "the bare pod's image to go by the maximum age",
    async () => {
      runs.push(await run(ageOut));
      return !(await present(EB_BARE.name));
    },
    { timeoutMs: 120_000, intervalMs: 1000 },
  );
  expect(await present(EB_DEPLOY.name)).toBe(true);
  // Once more, with the dead containers long gone: still kept, as expected back.
  runs.push(await run(ageOut));
  expect(await present(EB_DEPLOY.name)).toBe(true);
  log(`expected-back runs: ${runs.map((r) => r.removedImages().length).join(', ')} images removed`);

  // The feature off: the same pass takes it.
  await run([...ageOut, '--expected-back-images=false']);
  expect(await present(EB_DEPLOY.name)).toBe(false);
  await core.deleteNamespace({ name: ns });
});
