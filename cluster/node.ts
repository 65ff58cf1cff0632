// A real node beside the local control plane (`npm run cluster -- up --node`):
// kube-scheduler, containerd and a kubelet joined as one Ready node, so that
// kubegc runs the way its users run it (image, `kubectl apply -k deploy/`,
// pods, a DaemonSet on the kubelet's own containerd), with an image registry
// on the node bridge that the kubelet pulls from (cluster/registry.ts).
//
// Opt-in and root only: it changes the host. Everything it adds is recorded in
// DIR/node/state.json and removed by downNode(): processes (by verified PID),
// pods and their mounts, the containerd filesystem, cgroups, iptables rules
// and the bridge. Every address is in 198.18.0.0/15 (never routed): the bridge
// holds the node address, pods get addresses on it, the `kubernetes` Service
// is DNATed from the bridge to the API server's loopback port. ip_forward stays
// off and anything forwarded out of the bridge is dropped.
//
// Facts this relies on: ../shared/reference/local-node.md.
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmdirSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  CLIENT_CERT_EXT,
  ControlPlaneError,
  KUBERNETES_SERVICE_IP,
  NODE_IP,
  SERVICE_CIDR,
  apiRequest,
  delay,
  isOurs,
  kubeconfigFor,
  logFile,
  paths,
  signCert,
  startProcess,
  stopProcess,
  type Cluster,
  type ProcessRecord,
} from './controlplane.ts';
import { hostToolsLayer, ociArchive, type ImageSpec } from './oci-image.ts';
import { ensurePackages, type Requirement } from './packages.ts';
import { REGISTRY_HOST, prepareRegistry, registryPaths, registryServes } from './registry.ts';

export const NODE_NAME = 'kubegc-node';
export const BRIDGE = 'kubegc0';
/** The bridge's subnet: the node address and the pods' addresses. */
const BRIDGE_CIDR = `${NODE_IP}/16`;
const POD_RANGE = { subnet: '198.18.0.0/16', start: '198.18.1.2', end: '198.18.1.254' };
export const POD_CIDR = '198.18.1.0/24';
/** The sandbox image, imported from a local build: the DaemonSet's pinned-image glob protects it. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10';

/** containerd at its standard paths: kubegc's node GC statfs-es the paths CRI reports, in the pod as on the host. */
export const CONTAINERD = {
  root: '/var/lib/containerd',
  state: '/run/containerd',
  socket: '/run/containerd/containerd.sock',
};
const POD_LOGS = '/var/log/pods';
const CONTAINER_LOGS = '/var/log/containers';
/** Written by the kubelet outside its root dir. */
const KUBELET_SHARED = '/var/lib/kubelet';
/** The node GC DaemonSet's hostPath state directory (deploy/node/daemonset.yaml). */
const KUBEGC_NODE_STATE = '/var/lib/kubegc';
/** The node GC DaemonSet's nodefs hostPath (--root-dir, deploy/node/daemonset.yaml). */
const KUBEGC_NODEFS = '/var/lib/kubelet/kubegc';
const COMMENT = 'kubegc-local-node';

export const NODE_PACKAGES: Requirement[] = [
  { provides: 'containerd', pkg: 'containerd', why: 'the node’s container runtime' },
  { provides: 'ctr', pkg: 'containerd', why: 'imports images into containerd' },
  { provides: 'runc', pkg: 'runc', why: 'runs the node’s containers' },
  { provides: '/usr/lib/cni/bridge', pkg: 'containernetworking-plugins', why: 'pod networking' },
  { provides: 'iptables', pkg: 'iptables', why: 'the Service DNAT and the forward DROP' },
  { provides: 'ip', pkg: 'iproute2', why: 'the node bridge' },
  {
    provides: 'docker-registry',
    pkg: 'docker-registry',
    why: 'the image registry the kubelet pulls from',
  },
];

type NodeComponent = 'registry' | 'containerd' | 'kube-scheduler' | 'kubelet';
const NODE_COMPONENTS: NodeComponent[] = ['registry', 'containerd', 'kube-scheduler', 'kubelet'];

interface NodeState {
  processes: Partial<Record<NodeComponent, ProcessRecord>>;
  /** What up added to the host, so that down removes exactly that. */
  bridge: boolean;
  iptables: string[][];
  mounts: string[];
  /** Host directories that did not exist before (removed by down). */
  createdDirs: string[];
  diskMiB: number;
}

