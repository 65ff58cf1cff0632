// kubegc's node GC beside a kubelet with its default hard eviction
// (imagefs.available<15%) on a real node whose image filesystem is a 2 GiB
// tmpfs (a dedicated imagefs to the kubelet): unused images pushed at the disk
// step by step while a pod runs, more than the disk holds, and the node never
// reports DiskPressure, is never tainted, evicts nothing; the running pod's
// images, the pause image and kubegc's own stay. The user's path: the image
// built from the Dockerfile, `kubectl apply -k` of the deploy/ overlay, the
// kubelet configured as docs/node-gc.md's "Running beside the kubelet" says (its
// image GC off, its eviction at the defaults). Its own control plane and node
// (.cluster-e2e-pressure), taken down at the end.
import { existsSync } from 'node:fs';
import https from 'node:https';
import fs from 'node:fs/promises';
import path from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, down, up, userKubeconfig, type Cluster } from '../../cluster/controlplane.ts';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';
import { CONTAINERD, PAUSE_IMAGE, downNode, upNode } from '../../cluster/node.ts';
import { hostToolsLayer, randomLayer, type ImageSpec } from '../../cluster/oci-image.ts';
import type { DiskReport } from '../../src/node/disk-report.ts';
import { statFilesystem } from '../../src/node/statfs.ts';
import { clients, testNamespace, waitFor } from '../support/cluster.ts';
import {
  addNodeGcArgs,
  importNodeImages,
  kubectlOf,
  nodeImages,
  podReady,
  pushKubegcImage,
  run,
} from '../support/local-node.ts';

const APP: ImageSpec = {
  name: 'kubegc.test/dp-app:1',
  layers: [hostToolsLayer(['/bin/sleep']), randomLayer(8 << 20)],
  entrypoint: ['/bin/sleep', '3600'],
};

const DIR = path.join(REPO_ROOT, '.cluster-e2e-pressure');
const OVERLAY = path.join(REPO_ROOT, 'test', 'e2e', 'deploy-overlay');
const NS = 'kubegc-system';
const MiB = 1 << 20;
const log = (l: string): void => void process.stderr.write(`\nnode-disk-pressure: ${l}`);

let cluster: Cluster;
let core: k8s.CoreV1Api;
let kubegcRef = '';

const kubectl = kubectlOf(() => cluster);

const availablePercent = async (): Promise<number> => {
  const s = await statFilesystem(CONTAINERD.root);
  return (100 * s.availableBytes) / s.capacityBytes;
};

interface NodeWatch {
  diskPressure: boolean;
  taints: string[];
  lowestAvailablePercent: number;
}

