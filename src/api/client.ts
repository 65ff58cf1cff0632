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
import https from 'node:https';
import { createSecureContext } from 'node:tls';
import { httpModule } from './node-http.ts';
import type { KubeConfigLike } from './kubeconfig.ts';
import { FrameReader, isProtobufContentType } from './protobuf-meta.ts';
import { currentLane, type Lane } from './lanes.ts';
import { LaneTokenBucket } from './token-bucket.ts';
import { ApiError, errorBodyText } from './errors.ts';
import { Http2Connection } from './http2-connection.ts';
import {
  abortedMessage,
  type Answer,
  type InterceptedRequest,
  type Prepared,
  type RequestOptions,
} from './request.ts';

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

export const DEFAULT_CLIENT_OPTIONS: ClientOptions = {
  qps: 500,
  burst: 1000,
  housekeepingQpsShare: 0.5,
  requestTimeoutMs: 30_000,
  http2ReadIdleTimeoutMs: 30_000,
  http2PingTimeoutMs: 15_000,
  userAgent: 'kubegc',
};

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
      ...o.headers,
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
