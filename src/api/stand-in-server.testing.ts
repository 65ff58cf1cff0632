// For unit tests: a KubeClient of a stand-in API server (node:http on a free
// loopback port, plain HTTP), so that the client's real transport is tested.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { KubeClient, type ClientOptions } from './client.ts';

/** Starts `server` on 127.0.0.1 and returns a client of it (no client-side rate limit by default). */
export async function listenAndConnect(
  server: http.Server,
  opts: Partial<ClientOptions> = { qps: 0, burst: 1 },
): Promise<KubeClient> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return KubeClient.create(kc, opts);
}

/**
 * For a describe block: `connect(handler)` starts a stand-in server answering
 * with `handler` and returns its client; both are closed after each test.
 */
export function standInPerTest(): (handler: http.RequestListener) => Promise<KubeClient> {
  let server: http.Server | undefined;
  let client: KubeClient | undefined;
  afterEach(async () => {
    client?.close();
    server?.closeAllConnections();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    server = client = undefined;
  });
  return async (handler) => {
    server = http.createServer(handler);
    client = await listenAndConnect(server);
    return client;
  };
}
