// Every shell command of the README and docs/ (```sh and ```bash blocks), and
// how each is proven to work: run as written by test/e2e/docs-commands.test.ts
// (RUN_BY_E2E), or named in PROVEN_ELSEWHERE with the file that runs it or its
// exact equivalent. test/unit/docs-commands.test.ts fails when a command is in
// neither list, or when an entry no longer matches the docs or its file, so a
// command in the docs cannot rot unseen.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface DocCommand {
  /** Path relative to the repository root. */
  file: string;
  /** 1-based line of the command's first line. */
  line: number;
  /** Continuation lines joined with single spaces, the trailing comment dropped. */
  text: string;
}

/** The markdown files whose commands must be proven: README.md, docs/*.md, docs/runbooks/*.md. */
export function docFiles(root: string): string[] {
  const md = (dir: string): string[] =>
    readdirSync(path.join(root, dir))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => path.join(dir, f));
  return ['README.md', ...md('docs'), ...md(path.join('docs', 'runbooks'))];
}

const FENCE = /^\s*(```|~~~)\s*([\w-]*)/;
const SHELL_LANGS = new Set(['sh', 'bash']);

/**
 * Drops a `#` comment: a `#` that starts a word outside quotes (so `'{"a#b"}'`
 * and `$#` stay), as the shell reads it.
 */
export function stripComment(line: string): string {
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = undefined;
    } else if (ch === '\\') i++;
    else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1] ?? ''))) return line.slice(0, i);
  }
  return line;
}

/** The commands of one markdown text, in order. */
export function extractCommands(markdown: string, file: string): DocCommand[] {
  const out: DocCommand[] = [];
  const lines = markdown.split('\n');
  let fence: string | undefined;
  let shell = false;
  let pending: { line: number; text: string } | undefined;
  const flush = (): void => {
    if (!pending) return;
    const text = stripComment(pending.text).trim();
    if (text) out.push({ file, line: pending.line, text });
    pending = undefined;
  };
  lines.forEach((raw, i) => {
    const m = FENCE.exec(raw);
    if (m && (fence === undefined || m[1] === fence)) {
      if (fence === undefined) {
        fence = m[1];
        shell = SHELL_LANGS.has(m[2] ?? '');
      } else {
        flush();
        fence = undefined;
        shell = false;
      }
      return;
    }
    if (!shell) return;
    const line = raw.trimEnd();
    // A comment-only line neither starts nor continues a command.
    if (!pending && stripComment(line).trim() === '') return;
    // A trailing backslash continues the command; one inside a comment does not.
    const code = stripComment(line).trimEnd();
    const continued = code.endsWith('\\');
    const part = continued ? code.slice(0, -1).trim() : line.trim();
    if (pending) pending.text += ` ${part}`;
    else pending = { line: i + 1, text: part };
    if (!continued) flush();
  });
  flush();
  return out;
}

/** Every command of every doc file, in file order. */
export function docCommands(root: string): DocCommand[] {
  return docFiles(root).flatMap((f) =>
    extractCommands(readFileSync(path.join(root, f), 'utf8'), f),
  );
}

/**
 * Commands test/e2e/docs-commands.test.ts runs against the e2e control plane,
 * exactly as written but for the substitutions its table names (placeholders,
 * `.cluster/`, loopback listeners). It fails unless it ran each of them.
 */
