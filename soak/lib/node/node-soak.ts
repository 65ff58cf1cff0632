// The node soak (issue 33): `npm run soak -- --node`. On a real kubelet node
// (cluster/node.ts) it runs the seeded workload of node-workload.ts and a
// fault every 40 s, first with kubegc's node GC beside the kubelet (its image
// GC off, its eviction at the defaults), then, as the reference, the kubelet
// alone with its own image GC and eviction at the defaults; the oracle
// (node-oracle.ts) judges N1–N5 for each from the API server's pods and
// containerd's event stream only.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { kubegcArgv } from '../../../cluster/kubegc-command.ts';
import { REPO_ROOT, down, paths, up, type Cluster } from '../../../cluster/controlplane.ts';
import {
  CONTAINERD,
  NODE_NAME,
  PAUSE_IMAGE,
  downNode,
  importNodeImages,
  restartContainerd,
  upNode,
} from '../../../cluster/node.ts';
import {
  hostToolsLayer,
  imageBlobs,
  randomLayer,
  type ImageSpec,
} from '../../../cluster/oci-image.ts';
import { REGISTRY_HOST, pushImageSpec } from '../../../cluster/registry.ts';
import { statFilesystem } from '../../../src/node/statfs.ts';
import { Kube, waitUntil } from '../kube.ts';
import { TcpProxy } from '../netproxy.ts';
import { Prng } from '../prng.ts';
import { ImageTable, pinSpellings, spellings, type SoakImage } from './images.ts';
import {
  judge,
  type EndState,
  type LogDirGone,
  type NodeSample,
  type PodSnapshot,
  type PodView,
  type Violation,
} from './node-oracle.ts';
import { RuntimeEvents } from './runtime-events.ts';
import { NODE_SOAK_NS, NodeWorkload } from './node-workload.ts';

export type NodeContender = 'kubegc' | 'kubelet';
export const NODE_FAULTS = [
  'kubegc-restart',
  'containerd-restart',
  'api-blackhole',
  'cri-slow',
  'cri-reset',
  'wrong-node-name',
] as const;
export type NodeFault = (typeof NODE_FAULTS)[number];
/** Faults that act on kubegc (skipped for the kubelet alone). */
const KUBEGC_FAULTS = new Set<NodeFault>([
  'kubegc-restart',
  'api-blackhole',
  'cri-slow',
  'cri-reset',
  'wrong-node-name',
]);

export interface NodeSoakOptions {
  durationMs: number;
  seed: number;
  contenders: NodeContender[];
  dir: string;
  keepCluster?: boolean;
  /** kubegc's --image-maximum-gc-age in seconds (default 180; the quiet period at the end waits it out). */
  maxAgeS?: number;
  /** Exactly these faults, in this order, one per 40 s (default: seeded from every kind). */
  faults?: NodeFault[];
  log?: (line: string) => void;
}

export interface NodeContenderResult {
  contender: NodeContender;
  config: string;
  durationMs: number;
  violations: Violation[];
  counts: Record<string, number>;
  ops: Record<string, number>;
  faults: Record<string, number>;
  imagesRemoved: number;
  containersRemoved: number;
  gapsMs: number;
  imageVolumes: string;
  error?: string;
}

export interface NodeSoakResult {
  seed: number;
  durationMs: number;
  results: NodeContenderResult[];
  /** kubegc violated N1–N5 (or its run failed). */
  failed: boolean;
}

