// The HTTP/2 health check (client-go's ReadIdleTimeout / PingTimeout): a
// connection that goes silent is detected by an unanswered PING, its streams
// fail at once, and the next request opens a new connection. The server sits
// behind a TCP relay on 127.0.0.1 that can stop forwarding, as a frozen peer
// or a network that drops packets would.
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from './client.ts';
import { ApiError } from './errors.ts';
import { selfSignedCert } from '../../test/support/tls.ts';

let tls: { key: Buffer; cert: Buffer };

beforeAll(() => {
  tls = selfSignedCert();
});

/** An HTTP/2 server that answers every request with its URL, and counts its connections. */
async function h2Server() {
  const sessions: http2.ServerHttp2Session[] = [];
  const server = http2.createSecureServer(tls);
  server.on('session', (s) => sessions.push(s));
  server.on('stream', (stream, headers) => {
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end(JSON.stringify({ path: headers[':path'] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    sessions,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sessions) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A TCP relay to `port`; freeze() makes its current connections drop all bytes both ways. */
async function relay(port: number) {
  const links: { frozen: boolean; sockets: net.Socket[] }[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const link = { frozen: false, sockets: [client, upstream] };
    links.push(link);
    client.on('data', (d) => void (link.frozen || upstream.write(d)));
    upstream.on('data', (d) => void (link.frozen || client.write(d)));
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of link.sockets) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => links.length,
    freeze: () => links.forEach((l) => (l.frozen = true)),
    close: async () => {
      for (const l of links) l.sockets.forEach((s) => s.destroy());
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function kubeconfig(server: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

test('an HTTP/2 connection that stops answering PINGs is dropped and replaced', async () => {
  const server = await h2Server();
  const proxy = await relay(server.port);
  const client = await KubeClient.create(kubeconfig(proxy.url), {
    qps: 0,
    burst: 1,
    // Far beyond the test's own timeout: only the health check can end the frozen request.
    requestTimeoutMs: 60_000,
    http2ReadIdleTimeoutMs: 300,
    http2PingTimeoutMs: 500,
  });
  try {
    await expect(client.request('GET', '/api/v1/namespaces/a')).resolves.toEqual({
      path: '/api/v1/namespaces/a',
    });
    expect(client.http2).toBe(true);
    proxy.freeze();

    const err = await client.request('GET', '/api/v1/namespaces/b').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(0);
    expect((err as ApiError).message).toMatch(
      /HTTP\/2 connection to https:\/\/127\.0\.0\.1:\d+ failed its health check: no PING ack within 0\.5s/,
    );

    await expect(client.request('GET', '/api/v1/namespaces/c')).resolves.toEqual({
      path: '/api/v1/namespaces/c',
    });
    expect(proxy.connections()).toBe(2);
    expect(server.sessions).toHaveLength(2);
  } finally {
    client.close();
    await proxy.close();
    await server.close();
  }
}, 20_000);

test('a connection that never completes its TLS handshake (a blackholed network) fails the request after its timeout, and the next request connects anew', async () => {
  // Accepts TCP and says nothing: the HTTP/2 session stays "connecting", where the
  // stream's own idle timer does not run.
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const port = (silent.address() as AddressInfo).port;
  const client = await KubeClient.create(kubeconfig(`https://127.0.0.1:${port}`), {
    qps: 0,
    burst: 1,
    requestTimeoutMs: 300,
  });
  try {
    for (const name of ['a', 'b']) {
      const err = await client
        .request('GET', `/api/v1/namespaces/${name}`)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(0);
      expect((err as ApiError).message).toMatch(/timed out after 300 ms/);
    }
  } finally {
    client.close();
    silent.close();
  }
}, 20_000);