export interface NodeOptions {
  /** Size of the filesystem under containerd's root (images, snapshots), MiB. */
  diskMiB?: number;
  /**
   * The kubelet's own disk management. Default: image GC off and hard
   * eviction on disk off (kubegc's node GC is the one under test, and a small
   * image filesystem must not evict pods). `kubelet-defaults` gives the
   * kubelet's defaults for either, as on a stock node; an object gives
   * `evictionHard` exactly (signal → threshold, e.g. `imagefs.available: 5%`).
   */
  kubeletDisk?: {
    imageGc?: 'off' | 'kubelet-defaults';
    eviction?: 'off' | 'kubelet-defaults' | Record<string, string>;
  };
  log?: (line: string) => void;
}

export interface LocalNode {
  name: string;
  ip: string;
  dir: string;
  containerdSocket: string;
  /** The image registry on the node bridge (host:port), which the kubelet pulls from. */
  registry: string;
  /** The CA that signed the registry's certificate (the cluster's): for podman push and helm. */
  registryCa: string;
  /** true when upNode found the node running and reused it. */
  reused: boolean;
}

const noop = (): void => undefined;

function nodePaths(clusterDir: string) {
  // Absolute: mount points are compared with /proc/mounts.
  const dir = path.join(path.resolve(clusterDir), 'node');
  return {
    dir,
    state: path.join(dir, 'state.json'),
    containerdConfig: path.join(dir, 'containerd.toml'),
    cniConf: path.join(dir, 'cni', 'net.d'),
    cniIpam: path.join(dir, 'cni', 'ipam'),
    kubeletRoot: path.join(dir, 'kubelet'),
    kubeletCerts: path.join(dir, 'kubelet-pki'),
    kubeletConfig: path.join(dir, 'kubelet-config.yaml'),
    kubeletKubeconfig: path.join(dir, 'kubelet.kubeconfig'),
    schedulerKubeconfig: path.join(dir, 'scheduler.kubeconfig'),
    manifests: path.join(dir, 'manifests'),
    pki: path.join(dir, 'pki'),
  };
}

async function readNodeState(clusterDir: string): Promise<NodeState | undefined> {
  try {
    return JSON.parse(await fs.readFile(nodePaths(clusterDir).state, 'utf8')) as NodeState;
  } catch {
    return undefined;
  }
}

async function writeNodeState(clusterDir: string, s: NodeState): Promise<void> {
  const file = nodePaths(clusterDir).state;
  await fs.writeFile(`${file}.tmp`, JSON.stringify(s, null, 2));
  await fs.rename(`${file}.tmp`, file);
}

const execFileAsync = promisify(execFile);

function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new ControlPlaneError(`${cmd} ${args.join(' ')}: ${(e.stderr ?? e.message).trim()}`);
  }
}

function tryRun(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

/** The mounts of this machine: source and target, in /proc/mounts order. */
function mounts(): { source: string; target: string }[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [source = '', target = ''] = l.split(' ');
      return { source, target: target.replace(/\\040/g, ' ') };
    });
}

function mountPoints(): string[] {
  return mounts().map((m) => m.target);
}

/**
 * What a local node whose processes are gone left behind: a session killed
 * with its node up, a machine not rebooted since. Its tmpfs stays mounted
 * on the runtime's root with that node's images and containers, and a node
 * started on it begins with its disk nearly full (the node tests then see
 * DiskPressure from their first minute). Called once no containerd serves
 * the socket (checked before): only our own tmpfs (source COMMENT) is
 * taken down, with the shims and mounts of that containerd.
 */
function clearStaleNode(log: (line: string) => void): void {
  const stale = mounts().some((m) => m.target === CONTAINERD.root && m.source === COMMENT);
  if (!stale) return;
  log(
    `${CONTAINERD.root}: a tmpfs a previous local node left mounted (its containerd is gone); unmounting it`,
  );
  for (const pid of shimPids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  unmountUnder(CONTAINERD.state);
  unmountUnder(CONTAINERD.root);
  if (mountPoints().includes(CONTAINERD.root))
    throw new ControlPlaneError(
      `${CONTAINERD.root}: could not unmount the tmpfs a previous local node left there`,
    );
}

/** Unmounts everything at or under `dir`, deepest first. */
function unmountUnder(dir: string): void {
  const under = mountPoints()
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of under) if (!tryRun('umount', [m])) tryRun('umount', ['-l', m]);
}

