// A CRI runtime in memory for the node GC's unit tests: images made of
// layers (a layer shared by several images takes disk space once, as on
// CRI-O and containerd, while each image's reported size counts it again),
// containers, sandboxes, and a file system whose available bytes follow
// what remains. Acceptance stays with the real containerd (test/e2e/node-*).
import { Registry } from 'prom-client';
import { silentLogger } from '../../src/log.ts';
import type {
  CriContainer,
  CriImage,
  CriSandbox,
  ContainerState,
  ImageFilesystem,
} from '../../src/node/cri/client.ts';
import type { ImageGcOptions } from '../../src/node/image-gc.ts';
import {
  DEFAULT_IMAGE_GC_POLICY,
  type FsStats,
  type ImageStoreView,
} from '../../src/node/image-gc-policy.ts';
import { createNodeMetrics, type NodeMetrics } from '../../src/node/metrics.ts';
import type { NodeEventReason, NodeEvents } from '../../src/node/node-events.ts';
import type { RuntimeConnection } from '../../src/node/runtime.ts';

export interface FakeImage {
  id: string;
  repoTags?: string[];
  repoDigests?: string[];
  pinned?: boolean;
  /** Layer name → bytes. */
  layers: Record<string, number>;
}

export class FakeRuntime {
  images = new Map<string, FakeImage>();
  containers: CriContainer[] = [];
  sandboxes: CriSandbox[] = [];
  removed: string[] = [];
  /** Container and sandbox calls, in order ("stop c1", "remove c1", "stopp s1", "removep s1"). */
  calls: string[] = [];
  /** Image IDs whose RemoveImage fails (with this message). */
  failRemoval = new Map<string, string>();
  /** Runs before each RemoveImage answers (to change the world meanwhile). */
  beforeRemove?: (id: string) => void;
  imageFs: ImageFilesystem[] = [{ mountpoint: '/var/lib/containers/storage' }];
  containerFs: ImageFilesystem[] = [];

  readonly capacityBytes: number;
  /** Bytes used by everything but the images. */
  otherUsedBytes: number;

  constructor(capacityBytes: number, otherUsedBytes: number) {
    this.capacityBytes = capacityBytes;
    this.otherUsedBytes = otherUsedBytes;
  }

  addImage(i: FakeImage): this {
    this.images.set(i.id, i);
    return this;
  }

  /** `count` unused images docker.io/library/app<i>:1, each a layer of its own of `bytes`; IDs from `id(i)`. */
  addApps(count: number, bytes: number, id: (i: number) => string): this {
    for (let i = 0; i < count; i++)
      this.addImage({
        id: id(i),
        repoTags: [`docker.io/library/app${i}:1`],
        layers: { [`l${i}`]: bytes },
      });
    return this;
  }

  /** ImageGarbageCollector options over this runtime: the kubelet's policy, the pause image named, statfs and the store check faked. */
  imageGcOptions(o: Partial<ImageGcOptions> = {}): ImageGcOptions {
    return {
      policy: DEFAULT_IMAGE_GC_POLICY,
      pinnedImages: [],
      sandboxImage: 'registry.k8s.io/pause:3.10',
      maxRemovalsPerRun: 0,
      dryRun: false,
      statfs: this.statfs,
      imageStore: this.imageStore,
      ...o,
    };
  }

  addContainer(id: string, image: string, state: ContainerState = 'running'): this {
    this.containers.push({
      id,
      sandboxId: `sb-${id}`,
      name: id,
      attempt: 0,
      image,
      imageRef: image,
      imageId: '',
      state,
      createdAtNs: 0n,
      labels: {},
    });
    return this;
  }

  /** A container of a pod (the kubelet's labels), with its sandbox (NOTREADY) if the pod has none yet. */
  addPodContainer(
    id: string,
    podUid: string,
    name: string,
    state: ContainerState,
    createdAtMs: number,
  ): this {
    this.containers.push({
      id,
      sandboxId: `sb-${podUid}`,
      name,
      attempt: 0,
      image: 'docker.io/library/app:1',
      imageRef: 'docker.io/library/app:1',
      imageId: '',
      state,
      createdAtNs: BigInt(createdAtMs) * 1_000_000n,
      labels: {
        'io.kubernetes.pod.uid': podUid,
        'io.kubernetes.container.name': name,
        'io.kubernetes.pod.name': podUid,
        'io.kubernetes.pod.namespace': 'default',
      },
    });
    if (!this.sandboxes.some((s) => s.id === `sb-${podUid}`))
      this.sandboxes.push({
        id: `sb-${podUid}`,
        name: podUid,
        namespace: 'default',
        uid: podUid,
        attempt: 0,
        state: 'notready',
        createdAtNs: BigInt(createdAtMs) * 1_000_000n,
        labels: { 'io.kubernetes.pod.uid': podUid },
      });
    return this;
  }

  /** The pod's sandbox runs (READY), as while any of its containers may run. */
  readySandbox(podUid: string): this {
    this.sandboxes = this.sandboxes.map((s) =>
      s.id === `sb-${podUid}` ? { ...s, state: 'ready' } : s,
    );
    return this;
  }