const MiB = 1 << 20;
const DISK_MIB = 1024;
const FILL_TO = 88;
/** kubegc's ages and periods, short so that a soak sees many passes. */
const KUBEGC = { imagePeriodS: 20, containerPeriodS: 10, minAgeS: 30 };
const FAULT_EVERY_MS = 40_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The images: apps in every kind of name, pinned ones, the spellings' table. */
function planImages(p: Prng): {
  specs: Map<string, ImageSpec>;
  table: ImageTable;
  pins: string[];
  pinned: Set<string>;
} {
  const tools = hostToolsLayer(['/bin/sleep', '/bin/sh']);
  const specs = new Map<string, ImageSpec>();
  const table = new ImageTable();
  const plans: Omit<SoakImage, 'digest' | 'id'>[] = [];
  const domains: [SoakImage['domain'], (i: number) => string][] = [
    ['docker.io', (i) => `library/soak-app-${i}`],
    ['docker.io', (i) => `soakorg/app-${i}`],
    [REGISTRY_HOST, (i) => `soak/app-${i}`],
  ];
  for (let i = 0; i < 9; i++) {
    const [domain, pathOf] = domains[i % 3] as [SoakImage['domain'], (i: number) => string];
    plans.push({
      key: `app-${i}`,
      role: 'app',
      domain,
      path: pathOf(i),
      tag: i % 4 === 0 ? 'latest' : '1',
    });
  }
  for (let i = 0; i < 3; i++) {
    const [domain, pathOf] = domains[i % 3] as [SoakImage['domain'], (i: number) => string];
    plans.push({
      key: `pin-${i}`,
      role: 'pinned',
      domain,
      path: pathOf(100 + i).replace('app', 'pin'),
      tag: '1',
    });
  }
  const pins: string[] = [];
  const pinned = new Set<string>();
  for (const plan of plans) {
    const spec: ImageSpec = {
      name: `${plan.domain}/${plan.path}:${plan.tag}`,
      layers: [tools, randomLayer(p.int(2, 6) * MiB)],
    };
    specs.set(plan.key, spec);
    const b = imageBlobs(spec);
    const img: SoakImage = { ...plan, digest: b.manifestDigest, id: b.configDigest };
    table.add(img);
    if (plan.role === 'pinned') {
      pins.push(p.pick(pinSpellings(img)));
      pinned.add(plan.key);
    }
  }
  return { specs, table, pins, pinned };
}

export async function runNodeSoak(o: NodeSoakOptions): Promise<NodeSoakResult> {
  const results: NodeContenderResult[] = [];
  for (const contender of o.contenders) results.push(await runContender(o, contender));
  return {
    seed: o.seed,
    durationMs: o.durationMs,
    results,
    failed: results.some(
      (r) => r.contender === 'kubegc' && (r.violations.length > 0 || r.error !== undefined),
    ),
  };
}

