// A CRI (runtime.v1) client over gRPC on a unix socket: the calls kubegc node
// needs, with a deadline on every call and results converted to plain objects
// (IDs, sizes as numbers, creation times as bigint nanoseconds).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export type ContainerState = 'created' | 'running' | 'exited' | 'unknown';
export type SandboxState = 'ready' | 'notready';

export interface CriImage {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  /** Bytes as the runtime reports them (containerd: the content blobs, compressed). */
  sizeBytes: number;
  /** The runtime recommends never removing it (e.g. the sandbox image on containerd ≥ 1.7). */
  pinned: boolean;
}

export interface CriContainer {
  id: string;
  sandboxId: string;
  name: string;
  attempt: number;
  /** The image as the container spec names it (tag, digest or ID). */
  image: string;
  imageRef: string;
  imageId: string;
  state: ContainerState;
  createdAtNs: bigint;
  labels: Record<string, string>;
}

export interface CriSandbox {
  id: string;
  name: string;
  namespace: string;
  uid: string;
  attempt: number;
  state: SandboxState;
  createdAtNs: bigint;
  labels: Record<string, string>;
}

export interface CriContainerStatus {
  id: string;
  state: ContainerState;
  logPath: string;
  labels: Record<string, string>;
}

export interface ImageFilesystem {
  mountpoint: string;
  /** Bytes the runtime says its images use (absent on some snapshotters). */
  usedBytes?: number;
}

export interface RuntimeVersion {
  runtimeName: string;
  runtimeVersion: string;
  runtimeApiVersion: string;
}

/** A failed CRI call: the gRPC status code and the runtime's message. */
export class CriError extends Error {
  readonly code: grpc.status;
  readonly method: string;
  constructor(method: string, code: grpc.status, details: string) {
    super(`CRI ${method}: ${grpc.status[code] ?? code}: ${details}`);
    this.code = code;
    this.method = method;
  }
}

export const isCriNotFound = (err: unknown): boolean =>
  err instanceof CriError && err.code === grpc.status.NOT_FOUND;

/** The runtime cannot be reached (socket missing, runtime stopped, deadline passed). */
export const isCriUnavailable = (err: unknown): boolean =>
  err instanceof CriError &&
  (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED);

const CONTAINER_STATES: ContainerState[] = ['created', 'running', 'exited', 'unknown'];
const SANDBOX_STATES: SandboxState[] = ['ready', 'notready'];

export const CONTAINER_STATE_NUMBER: Record<ContainerState, number> = {
  created: 0,
  running: 1,
  exited: 2,
  unknown: 3,
};

/**
 * The proto sits next to this module in src/; the build (scripts/build.ts)
 * copies it next to the bundled modules in dist/.
 */
export function runtimeProtoPath(): string {
  const beside = fileURLToPath(new URL('./runtime.proto', import.meta.url));
  if (existsSync(beside)) return beside;
  const inSources = fileURLToPath(new URL('../../../src/node/cri/runtime.proto', import.meta.url));
  if (existsSync(inSources)) return inSources;
  throw new Error(`runtime.proto not found next to ${fileURLToPath(import.meta.url)}`);
}

type ServiceClient = grpc.Client & Record<string, grpc.MethodDefinition<unknown, unknown>>;
type ClientConstructor = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => grpc.Client;

export interface RuntimeServices {
  RuntimeService: ClientConstructor;
  ImageService: ClientConstructor;
}

let services: RuntimeServices | undefined;