async function mkdirRecorded(dir: string, created: string[]): Promise<void> {
  if (existsSync(dir)) return;
  await fs.mkdir(dir, { recursive: true });
  created.push(dir);
}

// ---------------------------------------------------------------------------
// Network

/** iptables rules up adds (table, chain, rule...); removed with -D by down. */
function iptablesRules(apiserverPort: number): string[][] {
  const tag = ['-m', 'comment', '--comment', COMMENT];
  return [
    // Nothing leaves the bridge for anywhere else (ip_forward stays 0 as well).
    ['filter', 'FORWARD', '-i', BRIDGE, '!', '-o', BRIDGE, ...tag, '-j', 'DROP'],
    // In-cluster config without kube-proxy: the `kubernetes` Service → the API server's loopback port.
    [
      'nat',
      'PREROUTING',
      '-i',
      BRIDGE,
      '-d',
      KUBERNETES_SERVICE_IP,
      '-p',
      'tcp',
      '--dport',
      '443',
      ...tag,
      '-j',
      'DNAT',
      '--to-destination',
      `127.0.0.1:${apiserverPort}`,
    ],
  ];
}

function addRule(rule: string[]): void {
  const [table, chain, ...spec] = rule as [string, string, ...string[]];
  if (tryRun('iptables', ['-t', table, '-C', chain, ...spec])) return;
  run('iptables', ['-t', table, '-I', chain, ...spec]);
}

function deleteRule(rule: string[]): void {
  const [table, chain, ...spec] = rule as [string, string, ...string[]];
  while (tryRun('iptables', ['-t', table, '-D', chain, ...spec])) {
    /* every copy */
  }
}

function bridgeExists(): boolean {
  return tryRun('ip', ['link', 'show', BRIDGE]);
}

