// The soak's own API client: node:https with a client certificate from a
// kubeconfig written by cluster/controlplane.ts, a client-side token bucket,
// and streaming watches. Deliberately independent of kubegc's client
// (src/api/), so the soak's record of what happened does not share its bugs.
// Every request goes to 127.0.0.1.
import https from 'node:https';
import { readFileSync } from 'node:fs';

export interface Credentials {
  server: URL;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

interface KubeconfigFile {
  clusters?: { cluster?: { server?: string; 'certificate-authority-data'?: string } }[];
  users?: { user?: { 'client-certificate-data'?: string; 'client-key-data'?: string } }[];
}

/** The credentials of a kubeconfig with embedded data (the format controlplane.ts writes). */
export function readCredentials(file: string): Credentials {
  const kc = JSON.parse(readFileSync(file, 'utf8')) as KubeconfigFile;
  const cluster = kc.clusters?.[0]?.cluster;
  const user = kc.users?.[0]?.user;
  const server = cluster?.server;
  const ca = cluster?.['certificate-authority-data'];
  const cert = user?.['client-certificate-data'];
  const key = user?.['client-key-data'];
  if (!server || !ca || !cert || !key)
    throw new Error(`${file}: expected a server, a CA and a client certificate with embedded data`);
  const url = new URL(server);
  if (url.hostname !== '127.0.0.1')
    throw new Error(`${file}: the soak talks to 127.0.0.1 only, not ${url.hostname}`);
  return {
    server: url,
    ca: Buffer.from(ca, 'base64'),
    cert: Buffer.from(cert, 'base64'),
    key: Buffer.from(key, 'base64'),
  };
}

export class KubeError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(method: string, path: string, status: number, text: string) {
    let message = text;
    let reason = '';
    try {
      const s = JSON.parse(text) as { message?: string; reason?: string };
      message = s.message ?? text;
      reason = s.reason ?? '';
    } catch {
      /* not a Status */
    }
    super(`${method} ${path}: ${status || 'no response'} ${reason} ${message.slice(0, 300)}`);
    this.status = status;
    this.reason = reason;
  }
}

export const statusOf = (err: unknown): number | undefined =>
  err instanceof KubeError ? err.status : undefined;

/** A token bucket: at most `qps` requests a second on average, bursts of `burst`. */
class Bucket {
  private tokens: number;
  private last = performance.now();
  private readonly qps: number;
  private readonly burst: number;
  private chain: Promise<void> = Promise.resolve();
  constructor(qps: number, burst: number) {
    this.qps = qps;
    this.burst = burst;
    this.tokens = burst;
  }
  take(): Promise<void> {
    if (this.qps <= 0) return Promise.resolve();
    const next = this.chain.then(async () => {
      const now = performance.now();
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
      this.last = now;
      if (this.tokens < 1) {
        // Rate limiting, not a condition: the wait is the limit itself.
        const ms = ((1 - this.tokens) / this.qps) * 1000;
        await new Promise((r) => setTimeout(r, ms));
        this.tokens = 1;
        this.last = performance.now();
      }
      this.tokens -= 1;
    });
    this.chain = next.catch(() => undefined);
    return next;
  }
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  timeoutMs?: number;
}

export interface ClientOptions {
  qps: number;
  burst: number;
  userAgent: string;
  /** Called after each request (status 0: no answer), e.g. to count requests. */
  onResponse?: (method: string, status: number) => void;
}

export interface Response<T> {
  status: number;
  body: T;
}

export class Kube {
  readonly creds: Credentials;
  private readonly opts: ClientOptions;
  private readonly bucket: Bucket;
  private readonly agent: https.Agent;