/** Polls the Node and the disk every second until stopped; records the worst seen. */
function watchNode(nodeName: string): { seen: NodeWatch; stop: () => Promise<void> } {
  const seen: NodeWatch = { diskPressure: false, taints: [], lowestAvailablePercent: 100 };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const node = await core.readNode({ name: nodeName }).catch(() => undefined);
      if (node?.status?.conditions?.some((c) => c.type === 'DiskPressure' && c.status === 'True'))
        seen.diskPressure = true;
      for (const t of node?.spec?.taints ?? [])
        if (!seen.taints.includes(t.key)) seen.taints.push(t.key);
      seen.lowestAvailablePercent = Math.min(seen.lowestAvailablePercent, await availablePercent());
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return {
    seen,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** Fillers of 24 MiB layers (about 34 MiB each on this disk), one every 8 s. */
const FILLERS = 44;
const FILL_INTERVAL_MS = 8000;

/**
 * About 1.5 GiB of unused images, more than the disk has left, about 40 MiB
 * per pressure check (10 s): well within the 5% margin (~100 MiB) between
 * kubegc's reclaim start (20% available) and the kubelet's threshold (15%).
 * An import the full disk refuses is counted, not fatal.
 */
async function fill(
  nodeName: string,
  prefix: string,
  /** Stop once the Node reports DiskPressure (the reference run: that is all it has to show). */
  untilPressure = false,
): Promise<{ imported: number; refused: number; seen: NodeWatch }> {
  const watch = watchNode(nodeName);
  let imported = 0;
  let refused = 0;
  try {
    for (let i = 0; i < FILLERS && !(untilPressure && watch.seen.diskPressure); i++) {
      try {
        await importNodeImages([
          { name: `kubegc.test/${prefix}:${i}`, layers: [randomLayer(24 * MiB)] },
        ]);
        imported++;
      } catch {
        refused++;
      }
      await new Promise((r) => setTimeout(r, FILL_INTERVAL_MS));
    }
    // The last ones settle (two pressure checks and more).
    await new Promise((r) => setTimeout(r, 20_000));
  } finally {
    await watch.stop();
  }
  return { imported, refused, seen: watch.seen };
}

/** Containers (and sandboxes) of a pod in the node's containerd, by the CRI's pod-name label. */
async function podContainers(pod: string): Promise<string[]> {
  const { stdout } = await run('ctr', [
    '--address',
    CONTAINERD.socket,
    '-n',
    'k8s.io',
    'containers',
    'ls',
    '-q',
    `labels."io.kubernetes.pod.name"==${pod}`,
  ]);
  return stdout.split('\n').filter(Boolean);
}

/** A pod that ran to completion (restartPolicy Never) and stays in the API: Succeeded. */
async function completedPod(ns: string, image: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'done' },
      spec: {
        restartPolicy: 'Never',
        containers: [
          { name: 'job', image, imagePullPolicy: 'Never', command: ['/bin/sleep', '1'] },
        ],
      },
    },
  });
  await waitFor('the completed pod to succeed', async () => {
    const p = await core.readNamespacedPod({ namespace: ns, name: 'done' });
    return p.status?.phase === 'Succeeded';
  });
}

/** The app pod (one image, a sleeping container) in a new namespace, running. */
async function runApp(image: string): Promise<string> {
  const ns = await testNamespace(core, 'disk-pressure');
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'app' },
      spec: { containers: [{ name: 'app', image, imagePullPolicy: 'Never' }] },
    },
  });
  await waitFor('the app pod to run', async () =>
    podReady(await core.readNamespacedPod({ namespace: ns, name: 'app' })),
  );
  return ns;
}

beforeAll(async () => {
  cluster = await up({ dir: DIR, log });
  const node = await upNode(cluster, {
    log,
    kubeletDisk: { imageGc: 'off', eviction: 'kubelet-defaults' },
  });
  kubegcRef = await pushKubegcImage(node, log);
  core = clients(cluster).core;
  await kubectl('apply', '-k', OVERLAY);
  // Time only: the fillers are old enough for the minimum age after 20 s, not 2 minutes.
  await addNodeGcArgs(kubectl, NS, ['--image-minimum-gc-age=20s']);
  await kubectl('rollout', 'status', 'daemonset/kubegc-node', '-n', NS, '--timeout=180s');
}, 1_800_000);

afterAll(async () => {
  await downNode(DIR, log).catch((err: unknown) => log(`node teardown: ${String(err)}`));
  await down(DIR);
}, 300_000);