/** The generated client constructors of runtime.v1 (also used by the e2e harness). */
export function runtimeServices(): RuntimeServices {
  if (services) return services;
  const definition = protoLoader.loadSync(runtimeProtoPath(), {
    keepCase: true,
    longs: String,
    enums: Number,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    runtime: { v1: RuntimeServices };
  };
  services = pkg.runtime.v1;
  return services;
}

export interface CriClientOptions {
  /** Deadline of every call. */
  timeoutMs: number;
}

// Listing every image and container of a busy node can exceed gRPC's 4 MiB
// default (the kubelet allows 16 MiB).
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** `unix:///run/containerd/containerd.sock` or a bare socket path → a grpc-js target. */
export function grpcTarget(endpoint: string): string {
  if (endpoint.startsWith('unix://')) return `unix:${endpoint.slice('unix://'.length)}`;
  if (endpoint.startsWith('/')) return `unix:${endpoint}`;
  return endpoint;
}

/* eslint-disable @typescript-eslint/no-explicit-any -- messages decoded by proto-loader are untyped */
type Message = any;

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const labelsOf = (v: unknown): Record<string, string> =>
  v && typeof v === 'object' ? { ...(v as Record<string, string>) } : {};

function toImage(m: Message): CriImage {
  return {
    id: str(m.id),
    repoTags: [...(m.repo_tags ?? [])],
    repoDigests: [...(m.repo_digests ?? [])],
    sizeBytes: Number(m.size ?? 0),
    pinned: Boolean(m.pinned),
  };
}

function toContainer(m: Message): CriContainer {
  return {
    id: str(m.id),
    sandboxId: str(m.pod_sandbox_id),
    name: str(m.metadata?.name),
    attempt: Number(m.metadata?.attempt ?? 0),
    image: str(m.image?.image),
    imageRef: str(m.image_ref),
    imageId: str(m.image_id),
    state: CONTAINER_STATES[Number(m.state)] ?? 'unknown',
    createdAtNs: BigInt(m.created_at ?? 0),
    labels: labelsOf(m.labels),
  };
}

function toSandbox(m: Message): CriSandbox {
  return {
    id: str(m.id),
    name: str(m.metadata?.name),
    namespace: str(m.metadata?.namespace),
    uid: str(m.metadata?.uid),
    attempt: Number(m.metadata?.attempt ?? 0),
    // An unknown future state is treated as not ready: only READY protects a sandbox.
    state: SANDBOX_STATES[Number(m.state)] ?? 'notready',
    createdAtNs: BigInt(m.created_at ?? 0),
    labels: labelsOf(m.labels),
  };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

export class CriClient {
  readonly endpoint: string;
  /** Raw clients, for calls kubegc itself never makes (the e2e harness plays the kubelet). */
  readonly runtime: grpc.Client;
  readonly images: grpc.Client;
  private readonly timeoutMs: number;

  constructor(endpoint: string, opts: CriClientOptions) {
    this.endpoint = endpoint;
    this.timeoutMs = opts.timeoutMs;
    const { RuntimeService, ImageService } = runtimeServices();
    const channelOptions: grpc.ChannelOptions = {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      // Reconnect soon after a runtime restart (grpc-js backs off up to 2 min by default).
      'grpc.initial_reconnect_backoff_ms': 500,
      'grpc.max_reconnect_backoff_ms': 5000,
    };
    const target = grpcTarget(endpoint);
    this.runtime = new RuntimeService(target, grpc.credentials.createInsecure(), channelOptions);
    // Same channel options → grpc-js shares the subchannel between both services.
    this.images = new ImageService(target, grpc.credentials.createInsecure(), channelOptions);
  }

  /** One unary call with a deadline; gRPC failures become CriError. */
  call<Res>(client: grpc.Client, method: string, request: object, timeoutMs = this.timeoutMs) {
    const service = client === this.images ? 'ImageService' : 'RuntimeService';
    const fn = (client as ServiceClient)[method] as unknown as (
      req: object,
      options: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null, res: Res) => void,
    ) => void;
    return new Promise<Res>((resolve, reject) => {
      fn.call(client, request, { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) reject(new CriError(`${service}/${method}`, err.code, err.details || err.message));
        else resolve(res);
      });
    });
  }

  async version(): Promise<RuntimeVersion> {
    const r = await this.call<Record<string, string>>(this.runtime, 'Version', {
      version: '0.1.0',
    });
    return {
      runtimeName: str(r.runtime_name),
      runtimeVersion: str(r.runtime_version),
      runtimeApiVersion: str(r.runtime_api_version),
    };
  }

  /** Verbose status info: runtime-specific JSON documents by key. */
  async statusInfo(): Promise<Record<string, string>> {
    const r = await this.call<{ info?: Record<string, string> }>(this.runtime, 'Status', {
      verbose: true,
    });
    return labelsOf(r.info);
  }

  async listImages(): Promise<CriImage[]> {
    const r = await this.call<{ images?: unknown[] }>(this.images, 'ListImages', {});
    return (r.images ?? []).map(toImage);
  }

  /** Removes an image (all its tags) by ID; an image already gone is success. */
  async removeImage(id: string): Promise<void> {
    try {
      await this.call(this.images, 'RemoveImage', { image: { image: id } });
    } catch (err) {
      if (!isCriNotFound(err)) throw err;
    }
  }

  async imageFilesystems(): Promise<ImageFilesystem[]> {
    return (await this.filesystems()).image;
  }

  /**
   * ImageFsInfo: the image filesystems and, from runtimes that keep writable
   * layers elsewhere (KEP-4191), the container filesystems.
   */
  async filesystems(): Promise<{ image: ImageFilesystem[]; container: ImageFilesystem[] }> {
    type Usage = { fs_id?: { mountpoint?: string }; used_bytes?: { value?: string } };
    const r = await this.call<{ image_filesystems?: Usage[]; container_filesystems?: Usage[] }>(
      this.images,
      'ImageFsInfo',
      {},
    );
    const map = (list: Usage[] | undefined): ImageFilesystem[] =>
      (list ?? []).map((f) => ({
        mountpoint: str(f.fs_id?.mountpoint),
        ...(f.used_bytes ? { usedBytes: Number(f.used_bytes.value ?? 0) } : {}),
      }));
    return { image: map(r.image_filesystems), container: map(r.container_filesystems) };
  }

  async listContainers(): Promise<CriContainer[]> {
    const r = await this.call<{ containers?: unknown[] }>(this.runtime, 'ListContainers', {});
    return (r.containers ?? []).map(toContainer);
  }

  async listSandboxes(): Promise<CriSandbox[]> {
    const r = await this.call<{ items?: unknown[] }>(this.runtime, 'ListPodSandbox', {});
    return (r.items ?? []).map(toSandbox);
  }

  /** undefined when the runtime no longer knows the container. */
  async containerStatus(id: string): Promise<CriContainerStatus | undefined> {
    try {
      const r = await this.call<{
        status?: { id?: string; state?: number; log_path?: string; labels?: unknown };
      }>(this.runtime, 'ContainerStatus', { container_id: id });
      if (!r.status) return undefined;
      return {
        id: str(r.status.id),
        state: CONTAINER_STATES[Number(r.status.state)] ?? 'unknown',
        logPath: str(r.status.log_path),
        labels: labelsOf(r.status.labels),
      };
    } catch (err) {
      if (isCriNotFound(err)) return undefined;
      throw err;
    }
  }

  async stopContainer(id: string, timeoutSeconds: number): Promise<void> {
    await this.call(
      this.runtime,
      'StopContainer',
      { container_id: id, timeout: timeoutSeconds },
      this.timeoutMs + timeoutSeconds * 1000,
    );
  }

  async removeContainer(id: string): Promise<void> {
    try {
      await this.call(this.runtime, 'RemoveContainer', { container_id: id });
    } catch (err) {
      if (!isCriNotFound(err)) throw err;
    }
  }

  async stopSandbox(id: string): Promise<void> {
    try {
      await this.call(this.runtime, 'StopPodSandbox', { pod_sandbox_id: id });
    } catch (err) {
      if (!isCriNotFound(err)) throw err;
    }
  }

  async removeSandbox(id: string): Promise<void> {
    try {
      await this.call(this.runtime, 'RemovePodSandbox', { pod_sandbox_id: id });
    } catch (err) {
      if (!isCriNotFound(err)) throw err;
    }
  }

  close(): void {
    this.runtime.close();
    this.images.close();
  }
}