export const RUN_BY_E2E: readonly string[] = [
  // docs/development.md
  'npx kubegc controller --kubeconfig .cluster/kubeconfig',
  'npx kubegc controller --kubeconfig .cluster/kubeconfig --dry-run --log-level debug',
  'npm run cluster -- up',
  'npm run cluster -- up --builtin-gc',
  'npm run cluster -- up --audit',
  'npm run cluster -- status',
  'npm run cluster -- down',
  '.cluster/bin/kubectl --kubeconfig .cluster/kubeconfig get --raw /readyz',
  // docs/doctor.md, the runbooks
  'kubegc doctor',
  `kubegc doctor --older-than 1h -o json | jq '.findings[] | select(.kind == "stuck-deletion") | .heldBy'`,
  'kubegc doctor -n shop',
  'kubegc doctor --older-than 30m',
  `kubegc doctor --older-than 30m -o json | jq '.findings[] | select(.kind == "stuck-deletion")'`,
  'kubegc explain RESOURCE/NAME -n NAMESPACE',
  // docs/node-gc.md
  'npx kubegc node --once --dry-run',
  'npx kubegc node --cri-endpoint unix:///run/containerd/containerd.sock --state-file /var/lib/kubegc/node-state.json --metrics-bind-address 0',
  // docs/operations.md
  'HELM=$(bash cluster/build-helm.sh)/helm',
  '$HELM package charts/kubegc --destination /tmp',
  'TOKEN=$(kubectl create token my-debugger -n default)',
  `curl -sk -H "Authorization: Bearer $TOKEN" 'https://127.0.0.1:8443/debug/graph?format=json&limit=1000'`,
  // docs/runbooks/
  'kubectl get events -A --field-selector reason=DeletionBlocked',
  'kubectl describe RESOURCE NAME -n NAMESPACE',
  `kubectl patch RESOURCE NAME -n NAMESPACE --type=json -p '[{"op":"test","path":"/metadata/finalizers/0","value":"example.com/cleanup"},{"op":"remove","path":"/metadata/finalizers/0"}]'`,
  `kubectl patch RESOURCE NAME -n NAMESPACE --type=json -p '[{"op":"test","path":"/metadata/ownerReferences/0/uid","value":"OWNER_UID"},{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]'`,
  'kubectl get events -A --field-selector reason=GarbageCollectionForbidden',
  'kubectl get apiservices | grep -v True',
  'kubectl describe apiservice VERSION.GROUP',
  "kubectl -n kubegc-system logs POD | grep 'discovery failed'",
  'kubectl -n kubegc-system get deploy,pods -l app.kubernetes.io/component=controller',
  'kubectl -n kubegc-system describe pods -l app.kubernetes.io/component=controller',
  'kubectl -n kubegc-system get lease kubegc -o yaml',
  "kubectl -n kubegc-system logs deploy/kubegc-controller --all-containers | grep -E 'leader|lease'",
  `kubectl get RESOURCE NAME -n NAMESPACE -o jsonpath='{.metadata.deletionTimestamp} {.metadata.finalizers}{"\\n"}'`,
  'kubectl get events -A --field-selector reason=WatchForbidden',
  'kubectl get events -A --field-selector reason=WatchStalled',
  'kubectl -n kubegc-system logs POD | grep RESOURCE',
  'kubectl auth can-i list RESOURCE -A --as system:serviceaccount:kubegc-system:kubegc-controller',
  'kubectl get RESOURCE -A --request-timeout=30s | head',
  `kubectl -n kubegc-system get lease kubegc -o jsonpath='{.spec.holderIdentity}{"\\n"}'`,
  'kubectl -n kubegc-system get pods -l app.kubernetes.io/name=kubegc,app.kubernetes.io/component=controller -o wide',
  `kubectl -n kubegc-system logs POD | grep '"level":"warn"' | tail -50`,
  'curl -sk -H "Authorization: Bearer $TOKEN" https://127.0.0.1:8443/metrics | grep -E \'^kubegc_(blocked|oldest|pending)\'',
  // docs/runbooks/ of the node alerts
  'kubectl -n kubegc-system get pods -l app.kubernetes.io/name=kubegc-node -o wide',
  `kubectl -n kubegc-system logs POD | grep -E '"level":"(warn|error)"' | tail -50`,
  'kubectl get events -A --field-selector involvedObject.kind=Node,involvedObject.name=NODE',
  'kubectl get events -A --field-selector reason=PodsUnknown',
  `kubectl -n kubegc-system logs POD | grep "this node's pods"`,
  'kubectl get nodes -o wide',
  'kubectl get pods -A --field-selector spec.nodeName=NODE -o wide',
  'kubectl auth can-i list pods -A --as system:serviceaccount:kubegc-system:kubegc-node',
  'kubectl auth can-i get nodes --as system:serviceaccount:kubegc-system:kubegc-node',
  'kubectl get events -A --field-selector reason=DiskPressureReclaimFailed',
  "kubectl -n kubegc-system logs POD | grep 'disk pressure'",
  'kubectl describe node NODE',
  "kubectl -n kubegc-system logs POD | grep -E 'unavailable|failed|could not|state file'",
  'kubectl get events -A --field-selector reason=ImageGCFailed',
  'kubectl get events -A --field-selector reason=ContainerGCFailed',
  'kubectl -n kubegc-system describe pod POD',
];