test("unused images pushed past the disk while a pod runs: kubegc reclaims within the margin; no DiskPressure, no taint, no eviction; protected images kept; a completed pod's last dead container goes", async () => {
  const nodeName = (await core.listNode()).items[0]?.metadata?.name ?? '';
  const app = APP;
  await importNodeImages([app]);
  const ns = await runApp(app.name);
  await completedPod(ns, app.name);
  // Its one dead container is within every per-container cap (the kubelet's
  // and kubegc's: one kept per pod and container): only a reclaim removes it.
  const doneBefore = await podContainers('done');
  expect(doneBefore.length).toBeGreaterThan(0);
  const start = await availablePercent();
  log(`image filesystem ${start.toFixed(1)}% available before the fill`);

  const { imported, seen } = await fill(nodeName, 'dp-filler');
  log(
    `kubegc: imported ${imported} fillers; lowest available ${seen.lowestAvailablePercent.toFixed(1)}%; taints seen: ${seen.taints.join(', ') || 'none'}`,
  );
  expect(imported).toBe(FILLERS);
  expect(seen.diskPressure).toBe(false);
  expect(seen.taints).not.toContain('node.kubernetes.io/disk-pressure');
  expect(seen.lowestAvailablePercent).toBeGreaterThan(15);

  const pods = (await core.listPodForAllNamespaces()).items;
  expect(pods.filter((p) => p.status?.reason === 'Evicted').map((p) => p.metadata?.name)).toEqual(
    [],
  );
  expect(podReady(await core.readNamespacedPod({ namespace: ns, name: 'app' }))).toBe(true);
  const images = await nodeImages();
  for (const kept of [app.name, PAUSE_IMAGE, kubegcRef]) expect(images).toContain(kept);
  // kubegc removed fillers (the disk could not hold them all).
  expect(images.filter((n) => n.startsWith('kubegc.test/dp-filler:')).length).toBeLessThan(FILLERS);

  // The fill brought imagefs within the margin (reclaims happened), and the
  // reclaim removed the completed pod's dead container and sandbox, as the
  // kubelet's DeleteAllUnusedContainers does, while the Pod stays in the API.
  const reclaims = (
    await kubectl(
      'get',
      'events',
      '-A',
      '--field-selector=reason=DiskPressureReclaimed',
      '-o',
      'name',
    )
  )
    .split('\n')
    .filter(Boolean);
  log(
    `kubegc: ${reclaims.length} DiskPressureReclaimed event(s); completed pod's containers before ${doneBefore.length}, after ${(await podContainers('done')).length}`,
  );
  expect(reclaims.length).toBeGreaterThan(0);
  expect(await podContainers('done')).toEqual([]);
  const done = await core.readNamespacedPod({ namespace: ns, name: 'done' });
  expect(done.status?.phase).toBe('Succeeded');
  // Its logs stay while the Pod exists (kubectl logs still answers).
  expect(existsSync(`/var/log/pods/${ns}_done_${done.metadata?.uid ?? ''}`)).toBe(true);
}, 900_000);

/** `kubegc explain node/NAME -o json` as `kubeconfig`'s user: its exit code, output and JSON. */
async function explainNode(
  kubeconfig: string,
  nodeName: string,
): Promise<{ code: number; stdout: string; stderr: string; report?: DiskReport }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      kubegcArgv(['explain', `node/${nodeName}`, '-o', 'json', '--kubeconfig', kubeconfig]),
    );
    return { code: 0, stdout, stderr, report: JSON.parse(stdout) as DiskReport };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

