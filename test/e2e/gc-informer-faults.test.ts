// Informer faults forced against the real API server (issue 19). The
// collector runs in this process, as in gc-races.test.ts, but its client goes
// through a small reverse proxy on loopback that can break one response
// in the middle of its stream: a connection reset, as a restarting
// kube-apiserver or a load balancer gives. The proxy speaks plain HTTP to the
// collector (so that it sees which request a connection carries; the client
// then uses HTTP/1.1 for everything) and HTTPS to the API server, passing the
// collector's own Authorization header on.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import type { InterceptedRequest } from '../../src/api/request.ts';
import { INITIAL_EVENTS_END } from '../../src/informers/metadata-informer.ts';
import { kubegcKubeConfig, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { e2eLogger, startInProcessGc, type InProcessGc } from '../support/in-process-gc.ts';
import { configMap, isGone, ownerRef } from '../support/objects.ts';

const { cluster, c, namespace } = await e2e();

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host']);
const endToEnd = <T extends object>(headers: T): Partial<T> =>
  Object.fromEntries(
    Object.entries(headers).filter(([k]) => !HOP_BY_HOP.has(k.toLowerCase())),
  ) as Partial<T>;

/**
 * A reverse proxy to the API server on 127.0.0.1. `cut(req)` picks the
 * responses to break: for those, whole watch events (JSON lines, or the
 * length-prefixed frames of a protobuf stream), bytes untouched, are passed
 * on until `after(event)` is true (the event's bytes as latin1 text, where
 * UIDs and annotation keys read as they are), and then the collector's
 * connection is destroyed, that event delivered and nothing after it.
 */
async function faultProxy(
  upstream: URL,
  ca: Buffer | string | undefined,
  cut: (req: http.IncomingMessage) => ((event: string) => boolean) | undefined,
): Promise<{ url: string; close(): Promise<void> }> {
  const agent = new https.Agent({ ca, keepAlive: true });
  const server = http.createServer((req, res) => {
    const headers = endToEnd(req.headers);
    const up = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers,
        agent,
      },
      (answer) => {
        const out = endToEnd(answer.headers);
        res.writeHead(answer.statusCode ?? 502, out);
        const after = cut(req);
        if (!after) {
          answer.pipe(res);
          return;
        }
        res.flushHeaders();
        const framed = String(answer.headers['content-type']).startsWith(
          'application/vnd.kubernetes.protobuf',
        );
        /** The length of the first whole event in `b`, or 0 while it is incomplete. */
        const nextEvent = (b: Buffer): number => {
          if (framed)
            return b.length >= 4 && b.length >= 4 + b.readUInt32BE(0) ? 4 + b.readUInt32BE(0) : 0;
          const nl = b.indexOf(0x0a);
          return nl + 1;
        };
        let buf = Buffer.alloc(0);
        answer.on('data', (chunk: Buffer) => {
          buf = Buffer.concat([buf, chunk]);
          for (let n = nextEvent(buf); n > 0; n = nextEvent(buf)) {
            const event = buf.subarray(0, n);
            buf = buf.subarray(n);
            if (after(event.toString('latin1'))) {
              // The event reaches the collector, then the connection is reset
              // (no end of the chunked body: the stream breaks).
              res.write(event, () => res.destroy());
              answer.destroy();
              buf = Buffer.alloc(0);
              return;
            }
            res.write(event);
          }
        });
        answer.on('end', () => res.end(buf));
      },
    );
    up.on('error', () => res.destroy());
    // The collector gave up the request (a watch it aborts): so does the proxy.
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };
}

/** A copy of kubeconfig `direct`, its server the proxy at `url`. */
function throughProxy(direct: k8s.KubeConfig, url: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    // Plain HTTP on loopback to the proxy, which verifies the API server's certificate.
    clusters: direct.clusters.map((cl) => ({ ...cl, server: url, skipTLSVerify: true })),
    users: direct.users,
    contexts: direct.contexts,
    currentContext: direct.currentContext,
  });
  return kc;
}