/** A file that runs a command (or its exact equivalent), and words of the command it must contain. */
export interface Proof {
  file: string;
  /** Each appears in the command and in the file: an entry whose file no longer does it goes stale loudly. */
  words: string[];
}

export interface ProvenElsewhere {
  command: string;
  proofs: Proof[];
  /** Why this test cannot run it, and what the file does instead. */
  why: string;
}

const IN_CLUSTER = 'test/e2e/in-cluster.test.ts';
const OVERLAY = 'test/e2e/deploy-overlay/kustomization.yaml';

export const PROVEN_ELSEWHERE: readonly ProvenElsewhere[] = [
  {
    command:
      'kubectl -n kubegc-system create rolebinding explain-operator --clusterrole=kubegc-node-explainer --user=USER',
    proofs: [
      {
        file: 'test/e2e/node-disk-pressure.test.ts',
        words: ['create', 'rolebinding', 'explain-operator', '--clusterrole=kubegc-node-explainer'],
      },
    ],
    why: 'the test grants a client-certificate user of its own the ClusterRole this way, after checking that explain node is refused without it',
  },
  {
    command: 'kubegc explain node/NODE -o json',
    proofs: [{ file: 'test/e2e/node-disk-pressure.test.ts', words: ['explain', '-o', 'json'] }],
    why: 'the test runs it on the real kubelet node, through the pod proxy to the DaemonSet applied with kubectl apply -k',
  },
  {
    command: 'export PATH="$PWD/node_modules/.bin:$PATH"',
    proofs: [{ file: 'test/e2e/kubectl-plugin.test.ts', words: ['node_modules/.bin', 'PATH'] }],
    why: "the plugin's e2e test runs the real kubectl with the project's .bin first on PATH",
  },
  {
    command: 'npm run krew',
    proofs: [{ file: 'test/e2e/kubectl-plugin.test.ts', words: ['npm', 'run', 'krew'] }],
    why: 'the test runs it with --out, into its own directory, twice (the archive must be the same)',
  },
  {
    command:
      'kubectl krew install --manifest dist-krew/gc.yaml --archive dist-krew/kubectl-gc-v0.1.0.tar.gz',
    proofs: [
      {
        file: 'test/e2e/kubectl-plugin.test.ts',
        words: ['krew', 'install', '--manifest', '--archive'],
      },
    ],
    why: 'the test installs what `npm run krew --out DIR` made there, with the real krew into its own KREW_ROOT',
  },
  {
    command: 'kubectl gc doctor --context prod --older-than 1h',
    proofs: [{ file: 'test/e2e/kubectl-plugin.test.ts', words: ['gc', 'doctor', '--context'] }],
    why: 'the e2e cluster has no context named prod: the test runs `kubectl gc doctor` with --context on a kubeconfig of two contexts',
  },
  {
    command: 'kubectl gc explain deployment/web -n shop -o json',
    proofs: [
      { file: 'test/e2e/kubectl-plugin.test.ts', words: ['gc', 'explain', '-n', '-o', 'json'] },
    ],
    why: 'there is no deployment web in namespace shop: the test runs `kubectl gc explain` with -n and -o json on its own object',
  },
  {
    command: 'npm ci && npm run demo',
    proofs: [
      { file: '.ci/run', words: ['npm ci'] },
      { file: 'package.json', words: ['demo'] },
      { file: 'scripts/demo.ts', words: ['demo'] },
    ],
    why: 'CI runs `npm ci` from a clean clone; `npm run demo` is scripts/demo.ts (package.json), a 10-minute run on its own control plane',
  },
  {
    command: 'npm test',
    proofs: [{ file: '.ci/run', words: ['npm test'] }],
    why: 'the whole suite, this test included: CI runs it',
  },
  {
    command:
      'helm install kubegc oci://registry.example.com/charts/kubegc --version 0.1.0 -n kubegc-system --create-namespace --set image.repository=registry.example.com/kubegc',
    proofs: [
      {
        file: IN_CLUSTER,
        words: ['helm install', 'oci://', '--version', '--create-namespace', 'image.repository'],
      },
    ],
    why: 'needs a registry and a node: the in-cluster e2e installs from the local node’s registry, pods pulling the image',
  },
  {
    command: '(cd deploy && kustomize edit set image kubegc=registry.example.com/kubegc:0.1.0)',
    proofs: [
      { file: 'deploy/kustomization.yaml', words: ['image', 'kubegc'] },
      { file: OVERLAY, words: ['image', 'kubegc'] },
    ],
    why: 'kustomize is not installed here: the command rewrites the `images:` entry named kubegc in deploy/kustomization.yaml; the e2e overlay sets the image the same way (`images:`), and the in-cluster e2e applies it and runs the pulled image',
  },
  {
    command: 'kubectl apply -k deploy/',
    proofs: [
      { file: IN_CLUSTER, words: ['kubectl apply -k', 'deploy/'] },
      { file: OVERLAY, words: ['deploy'] },
    ],
    why: 'needs a node: the in-cluster e2e applies an overlay of deploy/ that sets only the image',
  },
  {
    command: 'npm run cluster -- up --node',
    proofs: [{ file: IN_CLUSTER, words: ['npm run cluster -- up --node'] }],
    why: 'root, changes the host (containerd, kubelet, a bridge): the in-cluster e2e joins the node the same way (cluster/node.ts upNode)',
  },
  {
    command: 'kubectl apply -k deploy/node/',
    proofs: [
      { file: IN_CLUSTER, words: ['kubectl apply -k', 'node'] },
      { file: 'deploy/kustomization.yaml', words: ['node'] },
    ],
    why: 'needs a node: deploy/ includes deploy/node/, and the in-cluster e2e applies it and runs the DaemonSet',
  },
  {
    command:
      'helm install kubegc oci://REGISTRY/charts/kubegc --version 0.1.0 -n kubegc-system --create-namespace --set image.repository=REGISTRY/kubegc --set-string image.tag=0.1.0',
    proofs: [
      {
        file: IN_CLUSTER,
        words: ['helm install', 'oci://', '/charts/kubegc', '--create-namespace', 'image.tag'],
      },
    ],
    why: 'needs a registry and a node: the in-cluster e2e installs from the local node’s registry',
  },
  {
    command:
      'helm upgrade kubegc oci://REGISTRY/charts/kubegc --version 0.1.0 -n kubegc-system --reuse-values --set prometheusOperator.enabled=true --set dashboard.enabled=true',
    proofs: [
      { file: IN_CLUSTER, words: ['helm upgrade', '--reuse-values', 'oci://'] },
      { file: 'test/unit/chart.test.ts', words: ['prometheusOperator', 'dashboard'] },
    ],
    why: 'the in-cluster e2e upgrades the release with --reuse-values and changed values; the chart test renders these two values',
  },
  {
    command: 'helm uninstall kubegc -n kubegc-system',
    proofs: [{ file: IN_CLUSTER, words: ['helm uninstall', 'kubegc-system'] }],
    why: 'the in-cluster e2e uninstalls its release and checks nothing is left',
  },
  {
    command: 'kubectl delete namespace kubegc-system',
    proofs: [{ file: IN_CLUSTER, words: ['delete', 'namespace', 'kubegc-system'] }],
    why: 'the e2e control plane’s kubegc-system holds the service account every e2e file runs kubegc as; the in-cluster e2e deletes it after helm uninstall',
  },
  {
    command:
      '$HELM push /tmp/kubegc-0.1.0.tgz oci://198.18.0.1:5000/charts --ca-file .cluster/pki/ca.crt',
    proofs: [{ file: IN_CLUSTER, words: ['push', 'oci://', '/charts', '--ca-file'] }],
    why: 'the registry on 198.18.0.1:5000 runs with the node: the in-cluster e2e pushes the packaged chart to it',
  },
  {
    command:
      '$HELM install kubegc oci://198.18.0.1:5000/charts/kubegc --version 0.1.0 --ca-file .cluster/pki/ca.crt --kubeconfig .cluster/kubeconfig -n kubegc-system --create-namespace --set image.repository=198.18.0.1:5000/kubegc --set image.tag=dev --wait',
    proofs: [
      {
        file: IN_CLUSTER,
        words: [
          'install',
          '--ca-file',
          '--kubeconfig',
          '--create-namespace',
          'image.tag=dev',
          '--wait',
        ],
      },
    ],
    why: 'the same install as the in-cluster e2e’s, from the node’s registry',
  },
  {
    command: 'kubectl -n kubegc-system port-forward deploy/kubegc-controller 8443 &',
    proofs: [{ file: IN_CLUSTER, words: ['kubegc-system', '8443'] }],
    why: 'a port-forward needs a real kubelet: the in-cluster e2e reaches the pods’ port 8443 directly; here the curl after it runs against a kubegc serving on loopback',
  },
  {
    command:
      'kubegc doctor --gc-metrics https://127.0.0.1:8443/metrics --gc-metrics-insecure-skip-tls-verify --gc-metrics-token-file reader.token',
    proofs: [
      {
        file: 'test/e2e/gc-lanes.test.ts',
        words: ['--gc-metrics', '--gc-metrics-token-file', '--gc-metrics-insecure-skip-tls-verify'],
      },
    ],
    why: 'its URL is a port-forward to a pod (a real kubelet); gc-lanes runs the same doctor against an in-process collector serving its metrics port over HTTPS on loopback, with a kubegc-metrics-reader token, during a backlog',
  },
  {
    command: 'kubectl -n kubegc-system port-forward pod/POD 8443 &',
    proofs: [{ file: IN_CLUSTER, words: ['kubegc-system', '8443'] }],
    why: 'a port-forward needs a real kubelet: the in-cluster e2e reaches the pods’ port 8443 directly; here the curl after it runs against a kubegc serving on loopback',
  },
];

