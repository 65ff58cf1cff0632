// A real containerd for the node-GC e2e tests, private to one test file: its
// own config, socket, state and runc root under a temp directory, and its root
// (content store + snapshots) on a size-limited tmpfs so disk usage is real
// and small. The harness also plays the kubelet over CRI (RunPodSandbox,
// CreateContainer, StartContainer) and builds its images itself (nothing can
// be pulled). Needs root, containerd, ctr and runc (installed with apt-get
// when missing, as .ci/run does).
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  closeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensurePackages, TEST_PACKAGES } from '../../cluster/packages.ts';
import {
  CriClient,
  CriError,
  type ContainerState,
  type CriSandbox,
} from '../../src/node/cri/client.ts';
import type { FsStats } from '../../src/node/image-gc-policy.ts';
import { statFilesystem } from '../../src/node/statfs.ts';
import {
  hostToolsLayer,
  ociArchive,
  type BuiltImage,
  type ImageSpec,
  type Layer,
} from '../../cluster/oci-image.ts';
import { afterFile } from './e2e.ts';

export const PAUSE_IMAGE = 'kubegc.test/pause:1';

const KUBELET_LABELS = {
  podUid: 'io.kubernetes.pod.uid',
  podName: 'io.kubernetes.pod.name',
  podNamespace: 'io.kubernetes.pod.namespace',
  containerName: 'io.kubernetes.container.name',
};

/** containerd, ctr and runc on PATH, installing Debian's packages when missing (needs root). */
export function ensureContainerdInstalled(): void {
  if (process.getuid?.() !== 0)
    throw new Error('the node-GC e2e tests need root (containerd, runc and a tmpfs mount)');
  ensurePackages(TEST_PACKAGES.filter((r) => ['containerd', 'ctr', 'runc'].includes(r.provides)));
}

