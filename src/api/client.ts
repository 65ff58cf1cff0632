// The one HTTP client kubegc uses for the API server. kubeconfig.ts supplies
// the TLS material and authentication (natively for in-cluster, certificates
// and tokens; through @kubernetes/client-node, loaded on demand, for exec
// plugins and the rest); requests go through our own
// transport, because we need metadata-only Accept headers, streaming watches
// and a client-side rate limit that client-node lacks. Requests share one
// HTTP/2 connection, as client-go's do (about 40% less client CPU per request
// than node:https with a keep-alive agent); watches stay on HTTP/1.1
// connections of their own. DISABLE_HTTP2 (client-go's switch) turns HTTP/2
// off; a server that does not offer it gets HTTP/1.1 too.
import type http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import { createSecureContext } from 'node:tls';
import { httpModule } from './node-http.ts';
import type { KubeConfigLike } from './kubeconfig.ts';
import { decodeStatus, FrameReader, isProtobufContentType } from './protobuf-meta.ts';
import { currentLane, type Lane } from './lanes.ts';
import { LaneTokenBucket } from './token-bucket.ts';

export interface ClientOptions {
  /** Client-side rate limit for requests (watch streams count once, at start). */
  qps: number;
  burst: number;
  /**
   * Housekeeping's part (0 ≤ share < 1) of the requests a second while
   * requests of the user lane wait for a token (src/api/lanes.ts); all of
   * them when none waits.
   */
  housekeepingQpsShare: number;
  /** Timeout of one non-watch request. */
  requestTimeoutMs: number;
  /**
   * HTTP/2 health check, as client-go's (golang.org/x/net/http2 Transport's
   * ReadIdleTimeout and PingTimeout): when nothing has arrived on the
   * connection for `http2ReadIdleTimeoutMs`, send a PING; without its ack
   * within `http2PingTimeoutMs`, drop the connection (its requests fail) and
   * open a new one for the next request.
   */
  http2ReadIdleTimeoutMs: number;
  http2PingTimeoutMs: number;
  userAgent: string;
  /** Called after every request with its verb and HTTP status (0: no response). */
  onRequest?: (verb: string, status: number) => void;
  /**
   * Called right before each attempt of a request goes on the wire (after the
   * rate limiter). A seam for tests that must force an interleaving against
   * the real API server (change an object between kubegc's read and write);
   * unset in production.
   */
  intercept?: (req: InterceptedRequest) => Promise<void> | void;
}

export interface InterceptedRequest {
  method: string;
  path: string;
  verb: string;
  query?: RequestOptions['query'];
  body?: unknown;
}

export const DEFAULT_CLIENT_OPTIONS: ClientOptions = {
  qps: 500,
  burst: 1000,
  housekeepingQpsShare: 0.5,
  requestTimeoutMs: 30_000,
  http2ReadIdleTimeoutMs: 30_000,
  http2PingTimeoutMs: 15_000,
  userAgent: 'kubegc',
};

/** A non-2xx answer from the API server (or no answer: status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: string;
  /** The server's Retry-After, in ms (a 429, or a 5xx that asks for one). */
  retryAfterMs: number | undefined;
  constructor(method: string, path: string, status: number, body: string, reason = '') {
    let message = body;
    let parsedReason = reason;
    try {
      const s = JSON.parse(body) as { message?: string; reason?: string };
      message = s.message ?? body;
      parsedReason = s.reason ?? reason;
    } catch {
      /* not a Status object */
    }
    super(
      `${method} ${path}: ${status || 'no response'}${parsedReason ? ` ${parsedReason}` : ''}: ${message.slice(0, 500)}`,
    );
    this.status = status;
    this.reason = parsedReason;
    this.body = body;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}

/**
 * A 404 that says THIS object does not exist: the Status names it
 * (`details.name`). A 404 for the path itself ("the server could not find the
 * requested resource": a version no longer served, a CRD being updated, an
 * aggregated API gone) says nothing about the object, and a garbage collector
 * that took it for "the owner is gone" would delete live objects' dependents.
 */
export function isObjectNotFound(err: unknown, name: string): boolean {
  if (!(err instanceof ApiError) || err.status !== 404) return false;
  try {
    const s = JSON.parse(err.body) as { details?: { name?: string } };
    return s.details?.name === name;
  } catch {
    return false;
  }
}
export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}

