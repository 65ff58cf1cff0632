// A design study, not used by kubegc: the client CPU one API request costs
// through KubeClient (node:https with a keep-alive Agent) and through an
// undici Pool (the HTTP client inside Node's fetch; already installed, as a
// dependency of @kubernetes/client-node) and through one node:http2 session
// (as client-go does), same server, same concurrency.
//   node bench/prototype/http-client.ts KUBECONFIG [--n 4000] [--concurrency 20]
import http2 from 'node:http2';
import { Pool } from 'undici';
import { KubeClient, METADATA_ACCEPT, loadKubeConfig } from '../../src/api/client.ts';

const PATH = '/api/v1/namespaces/default/configmaps/kube-root-ca.crt';

async function measure(label: string, n: number, concurrency: number, get: () => Promise<unknown>) {
  const run = async (count: number): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < count) await get();
      }),
    );
  };
  await run(500); // warm-up: JIT and connections
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run(n);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const us = (cpu.user + cpu.system) / n;
  console.log(
    `${label.padEnd(44)} ${us.toFixed(0).padStart(5)} µs CPU/request  ${((n * 1000) / wall).toFixed(0).padStart(6)} requests/s`,
  );
}

const file = process.argv[2];
if (!file) throw new Error('usage: http-client.ts KUBECONFIG [--n N] [--concurrency C]');
const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const n = arg('--n', 4000);
const concurrency = arg('--concurrency', 20);
const kc = loadKubeConfig(file);

const client = await KubeClient.create(kc, { qps: 0, burst: 1 });
await measure('KubeClient (node:https, keep-alive Agent)', n, concurrency, () =>
  client.request('GET', PATH, { accept: METADATA_ACCEPT }),
);
client.close();

const tls: { ca?: unknown; cert?: unknown; key?: unknown } = {};
await kc.applyToHTTPSOptions(tls);
const server = kc.getCurrentCluster()?.server ?? '';
const pool = new Pool(server, {
  connections: concurrency,
  connect: { ca: tls.ca as string, cert: tls.cert as string, key: tls.key as string },
});
await measure('undici Pool', n, concurrency, async () => {
  const res = await pool.request({
    path: PATH,
    method: 'GET',
    headers: { accept: METADATA_ACCEPT },
  });
  return JSON.parse(await res.body.text()) as unknown;
});
await pool.close();

// HTTP/2, as client-go speaks to the API server: one TLS connection, multiplexed streams.
const session = http2.connect(server, {
  ca: tls.ca as string,
  cert: tls.cert as string,
  key: tls.key as string,
});
await measure('node:http2, one session', n, concurrency, () => h2get(session, PATH));
session.close();

function h2get(s: http2.ClientHttp2Session, path: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ':path': path, accept: METADATA_ACCEPT });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown));
    req.on('error', reject);
    req.end();
  });
}
