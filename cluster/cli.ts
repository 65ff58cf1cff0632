// `npm run cluster -- up [--builtin-gc] [--audit] [--node] | down | status [--dir DIR]`
// The last line `up` prints is the kubeconfig path, so scripts can capture it.
import path from 'node:path';
import { ControlPlaneError, REPO_ROOT, down, status, up } from './controlplane.ts';
import { downNode, nodeStatus, upNode } from './node.ts';

const USAGE = `usage: npm run cluster -- <command> [--dir DIR]

commands:
  up [--builtin-gc] [--audit] [--node]
                     start (or reuse) etcd, kube-apiserver and kube-controller-manager;
                     --builtin-gc also runs kube-controller-manager's own garbage collector;
                     --audit has kube-apiserver log every write to DIR/logs/audit.log;
                     --node (root: changes the host's network and cgroups) also joins a
                     node: kube-scheduler, containerd and a kubelet, on bridge kubegc0
                     (198.18.0.1), and an image registry there (https://198.18.0.1:5000,
                     TLS from the cluster CA) that the kubelet pulls from (npm run image
                     pushes to it); without it Pods stay Pending
  down               stop the processes started in DIR (node included), undo what they
                     added to the host and remove the data
  status             show what runs in DIR

--dir DIR defaults to .cluster in the repository (env KUBEGC_CLUSTER_DIR).`;

function fail(msg: string, code = 1): never {
  console.error(msg);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  let dir = process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster');
  let builtinGc = false;
  let audit = false;
  let node = false;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--dir') {
      const v = argv[++i];
      if (!v) fail('cluster: --dir needs a value', 2);
      dir = v;
    } else if (a.startsWith('--dir=')) dir = a.slice('--dir='.length);
    else if (a === '--builtin-gc') builtinGc = true;
    else if (a === '--audit') audit = true;
    else if (a === '--node') node = true;
    else if (a === '-h' || a === '--help') {
      console.log(USAGE);
      return;
    } else if (a.startsWith('-')) fail(`cluster: unknown flag ${a}\n${USAGE}`, 2);
    else rest.push(a);
  }
  const [command, ...extra] = rest;
  if (extra.length > 0) fail(`cluster: unexpected arguments: ${extra.join(' ')}`, 2);
  if (builtinGc && command !== 'up') fail('cluster: --builtin-gc goes with up', 2);
  if (audit && command !== 'up') fail('cluster: --audit goes with up', 2);
  if (node && command !== 'up') fail('cluster: --node goes with up', 2);
  const log = (line: string): void => console.error(`cluster: ${line}`);
  switch (command) {
    case 'up': {
      const started = Date.now();
      const c = await up({ dir, builtinGc, audit, log });
      log(
        `${c.reused ? 'reused the running' : 'started a'} Kubernetes ${c.version} control plane at ${c.server}` +
          ` (${c.builtinGc ? 'with' : 'without'} the built-in GC) in ${((Date.now() - started) / 1000).toFixed(1)}s`,
      );
      if (node) {
        const nodeStarted = Date.now();
        const n = await upNode(c, { log });
        log(
          `${n.reused ? 'reused the running' : 'joined'} node ${n.name} (${n.ip}, containerd ${n.containerdSocket}) in ${((Date.now() - nodeStarted) / 1000).toFixed(1)}s`,
        );
        log(`registry: https://${n.registry} (CA ${path.relative(process.cwd(), n.registryCa)})`);
      }
      log(
        `kubectl: ${path.relative(process.cwd(), c.kubectl) || c.kubectl} --kubeconfig ${path.relative(process.cwd(), c.kubeconfig)}`,
      );
      console.log(path.relative(process.cwd(), c.kubeconfig) || c.kubeconfig);
      return;
    }
    case 'down': {
      const hadNode = await downNode(dir, log);
      const stopped: string[] = [...(hadNode ? ['node'] : []), ...(await down(dir))];
      console.log(stopped.length ? `stopped ${stopped.join(', ')}` : 'nothing was running');
      return;
    }
    case 'status': {
      const s = await status(dir);
      if (!s.cluster) {
        console.log(`no cluster in ${dir}`);
        return;
      }
      console.log(
        JSON.stringify(
          {
            ready: s.ready,
            running: s.running,
            server: s.cluster.server,
            kubeconfig: s.cluster.kubeconfig,
            node: (await nodeStatus(dir)) ?? null,
          },
          null,
          2,
        ),
      );
      return;
    }
    case undefined:
      fail(USAGE, 2);
      break;
    default:
      fail(`cluster: unknown command ${command}\n${USAGE}`, 2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  fail(
    err instanceof ControlPlaneError
      ? `cluster: ${err.message}`
      : `cluster: ${(err as Error).stack ?? String(err)}`,
  );
});
