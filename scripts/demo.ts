// `npm run demo`: brings up the local control plane and shows that it is real.
// (Later: runs kubegc on it and shows a cascade being collected.)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT, up } from '../cluster/controlplane.ts';

const dir = process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster');
const cluster = await up({ dir, log: (l) => console.log(`demo: ${l}`) });
const kubectl = (...args: string[]): string =>
  execFileSync(cluster.kubectl, ['--kubeconfig', cluster.kubeconfig, ...args], {
    encoding: 'utf8',
  });

console.log(
  `demo: Kubernetes ${cluster.version} is ${cluster.reused ? 'already running' : 'up'} at ${cluster.server}\n`,
);
console.log(`$ kubectl get --raw /readyz\n${kubectl('get', '--raw', '/readyz')}\n`);
console.log(`$ kubectl get namespaces\n${kubectl('get', 'namespaces')}`);
console.log(
  `$ kubectl api-resources --verbs=list,watch,delete | wc -l  (what a GC must watch)\n${kubectl('api-resources', '--verbs=list,watch,delete', '--no-headers').trim().split('\n').length}\n`,
);
console.log(
  `Try it: ${path.relative(process.cwd(), cluster.kubectl)} --kubeconfig ${path.relative(process.cwd(), cluster.kubeconfig)} get all -A`,
);
console.log('Stop it: npm run cluster -- down');
