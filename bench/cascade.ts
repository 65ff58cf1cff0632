// Seconds kubegc takes to collect N dependents of one owner deleted with
// Background, on the local control plane (started or reused in .cluster/).
//   npm run bench:cascade -- [--n 1000] [-- extra kubegc flags]
// Time runs from the owner's DELETE to the last dependent gone.
import { spawn } from 'node:child_process';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, up } from '../cluster/controlplane.ts';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const own = sep === -1 ? argv : argv.slice(0, sep);
const extra = sep === -1 ? [] : argv.slice(sep + 1);
const nIndex = own.indexOf('--n');
const n = nIndex === -1 ? 1000 : Number(own[nIndex + 1]);
if (!Number.isInteger(n) || n < 1) throw new Error('--n must be a positive integer');

const cluster = await up({
  dir: process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster'),
});
const kc = new k8s.KubeConfig();
kc.loadFromFile(cluster.kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = `bench-cascade-${Date.now().toString(36)}`;
await core.createNamespace({ body: { metadata: { name: ns } } });

const gc = spawn(
  process.execPath,
  [
    '--disable-warning=ExperimentalWarning',
    path.join(REPO_ROOT, 'src', 'cli.ts'),
    'controller',
    '--kubeconfig',
    cluster.kubeconfig,
    '--log-level',
    'warn',
    ...extra,
  ],
  { stdio: ['ignore', 'inherit', 'inherit'] },
);
try {
  const owner = await core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'owner' } },
  });
  const ref = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: 'owner',
    uid: owner.metadata?.uid ?? '',
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < n) {
        const i = next++;
        await core.createNamespacedConfigMap({
          namespace: ns,
          body: { metadata: { name: `dep-${i}`, ownerReferences: [ref] }, data: { i: String(i) } },
        });
      }
    }),
  );
  const count = async (): Promise<number> =>
    (await core.listNamespacedConfigMap({ namespace: ns, labelSelector: undefined })).items.filter(
      (c) => c.metadata?.name?.startsWith('dep-'),
    ).length;
  // Let kubegc finish its initial sync and observe the dependents.
  await new Promise((r) => setTimeout(r, 3000));
  const t0 = performance.now();
  await core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  while ((await count()) > 0) await new Promise((r) => setTimeout(r, 50));
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `kubegc collected ${n} dependents in ${seconds.toFixed(2)} s (${(n / seconds).toFixed(0)} objects/s)`,
  );
} finally {
  gc.kill('SIGTERM');
  await core.deleteNamespace({ name: ns }).catch(() => undefined);
}