export const METADATA_ACCEPT =
  'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';
export const METADATA_LIST_ACCEPT =
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  timeoutMs?: number;
  /**
   * Cancels the request: one not yet on the wire is never sent; one in
   * flight is reset (RST_STREAM CANCEL over HTTP/2, the socket destroyed over
   * HTTP/1.1) and rejects with an ApiError (status 0), never resolves.
   */
  signal?: AbortSignal;
  /** Label for the request metric (LIST, GET, ...); defaults to the HTTP method. */
  verb?: string;
  /**
   * Checked after the rate limiter and before every attempt (retries
   * included), and again after the auth headers are refreshed (an exec
   * plugin may take a while); throwing stops the request before it reaches
   * the wire. The leader-election write guard lives here, so that no write
   * waits in the token bucket, a header refresh or a Retry-After sleep and
   * then leaves after the lease is gone.
   */
  beforeSend?: () => void;
  /**
   * Retry a 429 (or a 5xx with Retry-After) after the time the server asks,
   * as client-go does (default true). False for a write whose decision may
   * not survive the wait: the caller gets the ApiError and decides again.
   */
  retryThrottled?: boolean;
  /**
   * Decodes a 2xx answer's body (default: JSON). Given with an Accept that
   * offers protobuf first: the server picks, and the Content-Type says which.
   */
  decode?: (body: Buffer, contentType: string | undefined) => unknown;
}

/**
 * The text of a non-2xx answer for ApiError: a Status in JSON as the server
 * sent it, or the protobuf Status one negotiated with protobuf first turned
 * into the same JSON (its code, reason and message), so that every caller
 * reads errors one way.
 */
export function errorBodyText(body: Buffer, contentType: string | undefined): string {
  if (!isProtobufContentType(contentType)) return body.toString('utf8');
  try {
    return JSON.stringify({ kind: 'Status', ...decodeStatus(body) });
  } catch {
    return `(an undecodable protobuf answer of ${body.length} bytes)`;
  }
}

