// KubeClient's transport against local TLS servers: HTTP/2 when the server
// offers it, HTTP/1.1 when it does not or when DISABLE_HTTP2 says so, and the
// same answers either way. (Every e2e test also runs it against kube-apiserver.)
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from './client.ts';
import { ApiError, isObjectNotFound } from './errors.ts';
import { inLane } from './lanes.ts';
import { selfSignedCert } from '../../test/support/tls.ts';

let tls: { key: Buffer; cert: Buffer };

beforeAll(() => {
  tls = selfSignedCert();
});

interface Seen {
  httpVersion: string;
  method: string;
  url: string;
  accept: string | undefined;
  authorization: string | undefined;
  body: string;
}

type Handler = (seen: Seen) => { status: number; body: string; headers?: Record<string, string> };

const apiHandler: Handler = (seen) => {
  if (seen.url.startsWith('/api/v1/namespaces/ns/configmaps/missing'))
    return { status: 404, body: '{"kind":"Status","reason":"NotFound","message":"not found"}' };
  return { status: 200, body: JSON.stringify({ echo: seen }) };
};

/** A TLS server; `h2`: also speaks HTTP/2 (and HTTP/1.1 for clients that ask for it). */
async function serve(h2: boolean, handler: Handler = apiHandler) {
  const seen: Seen[] = [];
  const onRequest = (
    req: http2.Http2ServerRequest | import('node:http').IncomingMessage,
    res: http2.Http2ServerResponse | import('node:http').ServerResponse,
  ): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = {
        httpVersion: req.httpVersion,
        method: req.method ?? '',
        url: req.url ?? '',
        accept: req.headers.accept,
        authorization: req.headers.authorization,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      seen.push(s);
      const answer = handler(s);
      const out = res as {
        writeHead(status: number, headers: Record<string, string>): void;
        end(body: string): void;
      };
      out.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      out.end(answer.body);
    });
  };
  const server = h2
    ? http2.createSecureServer({ ...tls, allowHTTP1: true }, onRequest)
    : https.createServer(tls, onRequest);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    seen,
    url: `https://127.0.0.1:${port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

function kubeconfig(server: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

async function withServer(
  h2: boolean,
  fn: (client: KubeClient, seen: Seen[]) => Promise<void>,
  handler?: Handler,
): Promise<void> {
  const srv = await serve(h2, handler);
  const client = await KubeClient.create(kubeconfig(srv.url), { qps: 0, burst: 1 });
  try {
    await fn(client, srv.seen);
  } finally {
    client.close();
    await srv.close();
  }
}

test('requests go over HTTP/2 when the server offers it', async () => {
  await withServer(true, async (client, seen) => {
    const got = await client.request<{ echo: Seen }>('GET', '/api/v1/namespaces/ns/configmaps/a', {
      accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      query: { limit: 5 },
    });
    await client.request('DELETE', '/api/v1/namespaces/ns/configmaps/a', {
      body: { preconditions: { uid: 'u1' } },
    });
    expect(client.http2).toBe(true);
    expect(got.echo.url).toBe('/api/v1/namespaces/ns/configmaps/a?limit=5');
    expect(seen.map((s) => [s.httpVersion, s.method])).toEqual([
      ['2.0', 'GET'],
      ['2.0', 'DELETE'],
    ]);
    expect(seen[0]?.accept).toBe('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1');
    expect(seen[0]?.authorization).toBe('Bearer secret-token');
    expect(JSON.parse(seen[1]?.body ?? '')).toEqual({ preconditions: { uid: 'u1' } });
  });
});

test('a non-2xx answer over HTTP/2 is an ApiError with status and reason', async () => {
  await withServer(true, async (client) => {
    const err = await client
      .request('GET', '/api/v1/namespaces/ns/configmaps/missing')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(404);
    expect((err as ApiError).reason).toBe('NotFound');
  });
});

test('429 with Retry-After is retried over HTTP/2', async () => {
  let calls = 0;
  await withServer(
    true,
    async (client, seen) => {
      await expect(client.request('GET', '/api/v1/namespaces')).resolves.toEqual({ ok: true });
      expect(seen).toHaveLength(2);
    },
    () =>
      ++calls === 1
        ? { status: 429, body: '{}', headers: { 'retry-after': '1' } }
        : { status: 200, body: '{"ok":true}' },
  );
});

test('a server without HTTP/2 gets HTTP/1.1, from the first request on', async () => {
  await withServer(false, async (client, seen) => {
    await client.request('GET', '/api/v1/namespaces/ns/configmaps/a');
    await client.request('GET', '/api/v1/namespaces/ns/configmaps/b');
    expect(client.http2).toBe(false);
    expect(seen.map((s) => s.httpVersion)).toEqual(['1.1', '1.1']);
  });
});

test('DISABLE_HTTP2 (as client-go reads it) keeps requests on HTTP/1.1', async () => {
  process.env.DISABLE_HTTP2 = 'true';
  try {
    await withServer(true, async (client, seen) => {
      await client.request('GET', '/api/v1/namespaces/ns/configmaps/a');
      expect(client.http2).toBe(false);
      expect(seen.map((s) => s.httpVersion)).toEqual(['1.1']);
    });
  } finally {
    delete process.env.DISABLE_HTTP2;
  }
});

test('an exception thrown by a watch line handler rejects the stream instead of escaping', async () => {
  await withServer(
    true,
    async (client) => {
      const lines: string[] = [];
      const err = await client
        .stream(
          '/api/v1/configmaps',
          { query: { watch: true } },
          () => undefined,
          (line) => {
            lines.push(line);
            throw new Error(`cannot handle ${line}`);
          },
        )
        .catch((e: unknown) => e);
      expect(err).toEqual(new Error('cannot handle {"n":1}'));
      expect(lines).toEqual(['{"n":1}']);
    },
    () => ({ status: 200, body: '{"n":1}\n{"n":2}\n' }),
  );
});

test('a watch aborted from its last line (an ERROR that ends the stream) resolves, and nothing escapes as an uncaught exception', async () => {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => void uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    await withServer(
      true,
      async (client) => {
        for (let i = 0; i < 3; i++) {
          const abort = new AbortController();
          const lines: string[] = [];
          await client.stream(
            '/api/v1/configmaps',
            { query: { watch: true }, signal: abort.signal },
            () => undefined,
            (line) => {
              lines.push(line);
              abort.abort();
            },
          );
          expect(lines).toEqual(['{"type":"ERROR","object":{"code":410}}']);
        }
        await new Promise((r) => setTimeout(r, 50));
      },
      () => ({ status: 200, body: '{"type":"ERROR","object":{"code":410}}\n' }),
    );
    expect(uncaught).toEqual([]);
  } finally {
    process.off('uncaughtException', onUncaught);
  }
});

test("watches opened together resume the first one's TLS session instead of a full handshake each", async () => {
  // What every informer does at start: a watch connection each, all at once.
  const reused: boolean[] = [];
  const server = https.createServer(tls, (req, res) => {
    reused.push((req.socket as import('node:tls').TLSSocket).isSessionReused());
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"type":"BOOKMARK"}\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const client = await KubeClient.create(kubeconfig(`https://127.0.0.1:${port}`), {
    qps: 0,
    burst: 1,
  });
  try {
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        client.stream(
          `/api/v1/r${i}`,
          { query: { watch: true } },
          () => undefined,
          () => undefined,
        ),
      ),
    );
    expect(reused).toHaveLength(6);
    expect(reused.filter(Boolean)).toHaveLength(5);
  } finally {
    client.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

describe('isObjectNotFound', () => {
  const notFound = (body: unknown): ApiError =>
    new ApiError('GET', '/apis/g/v2/namespaces/n/things/a', 404, JSON.stringify(body));
  test('a 404 whose Status names the object says the object is gone', () => {
    const err = notFound({
      kind: 'Status',
      reason: 'NotFound',
      details: { name: 'a', kind: 'things' },
    });
    expect(isObjectNotFound(err, 'a')).toBe(true);
    expect(isObjectNotFound(err, 'b')).toBe(false);
  });
  test('a 404 for the path (a version no longer served) says nothing about the object', () => {
    const err = notFound({
      kind: 'Status',
      reason: 'NotFound',
      message: 'the server could not find the requested resource',
      details: {},
    });
    expect(isObjectNotFound(err, 'a')).toBe(false);
    expect(isObjectNotFound(new ApiError('GET', '/x', 404, 'page not found'), 'a')).toBe(false);
  });
});

test('a request issued in the housekeeping lane waits behind the user requests in the rate limiter', async () => {
  const srv = await serve(true);
  const client = await KubeClient.create(kubeconfig(srv.url), {
    qps: 20,
    burst: 1,
    housekeepingQpsShare: 0,
  });
  try {
    const get = (name: string): Promise<unknown> =>
      client.request('GET', `/api/v1/namespaces/ns/configmaps/${name}`);
    // The lane comes from the work item the request is issued for (AsyncLocalStorage),
    // through every await on the way: no request option names it.
    const housekeeping = inLane('housekeeping', () =>
      Promise.all(
        ['h1', 'h2', 'h3'].map(async (name) => {
          await Promise.resolve();
          return get(name);
        }),
      ),
    );
    await new Promise((r) => setImmediate(r));
    // h1 took the one token there was.
    expect(client.rateLimited('housekeeping')).toBe(2);
    const user = inLane('user', () => get('u1'));
    // No lane (an informer, discovery): served as the user's.
    const none = get('n1');
    await Promise.all([housekeeping, user, none]);
    expect(srv.seen.map((s) => s.url.split('/').pop())).toEqual(['h1', 'u1', 'n1', 'h2', 'h3']);
  } finally {
    client.close();
    await srv.close();
  }
});