  constructor(creds: Credentials, opts: ClientOptions) {
    this.creds = creds;
    this.opts = opts;
    this.bucket = new Bucket(opts.qps, opts.burst);
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 16 });
  }

  static fromKubeconfig(file: string, opts: ClientOptions): Kube {
    return new Kube(readCredentials(file), opts);
  }

  close(): void {
    this.agent.destroy();
  }

  private url(path: string, query?: RequestOptions['query']): string {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) qs.set(k, String(v));
    const q = qs.toString();
    return q ? `${path}?${q}` : path;
  }

  /** Throws KubeError on a non-2xx answer (status 0 when there was none). */
  async request<T = unknown>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, o);
    if (res.status < 200 || res.status > 299)
      throw new KubeError(method, path, res.status, res.text);
    return (res.text ? JSON.parse(res.text) : undefined) as T;
  }

  /** The answer whatever its status; throws KubeError(status 0) when there is none. */
  async raw(
    method: string,
    path: string,
    o: RequestOptions = {},
  ): Promise<{ status: number; text: string }> {
    await this.bucket.take();
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.opts.userAgent,
    };
    if (body !== undefined) {
      headers['content-type'] = o.contentType ?? 'application/json';
      // Explicit: Node frames no body of a DELETE by itself, and the server would read the
      // body as the next request on the connection.
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    const target = this.url(path, o.query);
    try {
      const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = https.request(
          {
            host: '127.0.0.1',
            port: Number(this.creds.server.port),
            path: target,
            method,
            ca: this.creds.ca,
            cert: this.creds.cert,
            key: this.creds.key,
            agent: this.agent,
            headers,
            timeout: o.timeoutMs ?? 20_000,
          },
          (r) => {
            const chunks: Buffer[] = [];
            r.on('data', (c: Buffer) => chunks.push(c));
            r.on('end', () =>
              resolve({ status: r.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
            );
            r.on('error', reject);
          },
        );
        req.on('timeout', () => req.destroy(new Error('request timeout')));
        req.on('error', reject);
        req.end(body);
      });
      this.opts.onResponse?.(method, res.status);
      return res;
    } catch (err) {
      this.opts.onResponse?.(method, 0);
      throw new KubeError(method, path, 0, (err as Error).message);
    }
  }

  /**
   * A watch stream: calls `onEvent` for each line until the server ends the
   * stream (resolves with the HTTP status) or `signal` aborts it. A non-200
   * answer resolves with its status and body without events.
   */
  watch(
    path: string,
    query: RequestOptions['query'],
    onEvent: (event: WatchEvent) => void,
    signal: AbortSignal,
  ): Promise<{ status: number; text: string }> {
    const target = this.url(path, { ...query, watch: 1 });
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: Number(this.creds.server.port),
          path: target,
          method: 'GET',
          ca: this.creds.ca,
          cert: this.creds.cert,
          key: this.creds.key,
          agent: false,
          headers: { accept: 'application/json', 'user-agent': this.opts.userAgent },
          signal,
        },
        (r) => {
          const status = r.statusCode ?? 0;
          let rest = '';
          let text = '';
          r.on('data', (c: Buffer) => {
            if (status !== 200) {
              text += c.toString('utf8');
              return;
            }
            rest += c.toString('utf8');
            let nl: number;
            while ((nl = rest.indexOf('\n')) !== -1) {
              const line = rest.slice(0, nl).trim();
              rest = rest.slice(nl + 1);
              if (line) onEvent(JSON.parse(line) as WatchEvent);
            }
          });
          r.on('end', () => resolve({ status, text }));
          r.on('error', reject);
          r.on('aborted', () => reject(new Error('watch stream aborted')));
        },
      );
      // A silent stream (apiserver SIGSTOPped, half-open socket) is cut after 90 s;
      // bookmarks arrive about every minute on a healthy one.
      req.setTimeout(90_000, () => req.destroy(new Error('watch stream silent for 90s')));
      req.on('error', reject);
      req.end();
    });
  }
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  labels?: Record<string, string>;
  creationTimestamp?: string;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: KubeObject & { code?: number; reason?: string; message?: string };
}

export interface ObjectList {
  metadata: { resourceVersion: string; continue?: string };
  items: KubeObject[];
}

/** Resolves when `check` returns true, polling every `intervalMs`; throws after `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${Math.round(timeoutMs / 1000)}s waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Like waitUntil, but resolves to false at the deadline instead of throwing. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 250,
): Promise<boolean> {
  try {
    await waitUntil('condition', check, timeoutMs, intervalMs);
    return true;
  } catch {
    return false;
  }
}