test.each([
  ['protobuf', true],
  ['JSON', false],
])(
  'item 1 (%s): an owner delivered only by a broken initial list, deleted before the relist: the relist reports it deleted and its dependent is collected',
  async (_encoding, protobuf) => {
    const ns = await namespace('faults-cut-list');
    // Created before the collector starts: its first list of configmaps holds
    // them, in key order (namespace/name), O first. The list is cut after O, so
    // D first comes in the relist, when the graph (without the fix) still shows
    // O as an existing owner: nothing makes the collector look at D again. (Had
    // D come first, O would be virtual at first, and the collector would check
    // it live and find it gone.)
    const o = await configMap(c, ns, 'a-owner');
    const d = await configMap(c, ns, 'b-dependent', [ownerRef(o)]);

    const direct = await kubegcKubeConfig(cluster);
    const tls: https.RequestOptions = {};
    await direct.applyToHTTPSOptions(tls);
    const isConfigMapList = (path: string, sendInitialEvents: unknown): boolean =>
      path === '/api/v1/configmaps' && sendInitialEvents === true;

    // The first watch-list of configmaps is cut right after O's ADDED event.
    let cut: { deliveredO: boolean; endBookmark: boolean } | undefined;
    /** The Accept of every watch-list of configmaps: the encoding asked for throughout. */
    const accepts: string[] = [];
    const proxy = await faultProxy(new URL(cluster.server), tls.ca as Buffer | undefined, (req) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (isConfigMapList(u.pathname, u.searchParams.get('sendInitialEvents') === 'true'))
        accepts.push(String(req.headers.accept));
      if (cut || !isConfigMapList(u.pathname, u.searchParams.get('sendInitialEvents') === 'true'))
        return undefined;
      const seen = { deliveredO: false, endBookmark: false };
      cut = seen;
      return (event) => {
        if (event.includes(INITIAL_EVENTS_END)) seen.endBookmark = true;
        if (event.includes(o.uid)) seen.deliveredO = true;
        return seen.deliveredO;
      };
    });
    const kc = throughProxy(direct, proxy.url);

    // The relist (the second watch-list of configmaps): before it goes out, O is deleted.
    let lists = 0;
    let deletedBeforeRelist = false;
    const intercept = async (r: InterceptedRequest): Promise<void> => {
      if (r.verb !== 'WATCH' || !isConfigMapList(r.path, r.query?.sendInitialEvents)) return;
      if (++lists !== 2) return;
      await c.core.deleteNamespacedConfigMap({
        name: o.name,
        namespace: ns,
        body: { propagationPolicy: 'Background' },
      });
      await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 30_000 });
      deletedBeforeRelist = true;
    };
    let g: InProcessGc | undefined;
    try {
      g = await startInProcessGc(cluster, {
        userAgent: 'kubegc-e2e-faults',
        kubeConfig: kc,
        intercept,
        log: e2eLogger('error'),
        gc: { informer: { protobuf } },
      });
      const collector = g.gc;
      await waitFor('the configmaps informer to list again', () =>
        Promise.resolve(deletedBeforeRelist && collector.informers.get('configmaps')?.synced),
      );
      expect(cut).toEqual({ deliveredO: true, endBookmark: false });
      expect(lists).toBeGreaterThanOrEqual(2);
      // The cut frame was no decode error: the relist asked in the same encoding.
      expect(accepts.length).toBeGreaterThanOrEqual(2);
      for (const a of accepts)
        expect(a.startsWith('application/vnd.kubernetes.protobuf')).toBe(protobuf);
      await waitFor('D to be collected', () => isGone(c, d), { timeoutMs: 30_000 });
      // And in the collector's own view (whatever other collectors on this cluster do), O is gone.
      await waitFor(
        'the graph to drop O',
        () => Promise.resolve(collector.graph.get(o.uid)?.virtual !== false),
        { timeoutMs: 15_000 },
      );
    } finally {
      await g?.stop();
      await proxy.close();
    }
  },
);
