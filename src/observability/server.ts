// HTTP endpoints for operators: /metrics (Prometheus text format) on
// --metrics-bind-address, /healthz and /readyz on --health-probe-bind-address,
// and extra read-only routes (e.g. /debug/graph) on the metrics address.
// The two addresses may be the same; "0" disables one.
import http from 'node:http';
import type { Registry } from 'prom-client';

export interface Check {
  ok: boolean;
  /** Shown in the response body when not ok. */
  reason?: string;
  /** Problems worth seeing that do not fail the check, one line each in the body. */
  warnings?: string[];
}

export type Route = (url: URL) => { status: number; contentType: string; body: string };

export interface ServerOptions {
  metricsAddress: string;
  healthAddress: string;
  registry: Registry;
  healthz: () => Check;
  readyz: () => Check;
  routes?: Record<string, Route>;
}

export interface ObservabilityServer {
  /** Actual bound addresses ("host:port"), for tests and logs. */
  metrics?: string;
  health?: string;
  close(): Promise<void>;
}

/** `:8080` → all interfaces, `127.0.0.1:0` → an ephemeral port; `0` → disabled. */
export function parseBindAddress(
  text: string,
): { host: string | undefined; port: number } | undefined {
  if (text === '0' || text === '') return undefined;
  const m = /^(?:\[?([^\]]*)\]?)?:(\d+)$/.exec(text);
  if (!m)
    throw new Error(
      `invalid bind address "${text}" (examples: :8080, 127.0.0.1:8080, 0 to disable)`,
    );
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`invalid port in bind address "${text}"`);
  return { host: m[1] || undefined, port };
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

export async function startObservabilityServer(o: ServerOptions): Promise<ObservabilityServer> {
  const metricsAddr = parseBindAddress(o.metricsAddress);
  const healthAddr = parseBindAddress(o.healthAddress);
  const shared =
    metricsAddr &&
    healthAddr &&
    metricsAddr.port === healthAddr.port &&
    metricsAddr.port !== 0 &&
    metricsAddr.host === healthAddr.host;

  const healthRoutes = (path: string, res: http.ServerResponse): boolean => {
    const check =
      path === '/healthz' || path === '/livez'
        ? o.healthz
        : path === '/readyz'
          ? o.readyz
          : undefined;
    if (!check) return false;
    const c = check();
    res.writeHead(c.ok ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' });
    const lines = [c.ok ? 'ok' : `not ok: ${c.reason ?? 'unknown'}`];
    for (const w of c.warnings ?? []) lines.push(`warning: ${w}`);
    res.end(lines.join('\n'));
    return true;
  };
  const metricsRoutes = async (url: URL, res: http.ServerResponse): Promise<boolean> => {
    if (url.pathname === '/metrics') {
      const text = await o.registry.metrics();
      res.writeHead(200, { 'content-type': o.registry.contentType });
      res.end(text);
      return true;
    }
    const route = o.routes?.[url.pathname];
    if (!route) return false;
    const out = route(url);
    res.writeHead(out.status, { 'content-type': out.contentType });
    res.end(out.body);
    return true;
  };
  const handler =
    (serveMetrics: boolean, serveHealth: boolean) =>
    (req: http.IncomingMessage, res: http.ServerResponse): void => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      void (async () => {
        try {
          if (req.method !== 'GET' && req.method !== 'HEAD') {
            res.writeHead(405).end();
            return;
          }
          if (serveHealth && healthRoutes(url.pathname, res)) return;
          if (serveMetrics && (await metricsRoutes(url, res))) return;
          res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        } catch (err) {
          res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
        }
      })();
    };

  const servers: http.Server[] = [];
  const result: ObservabilityServer = {
    close: async () => {
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
  if (metricsAddr) {
    const s = http.createServer(handler(true, Boolean(shared)));
    servers.push(s);
    result.metrics = await listen(s, metricsAddr);
    if (shared) result.health = result.metrics;
  }
  if (healthAddr && !shared) {
    const s = http.createServer(handler(false, true));
    servers.push(s);
    result.health = await listen(s, healthAddr);
  }
  for (const s of servers) s.unref();
  return result;
}
