// HTTP endpoints for operators, on two listeners that never share a port:
// - the metrics port (--metrics-bind-address, default :8443): /metrics and
//   read-only debug routes (/debug/graph). By default HTTPS, and every
//   request must carry a bearer token that a TokenReview accepts and whose
//   user a SubjectAccessReview allows `get` on the path (delegated-auth.ts):
//   401 without or with a bad token, 403 without the permission. Plain HTTP
//   without authentication only with --metrics-secure=false.
// - the probe port (--health-probe-bind-address): /healthz, /livez, /readyz,
//   plain HTTP for the kubelet, and nothing else.
// "0" disables a listener.
import type http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';
import type { Registry } from 'prom-client';
import { httpModule } from '../../api/node-http.ts';
import type { Logger } from '../../log.ts';
import type { AuthOutcome } from './delegated-auth.ts';

export interface Check {
  ok: boolean;
  /** Shown in the response body when not ok. */
  reason?: string;
  /** Problems worth seeing that do not fail the check, one line each in the body. */
  warnings?: string[];
}

/** A route on the metrics port, called after authentication and authorization. */
export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> | void;

/** The serving certificate (tls.ts): its PEMs now, and a watcher that swaps them in. */
export interface CertificateSource {
  cert: string;
  key: string;
  /** `base`: the server's other TLS options, kept across reloads. */
  watch(server: tls.Server, base?: tls.SecureContextOptions): void;
  close(): void;
}

export interface SecureServing {
  certificate: CertificateSource;
  /** Decides one request: 200 lets it through. */
  authorize(authorization: string | undefined, path: string, verb: string): Promise<AuthOutcome>;
}

export interface ServerOptions {
  metricsAddress: string;
  healthAddress: string;
  /** HTTPS with delegated authentication and authorization; undefined serves plain HTTP to anyone. */
  secure: SecureServing | undefined;
  registry: Registry;
  healthz: () => Check;
  readyz: () => Check;
  routes?: Record<string, Handler>;
  log?: Logger;
}

export interface ObservabilityServer {
  /** Actual bound addresses ("host:port"), for tests and logs. */
  metrics?: string;
  health?: string;
  /** "https" or "http": how the metrics port serves. */
  metricsScheme: 'https' | 'http';
  close(): Promise<void>;
}

/** `:8443` → all interfaces, `127.0.0.1:0` → an ephemeral port; `0` → disabled. */
export function parseBindAddress(
  text: string,
): { host: string | undefined; port: number } | undefined {
  if (text === '0' || text === '') return undefined;
  const m = /^(?:\[?([^\]]*)\]?)?:(\d+)$/.exec(text);
  if (!m)
    throw new Error(
      `invalid bind address "${text}" (examples: :8443, 127.0.0.1:8443, 0 to disable)`,
    );
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`invalid port in bind address "${text}"`);
  return { host: m[1] || undefined, port };
}

/**
 * An error message when the two addresses would share a port: probes are
 * unauthenticated and the metrics port is not, so they cannot be one listener.
 */
export function sharedPortProblem(metrics: string, health: string): string | undefined {
  const m = parseBindAddress(metrics);
  const h = parseBindAddress(health);
  if (!m || !h || m.port === 0 || m.port !== h.port) return undefined;
  const overlap = m.host === h.host || m.host === undefined || h.host === undefined;
  return overlap
    ? `--metrics-bind-address (${metrics}) and --health-probe-bind-address (${health}) must use different ports`
    : undefined;
}

function listen(
  server: http.Server,
  addr: { host: string | undefined; port: number },
): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      const a = server.address();
      resolve(
        a && typeof a === 'object'
          ? `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`
          : String(a),
      );
    });
  });
}

/**
 * The header a caller's bearer token comes in. Through the API server's pod
 * proxy (`kubegc explain node/NAME`) the Authorization header never arrives:
 * the API server authenticates the caller with it and removes it. So a
 * token may also come as X-Kubegc-Authorization; it is checked exactly as
 * Authorization is (TokenReview, then a SubjectAccessReview on the path).
 */