test("kubegc explain node/NAME from an operator's context, through the pod proxy: what is reclaimable, what is kept and why (the running pod by name, the sandbox image), each eviction signal; refused without the ClusterRole kubegc-node-explainer, and the agent refuses a caller without a token", async () => {
  const nodeName = (await core.listNode()).items[0]?.metadata?.name ?? '';
  // A user of its own (a client certificate: the API server removes the
  // caller's credentials before the pod proxy, so the CLI's minted token is
  // the only way through for a certificate user too).
  const user = 'node-explain-operator';
  const kubeconfig = await userKubeconfig(cluster, user);
  const refused = await explainNode(kubeconfig, nodeName);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('kubegc-node-explainer');

  // As docs/node-gc.md says to grant it.
  await kubectl(
    '-n',
    NS,
    'create',
    'rolebinding',
    'explain-operator',
    '--clusterrole=kubegc-node-explainer',
    `--user=${user}`,
  );
  const answered = await waitFor('the node agent to answer kubegc explain node', async () => {
    const r = await explainNode(kubeconfig, nodeName);
    if (r.code !== 0) log(`explain node: ${r.stderr.trim()}`);
    return r.report;
  });
  log(`explain node: ${JSON.stringify(answered.images.kept)}`);
  expect(answered.node).toBe(nodeName);
  const inUse = answered.images.kept['in-use'];
  expect(inUse?.by).toEqual(
    expect.arrayContaining([expect.stringMatching(/^disk-pressure-[^/]+\/app$/)]),
  );
  expect(answered.images.kept['sandbox-image']?.by).toEqual([expect.stringContaining('pause')]);
  expect(answered.images.kept['sandbox-image']?.bytes).toBeGreaterThan(0);
  const imagefs = answered.pressure?.signals.find((x) => x.signal === 'imagefs.available');
  expect(imagefs?.toEviction).toBe((imagefs?.available ?? 0) - (imagefs?.threshold ?? 0));
  expect(imagefs?.threshold).toBeGreaterThan(0);

  const text = await run(
    process.execPath,
    kubegcArgv(['explain', `node/${nodeName}`, '--kubeconfig', kubeconfig]),
  );
  expect(text.stdout).toContain('Not reclaimable, and why:');
  expect(text.stdout).toMatch(/imagefs\.available: .* the kubelet evicts below /);

  // The agent itself: a caller reaching its port directly, without a token, gets 401.
  const pod = JSON.parse(
    await kubectl(
      '-n',
      NS,
      'get',
      'pods',
      '-l',
      'app.kubernetes.io/name=kubegc-node',
      '-o',
      'json',
    ),
  ) as { items: { status?: { podIP?: string } }[] };
  const ip = pod.items[0]?.status?.podIP ?? '';
  const direct = await fetchInsecure(`https://${ip}:8443/debug/disk`);
  expect(direct).toBe(401);
}, 300_000);

/** The status of a GET over HTTPS without verifying the server (the agent's self-signed certificate). */
function fetchInsecure(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { rejectUnauthorized: false, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

test('the same fill on the kubelet alone (kubegc removed, the kubelet at its defaults: image GC 85/80, hard eviction): the node reports DiskPressure', async () => {
  await kubectl('logs', '-n', NS, 'ds/kubegc-node', '--tail=300')
    .then((text) => fs.writeFile(path.join(DIR, 'logs', 'kubegc-node-pod.log'), text))
    .catch(() => undefined);
  await kubectl('delete', '-k', OVERLAY, '--wait=true', '--timeout=120s').catch(() => '');
  await downNode(DIR, log);
  await upNode(cluster, {
    log,
    kubeletDisk: { imageGc: 'kubelet-defaults', eviction: 'kubelet-defaults' },
  });
  const nodeName = (await core.listNode()).items[0]?.metadata?.name ?? '';
  await importNodeImages([APP]);
  const ns = await runApp(APP.name);
  const { imported, refused, seen } = await fill(nodeName, 'ref-filler', true);
  const pods = (await core.listPodForAllNamespaces()).items;
  const evicted = pods.filter((p) => p.status?.reason === 'Evicted').map((p) => p.metadata?.name);
  const app = await core.readNamespacedPod({ namespace: ns, name: 'app' }).catch(() => undefined);
  const left = (await nodeImages()).filter((n) => n.startsWith('kubegc.test/ref-filler:')).length;
  log(
    `kubelet alone: imported ${imported} fillers (${refused} refused: disk full); lowest available ${seen.lowestAvailablePercent.toFixed(1)}%; DiskPressure ${seen.diskPressure}; taints seen: ${seen.taints.join(', ') || 'none'}; evicted pods: ${evicted.join(', ') || 'none'}; app pod ${app?.status?.phase ?? 'gone'}${app?.status?.reason ? ` (${app.status.reason})` : ''}; fillers left ${left}`,
  );
  expect(seen.lowestAvailablePercent).toBeLessThan(15);
  expect(seen.diskPressure).toBe(true);
  expect(left).toBeGreaterThan(0);
}, 900_000);