  /** Disk bytes the images take: each distinct layer once. */
  imageDiskBytes(): number {
    const layers = new Map<string, number>();
    for (const i of this.images.values())
      for (const [l, b] of Object.entries(i.layers)) layers.set(l, b);
    return [...layers.values()].reduce((a, b) => a + b, 0);
  }

  /** Inodes of the filesystem, when a test wants statfs to report them: each distinct layer takes `perLayer`. */
  inodes?: { capacity: number; otherUsed: number; perLayer: number };

  statfs = (_mountpoint: string): Promise<FsStats> => {
    const layers = new Set<string>();
    for (const i of this.images.values()) for (const l of Object.keys(i.layers)) layers.add(l);
    return Promise.resolve({
      capacityBytes: this.capacityBytes,
      availableBytes: this.capacityBytes - this.otherUsedBytes - this.imageDiskBytes(),
      ...(this.inodes
        ? {
            inodes: this.inodes.capacity,
            inodesFree:
              this.inodes.capacity - this.inodes.otherUsed - layers.size * this.inodes.perLayer,
          }
        : {}),
    });
  };

  /** What kubegc sees at the image filesystem's mountpoint: the runtime's files, on its device. */
  storeView: ImageStoreView = { device: 1n, entries: [{ name: 'images.json', device: 1n }] };

  imageStore = (_mountpoint: string): Promise<ImageStoreView> => Promise.resolve(this.storeView);

  /**
   * Awaited by ListImages and ImageFsInfo before they answer: a test sees
   * which calls a pass has in flight at once (a slow runtime pays each
   * round trip it waits on in turn).
   */
  gate: ((call: 'listImages' | 'imageFilesystems') => Promise<void>) | undefined;

  private readonly client = {
    listImages: (): Promise<CriImage[]> =>
      (this.gate?.('listImages') ?? Promise.resolve()).then(() =>
        [...this.images.values()].map((i) => ({
          id: i.id,
          repoTags: i.repoTags ?? [],
          repoDigests: i.repoDigests ?? [],
          // The runtime's size: every layer of the image, shared or not.
          sizeBytes: Object.values(i.layers).reduce((a, b) => a + b, 0),
          pinned: i.pinned ?? false,
        })),
      ),
    listContainers: (): Promise<CriContainer[]> => Promise.resolve([...this.containers]),
    listSandboxes: (): Promise<CriSandbox[]> => Promise.resolve([...this.sandboxes]),
    imageFilesystems: (): Promise<ImageFilesystem[]> =>
      (this.gate?.('imageFilesystems') ?? Promise.resolve()).then(() => this.imageFs),
    filesystems: () => Promise.resolve({ image: this.imageFs, container: this.containerFs }),
    containerStatus: (id: string) => {
      const c = this.containers.find((x) => x.id === id);
      return Promise.resolve(c ? { id, state: c.state, logPath: '', labels: c.labels } : undefined);
    },
    stopContainer: (id: string): Promise<void> => {
      this.calls.push(`stop ${id}`);
      const c = this.containers.find((x) => x.id === id);
      if (c) c.state = 'exited';
      return Promise.resolve();
    },
    removeContainer: (id: string): Promise<void> => {
      this.calls.push(`remove ${id}`);
      this.containers = this.containers.filter((x) => x.id !== id);
      return Promise.resolve();
    },
    stopSandbox: (id: string): Promise<void> => {
      this.calls.push(`stopp ${id}`);
      return Promise.resolve();
    },
    removeSandbox: (id: string): Promise<void> => {
      this.calls.push(`removep ${id}`);
      this.sandboxes = this.sandboxes.filter((x) => x.id !== id);
      return Promise.resolve();
    },
    removeImage: (id: string): Promise<void> => {
      this.beforeRemove?.(id);
      const fail = this.failRemoval.get(id);
      if (fail) return Promise.reject(new Error(fail));
      this.images.delete(id);
      this.removed.push(id);
      return Promise.resolve();
    },
  };

  /** What ImageGarbageCollector and ContainerGarbageCollector use of a RuntimeConnection. */
  connection(info: { sandboxImage?: string } = {}): RuntimeConnection {
    const client = this.client;
    return {
      endpoint: 'unix:///fake.sock',
      info: { runtimeName: 'cri-o', runtimeVersion: '1.36.3', runtimeApiVersion: 'v1', ...info },
      up: true,
      get: () => Promise.resolve(client),
      check: (err: unknown) => err,
      close: () => undefined,
    } as unknown as RuntimeConnection;
  }
}

/** Records the Node events: `seen` the warnings, `normal` the Normal ones. */
export function recordingEvents(): NodeEvents & {
  seen: { reason: NodeEventReason; note: string }[];
  normals: { reason: NodeEventReason; note: string }[];
} {
  const seen: { reason: NodeEventReason; note: string }[] = [];
  const normals: { reason: NodeEventReason; note: string }[] = [];
  return {
    seen,
    normals,
    warning: (reason, note) => void seen.push({ reason, note }),
    normal: (reason, note) => void normals.push({ reason, note }),
  };
}

export function testMetrics(): { metrics: NodeMetrics; registry: Registry } {
  const registry = new Registry();
  return { metrics: createNodeMetrics(registry), registry };
}

export const quietLog = silentLogger;