async function runContender(
  o: NodeSoakOptions,
  contender: NodeContender,
): Promise<NodeContenderResult> {
  const log = (l: string): void =>
    (o.log ?? ((x: string) => process.stderr.write(`${x}\n`)))(
      `${new Date().toISOString()} ${contender}: ${l}`,
    );
  const dir = path.resolve(REPO_ROOT, o.dir);
  const prng = new Prng(o.seed, `node-${contender}`);
  const maxAgeS = o.maxAgeS ?? 180;
  const { specs, table, pins, pinned } = planImages(new Prng(o.seed, 'node-images'));
  const cleanups: (() => Promise<void>)[] = [];
  const result: NodeContenderResult = {
    contender,
    config: '',
    durationMs: o.durationMs,
    violations: [],
    counts: {},
    ops: {},
    faults: {},
    imagesRemoved: 0,
    containersRemoved: 0,
    gapsMs: 0,
    imageVolumes: 'unknown',
  };
  try {
    if (existsSync(dir)) {
      await downNode(dir, log).catch(() => undefined);
      await down(dir).catch(() => undefined);
      await fs.rm(dir, { recursive: true, force: true });
    }
    const cluster = await up({ dir, log });
    cleanups.push(async () => {
      if (o.keepCluster) return;
      await downNode(dir, log).catch(() => undefined);
      await down(dir);
    });
    await upNode(cluster, {
      diskMiB: DISK_MIB,
      kubeletDisk:
        contender === 'kubegc'
          ? { imageGc: 'off', eviction: 'kubelet-defaults' }
          : { imageGc: 'kubelet-defaults', eviction: 'kubelet-defaults' },
      log,
    });
    const caFile = paths(dir).caCrt;
    for (const img of table.images) {
      const spec = specs.get(img.key) as ImageSpec;
      await pushImageSpec(caFile, spec, img.path, img.tag);
    }
    log(`pushed ${table.images.length} images to the node's registry (Docker Hub names included)`);
    const admin = Kube.fromKubeconfig(cluster.kubeconfig, {
      qps: 50,
      burst: 100,
      userAgent: 'soak-node-workload',
    });
    cleanups.push(async () => admin.close());
    await admin.raw('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NODE_SOAK_NS } },
    });
    await waitUntil(
      "the namespace's default service account",
      async () =>
        (await admin.raw('GET', `/api/v1/namespaces/${NODE_SOAK_NS}/serviceaccounts/default`))
          .status === 200,
      60_000,
    );

    // The oracle's eyes: containerd's events, the pods, the node, the log directories.
    const runtime = new RuntimeEvents(CONTAINERD.socket);
    runtime.start();
    cleanups.push(() => runtime.stop());
    const snapshots: PodSnapshot[] = [];
    const samples: NodeSample[] = [];
    const logDirsGone: LogDirGone[] = [];
    let observing = true;
    const pods = async (): Promise<PodView[] | undefined> => {
      const res = await admin
        .raw('GET', '/api/v1/pods', { query: { fieldSelector: `spec.nodeName=${NODE_NAME}` } })
        .catch(() => undefined);
      if (res?.status !== 200) return undefined;
      return (JSON.parse(res.text) as { items: PodJson[] }).items.map(podView);
    };
    const observer = (async () => {
      let dirs = new Set<string>();
      while (observing) {
        const t = Date.now();
        const list = await pods();
        if (list) snapshots.push({ t: Date.now(), pods: list });
        const now = new Set(existsSync('/var/log/pods') ? readdirSync('/var/log/pods') : []);
        for (const d of dirs)
          if (!now.has(d)) logDirsGone.push({ t, dir: d, podUid: d.slice(d.lastIndexOf('_') + 1) });
        dirs = now;
        await sleep(1000);
      }
    })();
    const usagePercent = async (): Promise<number> => {
      const s = await statFilesystem(CONTAINERD.root);
      return (
        (100 * (s.capacityBytes - Math.min(s.availableBytes, s.capacityBytes))) / s.capacityBytes
      );
    };
    let fillers = 0;
    const fillerPrefix = 'kubegc.soak/filler-';
    // The disk alone, every 200 ms: kubegc reclaims within its 2 s check of
    // crossing 80% and is done a second later, a window the slower sampler
    // below (a Node GET and an image list each round) can miss entirely; a
    // reclaim's removals would then look like removals outside pressure (N2).
    let peakUsage = 0;
    const diskSampler = (async () => {
      while (observing) {
        peakUsage = Math.max(peakUsage, await usagePercent().catch(() => 0));
        await sleep(200);
      }
    })();
    const sampler = (async () => {
      while (observing) {
        const node = await admin.raw('GET', `/api/v1/nodes/${NODE_NAME}`).catch(() => undefined);
        const cond =
          node?.status === 200
            ? ((JSON.parse(node.text) as NodeJson).status?.conditions ?? [])
            : [];
        const last = snapshots[snapshots.length - 1];
        const names = await nodeImageNames();
        samples.push({
          t: Date.now(),
          diskPressure: cond.some((c) => c.type === 'DiskPressure' && c.status === 'True'),
          evicted: (last?.pods ?? [])
            .filter((p) => p.phase === 'Failed' && p.evicted)
            .map((p) => `${p.namespace}/${p.name}`),
          // imagefs.available<15% with kubegc's 5% margin: within reach of
          // eviction, now or at any moment since the last sample.
          pressure: Math.max(peakUsage, await usagePercent()) >= 80,
          fillersPresent: names.filter((n) => n.startsWith(fillerPrefix)).length,
        });
        peakUsage = 0;
        await sleep(2000);
      }
    })();
    cleanups.push(async () => {
      observing = false;
      await Promise.all([observer, sampler, diskSampler]);
    });

    // The contender.
    let gc: KubegcRunner | undefined;
    if (contender === 'kubegc') {
      gc = await KubegcRunner.start(cluster, dir, pins, maxAgeS, log);
      cleanups.push(() => (gc as KubegcRunner).stop());
      result.config = gc.describe();
    } else {
      result.config =
        'the kubelet alone: image GC at its defaults (85/80, minimum age 2m, every 5m), hard eviction at its defaults';
    }

    // The pinned images are pulled once (a pod each that completes), then only pinned.
    const workload = new NodeWorkload(admin, table, {
      fillTo: FILL_TO,
      usagePercent,
      importFiller: async () => {
        await importNodeImages([
          { name: `${fillerPrefix}${++fillers}:1`, layers: [randomLayer(24 * MiB)] },
        ]);
        return usagePercent();
      },
    });
    await pullPinned(admin, table, pinned, log);
    const cronImage = await workload.cronJob(prng.fork('cron'));
    const cronKey = table.resolve(cronImage)?.key;

    // The run: two actors and the faults.
    const started = Date.now();
    const deadline = started + o.durationMs;
    const actors = [0, 1].map((i) => workload.run(prng.fork(`actor-${i}`)));
    const faultPrng = prng.fork('faults');
    const planned = [...(o.faults ?? [])].filter(
      (k) => contender === 'kubegc' || !KUBEGC_FAULTS.has(k),
    );
    while (Date.now() < deadline) {
      await sleep(Math.min(FAULT_EVERY_MS, Math.max(0, deadline - Date.now())));
      if (cronKey) workload.touch([cronKey]);
      if (Date.now() >= deadline) break;
      const kinds = NODE_FAULTS.filter((k) => contender === 'kubegc' || !KUBEGC_FAULTS.has(k));
      const f = o.faults ? planned.shift() : faultPrng.pick(kinds);
      if (!f) continue;
      log(`fault ${f}`);
      result.faults[f] = (result.faults[f] ?? 0) + 1;
      try {
        await injectFault(f, dir, gc, log);
      } catch (err) {
        result.faults[`${f} failed`] = (result.faults[`${f} failed`] ?? 0) + 1;
        log(`fault ${f} failed: ${(err as Error).message}`);
      }
    }
    workload.stop();
    await Promise.all(actors);
    // Quiet: two of the slowest periods, so that whatever is eligible can go (N5).
    const quietMs = contender === 'kubegc' ? (maxAgeS + 2 * KUBEGC.imagePeriodS) * 1000 : 150_000;
    log(`quiet for ${quietMs / 1000} s`);
    await sleep(quietMs);
    const end: EndState = {
      t: Date.now(),
      imageNames: await nodeImageNames(),
      containers: await nodeContainers(),
      pods: (await pods()) ?? [],
    };
    observing = false;
    await Promise.all([observer, sampler]);
    await runtime.stop();
    result.ops = Object.fromEntries([...workload.ops].sort());
    result.imageVolumes = workload.imageVolumes;
    result.violations = judge({
      table,
      pinned,
      sandboxImage: PAUSE_IMAGE,
      snapshots,
      events: runtime.events,
      gaps: runtime.gaps,
      samples,
      logDirsGone,
      end,
      maxAgeMs: contender === 'kubegc' ? maxAgeS * 1000 : 0,
      slackMs: contender === 'kubegc' ? 2 * KUBEGC.imagePeriodS * 1000 + 10_000 : 150_000,
      lastNamed: workload.lastNamed,
    });
    for (const v of result.violations)
      result.counts[v.invariant] = (result.counts[v.invariant] ?? 0) + 1;
    result.imagesRemoved = runtime.events.filter(
      (e) => e.kind === 'image-delete' && !e.name.startsWith('sha256:') && !e.name.includes('@'),
    ).length;
    result.containersRemoved = runtime.events.filter((e) => e.kind === 'container-delete').length;
    result.gapsMs = runtime.gaps.reduce((n, [a, b]) => n + (b - a), 0);
    log(`done: ${result.violations.length} violations`);
  } catch (err) {
    result.error = (err as Error).stack ?? String(err);
    log(`failed: ${result.error}`);
  } finally {
    for (const c of cleanups.reverse())
      await c().catch((err: unknown) => log(`cleanup: ${String(err)}`));
  }
  return result;
}