export const PROXIED_AUTHORIZATION_HEADER = 'x-kubegc-authorization';

function credentials(req: http.IncomingMessage): string | undefined {
  const proxied = req.headers[PROXIED_AUTHORIZATION_HEADER];
  return req.headers.authorization ?? (typeof proxied === 'string' ? proxied : undefined);
}

function text(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(`${body}\n`);
}

export async function startObservabilityServer(o: ServerOptions): Promise<ObservabilityServer> {
  const metricsAddr = parseBindAddress(o.metricsAddress);
  const healthAddr = parseBindAddress(o.healthAddress);
  const shared = sharedPortProblem(o.metricsAddress, o.healthAddress);
  if (shared) throw new Error(shared);

  const healthHandler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    const check =
      path === '/healthz' || path === '/livez'
        ? o.healthz
        : path === '/readyz'
          ? o.readyz
          : undefined;
    if (!check) {
      text(res, 404, 'not found');
      return;
    }
    const c = check();
    const lines = [c.ok ? 'ok' : `not ok: ${c.reason ?? 'unknown'}`];
    for (const w of c.warnings ?? []) lines.push(`warning: ${w}`);
    res.writeHead(c.ok ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(lines.join('\n'));
  };

  const serveMetricsPort = async (
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (o.secure) {
      // Before routing, so that nobody learns which paths exist without a permission.
      const outcome = await o.secure.authorize(credentials(req), url.pathname, 'get');
      if (outcome.status !== 200) {
        o.log?.debug('metrics port request refused', {
          path: url.pathname,
          status: outcome.status,
          reason: outcome.message,
          remote: req.socket.remoteAddress,
        });
        if (outcome.status === 401) res.setHeader('www-authenticate', 'Bearer');
        text(res, outcome.status, outcome.message);
        return;
      }
    }
    if (url.pathname === '/metrics') {
      const body = await o.registry.metrics();
      res.writeHead(200, { 'content-type': o.registry.contentType });
      res.end(body);
      return;
    }
    const route = o.routes?.[url.pathname];
    if (!route) {
      text(res, 404, 'not found');
      return;
    }
    await route(req, res);
  };
  const metricsHandler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    serveMetricsPort(req, res).catch((err: unknown) => {
      o.log?.error('metrics port request failed', { path: req.url, error: String(err) });
      if (!res.headersSent) text(res, 500, 'internal error');
      else res.destroy();
    });
  };

  const servers: http.Server[] = [];
  const result: ObservabilityServer = {
    metricsScheme: o.secure ? 'https' : 'http',
    close: async () => {
      o.secure?.certificate.close();
      for (const s of servers) s.closeAllConnections();
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
  if (metricsAddr) {
    let s: http.Server;
    if (o.secure) {
      const base: tls.SecureContextOptions = { minVersion: 'TLSv1.2' };
      const tlsServer = https.createServer(
        { ...base, cert: o.secure.certificate.cert, key: o.secure.certificate.key },
        metricsHandler,
      );
      o.secure.certificate.watch(tlsServer, base);
      s = tlsServer;
    } else {
      s = httpModule.createServer(metricsHandler);
    }
    // A slow or stuck client cannot hold a connection open for long: 10 s to
    // send its request, and a socket with no progress for 60 s (a reader that
    // stopped reading a streamed /debug/graph) is closed, ending the handler.
    s.headersTimeout = 10_000;
    s.requestTimeout = 60_000;
    s.timeout = 60_000;
    servers.push(s);
    result.metrics = await listen(s, metricsAddr);
  }
  if (healthAddr) {
    const s = httpModule.createServer(healthHandler);
    s.headersTimeout = 10_000;
    s.requestTimeout = 10_000;
    servers.push(s);
    result.health = await listen(s, healthAddr);
  }
  for (const s of servers) s.unref();
  return result;
}