/** Polls until `check` returns a truthy value, or fails with `what` after the deadline. */
export async function until<T>(
  what: string,
  check: () => Promise<T> | T,
  timeoutMs = 20_000,
  intervalMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface PodSandboxHandle {
  id: string;
  uid: string;
  name: string;
  namespace: string;
  attempt: number;
  logDirectory: string;
  /** The config every CreateContainer repeats. */
  config: Record<string, unknown>;
}

export interface ContainerOptions {
  name: string;
  image: string;
  command: string[];
  attempt?: number;
  /** Leave out the kubelet's labels (an "unidentified" container). */
  unlabelled?: boolean;
  /** Create it only: a container in state created, never started. */
  createOnly?: boolean;
}

export interface TestContainerd {
  dir: string;
  endpoint: string;
  /** The tmpfs holding containerd's root. */
  root: string;
  podLogsDir: string;
  containerLogsDir: string;
  cri: CriClient;
  pause: BuiltImage;
  tools: Layer;
  logFile: string;
  importImages(specs: ImageSpec[]): Promise<BuiltImage[]>;
  imageIds(): Promise<Set<string>>;
  /**
   * The ID of the image containerd's CRI resolves a reference to (ImageStatus,
   * which the kubelet asks before it pulls), or undefined: no such image, or a
   * reference it refuses.
   */
  resolveImage(ref: string): Promise<string | undefined>;
  containerIds(): Promise<Set<string>>;
  sandboxIds(): Promise<Set<string>>;
  fs(): Promise<FsStats>;
  runPod(o: {
    name: string;
    uid?: string;
    namespace?: string;
    attempt?: number;
  }): Promise<PodSandboxHandle>;
  /** Creates and starts a container (createOnly: creates it); with `waitFor`, waits for that state. */
  runContainer(
    pod: PodSandboxHandle,
    o: ContainerOptions,
    waitFor?: ContainerState,
  ): Promise<string>;
  waitForState(containerId: string, state: ContainerState): Promise<void>;
  stopPod(pod: PodSandboxHandle | CriSandbox): Promise<void>;
  /** Removes every sandbox, container and image but the pause image, and the log directories. */
  reset(): Promise<void>;
  /** Stops containerd (data kept); start() brings it back. */
  stop(): Promise<void>;
  start(): Promise<void>;
  teardown(): Promise<void>;
}

/**
 * A containerd for the whole test file: started now, torn down after the
 * file; with `resetBeforeEach`, emptied (reset()) before each test.
 */
export async function fileContainerd(
  o: { sizeMiB?: number; resetBeforeEach?: boolean } = {},
): Promise<TestContainerd> {
  const h = await startContainerd(o);
  afterFile(() => h.teardown());
  if (o.resetBeforeEach) beforeEach(() => h.reset());
  return h;
}

export async function startContainerd(o: { sizeMiB?: number } = {}): Promise<TestContainerd> {
  ensureContainerdInstalled();
  // Short: unix socket paths are limited to 108 bytes.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kgc-'));
  const root = path.join(dir, 'root');
  const state = path.join(dir, 'state');
  const socket = path.join(dir, 'c.sock');
  const podLogsDir = path.join(dir, 'pods');
  const containerLogsDir = path.join(dir, 'containers');
  for (const d of [root, state, podLogsDir, containerLogsDir, path.join(dir, 'cni', 'conf')])
    mkdirSync(d, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${o.sizeMiB ?? 256}m`, 'kubegc-e2e', root]);

  const config = path.join(dir, 'config.toml');
  writeFileSync(
    config,
    `version = 2
root = "${root}"
state = "${state}"
[grpc]
  address = "${socket}"
[ttrpc]
  address = "${socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # The sandbox's default oom_score_adj (-998) is refused without CAP_SYS_RESOURCE
  # in some environments; never go below containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "${dir}/runc"
  # Pods use host networking; no CNI is needed, and the system's is not read.
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${dir}/cni/bin"
    conf_dir = "${dir}/cni/conf"
`,
  );
  const logFile = path.join(dir, 'containerd.log');
  const endpoint = `unix://${socket}`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const cri = new CriClient(endpoint, { timeoutMs: 30_000 });
  const logTail = (): string => {
    try {
      return readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '';
    }
  };

  const start = async (): Promise<void> => {
    const fd = openSync(logFile, 'a');
    const proc = spawn('containerd', ['--config', config], { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    child = proc;
    let gone = false;
    exited = new Promise<void>((resolve) =>
      proc.on('exit', () => {
        gone = true;
        resolve();
      }),
    );
    await until(
      'containerd to answer CRI Version',
      async () => {
        if (gone) throw new Error(`containerd exited:\n${logTail()}`);
        return (await cri.version()).runtimeName === 'containerd';
      },
      30_000,
      100,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${logTail()}`);
    });
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const killed = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killed);
    child = undefined;
  };

  await start();

  const imageIds = async (): Promise<Set<string>> =>
    new Set((await cri.listImages()).map((i) => i.id));

  let archives = 0;
  const importImages = async (specs: ImageSpec[]): Promise<BuiltImage[]> => {
    const { archive, images } = ociArchive(specs);
    const file = path.join(dir, `images-${archives++}.tar`);
    writeFileSync(file, archive);
    try {
      execFileSync(
        'ctr',
        ['-a', socket, '-n', 'k8s.io', 'images', 'import', '--snapshotter', 'native', file],
        { stdio: 'pipe' },
      );
    } finally {
      rmSync(file, { force: true });
    }
    // The CRI plugin learns of new images from containerd's events.
    await until('the CRI plugin to list the imported images', async () => {
      const ids = await imageIds();
      return images.every((i) => ids.has(i.id));
    });
    return images;
  };

  const tools = hostToolsLayer();
  const [pause] = await importImages([
    { name: PAUSE_IMAGE, layers: [tools], entrypoint: ['/bin/sleep', 'infinity'] },
  ]);
  if (!pause) throw new Error('pause image not built');

  const waitForState = async (id: string, want: ContainerState): Promise<void> => {
    await until(`container ${id.slice(0, 12)} to be ${want}`, async () => {
      const s = await cri.containerStatus(id);
      return s?.state === want;
    });
  };

  const harness: TestContainerd = {
    dir,
    endpoint,
    root,
    podLogsDir,
    containerLogsDir,
    cri,
    pause,
    tools,
    logFile,
    importImages,
    imageIds,
    async resolveImage(ref) {
      try {
        const r = await cri.call<{ image?: { id?: string } | null }>(cri.images, 'ImageStatus', {
          image: { image: ref },
        });
        return r.image?.id || undefined;
      } catch (err) {
        if (err instanceof CriError) return undefined;
        throw err;
      }
    },
    containerIds: async () => new Set((await cri.listContainers()).map((c) => c.id)),
    sandboxIds: async () => new Set((await cri.listSandboxes()).map((s) => s.id)),
    fs: () => statFilesystem(root),
    async runPod({
      name,
      uid = `uid-${randomBytes(6).toString('hex')}`,
      namespace = 'default',
      attempt = 0,
    }) {
      const logDirectory = path.join(podLogsDir, `${namespace}_${name}_${uid}`);
      const config = {
        metadata: { name, uid, namespace, attempt },
        hostname: '',
        log_directory: logDirectory,
        labels: {
          [KUBELET_LABELS.podUid]: uid,
          [KUBELET_LABELS.podName]: name,
          [KUBELET_LABELS.podNamespace]: namespace,
        },
        // Host networking (no CNI), a private PID namespace.
        linux: { security_context: { namespace_options: { network: 2, pid: 1, ipc: 0 } } },
      };
      const r = await cri.call<{ pod_sandbox_id: string }>(cri.runtime, 'RunPodSandbox', {
        config,
      });
      return { id: r.pod_sandbox_id, uid, name, namespace, attempt, logDirectory, config };
    },
    async runContainer(pod, c, waitFor) {
      const attempt = c.attempt ?? 0;
      const labels = c.unlabelled
        ? {}
        : {
            [KUBELET_LABELS.podUid]: pod.uid,
            [KUBELET_LABELS.podName]: pod.name,
            [KUBELET_LABELS.podNamespace]: pod.namespace,
            [KUBELET_LABELS.containerName]: c.name,
          };
      const r = await cri.call<{ container_id: string }>(cri.runtime, 'CreateContainer', {
        pod_sandbox_id: pod.id,
        sandbox_config: pod.config,
        config: {
          metadata: { name: c.name, attempt },
          image: { image: c.image },
          command: c.command,
          labels,
          log_path: `${c.name}/${attempt}.log`,
        },
      });
      if (!c.createOnly)
        await cri.call(cri.runtime, 'StartContainer', { container_id: r.container_id });
      if (waitFor) await waitForState(r.container_id, waitFor);
      return r.container_id;
    },
    waitForState,
    async stopPod(pod) {
      await cri.stopSandbox(pod.id);
    },
    async reset() {
      for (const s of await cri.listSandboxes()) {
        await cri.stopSandbox(s.id);
        await cri.removeSandbox(s.id);
      }
      for (const c of await cri.listContainers()) await cri.removeContainer(c.id);
      for (const i of await cri.listImages()) if (i.id !== pause.id) await cri.removeImage(i.id);
      for (const d of [podLogsDir, containerLogsDir]) {
        rmSync(d, { recursive: true, force: true });
        mkdirSync(d, { recursive: true });
      }
    },
    stop,
    start,
    async teardown() {
      try {
        if (child) {
          for (const s of await cri.listSandboxes()) {
            await cri.stopSandbox(s.id);
            await cri.removeSandbox(s.id);
          }
        }
      } finally {
        cri.close();
        await stop();
        killShimsOf(socket);
        unmountAllUnder(dir);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
  return harness;
}

/** Shims outlive containerd by design; end the ones that served this test's socket, by PID. */
function killShimsOf(socket: string): void {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const args = cmdline.split('\0');
    if (!args[0]?.includes('containerd-shim')) continue;
    const i = args.indexOf('-address');
    if (i !== -1 && args[i + 1] === socket) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}

/** The tmpfs root, and anything a killed shim left mounted (rootfs, /dev/shm), deepest first. */
function unmountAllUnder(dir: string): void {
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    if (spawnSync('umount', [m]).status !== 0) spawnSync('umount', ['-l', m]);
  }
}
