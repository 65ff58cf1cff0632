// The connection to the container runtime: connect lazily, check the CRI
// version once per connection, learn the sandbox image, and start over on the
// next pass when the runtime goes away (so a stopped containerd means error
// lines and a retry each period, never a crash loop).
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log.ts';
import { CriClient, CriError, isCriUnavailable, type RuntimeVersion } from './cri/client.ts';

/** The runtime cannot be used: unreachable, or not speaking CRI runtime.v1. */
export class RuntimeUnavailableError extends Error {}

export interface RuntimeInfo extends RuntimeVersion {
  /** The sandbox (pause) image the runtime is configured with, when it says so. */
  sandboxImage?: string;
}

/**
 * grpc-js phrases a missing socket as "UNAVAILABLE: No connection established.
 * Last error: Error: connect ENOENT /x. Resolution note: "; keep "UNAVAILABLE: connect ENOENT /x".
 */
export function conciseCriError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message
    .replace(/No connection established\. Last error: (?:Error: )?/, '')
    .replace(/\.?\s*Resolution note:.*$/s, '')
    .trim();
}

/** containerd's verbose Status carries its CRI config, including sandboxImage. */
export function sandboxImageFromStatusInfo(info: Record<string, string>): string | undefined {
  const config = info.config;
  if (!config) return undefined;
  try {
    const parsed = JSON.parse(config) as { sandboxImage?: unknown };
    return typeof parsed.sandboxImage === 'string' && parsed.sandboxImage
      ? parsed.sandboxImage
      : undefined;
  } catch {
    return undefined;
  }
}

export class RuntimeConnection {
  readonly endpoint: string;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private client: CriClient | undefined;
  private connected: RuntimeInfo | undefined;
  private lastProblem: string | undefined;
  private connecting: Promise<CriClient> | undefined;
  private readonly onState: (up: boolean) => void;

  constructor(endpoint: string, timeoutMs: number, log: Logger, onState: (up: boolean) => void) {
    this.endpoint = endpoint;
    this.timeoutMs = timeoutMs;
    this.log = log;
    this.onState = onState;
  }

  /** What the runtime said when this connection was checked, or undefined while not connected. */
  get info(): RuntimeInfo | undefined {
    return this.connected;
  }

  get up(): boolean {
    return this.connected !== undefined;
  }

  /**
   * A checked client, connecting (and checking Version) if needed. Passes
   * asking at the same time share one attempt (and its error).
   */
  get(): Promise<CriClient> {
    if (this.client && this.connected) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<CriClient> {
    this.client?.close();
    const client = new CriClient(this.endpoint, { timeoutMs: this.timeoutMs });
    this.client = client;
    let version: RuntimeVersion;
    try {
      version = await client.version();
    } catch (err) {
      throw this.fail(err);
    }
    if (!/^v1(\b|\.|$)/.test(version.runtimeApiVersion) && version.runtimeApiVersion !== '0.1.0') {
      throw this.fail(
        new Error(
          `the runtime at ${this.endpoint} (${version.runtimeName} ${version.runtimeVersion}) speaks CRI ${version.runtimeApiVersion}, not v1`,
        ),
      );
    }
    let sandboxImage: string | undefined;
    try {
      sandboxImage = sandboxImageFromStatusInfo(await client.statusInfo());
    } catch (err) {
      if (isCriUnavailable(err)) throw this.fail(err);
      // Status is optional for kubegc: without it the sandbox image must come from the flag.
    }
    this.connected = { ...version, ...(sandboxImage ? { sandboxImage } : {}) };
    this.log.info(
      this.lastProblem ? 'container runtime reachable again' : 'connected to container runtime',
      {
        endpoint: this.endpoint,
        runtime: version.runtimeName,
        runtimeVersion: version.runtimeVersion,
        apiVersion: version.runtimeApiVersion,
        ...(sandboxImage ? { sandboxImage } : {}),
      },
    );
    this.lastProblem = undefined;
    this.onState(true);
    return client;
  }

  /**
   * Call after a CRI call failed: if the runtime is unreachable, drop the
   * connection (the next get() reconnects) and return a RuntimeUnavailableError.
   */
  check(err: unknown): unknown {
    if (isCriUnavailable(err)) return this.fail(err);
    return err;
  }

  private fail(err: unknown): RuntimeUnavailableError {
    // The client is closed by the next connect(), not here: another pass may
    // still be using it and would only get a confusing "channel closed".
    this.connected = undefined;
    this.onState(false);
    let message: string;
    if (err instanceof CriError && err.code === grpc.status.UNIMPLEMENTED)
      message = `the runtime at ${this.endpoint} does not serve CRI runtime.v1 (${err.message})`;
    else if (err instanceof CriError)
      message = `cannot reach the container runtime at ${this.endpoint}: ${conciseCriError(err)}`;
    else message = err instanceof Error ? err.message : String(err);
    this.lastProblem = message;
    return new RuntimeUnavailableError(message);
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
    this.connected = undefined;
  }
}