const MAX_THROTTLE_RETRIES = 10;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export class KubeClient {
  readonly server: URL;
  private readonly kc: KubeConfigLike;
  private readonly opts: ClientOptions;
  private readonly bucket: LaneTokenBucket;
  private readonly agent: http.Agent;
  private readonly watchAgent: http.Agent;
  private headers: Record<string, string> = {};
  private headersAt = 0;
  /** undefined: HTTP/2 off (http:, DISABLE_HTTP2, or the server did not offer it). */
  private h2: Http2Connection | undefined;
  /**
   * Settles once the first watch connection has a TLS session to resume (or
   * has failed, or after WATCH_RESUME_WAIT_MS). Every informer opens a watch
   * connection of its own, all at start: opened after the first, they resume
   * its session (the agent caches the server's ticket) instead of a full
   * handshake each, which spares the client and the API server a certificate
   * signature and verification per connection. 55 watches of a near-empty
   * cluster: 130 ms of client CPU instead of 160-195 ms (2 cores).
   */
  private firstWatchSession: Promise<void> | undefined;

  private constructor(kc: KubeConfigLike, tls: https.AgentOptions, opts: ClientOptions) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    this.kc = kc;
    this.server = new URL(cluster.server);
    this.opts = opts;
    this.bucket = new LaneTokenBucket(opts.qps, opts.burst, opts.housekeepingQpsShare);
    const secure = this.server.protocol === 'https:';
    const make = (maxSockets: number): http.Agent =>
      secure
        ? new https.Agent({ ...tls, keepAlive: true, maxSockets })
        : new httpModule.Agent({ keepAlive: true, maxSockets });
    this.agent = make(128);
    this.watchAgent = make(Infinity);
    const disabled = ['1', 'true', 'yes'].includes((process.env.DISABLE_HTTP2 ?? '').toLowerCase());
    if (secure && !disabled)
      this.h2 = new Http2Connection(this.server.origin, tls, {
        readIdleTimeoutMs: opts.http2ReadIdleTimeoutMs,
        pingTimeoutMs: opts.http2PingTimeoutMs,
      });
  }

  /** Requests of `lane` waiting in the client-side rate limiter (for the metrics). */
  rateLimited(lane: Lane): number {
    return this.bucket.waiters(lane);
  }

  /** Whether requests currently go over HTTP/2 (for tests and the start-up log). */
  get http2(): boolean {
    return this.h2 !== undefined && !this.h2.unsupported;
  }

  static async create(kc: KubeConfigLike, opts: Partial<ClientOptions> = {}): Promise<KubeClient> {
    const tls: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(tls);
    // One secure context for every connection. Given ca, cert and key,
    // tls.connect builds a context per connection, parsing the CA and the key
    // again for each informer's watch connection, all opened at start: 22 ms
    // for the 55 resources of a near-empty cluster, on 2 cores.
    const agentTls: https.AgentOptions = {
      secureContext: createSecureContext({ ca: tls.ca, cert: tls.cert, key: tls.key }),
      servername: tls.servername,
    };
    if (tls.rejectUnauthorized !== undefined) agentTls.rejectUnauthorized = tls.rejectUnauthorized;
    const client = new KubeClient(kc, agentTls, { ...DEFAULT_CLIENT_OPTIONS, ...opts });
    await client.refreshHeaders();
    return client;
  }

  /** Auth headers, re-derived every minute so rotated tokens (projected SA tokens, exec plugins) are picked up. */
  private async refreshHeaders(): Promise<Record<string, string>> {
    if (Date.now() - this.headersAt < 60_000) return this.headers;
    const o: https.RequestOptions = { headers: {} };
    await this.kc.applyToHTTPSOptions(o);
    const h: Record<string, string> = {};
    for (const [k, v] of Object.entries(o.headers ?? {})) if (typeof v === 'string') h[k] = v;
    if (o.auth) h.Authorization = `Basic ${Buffer.from(o.auth).toString('base64')}`;
    this.headers = h;
    this.headersAt = Date.now();
    return h;
  }

  private url(path: string, query?: RequestOptions['query']): URL {
    const u = new URL(this.server.toString());
    u.pathname = `${u.pathname.replace(/\/$/, '')}${path}`;
    for (const [k, v] of Object.entries(query ?? {}))
      if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  private async prepare(
    o: RequestOptions,
  ): Promise<{ headers: Record<string, string>; payload: string | undefined }> {
    const headers: Record<string, string> = {
      ...(await this.refreshHeaders()),
      'User-Agent': this.opts.userAgent,
      Accept: o.accept ?? 'application/json',
    };
    let payload: string | undefined;
    if (o.body !== undefined) {
      payload = JSON.stringify(o.body);
      headers['Content-Type'] = o.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    return { headers, payload };
  }

  private async send(
    method: string,
    path: string,
    o: RequestOptions,
    agent: http.Agent,
    prepared?: Prepared,
    onSession?: () => void,
  ): Promise<http.IncomingMessage> {
    const { headers, payload } = prepared ?? (await this.prepare(o));
    const u = this.url(path, o.query);
    const lib = u.protocol === 'https:' ? https : httpModule;
    return new Promise((resolve, reject) => {
      const req = lib.request(u, { method, headers, agent, signal: o.signal }, resolve);
      if (onSession) req.once('socket', (socket) => socket.once('session', onSession));
      if (o.timeoutMs) {
        req.setTimeout(o.timeoutMs, () =>
          req.destroy(new Error(`timed out after ${o.timeoutMs} ms`)),
        );
      }
      req.on('error', reject);
      req.end(payload);
    });
  }

  /**
   * One request with a JSON answer. Waits for the client-side rate limit,
   * honours 429 / Retry-After (up to 10 times), and throws ApiError on non-2xx.
   */
  async request<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const verb = o.verb ?? method;
    for (let attempt = 0; ; attempt++) {
      await this.bucket.take(currentLane() ?? 'user');
      if (this.opts.intercept)
        await this.opts.intercept({ method, path, verb, query: o.query, body: o.body });
      o.beforeSend?.();
      let prepared: Prepared;
      try {
        prepared = await this.prepare(o);
      } catch (err) {
        this.opts.onRequest?.(verb, 0);
        throw new ApiError(method, path, 0, (err as Error).message);
      }
      // The header refresh may have waited on an exec plugin: check again.
      o.beforeSend?.();
      if (o.signal?.aborted) throw new ApiError(method, path, 0, abortedMessage(o.signal));
      let answer: Answer;
      try {
        answer = await this.exchange(
          method,
          path,
          { timeoutMs: this.opts.requestTimeoutMs, ...o },
          prepared,
        );
      } catch (err) {
        this.opts.onRequest?.(verb, 0);
        const message = o.signal?.aborted ? abortedMessage(o.signal) : (err as Error).message;
        throw new ApiError(method, path, 0, message);
      }
      const { status, body, contentType } = answer;
      this.opts.onRequest?.(verb, status);
      if (status >= 200 && status < 300) {
        if (o.decode) return o.decode(body, contentType) as T;
        return (body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined) as T;
      }
      const text = errorBodyText(body, contentType);
      const retryAfter = Number(answer.retryAfter);
      if (
        (status === 429 || (status >= 500 && retryAfter > 0)) &&
        attempt < MAX_THROTTLE_RETRIES &&
        o.retryThrottled !== false
      ) {
        await sleep(
          (Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 1) * 1000,
          o.signal,
        );
        if (o.signal?.aborted) throw new ApiError(method, path, status, text);
        continue;
      }
      const error = new ApiError(method, path, status, text);
      if (Number.isFinite(retryAfter) && retryAfter > 0) error.retryAfterMs = retryAfter * 1000;
      throw error;
    }
  }

  /** One request and its whole answer, over HTTP/2 when the server speaks it. */
  private async exchange(
    method: string,
    path: string,
    o: RequestOptions,
    prepared: Prepared,
  ): Promise<Answer> {
    const h2 = this.h2;
    if (h2 && !h2.unsupported) {
      const { headers, payload } = prepared;
      const answer = await h2.exchange(
        method,
        this.pathWithQuery(path, o.query),
        headers,
        payload,
        o,
      );
      if (answer) return answer;
      // The server chose HTTP/1.1 for the connection: use it from now on.
    }
    const res = await this.send(method, path, o, this.agent, prepared);
    const body = await readBodyBytes(res);
    const retryAfter = res.headers['retry-after'];
    return {
      status: res.statusCode ?? 0,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      contentType: res.headers['content-type'],
      body,
    };
  }

  private pathWithQuery(path: string, query?: RequestOptions['query']): string {
    const u = this.url(path, query);
    return `${u.pathname}${u.search}`;
  }

  /**
   * Opens a watch stream: `onOpen` once the server has answered 2xx, then
   * `onLine` for each JSON line, or `onFrame` for each length-prefixed frame
   * when the server chose protobuf (an Accept that offers it first), until
   * the stream ends (resolves), fails (rejects) or `signal` aborts
   * (resolves). An exception thrown by a callback ends the stream and
   * rejects with it; nothing is delivered after `signal` has aborted.
   */
  async stream(
    path: string,
    o: RequestOptions,
    onOpen: (contentType: string | undefined) => void,
    onLine: (line: string) => void,
    onFrame?: (frame: Uint8Array) => void,
  ): Promise<void> {
    await this.bucket.take(currentLane() ?? 'user');
    if (o.signal?.aborted) return;
    // The caller's signal does not go to the request itself: aborted after the
    // last byte has arrived (an ERROR line that ends the stream), node's
    // request would destroy a socket already back in the keep-alive pool, and
    // that error escapes as an uncaught exception. Until the answer comes,
    // the abort cancels the request; after, it destroys the response, which
    // leaves a complete one's socket alone.
    const beforeAnswer = new AbortController();
    let res: http.IncomingMessage | undefined;
    const onAbort = (): void => {
      if (res) res.destroy();
      else beforeAnswer.abort();
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this.streamAnswer(
        path,
        o,
        beforeAnswer.signal,
        onOpen,
        { onLine, onFrame },
        (r) => (res = r),
      );
    } finally {
      o.signal?.removeEventListener('abort', onAbort);
    }
  }

  private async streamAnswer(
    path: string,
    o: RequestOptions,
    signal: AbortSignal,
    onOpen: (contentType: string | undefined) => void,
    deliver: { onLine: (line: string) => void; onFrame?: (frame: Uint8Array) => void },
    answered: (res: http.IncomingMessage) => void,
  ): Promise<void> {
    let res: http.IncomingMessage;
    // Tests hold a watch here as they hold requests (an informer's initial
    // list is a watch with sendInitialEvents).
    if (this.opts.intercept)
      await this.opts.intercept({ method: 'GET', path, verb: 'WATCH', query: o.query });
    let sessionReady: (() => void) | undefined;
    if (this.server.protocol === 'https:' && !this.firstWatchSession) {
      this.firstWatchSession = new Promise((r) => (sessionReady = r));
    } else if (this.firstWatchSession)
      await waitAtMost(this.firstWatchSession, WATCH_RESUME_WAIT_MS);
    try {
      res = await this.send(
        'GET',
        path,
        { ...o, signal },
        this.watchAgent,
        undefined,
        sessionReady,
      );
    } catch (err) {
      if (o.signal?.aborted) return;
      this.opts.onRequest?.('WATCH', 0);
      throw new ApiError('WATCH', path, 0, (err as Error).message);
    } finally {
      // Answered or failed without a session (TLS 1.2 without tickets): the others go on.
      sessionReady?.();
    }
    answered(res);
    if (o.signal?.aborted) {
      res.destroy();
      return;
    }
    const status = res.statusCode ?? 0;
    this.opts.onRequest?.('WATCH', status);
    if (status < 200 || status >= 300)
      throw new ApiError('WATCH', path, status, await readBody(res));
    res.socket?.setKeepAlive(true, 30_000);
    const contentType = res.headers['content-type'];
    const frames = isProtobufContentType(contentType) ? new FrameReader() : undefined;
    if (frames && !deliver.onFrame) {
      res.destroy();
      throw new ApiError('WATCH', path, status, `unexpected protobuf answer (${contentType})`);
    }
    onOpen(contentType);
    await new Promise<void>((resolve, reject) => {
      let buffered = '';
      let failed = false;
      // Never let a callback's exception escape: thrown in an event listener,
      // it would end the process. Reject first: destroying the response reports 'aborted'.
      const fail = (err: unknown): void => {
        failed = true;
        reject(err);
        res.destroy();
      };
      if (!frames) res.setEncoding('utf8');
      res.on('data', (chunk: string | Buffer) => {
        if (failed) return;
        if (frames) {
          try {
            for (const frame of frames.push(chunk as Buffer)) {
              if (o.signal?.aborted) return;
              deliver.onFrame?.(frame);
            }
          } catch (err) {
            fail(err);
          }
          return;
        }
        buffered += chunk as string;
        let nl: number;
        while ((nl = buffered.indexOf('\n')) !== -1) {
          if (o.signal?.aborted) return;
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (!line.trim()) continue;
          try {
            deliver.onLine(line);
          } catch (err) {
            fail(err);
            return;
          }
        }
      });
      res.on('end', () => {
        if (failed) return;
        // A stream that stops inside a frame lost an event: a decode error, as a cut JSON line is malformed.
        if (frames && frames.buffered > 0 && !o.signal?.aborted) {
          try {
            frames.end();
          } catch (err) {
            fail(err);
            return;
          }
        }
        resolve();
      });
      res.on('error', (err) => (o.signal?.aborted ? resolve() : reject(err)));
      res.on('aborted', () =>
        o.signal?.aborted ? resolve() : reject(new Error('watch stream aborted')),
      );
      // Destroyed on abort before its 'end': only 'close' follows (a no-op after 'end').
      res.on('close', () =>
        o.signal?.aborted ? resolve() : reject(new Error('watch stream closed')),
      );
    });
  }

  close(): void {
    this.agent.destroy();
    this.watchAgent.destroy();
    this.h2?.close();
  }
}

