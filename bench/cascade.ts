// Seconds kubegc takes to carry out the delete of one owner with N dependent
// ConfigMaps, on the local control plane (started or reused in .cluster/).
//   npm run bench:cascade -- [--n 1000] [--policy Background|Foreground|Orphan] [-- kubegc flags]
// Background: from the owner's DELETE until the last dependent is gone.
// Foreground (blocking references): until the owner itself is gone.
// Orphan: until the owner is gone (every dependent kept, reference removed).
import { spawn } from 'node:child_process';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { controllerArgs, kubegcArgv } from '../cluster/kubegc-command.ts';
import { REPO_ROOT, up } from '../cluster/controlplane.ts';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const own = sep === -1 ? argv : argv.slice(0, sep);
const extra = sep === -1 ? [] : argv.slice(sep + 1);
const opt = (name: string, fallback: string): string => {
  const i = own.indexOf(name);
  return i === -1 ? fallback : (own[i + 1] ?? fallback);
};
const n = Number(opt('--n', '1000'));
const policy = opt('--policy', 'Background');
if (!Number.isInteger(n) || n < 1) throw new Error('--n must be a positive integer');
if (!['Background', 'Foreground', 'Orphan'].includes(policy))
  throw new Error('--policy must be Background, Foreground or Orphan');

const cluster = await up({
  dir: process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster'),
});
const kc = new k8s.KubeConfig();
kc.loadFromFile(cluster.kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = `bench-cascade-${Date.now().toString(36)}`;
await core.createNamespace({ body: { metadata: { name: ns } } });

const owner = await core.createNamespacedConfigMap({
  namespace: ns,
  body: { metadata: { name: 'owner' } },
});
const ref = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name: 'owner',
  uid: owner.metadata?.uid ?? '',
  blockOwnerDeletion: policy === 'Foreground',
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

// Start kubegc once the tree exists: its initial sync then holds every dependent.
const gc = spawn(process.execPath, kubegcArgv(controllerArgs(cluster.kubeconfig, extra)), {
  stdio: ['ignore', 'ignore', 'pipe'],
});
await new Promise<void>((resolve, reject) => {
  let rest = '';
  gc.stderr.on('data', (b: Buffer) => {
    rest += b.toString();
    for (let nl = rest.indexOf('\n'); nl !== -1; nl = rest.indexOf('\n')) {
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      if (line.includes('"garbage collector started"')) resolve();
      else if (line.includes('"level":"error"') || line.includes('"level":"warn"'))
        process.stderr.write(`${line}\n`);
    }
  });
  gc.on('exit', (code) => reject(new Error(`kubegc exited with ${code}`)));
});

try {
  const dependents = async (): Promise<k8s.V1ConfigMap[]> =>
    (await core.listNamespacedConfigMap({ namespace: ns })).items.filter((c) =>
      c.metadata?.name?.startsWith('dep-'),
    );
  const ownerGone = async (): Promise<boolean> =>
    core.readNamespacedConfigMap({ namespace: ns, name: 'owner' }).then(
      () => false,
      () => true,
    );
  const t0 = performance.now();
  await core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner', propagationPolicy: policy });
  const finished =
    policy === 'Background' ? async () => (await dependents()).length === 0 : ownerGone;
  while (!(await finished())) await new Promise((r) => setTimeout(r, 50));
  const seconds = (performance.now() - t0) / 1000;
  if (policy === 'Orphan') {
    const left = await dependents();
    if (left.length !== n || left.some((c) => c.metadata?.ownerReferences?.length))
      throw new Error('Orphan: dependents lost or still referencing the owner');
  } else if ((await dependents()).length !== 0) throw new Error(`${policy}: dependents left`);
  console.log(
    `kubegc: ${policy} delete of an owner with ${n} dependents took ${seconds.toFixed(2)} s (${(n / seconds).toFixed(0)} objects/s)`,
  );
} finally {
  gc.kill('SIGTERM');
  await core.deleteNamespace({ name: ns }).catch(() => undefined);
}
