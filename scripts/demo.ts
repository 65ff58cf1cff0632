// `npm run demo`: brings up the local control plane, builds a small ownership
// tree (Deployment → ReplicaSet → Pods, plus a ConfigMap owned by the
// Deployment and a Secret owned by that ConfigMap), runs `kubegc controller`,
// deletes the Deployment with propagationPolicy=Background and shows kubegc
// collecting every dependent. The control plane keeps running afterwards.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { controllerArgs, kubegcArgv } from '../cluster/kubegc-command.ts';
import { REPO_ROOT, up } from '../cluster/controlplane.ts';

const NS = 'kubegc-demo';
const dir = process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster');
const cluster = await up({ dir, log: (l) => console.log(`demo: ${l}`) });
const kubectl = (...args: string[]): string =>
  execFileSync(cluster.kubectl, ['--kubeconfig', cluster.kubeconfig, ...args], {
    encoding: 'utf8',
  });
const apply = (obj: unknown): string =>
  execFileSync(cluster.kubectl, ['--kubeconfig', cluster.kubeconfig, 'apply', '-f', '-'], {
    input: JSON.stringify(obj),
    encoding: 'utf8',
  });
const show = (): void => {
  console.log(
    kubectl(
      'get',
      'deployments,replicasets,pods,configmaps,secrets',
      '-n',
      NS,
      '--ignore-not-found',
      '-o',
      'wide',
    ),
  );
};
const kubectlAsync = async (...args: string[]): Promise<string> =>
  (
    await promisify(execFile)(cluster.kubectl, ['--kubeconfig', cluster.kubeconfig, ...args], {
      encoding: 'utf8',
    })
  ).stdout;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

console.log(
  `demo: Kubernetes ${cluster.version} ${cluster.reused ? 'already running' : 'up'} at ${cluster.server}`,
);
console.log('demo: its kube-controller-manager runs every controller except the garbage collector');
if (kubectl('get', 'nodes', '-o', 'name').trim() === '')
  console.log(
    'demo: no node has joined, so the Pods stay Pending (the GC does not need them to run); `sudo npm run cluster -- up --node` joins one',
  );
console.log('');

async function buildTree(): Promise<void> {
  kubectl('delete', 'namespace', NS, '--ignore-not-found', '--wait=true');
  kubectl('create', 'namespace', NS);
  apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: NS },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: { containers: [{ name: 'web', image: 'registry.k8s.io/pause:3.10' }] },
      },
    },
  });
  const deployUid = kubectl('get', 'deployment', 'web', '-n', NS, '-o', 'jsonpath={.metadata.uid}');
  apply({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'web-config',
      namespace: NS,
      labels: { app: 'web' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: deployUid }],
    },
    data: { greeting: 'hello' },
  });
  const cmUid = kubectl(
    'get',
    'configmap',
    'web-config',
    '-n',
    NS,
    '-o',
    'jsonpath={.metadata.uid}',
  );
  apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: 'web-secret',
      namespace: NS,
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'web-config', uid: cmUid }],
    },
    stringData: { token: 'demo' },
  });
  for (let i = 0; i < 120; i++) {
    const pods = kubectl('get', 'pods', '-n', NS, '-o', 'name').trim();
    if (pods.split('\n').filter(Boolean).length === 3) break;
    await sleep(500);
  }
  console.log(
    'The tree: Deployment web → ReplicaSet → 3 Pods; Deployment web → ConfigMap web-config → Secret web-secret\n',
  );
  show();
}

