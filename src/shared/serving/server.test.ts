import http from 'node:http';
import https from 'node:https';
import { Registry, Counter } from 'prom-client';
import { createLogger } from '../../log.ts';
import type { AuthOutcome } from './delegated-auth.ts';
import {
  sharedPortProblem,
  startObservabilityServer,
  type ObservabilityServer,
  type SecureServing,
} from './server.ts';
import { servingCertificate } from './tls.ts';

interface Got {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

function get(
  scheme: 'http' | 'https',
  hostPort: string,
  path: string,
  token?: string,
  header = 'authorization',
): Promise<Got> {
  return new Promise((resolve, reject) => {
    const mod = scheme === 'https' ? https : http;
    const req = mod.get(
      `${scheme}://${hostPort}${path}`,
      {
        headers: token ? { [header]: `Bearer ${token}` } : {},
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
  });
}

const registry = new Registry();
new Counter({ name: 'kubegc_test_total', help: 'test', registers: [registry] }).inc(3);

/** Tokens: "reader" may get /metrics, "debugger" /debug/graph, "nobody" nothing. */
const authorize = (header: string | undefined, path: string): Promise<AuthOutcome> => {
  const token = header?.replace(/^Bearer /, '');
  const users: Record<string, string[]> = {
    reader: ['/metrics'],
    debugger: ['/debug/graph'],
    nobody: [],
  };
  const allowed = token === undefined ? undefined : users[token];
  if (!allowed) return Promise.resolve({ status: 401, message: 'Unauthorized' });
  return Promise.resolve(
    allowed.includes(path)
      ? { status: 200, user: token ?? '' }
      : { status: 403, user: token ?? '', message: `Forbidden: ${path}` },
  );
};

let server: ObservabilityServer | undefined;
let routeCalls = 0;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function startSecure(): Promise<ObservabilityServer> {
  const log = createLogger('error', () => undefined);
  const certificate = await servingCertificate({ hosts: ['localhost'], ips: ['127.0.0.1'], log });
  const secure: SecureServing = { certificate, authorize };
  routeCalls = 0;
  server = await startObservabilityServer({
    metricsAddress: '127.0.0.1:0',
    healthAddress: '127.0.0.1:0',
    secure,
    registry,
    healthz: () => ({ ok: true }),
    readyz: () => ({ ok: false, reason: 'not synced' }),
    routes: {
      '/debug/graph': (_req, res) => {
        routeCalls++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"nodes":[],"edges":[]}');
      },
    },
    log,
  });
  return server;
}

test('the metrics port is HTTPS: 401 without or with a bad token, 403 without the permission, 200 with it', async () => {
  const s = await startSecure();
  expect(s.metricsScheme).toBe('https');
  const m = s.metrics ?? '';
  const none = await get('https', m, '/metrics');
  expect(none.status).toBe(401);
  expect(none.headers['www-authenticate']).toBe('Bearer');
  expect(none.body).not.toContain('kubegc_test_total');
  expect((await get('https', m, '/metrics', 'stolen')).status).toBe(401);
  expect((await get('https', m, '/metrics', 'nobody')).status).toBe(403);
  const ok = await get('https', m, '/metrics', 'reader');
  expect(ok.status).toBe(200);
  expect(ok.body).toContain('kubegc_test_total 3');
  // /debug/graph: its own permission; the route runs only once it is granted.
  expect((await get('https', m, '/debug/graph', 'reader')).status).toBe(403);
  expect((await get('https', m, '/debug/graph')).status).toBe(401);
  expect(routeCalls).toBe(0);
  expect((await get('https', m, '/debug/graph', 'debugger')).status).toBe(200);
  expect(routeCalls).toBe(1);
  // Unknown paths: authorization first, so nobody learns which paths exist.
  expect((await get('https', m, '/nope', 'reader')).status).toBe(403);
  // Plain HTTP on the TLS port gets nothing.
  await expect(get('http', m, '/metrics', 'reader')).rejects.toThrow();
});

test('through the pod proxy (which removes Authorization) a token in X-Kubegc-Authorization is checked exactly as Authorization is', async () => {
  const s = await startSecure();
  const m = s.metrics ?? '';
  const proxied = 'x-kubegc-authorization';
  expect((await get('https', m, '/debug/graph', 'debugger', proxied)).status).toBe(200);
  expect((await get('https', m, '/debug/graph', 'reader', proxied)).status).toBe(403);
  expect((await get('https', m, '/debug/graph', 'stolen', proxied)).status).toBe(401);
  expect((await get('https', m, '/metrics', 'reader', proxied)).status).toBe(200);
  expect(routeCalls).toBe(1);
});

test('the probe port is plain HTTP and serves the probes only', async () => {
  const s = await startSecure();
  const h = s.health ?? '';
  expect(await get('http', h, '/healthz')).toMatchObject({ status: 200, body: 'ok' });
  expect(await get('http', h, '/livez')).toMatchObject({ status: 200, body: 'ok' });
  expect(await get('http', h, '/readyz')).toMatchObject({
    status: 503,
    body: 'not ok: not synced',
  });
  expect((await get('http', h, '/metrics')).status).toBe(404);
  expect((await get('http', h, '/debug/graph')).status).toBe(404);
  expect(routeCalls).toBe(0);
});

test('--metrics-secure=false: plain HTTP, no authentication', async () => {
  server = await startObservabilityServer({
    metricsAddress: '127.0.0.1:0',
    healthAddress: '0',
    secure: undefined,
    registry,
    healthz: () => ({ ok: true }),
    readyz: () => ({ ok: true }),
  });
  expect(server.metricsScheme).toBe('http');
  expect(server.health).toBeUndefined();
  const ok = await get('http', server.metrics ?? '', '/metrics');
  expect(ok.status).toBe(200);
  expect(ok.body).toContain('kubegc_test_total 3');
});

test('the two ports cannot be one listener', async () => {
  expect(sharedPortProblem(':8443', ':8443')).toMatch(/must use different ports/);
  expect(sharedPortProblem('127.0.0.1:9000', ':9000')).toMatch(/must use different ports/);
  expect(sharedPortProblem('127.0.0.1:9000', '127.0.0.2:9000')).toBeUndefined();
  expect(sharedPortProblem(':8443', ':8081')).toBeUndefined();
  expect(sharedPortProblem('127.0.0.1:0', '127.0.0.1:0')).toBeUndefined();
  expect(sharedPortProblem('0', ':8081')).toBeUndefined();
  await expect(
    startObservabilityServer({
      metricsAddress: '127.0.0.1:18443',
      healthAddress: '127.0.0.1:18443',
      secure: undefined,
      registry,
      healthz: () => ({ ok: true }),
      readyz: () => ({ ok: true }),
    }),
  ).rejects.toThrow(/different ports/);
});