async function setUpNetwork(state: NodeState, apiserverPort: number): Promise<void> {
  if (readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() !== '0')
    throw new ControlPlaneError(
      'net.ipv4.ip_forward is on; the local node keeps every packet on this machine and needs it off',
    );
  if (!bridgeExists()) {
    run('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
    state.bridge = true;
  }
  if (!run('ip', ['-4', 'addr', 'show', 'dev', BRIDGE]).includes(` ${BRIDGE_CIDR} `))
    run('ip', ['addr', 'add', BRIDGE_CIDR, 'dev', BRIDGE]);
  run('ip', ['link', 'set', BRIDGE, 'up']);
  // The DNAT to 127.0.0.1 needs loopback destinations routable from the bridge.
  await fs.writeFile(`/proc/sys/net/ipv4/conf/${BRIDGE}/route_localnet`, '1');
  state.iptables = iptablesRules(apiserverPort);
  for (const r of state.iptables) addRule(r);
}

function cniConfig(ipamDir: string): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'kubegc-local',
      plugins: [
        {
          type: 'bridge',
          bridge: BRIDGE,
          isGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: ipamDir,
            ranges: [
              [
                {
                  subnet: POD_RANGE.subnet,
                  rangeStart: POD_RANGE.start,
                  rangeEnd: POD_RANGE.end,
                  gateway: NODE_IP,
                },
              ],
            ],
            // Only the Services; no default route: a pod reaches nothing beyond this machine.
            routes: [{ dst: SERVICE_CIDR, gw: NODE_IP }],
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

// ---------------------------------------------------------------------------
// containerd

function containerdConfig(cniConf: string, registryHosts: string): string {
  return `version = 2
root = "${CONTAINERD.root}"
state = "${CONTAINERD.state}"
[grpc]
  address = "${CONTAINERD.socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # Without CAP_SYS_RESOURCE runc cannot set a negative oom_score_adj and every
  # sandbox fails ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  # A directory of our own: Debian's podman package puts a bridge config in /etc/cni/net.d.
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cniConf}"
  # Registry hosts (hosts.toml per host:port): the local registry, trusted through the cluster CA.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${registryHosts}"
`;
}

function ctr(args: string[]): string {
  return run('ctr', ['--address', CONTAINERD.socket, '-n', 'k8s.io', ...args]);
}

/** `ctr` without blocking the event loop (an import of a large archive takes seconds). */
async function ctrAsync(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(
    'ctr',
    ['--address', CONTAINERD.socket, '-n', 'k8s.io', ...args],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout;
}

/** Images in the node's containerd (k8s.io namespace), by name. */
export async function nodeImages(): Promise<string[]> {
  return (await ctrAsync(['images', 'ls', '-q'])).split('\n').filter(Boolean);
}

/**
 * Builds test images as one OCI archive and imports it into the node's containerd.
 * For the tests' made-up images only: the kubegc image is pushed to the node's
 * registry and pulled by the kubelet (cluster/registry.ts), as users' clusters do.
 */
export async function importNodeImages(specs: ImageSpec[]): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-images-'));
  try {
    const file = path.join(dir, 'images.oci.tar');
    await fs.writeFile(file, ociArchive(specs).archive);
    await ctrAsync(['images', 'import', file]);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** The pause image: the host's `sleep` and its libraries, built here (nothing can be pulled). */
async function importPauseImage(dir: string): Promise<void> {
  if (ctr(['images', 'ls', '-q']).split('\n').includes(PAUSE_IMAGE)) return;
  const { archive } = ociArchive([
    {
      name: PAUSE_IMAGE,
      layers: [hostToolsLayer(['/bin/sleep'])],
      entrypoint: ['/bin/sleep', '2147483647'],
    },
  ]);
  const file = path.join(dir, 'pause.oci.tar');
  await fs.writeFile(file, archive);
  ctr(['images', 'import', file]);
  await fs.rm(file, { force: true });
}

// ---------------------------------------------------------------------------
// kubelet and kube-scheduler

function kubeletConfig(
  p: ReturnType<typeof nodePaths>,
  caCrt: string,
  disk: NonNullable<NodeOptions['kubeletDisk']> = {},
): string {
  const imageGc =
    disk.imageGc === 'kubelet-defaults'
      ? "# The kubelet's image GC at its defaults (85/80, every 5 minutes).\n"
      : `# kubegc's node GC is the one under test: the kubelet's own image GC stays
# out of its way.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`;
  const eviction =
    typeof disk.eviction === 'object'
      ? `evictionHard:\n${Object.entries(disk.eviction)
          .map(([signal, value]) => `  ${signal}: ${JSON.stringify(value)}\n`)
          .join('')}`
      : disk.eviction === 'kubelet-defaults'
        ? "# Hard eviction at the kubelet's defaults (imagefs.available<15%, nodefs.available<10%, ...).\n"
        : `# A small image filesystem must not evict pods.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%"
  imagefs.available: "0%"
`;
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd and cgroup v1 on these machines.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${CONTAINERD.socket}
staticPodPath: ${p.manifests}
address: ${NODE_IP}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podCIDR: ${POD_CIDR}
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: ${caCrt} }
authorization:
  mode: Webhook
${imageGc}${eviction}`;
}

async function nodeReady(clusterDir: string): Promise<boolean> {
  const res = await apiRequest(clusterDir, 'GET', `/api/v1/nodes/${NODE_NAME}`);
  if (res.status !== 200) return false;
  const node = JSON.parse(res.body) as {
    status?: { conditions?: { type: string; status: string }[] };
  };
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

async function waitUntil(
  what: string,
  rec: ProcessRecord | undefined,
  logName: string,
  clusterDir: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (rec && !isOurs(rec))
      throw new ControlPlaneError(
        `${logName} exited while waiting for ${what}; see ${logFile(clusterDir, logName)}`,
      );
    if (await check().catch(() => false)) return;
    await delay(250);
  }
  throw new ControlPlaneError(
    `${what}: not within ${timeoutMs / 1000}s; see ${logFile(clusterDir, logName)}`,
  );
}

function running(state: NodeState): boolean {
  return NODE_COMPONENTS.every((c) => isOurs(state.processes[c]));
}

/**
 * Joins a node to the running control plane in `cluster.dir` (idempotent: a
 * node already running there is reused). Root only.
 */
export async function upNode(cluster: Cluster, opts: NodeOptions = {}): Promise<LocalNode> {
  const log = opts.log ?? noop;
  const p = nodePaths(cluster.dir);
  const result = (reused: boolean): LocalNode => ({
    name: NODE_NAME,
    ip: NODE_IP,
    dir: p.dir,
    containerdSocket: CONTAINERD.socket,
    registry: REGISTRY_HOST,
    registryCa: paths(cluster.dir).caCrt,
    reused,
  });
  if (process.getuid?.() !== 0)
    throw new ControlPlaneError(
      'the local node needs root: it runs containerd and a kubelet and adds a bridge, iptables rules and cgroups',
    );
  const existing = await readNodeState(cluster.dir);
  if (existing && running(existing) && (await nodeReady(cluster.dir).catch(() => false)))
    return result(true);
  if (existing) {
    log('a previous node in this directory is not fully running; replacing it');
    await downNode(cluster.dir, log);
  }
  ensurePackages(NODE_PACKAGES, log);
  if (existsSync(CONTAINERD.socket) && tryRun('ctr', ['--address', CONTAINERD.socket, 'version']))
    throw new ControlPlaneError(
      `a containerd not started by kubegc already serves ${CONTAINERD.socket}; stop it first (the local node runs its own at the standard paths)`,
    );
  const apiserverPort = Number(new URL(cluster.server).port);
  const state: NodeState = {
    processes: {},
    bridge: false,
    iptables: [],
    mounts: [],
    createdDirs: [],
    diskMiB: opts.diskMiB ?? 2048,
  };
  await fs.mkdir(p.dir, { recursive: true });
  await writeNodeState(cluster.dir, state);
  const cp = paths(cluster.dir);
  try {
    log(
      `network: bridge ${BRIDGE} (${BRIDGE_CIDR}), Service ${KUBERNETES_SERVICE_IP}:443 → 127.0.0.1:${apiserverPort}`,
    );
    await setUpNetwork(state, apiserverPort);
    await writeNodeState(cluster.dir, state);
    for (const d of [p.cniConf, p.cniIpam, p.kubeletRoot, p.kubeletCerts, p.manifests, p.pki])
      await fs.mkdir(d, { recursive: true });
    await fs.writeFile(path.join(p.cniConf, '10-kubegc.conflist'), cniConfig(p.cniIpam));

    clearStaleNode(log);
    for (const d of [CONTAINERD.root, CONTAINERD.state, POD_LOGS, CONTAINER_LOGS, KUBELET_SHARED])
      await mkdirRecorded(d, state.createdDirs);
    // containerd 1.6 shims put their sockets in /run/containerd/s whatever the
    // configured state dir, creating missing parents with mode 0600 (any
    // containerd on this machine, the node-GC tests' own included). A pod that
    // mounts /run/containerd (the node GC DaemonSet, root without
    // CAP_DAC_OVERRIDE) must be able to traverse it: containerd's usual 0711.
    await fs.chmod(CONTAINERD.state, 0o711);
    // Made later by the kubelet for the node GC DaemonSet (hostPath DirectoryOrCreate): ours to remove if absent now.
    if (!existsSync(KUBEGC_NODE_STATE)) state.createdDirs.unshift(KUBEGC_NODE_STATE);
    // And its nodefs directory (--root-dir), below the kubelet's shared root.
    if (!existsSync(KUBEGC_NODEFS)) state.createdDirs.unshift(KUBEGC_NODEFS);
    if (readdirSync(CONTAINERD.root).length > 0 && !mountPoints().includes(CONTAINERD.root))
      throw new ControlPlaneError(
        `${CONTAINERD.root} is not empty; the local node mounts a filesystem of its own there`,
      );
    if (!mountPoints().includes(CONTAINERD.root)) {
      run('mount', ['-t', 'tmpfs', '-o', `size=${state.diskMiB}m`, COMMENT, CONTAINERD.root]);
      state.mounts.push(CONTAINERD.root);
    }
    await writeNodeState(cluster.dir, state);

    log(`starting the image registry (https://${REGISTRY_HOST}, TLS from the cluster CA)`);
    await prepareRegistry(cluster.dir, p.dir);
    const registry = startProcess(cluster.dir, 'registry', await which('docker-registry'), [
      'serve',
      registryPaths(p.dir).config,
    ]);
    state.processes.registry = registry;
    await writeNodeState(cluster.dir, state);
    await waitUntil('the registry to serve', registry, 'registry', cluster.dir, 30_000, () =>
      registryServes(cp.caCrt),
    );

    log(
      `starting containerd (${CONTAINERD.socket}, ${state.diskMiB} MiB under ${CONTAINERD.root})`,
    );
    await fs.writeFile(
      p.containerdConfig,
      containerdConfig(p.cniConf, registryPaths(p.dir).hostsDir),
    );
    const containerd = startProcess(cluster.dir, 'containerd', await which('containerd'), [
      '--config',
      p.containerdConfig,
    ]);
    state.processes.containerd = containerd;
    await writeNodeState(cluster.dir, state);
    await waitUntil('containerd to serve', containerd, 'containerd', cluster.dir, 30_000, () =>
      Promise.resolve(tryRun('ctr', ['--address', CONTAINERD.socket, 'version'])),
    );
    await importPauseImage(p.dir);

    // Credentials: the Node authorizer and NodeRestriction accept system:node:NAME in system:nodes.
    await signCert(
      cluster.dir,
      p.pki,
      'kubelet',
      `/O=system:nodes/CN=system:node:${NODE_NAME}`,
      CLIENT_CERT_EXT,
    );
    await signCert(cluster.dir, p.pki, 'scheduler', '/CN=system:kube-scheduler', CLIENT_CERT_EXT);
    const kubeconfig = async (user: string, file: string): Promise<void> => {
      const cfg = await kubeconfigFor(
        cluster.server,
        cp.caCrt,
        user,
        path.join(p.pki, `${user}.crt`),
        path.join(p.pki, `${user}.key`),
      );
      await fs.writeFile(file, JSON.stringify(cfg, null, 2), { mode: 0o600 });
    };
    await kubeconfig('kubelet', p.kubeletKubeconfig);
    await kubeconfig('scheduler', p.schedulerKubeconfig);

    log('starting kube-scheduler');
    state.processes['kube-scheduler'] = startProcess(
      cluster.dir,
      'kube-scheduler',
      path.join(cluster.binDir, 'kube-scheduler'),
      [
        `--kubeconfig=${p.schedulerKubeconfig}`,
        `--authentication-kubeconfig=${p.schedulerKubeconfig}`,
        `--authorization-kubeconfig=${p.schedulerKubeconfig}`,
        '--leader-elect=false',
        '--secure-port=0',
        '--v=0',
      ],
    );
    await writeNodeState(cluster.dir, state);

    log(`starting kubelet (node ${NODE_NAME}, ${NODE_IP})`);
    await fs.writeFile(p.kubeletConfig, kubeletConfig(p, cp.caCrt, opts.kubeletDisk));
    const kubelet = startProcess(cluster.dir, 'kubelet', path.join(cluster.binDir, 'kubelet'), [
      `--config=${p.kubeletConfig}`,
      `--kubeconfig=${p.kubeletKubeconfig}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${NODE_IP}`,
      `--root-dir=${p.kubeletRoot}`,
      `--cert-dir=${p.kubeletCerts}`,
      '--v=1',
    ]);
    state.processes.kubelet = kubelet;
    await writeNodeState(cluster.dir, state);
    await waitUntil(`node ${NODE_NAME} to be Ready`, kubelet, 'kubelet', cluster.dir, 90_000, () =>
      nodeReady(cluster.dir),
    );
  } catch (err) {
    await downNode(cluster.dir, log).catch(noop);
    throw err;
  }
  return result(false);
}

async function which(cmd: string): Promise<string> {
  const out = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  const p = out.stdout.trim();
  if (out.status !== 0 || !p) throw new ControlPlaneError(`${cmd} is not on PATH`);
  return fs.realpath(p);
}

// ---------------------------------------------------------------------------
// Teardown

/** containerd-shim processes serving our containerd (they outlive it). */
function shimPids(): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (
        (cmd[0] ?? '').includes('containerd-shim') &&
        cmd.includes(CONTAINERD.socket) &&
        cmd.includes('k8s.io')
      )
        out.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Removes empty cgroup directories the kubelet made (kubepods...), deepest first, in every hierarchy. */
function removeKubeletCgroups(): void {
  const base = '/sys/fs/cgroup';
  if (!existsSync(base)) return;
  const remove = (dir: string): void => {
    let entries: string[] = [];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const e of entries) {
      const child = path.join(dir, e);
      try {
        if (statSync(child).isDirectory()) remove(child);
      } catch {
        /* gone */
      }
    }
    try {
      rmdirSync(dir);
    } catch {
      /* still in use, or not a cgroup we own */
    }
  };
  for (const hierarchy of readdirSync(base)) {
    const kubepods = path.join(base, hierarchy, 'kubepods');
    if (existsSync(kubepods)) remove(kubepods);
  }
}

/**
 * Stops the node's containerd (SIGTERM; the shims keep the containers running,
 * as on a real node whose runtime restarts) and starts it again with the same
 * configuration; resolves once it serves CRI again. For the node soak's
 * runtime-restart fault.
 */
export async function restartContainerd(clusterDir: string): Promise<void> {
  const state = await readNodeState(clusterDir);
  if (!state || !isOurs(state.processes.containerd))
    throw new ControlPlaneError(`no containerd of the local node in ${clusterDir} is running`);
  const p = nodePaths(clusterDir);
  await stopProcess(state.processes.containerd);
  const containerd = startProcess(clusterDir, 'containerd', await which('containerd'), [
    '--config',
    p.containerdConfig,
  ]);
  state.processes.containerd = containerd;
  await writeNodeState(clusterDir, state);
  await waitUntil('containerd to serve again', containerd, 'containerd', clusterDir, 30_000, () =>
    Promise.resolve(tryRun('ctr', ['--address', CONTAINERD.socket, 'version'])),
  );
}

/** Stops every pod (sandboxes through CRI, then any shim left), the node's processes, and undoes what up added. */
export async function downNode(
  clusterDir: string,
  log: (line: string) => void = noop,
): Promise<boolean> {
  const p = nodePaths(clusterDir);
  const state = await readNodeState(clusterDir);
  if (!state) return false;
  await stopProcess(state.processes.kubelet);
  await stopProcess(state.processes['kube-scheduler']);
  if (isOurs(state.processes.containerd)) {
    // Pods first, while containerd can still tear down their networks and mounts.
    try {
      const { CriClient } = await import('../src/node/cri/client.ts');
      const cri = new CriClient(`unix://${CONTAINERD.socket}`, { timeoutMs: 30_000 });
      try {
        for (const s of await cri.listSandboxes()) {
          await cri.stopSandbox(s.id).catch(noop);
          await cri.removeSandbox(s.id).catch(noop);
        }
      } finally {
        cri.close();
      }
    } catch (err) {
      log(`could not remove the pods through CRI: ${(err as Error).message}`);
    }
  }
  await stopProcess(state.processes.containerd);
  await stopProcess(state.processes.registry);
  for (const pid of shimPids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (let i = 0; i < 50 && shimPids().length > 0; i++) await delay(100);
  unmountUnder(CONTAINERD.state);
  unmountUnder(p.kubeletRoot);
  for (const m of [...state.mounts].reverse()) unmountUnder(m);
  removeKubeletCgroups();
  for (const r of state.iptables) deleteRule(r);
  // The kubelet's own chains (it adds them on every start).
  for (const bin of ['iptables', 'ip6tables'])
    for (const [table, chain] of [
      ['filter', 'KUBE-FIREWALL'],
      ['filter', 'KUBE-KUBELET-CANARY'],
      ['mangle', 'KUBE-KUBELET-CANARY'],
      ['nat', 'KUBE-KUBELET-CANARY'],
      ['mangle', 'KUBE-IPTABLES-HINT'],
    ] as const) {
      if (!tryRun(bin, ['-t', table, '-L', chain, '-n'])) continue;
      // Jumps into the chain from the built-in chains go first.
      for (const from of ['INPUT', 'OUTPUT', 'FORWARD'])
        while (tryRun(bin, ['-t', table, '-D', from, '-j', chain])) {
          /* every copy */
        }
      tryRun(bin, ['-t', table, '-F', chain]);
      tryRun(bin, ['-t', table, '-X', chain]);
    }
  if (state.bridge && bridgeExists()) tryRun('ip', ['link', 'del', BRIDGE]);
  // What the kubelet wrote outside its root (pod logs go with the directories up created).
  await fs.rm(path.join(KUBELET_SHARED, 'device-plugins', 'kubelet.sock'), { force: true });
  for (const d of [...state.createdDirs].reverse())
    await fs.rm(d, { recursive: true, force: true }).catch(noop);
  await fs.rm(p.dir, { recursive: true, force: true });
  return true;
}

export interface NodeStatus {
  name: string;
  ready: boolean;
  running: Partial<Record<NodeComponent, number>>;
}

export async function nodeStatus(clusterDir: string): Promise<NodeStatus | undefined> {
  const state = await readNodeState(clusterDir);
  if (!state) return undefined;
  const runningNow: Partial<Record<NodeComponent, number>> = {};
  for (const c of NODE_COMPONENTS) {
    const rec = state.processes[c];
    if (rec && isOurs(rec)) runningNow[c] = rec.pid;
  }
  return {
    name: NODE_NAME,
    ready: await nodeReady(clusterDir).catch(() => false),
    running: runningNow,
  };
}