console.log('demo: starting kubegc controller');
const gc = spawn(process.execPath, kubegcArgv(controllerArgs(cluster.kubeconfig)), {
  stdio: ['ignore', 'inherit', 'pipe'],
});
let started = false;
let deletions = 0;
let rest = '';
gc.stderr.on('data', (b: Buffer) => {
  rest += b.toString();
  let nl: number;
  while ((nl = rest.indexOf('\n')) !== -1) {
    const text = rest.slice(0, nl);
    rest = rest.slice(nl + 1);
    try {
      const l = JSON.parse(text) as Record<string, unknown>;
      if (l.msg === 'garbage collector started') {
        started = true;
        console.log(
          `kubegc: started, watching ${String(l.resources)} resources, ${String(l.objects)} objects in its graph`,
        );
      } else if (l.msg === 'deleted') {
        deletions++;
        const owner = (
          l.owners as { kind: string; name: string; state: string }[] | undefined
        )?.[0];
        const why =
          owner?.state === 'waiting' ? 'is deleting its dependents in the foreground' : 'is gone';
        console.log(
          `kubegc: deleted ${String(l.resource)} ${String(l.namespace)}/${String(l.name)} (owner ${owner?.kind ?? '?'} ${owner?.name ?? '?'} ${why}, ${String(l.propagationPolicy)})`,
        );
      } else if (
        l.msg === 'orphaned dependents and removed the orphan finalizer' ||
        l.msg === 'foreground deletion finished: removed the foregroundDeletion finalizer'
      ) {
        console.log(`kubegc: ${String(l.msg)} (${String(l.resource)} ${String(l.name)})`);
      } else if (l.level === 'warn' || l.level === 'error') {
        console.log(
          `kubegc: ${String(l.level)}: ${String(l.msg)} ${String(l.resource ?? '')} ${String(l.name ?? '')} ${String(l.error ?? '')}`,
        );
      }
    } catch {
      console.log(text);
    }
  }
});
for (let i = 0; i < 120 && !started; i++) await sleep(250);
if (!started) {
  gc.kill('SIGKILL');
  throw new Error('kubegc did not start within 30 s');
}

async function cascade(mode: 'background' | 'orphan' | 'foreground'): Promise<void> {
  await buildTree();
  // kubectl runs synchronously: kubegc's lines about the previous tree (its
  // leftovers go with the namespace) may still be in the pipe. Count from here.
  await sleep(500);
  const before = deletions;
  console.log(`\n$ kubectl delete deployment web -n ${NS} --cascade=${mode}`);
  const t0 = Date.now();
  console.log(
    kubectl('delete', 'deployment', 'web', '-n', NS, `--cascade=${mode}`, '--wait=false'),
  );
  const dependentsLeft = async (): Promise<string[]> =>
    (await kubectlAsync('get', 'replicasets,pods,configmaps,secrets', '-n', NS, '-o', 'name'))
      .split('\n')
      .filter((n) => n && !n.includes('kube-root-ca.crt'));
  const deploymentLeft = async (): Promise<boolean> =>
    (await kubectlAsync('get', 'deployments', '-n', NS, '-o', 'name')).trim() !== '';
  let sawWaiting = false;
  for (let i = 0; i < 240; i++) {
    const [deps, deploy] = await Promise.all([dependentsLeft(), deploymentLeft()]);
    if (mode === 'foreground' && deploy && deps.length > 0 && !sawWaiting) {
      sawWaiting = true;
      console.log(
        'demo: the Deployment still exists (deletionTimestamp + foregroundDeletion) while its dependents go',
      );
    }
    if (!deploy && (mode === 'orphan' || deps.length === 0)) break;
    await sleep(100);
  }
  const seconds = ((Date.now() - t0) / 1000).toFixed(1);
  await sleep(300);
  console.log(`\n${mode}: done in ${seconds} s, ${deletions - before} deletions by kubegc.`);
  if (mode === 'orphan') {
    // What the Deployment owned: its ReplicaSet and web-config (both app=web),
    // not the namespace's kube-root-ca.crt, which it never owned.
    console.log('The dependents stay, no longer owned by the Deployment:');
    console.log(
      kubectl(
        'get',
        'replicasets,configmaps',
        '-n',
        NS,
        '-l',
        'app=web',
        '-o',
        'custom-columns=KIND:.kind,NAME:.metadata.name,OWNERS:.metadata.ownerReferences[*].kind',
      ),
    );
  } else show();
}

await cascade('background');
await cascade('orphan');
await cascade('foreground');
gc.kill('SIGTERM');
await new Promise((r) => gc.on('exit', r));
console.log(
  `Explore: ${path.relative(process.cwd(), cluster.kubectl)} --kubeconfig ${path.relative(process.cwd(), cluster.kubeconfig)} get all -A`,
);
console.log('Run kubegc yourself: npx kubegc controller --kubeconfig .cluster/kubeconfig');
console.log('Stop the control plane: npm run cluster -- down');