interface Prepared {
  headers: Record<string, string>;
  payload: string | undefined;
}

/** How long watches wait for the first watch connection's TLS session (see firstWatchSession). */
const WATCH_RESUME_WAIT_MS = 1000;

/** Settles when `p` does, or after `ms`, whichever comes first; never rejects. */
function waitAtMost(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<void>((r) => {
      timer = setTimeout(r, ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

function abortedMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return `aborted: ${reason instanceof Error ? reason.message : String(reason)}`;
}

interface Answer {
  status: number;
  retryAfter: string | undefined;
  contentType: string | undefined;
  body: Buffer;
}

interface Http2HealthOptions {
  readIdleTimeoutMs: number;
  pingTimeoutMs: number;
}

/**
 * One HTTP/2 session to the API server, opened on first use and again after
 * it closes (GOAWAY, a restarted server, a network error) or fails its health
 * check. Many requests share it as streams, so its cost per request is a
 * fraction of a request's own socket bookkeeping under node:https.
 */
class Http2Connection {
  private readonly origin: string;
  private readonly tls: https.AgentOptions;
  private readonly health: Http2HealthOptions;
  private session: http2.ClientHttp2Session | undefined;
  /** When each session last received anything (a frame we can observe, a PING ack). */
  private readonly lastRead = new WeakMap<http2.ClientHttp2Session, number>();
  /** The server answered the TLS handshake without offering h2 (ALPN). */
  unsupported = false;
  /** Streams in flight: an idle session must not keep the process alive (like idle keep-alive sockets). */
  private active = 0;

  constructor(origin: string, tls: https.AgentOptions, health: Http2HealthOptions) {
    this.origin = origin;
    this.tls = tls;
    this.health = health;
  }

  private noteRead(s: http2.ClientHttp2Session): void {
    this.lastRead.set(s, Date.now());
  }

  /**
   * client-go's HTTP/2 health check (ReadIdleTimeout / PingTimeout of
   * golang.org/x/net/http2): a session that has received nothing for
   * readIdleTimeout is sent a PING; no ack within pingTimeout and it is
   * destroyed, failing its streams at once instead of after minutes of TCP
   * retransmissions to a frozen peer. Its timer never keeps the process alive.
   */
  private watchHealth(s: http2.ClientHttp2Session): void {
    const { readIdleTimeoutMs, pingTimeoutMs } = this.health;
    let timer: NodeJS.Timeout | undefined;
    const schedule = (ms: number, fn: () => void): void => {
      timer = setTimeout(fn, Math.max(ms, 0));
      timer.unref();
    };
    const check = (): void => {
      if (s.closed || s.destroyed) return;
      const idle = Date.now() - (this.lastRead.get(s) ?? 0);
      if (idle < readIdleTimeoutMs) {
        schedule(readIdleTimeoutMs - idle, check);
        return;
      }
      let acked = false;
      const sent = s.ping((err) => {
        acked = true;
        clearTimeout(timer);
        if (s.destroyed) return; // the PING was cancelled: the session is gone anyway
        if (!err) this.noteRead(s);
        schedule(readIdleTimeoutMs, check);
      });
      if (!sent) {
        schedule(readIdleTimeoutMs, check); // too many PINGs in flight; look again later
        return;
      }
      schedule(pingTimeoutMs, () => {
        if (acked || s.destroyed) return;
        const seconds = pingTimeoutMs / 1000;
        s.destroy(
          new Error(
            `HTTP/2 connection to ${this.origin} failed its health check: no PING ack within ${seconds}s`,
          ),
        );
      });
    };
    s.once('connect', () => {
      this.noteRead(s);
      schedule(readIdleTimeoutMs, check);
    });
    s.once('close', () => clearTimeout(timer));
    // Frames node:http2 tells us about; responses and data are noted per stream.
    for (const event of ['ping', 'remoteSettings', 'altsvc', 'origin'] as const)
      s.on(event, () => this.noteRead(s));
  }

  private open(): http2.ClientHttp2Session {
    const current = this.session;
    if (current && !current.closed && !current.destroyed) return current;
    const s = http2.connect(this.origin, {
      secureContext: this.tls.secureContext,
      servername: this.tls.servername,
      rejectUnauthorized: this.tls.rejectUnauthorized,
    });
    // Errors reach every open stream; the session itself is just replaced.
    s.on('error', (err: Error) => this.noteRefusal(err));
    s.on('connect', () => {
      if (s.alpnProtocol !== 'h2') this.unsupported = true;
    });
    const forget = (): void => {
      if (this.session === s) this.session = undefined;
    };
    s.on('close', forget);
    s.on('goaway', forget);
    this.watchHealth(s);
    if (this.active === 0) s.unref();
    this.session = s;
    return s;
  }

  /** Resolves undefined if the server turned out not to speak HTTP/2. */
  exchange(
    method: string,
    pathWithQuery: string,
    headers: Record<string, string>,
    payload: string | undefined,
    o: RequestOptions,
  ): Promise<Answer | undefined> {
    if (o.signal?.aborted) return Promise.reject(new Error(abortedMessage(o.signal)));
    const session = this.open();
    const h2Headers: http2.OutgoingHttpHeaders = { ':method': method, ':path': pathWithQuery };
    for (const [k, v] of Object.entries(headers)) h2Headers[k.toLowerCase()] = v;
    return new Promise((resolve, reject) => {
      let req: http2.ClientHttp2Stream;
      try {
        // endStream explicitly: Node would close a DELETE's stream before its body.
        req = session.request(h2Headers, { endStream: payload === undefined });
      } catch (err) {
        // A session at the end of its life (out of stream IDs, closing): next time, a new one.
        if (this.session === session) this.session = undefined;
        session.close();
        reject(err as Error);
        return;
      }
      if (this.active++ === 0) session.ref();
      let status = 0;
      let retryAfter: string | undefined;
      let contentType: string | undefined;
      const chunks: Buffer[] = [];
      let failure: Error | undefined;
      // Two clocks: the stream's idle timeout (a response that stops arriving),
      // and one for the answer's first headers, because the idle timer only runs
      // once the session is connected: a server that accepts the TCP connection
      // and never completes TLS (a blackholed network) would hold the request
      // for ever.
      let awaitingHeaders: NodeJS.Timeout | undefined;
      if (o.timeoutMs) {
        const timedOut = (): void => {
          failure ??= new Error(`timed out after ${o.timeoutMs} ms`);
          // A stream of a session still connecting is not closed by cancelling it
          // (it has not been sent): the connection that did not come up in time goes,
          // and every stream waiting on it fails with it.
          if (session.connecting) session.destroy(failure);
          else req.close(http2.constants.NGHTTP2_CANCEL);
        };
        req.setTimeout(o.timeoutMs, timedOut);
        awaitingHeaders = setTimeout(timedOut, o.timeoutMs);
      }
      // The caller's signal resets the stream (RST_STREAM CANCEL): the API
      // server cancels the request's context (an admission webhook it waits
      // on, say), and the request rejects, whatever has arrived of its answer.
      const signal = o.signal;
      const onAbort = (): void => {
        failure ??= new Error(signal ? abortedMessage(signal) : 'aborted');
        req.close(http2.constants.NGHTTP2_CANCEL);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('response', (h) => {
        clearTimeout(awaitingHeaders);
        this.noteRead(session);
        status = Number(h[':status'] ?? 0);
        const ra = h['retry-after'];
        retryAfter = typeof ra === 'string' ? ra : undefined;
        const ct = h['content-type'];
        contentType = typeof ct === 'string' ? ct : undefined;
      });
      req.on('data', (c: Buffer) => {
        this.noteRead(session);
        chunks.push(c);
      });
      req.on('headers', () => this.noteRead(session));
      req.on('trailers', () => this.noteRead(session));
      req.on('error', (err: Error) => {
        failure ??= err;
      });
      req.on('close', () => {
        clearTimeout(awaitingHeaders);
        signal?.removeEventListener('abort', onAbort);
        if (--this.active === 0 && !session.destroyed) session.unref();
        if (status !== 0 && !failure) {
          resolve({ status, retryAfter, contentType, body: Buffer.concat(chunks) });
          return;
        }
        if (failure) this.noteRefusal(failure);
        if (this.unsupported) {
          resolve(undefined);
          return;
        }
        reject(failure ?? new Error(`stream closed without an answer (code ${req.rstCode})`));
      });
      if (payload === undefined) req.end();
      else req.end(payload);
    });
  }

  /** A TLS server without h2 in its ALPN list refuses the handshake with this alert. */
  private noteRefusal(err: Error): void {
    if (
      (err as NodeJS.ErrnoException).code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL' ||
      err.message.includes('no application protocol')
    )
      this.unsupported = true;
  }

  close(): void {
    this.session?.close();
    this.session = undefined;
  }
}

function readBody(res: http.IncomingMessage): Promise<string> {
  return readBodyBytes(res).then((b) => errorBodyText(b, res.headers['content-type']));
}

function readBodyBytes(res: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    let ended = false;
    res.on('end', () => {
      ended = true;
      resolve(Buffer.concat(chunks));
    });
    res.on('error', reject);
    // Destroyed before its end (the request's signal aborted): never a success.
    res.on('close', () => {
      if (!ended) reject(new Error('the response was cut off'));
    });
  });
}

export { loadKubeConfig } from './kubeconfig.ts';