interface PodJson {
  metadata: { uid: string; name: string; namespace: string; deletionTimestamp?: string };
  spec: {
    containers: { image: string }[];
    initContainers?: { image: string }[];
    volumes?: { image?: { reference?: string } }[];
  };
  status?: {
    phase?: string;
    reason?: string;
    containerStatuses?: { containerID?: string; state?: { running?: unknown } }[];
    initContainerStatuses?: { containerID?: string; state?: { running?: unknown } }[];
  };
}

interface NodeJson {
  status?: { conditions?: { type: string; status: string }[] };
}

function podView(p: PodJson): PodView & { evicted: boolean } {
  const statuses = [
    ...(p.status?.containerStatuses ?? []),
    ...(p.status?.initContainerStatuses ?? []),
  ];
  return {
    uid: p.metadata.uid,
    namespace: p.metadata.namespace,
    name: p.metadata.name,
    phase: p.status?.phase ?? 'Pending',
    deleting: Boolean(p.metadata.deletionTimestamp),
    images: [
      ...p.spec.containers.map((c) => c.image),
      ...(p.spec.initContainers ?? []).map((c) => c.image),
      ...(p.spec.volumes ?? []).flatMap((v) => (v.image?.reference ? [v.image.reference] : [])),
    ],
    running: statuses
      .filter((s) => s.state?.running !== undefined && s.containerID)
      .map((s) => (s.containerID as string).replace(/^containerd:\/\//, '')),
    evicted: p.status?.reason === 'Evicted',
  };
}

async function ctr(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(
      'ctr',
      ['--address', CONTAINERD.socket, '-n', 'k8s.io', ...args],
      { maxBuffer: 64 * MiB },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    ),
  );
}

async function nodeImageNames(): Promise<string[]> {
  return (await ctr(['images', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
}

async function nodeContainers(): Promise<EndState['containers']> {
  const ids = (await ctr(['containers', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
  const running = new Set(
    (await ctr(['tasks', 'ls']).catch(() => ''))
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f[2] === 'RUNNING')
      .map((f) => f[0] as string),
  );
  const out: EndState['containers'] = [];
  for (const id of ids) {
    const info = JSON.parse(await ctr(['containers', 'info', id]).catch(() => '{}')) as {
      Labels?: Record<string, string>;
    };
    const l = info.Labels ?? {};
    out.push({
      id,
      podUid: l['io.kubernetes.pod.uid'],
      name: l['io.kubernetes.container.name'],
      sandbox: l['io.cri-containerd.kind'] === 'sandbox',
      running: running.has(id),
    });
  }
  return out;
}

/** Each pinned image pulled by a pod that completes at once: present, then only pinned. */
async function pullPinned(
  admin: Kube,
  table: ImageTable,
  pinned: Set<string>,
  log: (l: string) => void,
): Promise<void> {
  for (const key of pinned) {
    const img = table.byKey(key) as SoakImage;
    const name = `pull-${key}`;
    await admin.request('POST', `/api/v1/namespaces/${NODE_SOAK_NS}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: NODE_SOAK_NS },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'main', image: spellings(img)[0], command: ['/bin/sleep', '1'] }],
        },
      },
    });
    await waitUntil(
      `pod ${name} to complete`,
      async () => {
        const pod = await admin.request<PodJson>(
          'GET',
          `/api/v1/namespaces/${NODE_SOAK_NS}/pods/${name}`,
        );
        return pod.status?.phase === 'Succeeded';
      },
      120_000,
      500,
    );
    await admin.raw('DELETE', `/api/v1/namespaces/${NODE_SOAK_NS}/pods/${name}`);
  }
  log(`pulled ${pinned.size} pinned images`);
}

/** `kubegc node` from source, as the DaemonSet runs it, through an API proxy and a CRI proxy; restarted when it exits. */
class KubegcRunner {
  readonly args: string[];
  readonly api: TcpProxy;
  readonly cri: TcpProxy;
  private child: ChildProcess | undefined;
  private stopping = false;
  private readonly logFile: string;
  private readonly log: (l: string) => void;
  restarts = 0;

  private constructor(
    args: string[],
    api: TcpProxy,
    cri: TcpProxy,
    logFile: string,
    log: (l: string) => void,
  ) {
    this.args = args;
    this.api = api;
    this.cri = cri;
    this.logFile = logFile;
    this.log = log;
  }

  static async start(
    cluster: Cluster,
    dir: string,
    pins: string[],
    maxAgeS: number,
    log: (l: string) => void,
  ): Promise<KubegcRunner> {
    const apiPort = Number(new URL(cluster.server).port);
    const api = new TcpProxy('kubegc-node-api', { host: '127.0.0.1', port: apiPort });
    await api.listen();
    const criSocket = path.join(dir, 'cri-proxy.sock');
    await fs.rm(criSocket, { force: true });
    const cri = new TcpProxy('kubegc-node-cri', { path: CONTAINERD.socket });
    await cri.listenPath(criSocket);
    const kc = JSON.parse(await fs.readFile(cluster.kubeconfig, 'utf8')) as {
      clusters: { cluster: { server: string } }[];
    };
    for (const c of kc.clusters) c.cluster.server = api.url;
    const kubeconfig = path.join(dir, 'kubegc-node.via-proxy.kubeconfig');
    await fs.writeFile(kubeconfig, JSON.stringify(kc), { mode: 0o600 });
    const args = [
      'node',
      '--kubeconfig',
      kubeconfig,
      '--node-name',
      NODE_NAME,
      '--cri-endpoint',
      `unix://${criSocket}`,
      '--runtime-request-timeout',
      '10s',
      '--state-file',
      path.join(dir, 'kubegc-node-state.json'),
      `--image-gc-period=${KUBEGC.imagePeriodS}s`,
      `--container-gc-period=${KUBEGC.containerPeriodS}s`,
      `--image-minimum-gc-age=${KUBEGC.minAgeS}s`,
      `--image-maximum-gc-age=${maxAgeS}s`,
      `--pinned-images=${pins.join(',')}`,
      '--root-dir',
      path.join(dir, 'node', 'kubelet'),
      '--metrics-bind-address',
      '0',
      '--health-probe-bind-address',
      '0',
    ];
    const r = new KubegcRunner(args, api, cri, path.join(dir, 'logs', 'kubegc-node.log'), log);
    r.spawn();
    return r;
  }

  describe(): string {
    return `kubegc ${this.args.filter((a) => !a.includes('/')).join(' ')} (through an API proxy and a CRI proxy; the kubelet's image GC off, its eviction at the defaults)`;
  }

  private spawn(): void {
    const out = openLog(this.logFile);
    const child = spawn(process.execPath, kubegcArgv(this.args), {
      stdio: ['ignore', out, out],
      env: { ...process.env, KUBERNETES_SERVICE_HOST: '' },
    });
    this.child = child;
    child.on('exit', (code, signal) => {
      if (this.stopping) return;
      this.restarts++;
      this.log(`kubegc node exited (${signal ?? code}); restarting`);
      setTimeout(() => this.spawn(), 1000);
    });
  }

  /** SIGKILL: it starts again from its state file. */
  kill(): void {
    this.child?.kill('SIGKILL');
  }

  /**
   * `kubegc node --once` beside the running one, as an operator's one-off run
   * would be, under another node name (the wrong-node-name fault): the same
   * runtime and log directories, no state file, no pressure reclaim.
   */
  async once(nodeName: string): Promise<number | null> {
    const args: string[] = [];
    for (let i = 0; i < this.args.length; i++) {
      const a = this.args[i] as string;
      if (a === '--state-file') {
        i++;
        continue;
      }
      args.push(a === '--node-name' ? a : this.args[i - 1] === '--node-name' ? nodeName : a);
    }
    const out = openLog(this.logFile.replace(/\.log$/, '-once.log'));
    const child = spawn(process.execPath, kubegcArgv([...args, '--once', '--eviction-hard', '']), {
      stdio: ['ignore', out, out],
      env: { ...process.env, KUBERNETES_SERVICE_HOST: '' },
    });
    return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const c = this.child;
    if (c && c.exitCode === null) {
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }
    await this.api.close();
    await this.cri.close();
  }
}

function openLog(file: string): number {
  mkdirSync(path.dirname(file), { recursive: true });
  return openSync(file, 'a');
}

async function injectFault(
  f: NodeFault,
  dir: string,
  gc: KubegcRunner | undefined,
  log: (l: string) => void,
): Promise<void> {
  switch (f) {
    case 'kubegc-restart':
      gc?.kill();
      return;
    case 'containerd-restart':
      await restartContainerd(dir);
      return;
    case 'api-blackhole':
      gc?.api.blackhole();
      await sleep(20_000);
      gc?.api.release('close');
      return;
    case 'cri-slow':
      if (gc) gc.cri.delay = 1500;
      await sleep(20_000);
      if (gc) gc.cri.delay = 0;
      return;
    case 'cri-reset':
      gc?.cri.reset();
      return;
    case 'wrong-node-name': {
      const code = await gc?.once('soak-no-such-node');
      log(`kubegc node --once --node-name soak-no-such-node exited ${code}`);
      return;
    }
  }
}