/** What is wrong with the two lists against the docs and the files they name (empty: nothing). */
export function provenProblems(
  root: string,
  commands: readonly DocCommand[],
  runByE2e: readonly string[] = RUN_BY_E2E,
  provenElsewhere: readonly ProvenElsewhere[] = PROVEN_ELSEWHERE,
): string[] {
  const problems: string[] = [];
  const inDocs = new Set(commands.map((c) => c.text));
  const run = new Set(runByE2e);
  const elsewhere = new Map(provenElsewhere.map((e) => [e.command, e]));
  for (const c of commands) {
    if (!run.has(c.text) && !elsewhere.has(c.text))
      problems.push(
        `${c.file}:${c.line}: \`${c.text}\` is neither run by test/e2e/docs-commands.test.ts nor in PROVEN_ELSEWHERE`,
      );
    if (run.has(c.text) && elsewhere.has(c.text))
      problems.push(
        `${c.file}:${c.line}: \`${c.text}\` is in both RUN_BY_E2E and PROVEN_ELSEWHERE`,
      );
  }
  for (const text of runByE2e)
    if (!inDocs.has(text)) problems.push(`RUN_BY_E2E: \`${text}\` is no longer in the docs`);
  if (run.size !== runByE2e.length) problems.push('RUN_BY_E2E names a command twice');
  if (elsewhere.size !== provenElsewhere.length)
    problems.push('PROVEN_ELSEWHERE names a command twice');
  for (const e of provenElsewhere) {
    if (!inDocs.has(e.command))
      problems.push(`PROVEN_ELSEWHERE: \`${e.command}\` is no longer in the docs`);
    if (e.proofs.length === 0) problems.push(`PROVEN_ELSEWHERE: \`${e.command}\` names no file`);
    for (const p of e.proofs) {
      let text: string;
      try {
        text = readFileSync(path.join(root, p.file), 'utf8');
      } catch {
        problems.push(`PROVEN_ELSEWHERE: \`${e.command}\`: ${p.file} does not exist`);
        continue;
      }
      if (p.words.length === 0)
        problems.push(`PROVEN_ELSEWHERE: \`${e.command}\`: no words to find in ${p.file}`);
      for (const w of p.words) {
        if (!e.command.includes(w))
          problems.push(`PROVEN_ELSEWHERE: \`${e.command}\`: "${w}" is not a word of the command`);
        if (!text.includes(w))
          problems.push(`PROVEN_ELSEWHERE: \`${e.command}\`: ${p.file} does not contain "${w}"`);
      }
    }
  }
  return problems;
}
