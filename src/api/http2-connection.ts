// One HTTP/2 session to the API server, shared by every non-watch request
// of a client as streams, with client-go's health check (a PING after a
// quiet read-idle period; no ack within the ping timeout drops it).
import http2 from 'node:http2';
import type https from 'node:https';
import { abortedMessage, type Answer, type RequestOptions } from './request.ts';

export interface Http2HealthOptions {
  readIdleTimeoutMs: number;
  pingTimeoutMs: number;
}

/**
 * One HTTP/2 session to the API server, opened on first use and again after
 * it closes (GOAWAY, a restarted server, a network error) or fails its health
 * check. Many requests share it as streams, so its cost per request is a
 * fraction of a request's own socket bookkeeping under node:https.
 */
export class Http2Connection {
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
