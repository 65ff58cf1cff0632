// The commands of the README and docs/ (test/support/docs-commands.ts
// RUN_BY_E2E), run as written in bash against the e2e control plane, each
// with an assertion on what it must show. Only what the substitution table
// below names is changed: placeholders get the objects this file makes, `.cluster/` is the
// e2e control plane, the local ends of listeners are loopback, and the node
// GC talks to a test containerd, never to the local node's.
//
// The runbooks read a kubegc Deployment in kubegc-system: its pod is bound to
// a Node whose "kubelet" is this file's HTTPS server (kube-apiserver does not
// verify a kubelet's serving certificate without --kubelet-certificate-authority),
// serving as the pod's log the output of a real `kubegc controller` this file
// runs with the Deployment's flags. So `kubectl logs POD | grep ...` greps
// real log lines, and a grep that no longer matches fails here. The node
// alerts' runbooks read a kubegc node pod bound to the same Node, whose log is
// what real `kubegc node --once` runs against a test containerd wrote, as the
// node's service account and with that Node's name (so their events are on it).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { isOurs, REPO_ROOT, type ProcessRecord } from '../../cluster/controlplane.ts';
import { randomLayer } from '../../cluster/oci-image.ts';
import { controllerArgs, kubegcArgv, KUBEGC_DIST_CLI } from '../../cluster/kubegc-command.ts';
import { ensurePackages } from '../../cluster/packages.ts';
import { RUN_BY_E2E } from '../support/docs-commands.ts';
import { exists, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { startContainerd, type TestContainerd } from '../support/containerd.ts';
import { addresses, runKubegc, type KubegcProcess } from '../support/kubegc.ts';
import {
  applyMetricsReaderRoles,
  deleteBindings,
  httpsGet,
  serviceAccountToken,
} from '../support/metrics-access.ts';
import { availablePercent, imagefsPressureFlags, runNodeOnce } from '../support/kubegc-node.ts';
import { breakConversion, configMap, ownerRef } from '../support/objects.ts';
import {
  KUBEGC_NODE_SERVICE_ACCOUNT,
  serviceAccountKubeconfig,
} from '../support/service-account.ts';
import { selfSignedCert } from '../support/tls.ts';

const log = (l: string): void => void process.stderr.write(`\ndocs-commands: ${l}`);

const SYSTEM_NS = 'kubegc-system';
const NODE = 'docs-commands-node';
/** The kubegc node pod the node alerts' runbooks read (POD in their commands). */
const NODE_POD = 'kubegc-node-docs';
const APISERVICE = 'v1alpha1.docs-commands.kubegc.test';
const FINALIZER = 'example.com/cleanup';
const LABELS = { 'app.kubernetes.io/name': 'kubegc', 'app.kubernetes.io/component': 'controller' };
/** `npm run cluster` gets a directory of its own: its `down` must not stop the e2e control plane. */
const DOCS_CLUSTER_DIR = path.join(REPO_ROOT, '.cluster-e2e-docs');
/** A resource the pod's kubegc may not list (its RBAC grants the core group only). */
const FORBIDDEN_RESOURCE = 'deployments.apps';

const { cluster, c, namespace } = await e2e();
let tmp: string;
/** The environment every command runs in (PATH with the control plane's kubectl, KUBECONFIG...). */
let baseEnv: NodeJS.ProcessEnv;
/** The pod's kubegc /metrics address (set while it runs). */
let podKubegcMetrics: () => string = () => {
  throw new Error('the pod’s kubegc is not running');
};
/** What the "kubelet" serves as each kubegc-system pod's log, by pod name. */
const podLogs = new Map<string, () => string>();
/** Variables set by the docs' `VAR=$(...)` lines, for the commands after them. */
const vars: Record<string, string> = {};

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}
/** Each command of RUN_BY_E2E this file ran, with what it printed. */
const ran = new Map<string, Result>();

// ---------------------------------------------------------------------------
// The substitution table.

/** What stands for the docs' placeholders (filled in as the fixtures are made). */
const placeholders: Record<string, string> = {
  RESOURCE: 'configmap',
  NAME: 'owner',
  NAMESPACE: '',
  POD: '',
  OWNER_UID: '',
  'VERSION.GROUP': APISERVICE,
  NODE,
};

/** Commands whose placeholders stand for another object than the default ones. */
const PLACEHOLDER_OVERRIDES: Record<string, Record<string, string>> = {
  // The dependent that holds the owner: its finalizer, its ownerReference.
  [cmd('/metadata/finalizers/0')]: { NAME: 'held' },
  [cmd('/metadata/ownerReferences/0/uid')]: { NAME: 'held' },
  // KubegcWatchNotSynced: the resource the pod's kubegc may not watch.
  'kubectl -n kubegc-system logs POD | grep RESOURCE': { RESOURCE: FORBIDDEN_RESOURCE },
  'kubectl auth can-i list RESOURCE -A --as system:serviceaccount:kubegc-system:kubegc-controller':
    { RESOURCE: FORBIDDEN_RESOURCE },
  'kubectl get RESOURCE -A --request-timeout=30s | head': { RESOURCE: FORBIDDEN_RESOURCE },
  // The node alerts' runbooks: POD is the kubegc node pod.
  ...Object.fromEntries(
    [
      `grep -E '"level":"(warn|error)"'`,
      `grep "this node's pods"`,
      "grep 'disk pressure'",
      "grep -E 'unavailable|failed|could not|state file'",
      'describe pod POD',
    ].map((part) => [cmd(part), { POD: NODE_POD }]),
  ),
};

/** Rewrites that are not placeholders: what is local in the docs is this test's here. */
const rewrites: { from: string; to: () => string; why: string }[] = [
  {
    from: '.cluster/',
    to: () => `${cluster.dir}/`,
    why: 'the docs’ local control plane is the e2e one',
  },
  { from: '--older-than 1h', to: () => '--older-than 1s', why: 'the fixtures are seconds old' },
  { from: '--older-than 30m', to: () => '--older-than 1s', why: 'the fixtures are seconds old' },
  {
    from: '127.0.0.1:8443',
    to: () => podKubegcMetrics(),
    why: 'the port-forward’s local end: the pod’s kubegc serves there itself (ephemeral port)',
  },
  {
    from: 'unix:///run/containerd/containerd.sock',
    to: () => containerd().endpoint,
    why: 'that socket is the local node’s containerd: the node GC runs against a test containerd',
  },
  {
    from: '/var/lib/kubegc/node-state.json',
    to: () => path.join(tmp, 'node-state.json'),
    why: 'not this machine’s /var/lib',
  },
];

/** The exact RUN_BY_E2E entry that contains `part` (fails loudly if there is not exactly one). */
function cmd(part: string): string {
  const found = RUN_BY_E2E.filter((t) => t.includes(part));
  if (found.length !== 1) throw new Error(`${found.length} commands contain ${part}`);
  return found[0] as string;
}

/** The command as this test runs it. */
function concrete(text: string): string {
  let out = text;
  for (const r of rewrites) if (out.includes(r.from)) out = out.split(r.from).join(r.to());
  const values = { ...placeholders, ...PLACEHOLDER_OVERRIDES[text] };
  out = out.replace(/\b(VERSION\.GROUP|NAMESPACE|RESOURCE|OWNER_UID|NAME|POD|NODE)\b/g, (p) => {
    const v = values[p];
    if (!v) throw new Error(`no value for ${p} yet (running \`${text}\`)`);
    return v;
  });
  return out;
}

// ---------------------------------------------------------------------------
// Running commands.

const shq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** `kubegc …` in the docs is the built CLI with the bin's runtime flags (cluster/kubegc-command.ts). */
const PRELUDE = `kubegc() { ${[process.execPath, ...kubegcArgv([], [], KUBEGC_DIST_CLI)].map(shq).join(' ')} "$@"; }\n`;

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...baseEnv, ...vars, ...extra };
}

/** Runs a docs command in bash from the repository root; records it. */
async function run(
  text: string,
  opts: { code?: number; extraEnv?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Result> {
  if (!RUN_BY_E2E.includes(text)) throw new Error(`not a RUN_BY_E2E command: ${text}`);
  const line = concrete(text);
  const assign = /^([A-Z_][A-Z0-9_]*)=\$\(/.exec(line);
  // `VAR=$(...)`: run it, and print what it set for the commands after it.
  const script = assign ? `${line}\nprintf '%s' "$${assign[1]}"` : line;
  const result = await new Promise<Result>((resolve) => {
    execFile(
      'bash',
      ['-c', PRELUDE + script],
      {
        cwd: REPO_ROOT,
        env: env(opts.extraEnv),
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: number }).code ?? null) : 0;
        resolve({ code: typeof code === 'number' ? code : null, stdout, stderr });
      },
    );
  });
  log(`$ ${line}\n  → exit ${result.code}, ${result.stdout.length} bytes out`);
  if (result.code !== (opts.code ?? 0))
    throw new Error(
      `\`${line}\` exited ${result.code}, expected ${opts.code ?? 0}\nstdout:\n${result.stdout.slice(-4000)}\nstderr:\n${result.stderr.slice(-4000)}`,
    );
  if (assign) vars[assign[1] as string] = result.stdout;
  ran.set(text, result);
  return result;
}

/** A long-running command (a server): started, seen ready, stopped. */
interface LongRun {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the first JSON log line whose msg is `msg`. */
  logged(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

function startLong(text: string, appended: string[]): LongRun {
  const line = `${concrete(text)} ${appended.map(shq).join(' ')}`;
  log(`$ ${line} (long-running)`);
  // Its own process group: stopping it stops npx and kubegc under it, by this group's id.
  const child = spawn('bash', ['-c', `${PRELUDE}exec ${line}`], {
    cwd: REPO_ROOT,
    env: env(),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  let done = false;
  void closed.then(() => (done = true));
  return {
    child,
    output: () => out,
    logged: (msg, timeoutMs = 90_000) =>
      waitFor(
        `\`${line}\` to log "${msg}"`,
        () => {
          if (done) throw new Error(`it exited:\n${out.slice(-3000)}`);
          return Promise.resolve(jsonLines(out).find((l) => l.msg === msg));
        },
        { timeoutMs },
      ),
    async stop() {
      if (!done && child.pid) process.kill(-child.pid, 'SIGTERM');
      return closed;
    },
  };
}

/** waitFor for a check that runs commands: once a second, a kubegc sweep or two long. */
function retrying<T>(what: string, check: () => Promise<T>): Promise<NonNullable<T>> {
  return waitFor(what, check, { timeoutMs: 90_000, intervalMs: 1000 });
}

/**
 * Loopback, ephemeral ports for the listeners a command leaves at their
 * defaults (all interfaces, fixed ports): the repository's rule for every
 * kubegc it starts (cluster/kubegc-command.ts), and several may run at once.
 */
function loopbackListeners(text: string): string[] {
  return ['--metrics-bind-address', '--health-probe-bind-address'].flatMap((f) =>
    text.includes(f) ? [] : [f, '127.0.0.1:0'],
  );
}

async function httpStatus(url: string): Promise<number> {
  const res = await fetch(url);
  return res.status;
}

// ---------------------------------------------------------------------------

let binDir: string;

beforeAll(async () => {
  ensurePackages(
    [
      { provides: 'jq', pkg: 'jq', why: 'the docs pipe kubegc doctor -o json to jq' },
      { provides: 'curl', pkg: 'curl', why: 'the docs read /metrics and /debug/graph with curl' },
    ],
    log,
  );
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-docs-commands-'));
  binDir = path.join(tmp, 'bin');
  await fs.mkdir(binDir);
  // `kubectl` in the docs: the control plane's, with its kubeconfig ($KUBECONFIG).
  await fs.symlink(cluster.kubectl, path.join(binDir, 'kubectl'));
  baseEnv = {
    ...process.env,
    // Node 24 and node_modules/.bin first (npx kubegc), Go where CI keeps it (build-helm.sh).
    PATH: [
      binDir,
      path.join(REPO_ROOT, 'node_modules', '.bin'),
      process.env.PATH,
      '/usr/local/go/bin',
      path.join(os.homedir(), 'go', 'bin'),
    ].join(':'),
    KUBECONFIG: cluster.kubeconfig,
    KUBEGC_CLUSTER_DIR: DOCS_CLUSTER_DIR,
    HELM_CACHE_HOME: path.join(tmp, 'helm', 'cache'),
    HELM_CONFIG_HOME: path.join(tmp, 'helm', 'config'),
    HELM_DATA_HOME: path.join(tmp, 'helm', 'data'),
  };
  if (!existsSync(KUBEGC_DIST_CLI)) throw new Error(`${KUBEGC_DIST_CLI} is missing: npm run build`);
});

afterAll(async () => {
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------

/** The processes a control plane's state.json names. */
async function stateProcesses(dir: string): Promise<ProcessRecord[]> {
  const state = JSON.parse(await fs.readFile(path.join(dir, 'state.json'), 'utf8')) as {
    processes: Record<string, ProcessRecord>;
  };
  return Object.values(state.processes);
}

test('docs/development.md: npm run cluster -- up, its variants, status, readyz and down (in a directory of its own)', async () => {
  /** Every process any `up` started: `down` must leave none of them running. */
  const started = new Map<number, ProcessRecord>();
  const readState = async (): Promise<{ builtinGc?: boolean; audit?: boolean }> => {
    for (const p of await stateProcesses(DOCS_CLUSTER_DIR)) started.set(p.pid, p);
    return JSON.parse(await fs.readFile(path.join(DOCS_CLUSTER_DIR, 'state.json'), 'utf8')) as {
      builtinGc?: boolean;
      audit?: boolean;
    };
  };
  try {
    const up = await run('npm run cluster -- up', { timeoutMs: 600_000 });
    // "prints the kubeconfig path last"
    expect(up.stdout.trim().split('\n').at(-1)).toBe(
      path.relative(REPO_ROOT, path.join(DOCS_CLUSTER_DIR, 'kubeconfig')),
    );
    expect(await readState()).toMatchObject({ builtinGc: false, audit: false });
    const status = await run('npm run cluster -- status');
    const s = JSON.parse(status.stdout.slice(status.stdout.indexOf('{'))) as {
      ready: boolean;
      running: Record<string, number>;
    };
    expect(s.ready).toBe(true);
    expect(Object.keys(s.running).sort()).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
    ]);

    await run('npm run cluster -- up --builtin-gc', { timeoutMs: 300_000 });
    expect(await readState()).toMatchObject({ builtinGc: true, audit: false });
    // In the docs' order: this `up` changes both the audit log and the GC mode.
    // It used to record the restarted kube-apiserver's pid and then overwrite it
    // with the old one, so `down` below left that kube-apiserver running.
    await run('npm run cluster -- up --audit', { timeoutMs: 300_000 });
    expect(await readState()).toMatchObject({ builtinGc: false, audit: true });
    await waitFor('the audit log', async () =>
      existsSync(path.join(DOCS_CLUSTER_DIR, 'logs', 'audit.log')),
    );

    // `.cluster/` is the e2e control plane here (rewrites).
    const ready = await run(
      '.cluster/bin/kubectl --kubeconfig .cluster/kubeconfig get --raw /readyz',
    );
    expect(ready.stdout.trim()).toBe('ok');
  } finally {
    const down = await run('npm run cluster -- down', { timeoutMs: 180_000 });
    expect(down.stdout).toContain('stopped kube-controller-manager, kube-apiserver, etcd');
  }
  // isOurs: alive and still that binary (a reaped-late zombie is neither).
  const left = [...started.values()].filter(isOurs);
  expect(left).toEqual([]);
  await fs.rm(DOCS_CLUSTER_DIR, { recursive: true, force: true });
}, 900_000);

test('docs/development.md: npx kubegc controller, and with --dry-run --log-level debug: started, healthy, deciding, stopped cleanly', async () => {
  const ns = await namespace('docs-dev');
  try {
    for (const text of [
      'npx kubegc controller --kubeconfig .cluster/kubeconfig',
      'npx kubegc controller --kubeconfig .cluster/kubeconfig --dry-run --log-level debug',
    ]) {
      const dryRun = text.includes('--dry-run');
      const proc = startLong(text, loopbackListeners(text));
      try {
        const start = await proc.logged('kubegc controller starting');
        expect(start.dryRun).toBe(dryRun);
        await proc.logged('garbage collector started');
        expect(await httpStatus(`http://${String(start.healthAddress)}/healthz`)).toBe(200);
        // A dependent whose owner is gone (kube-controller-manager here has no GC).
        const name = dryRun ? 'dry' : 'wet';
        const owner = await configMap(c, ns, `${name}-owner`);
        const dep = await configMap(c, ns, `${name}-dep`, [ownerRef(owner)]);
        await c.core.deleteNamespacedConfigMap({ namespace: ns, name: owner.name });
        if (dryRun) {
          // "decide and log, change nothing"
          await proc.logged('dry run: would delete');
          const line = jsonLines(proc.output()).find((l) => l.msg === 'dry run: would delete');
          expect(JSON.stringify(line)).toContain(dep.uid);
          expect(
            await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: dep.name })),
          ).toBe(true);
          // --log-level debug: a refused metrics request is a debug line.
          expect((await httpsGet(String(start.metricsAddress), '/metrics')).status).toBe(401);
          await proc.logged('metrics port request refused');
        } else {
          await waitFor(
            'the dependent to be collected',
            async () =>
              !(await exists(() =>
                c.core.readNamespacedConfigMap({ namespace: ns, name: dep.name }),
              )),
          );
          expect(jsonLines(proc.output()).some((l) => l.level === 'debug')).toBe(false);
        }
      } finally {
        await proc.stop();
      }
      // No npm noise around kubegc's own lines (issue 23: EBADENGINE under Node 20's npm).
      expect(proc.output()).not.toContain('EBADENGINE');
      expect(jsonLines(proc.output()).some((l) => l.msg === 'stopping')).toBe(true);
      ran.set(text, { code: 0, stdout: proc.output(), stderr: '' });
    }
  } finally {
    await c.core.deleteNamespace({ name: ns });
  }
});

// ---------------------------------------------------------------------------

let h: TestContainerd | undefined;
const containerd = (): TestContainerd => {
  if (!h) throw new Error('no test containerd');
  return h;
};

describe('docs/node-gc.md: kubegc node on a test containerd', () => {
  beforeAll(async () => {
    h = await startContainerd({ sizeMiB: 64 });
  }, 300_000);
  afterAll(async () => {
    await h?.teardown();
  });

  /** Flags that keep the node GC on the test containerd's directories (cf. test/support/kubegc-node.ts). */
  const isolation = (): string[] => [
    '--pod-logs-dir',
    containerd().podLogsDir,
    '--container-logs-dir',
    containerd().containerLogsDir,
    '--root-dir',
    containerd().podLogsDir,
    '--pressure-check-period',
    '0',
  ];

  test('npx kubegc node --once --dry-run: one pass, what would go, exit 0', async () => {
    const text = 'npx kubegc node --once --dry-run';
    const proc = startLong(text, ['--cri-endpoint', containerd().endpoint, ...isolation()]);
    const end = await waitFor(
      'the one pass to end',
      async () => (proc.child.exitCode !== null ? { code: proc.child.exitCode } : undefined),
      { timeoutMs: 120_000 },
    );
    expect(end.code).toBe(0);
    const lines = jsonLines(proc.output());
    expect(lines.find((l) => l.msg === 'kubegc node: one pass')).toMatchObject({
      dryRun: true,
      once: true,
      endpoint: containerd().endpoint,
    });
    expect(lines.some((l) => l.msg === 'image GC pass done')).toBe(true);
    expect(proc.output()).not.toContain('EBADENGINE');
    ran.set(text, { code: 0, stdout: proc.output(), stderr: '' });
  });

  test('npx kubegc node --cri-endpoint … --state-file …: serves /healthz and /readyz (runtime up), stops on SIGTERM', async () => {
    const text = cmd('npx kubegc node --cri-endpoint');
    const proc = startLong(text, [...isolation(), ...loopbackListeners(text)]);
    try {
      const start = await proc.logged('kubegc node starting');
      expect(start.endpoint).toBe(containerd().endpoint);
      const health = String(start.healthAddress);
      expect(await httpStatus(`http://${health}/healthz`)).toBe(200);
      await waitFor(
        '/readyz: the runtime answers',
        async () => (await httpStatus(`http://${health}/readyz`)) === 200,
      );
      await waitFor('the state file', async () => existsSync(path.join(tmp, 'node-state.json')), {
        timeoutMs: 90_000,
      });
    } finally {
      await proc.stop();
    }
    expect(jsonLines(proc.output()).some((l) => l.msg === 'stopping')).toBe(true);
    expect(proc.output()).not.toContain('EBADENGINE');
    ran.set(text, { code: 0, stdout: proc.output(), stderr: '' });
  });
});

// ---------------------------------------------------------------------------

test('docs/operations.md: helm from cluster/build-helm.sh packages the chart', async () => {
  await run('HELM=$(bash cluster/build-helm.sh)/helm', { timeoutMs: 900_000 });
  expect(vars.HELM).toMatch(/\/helm$/);
  await fs.access(vars.HELM as string, fs.constants.X_OK);
  const pkg = await run('$HELM package charts/kubegc --destination /tmp');
  expect(pkg.stdout).toContain('Successfully packaged chart and saved it to: /tmp/kubegc-');
  const chart = /\/tmp\/(kubegc-[\d.]+\.tgz)/.exec(pkg.stdout)?.[1];
  expect(chart).toBe('kubegc-0.1.0.tgz');
}, 900_000);

// ---------------------------------------------------------------------------
// The runbooks: a kubegc Deployment whose pod's log is a real kubegc's.

/** The label on what this file puts in kubegc-system, so that only that is ever removed. */
const MINE = { 'kubegc.test/docs-commands': 'true' };
const ROLE = 'docs-commands-kubegc';
const STALLED_ROLE = 'docs-commands-kubegc-stalled';
/** A custom resource whose preferred version cannot be listed: its conversion webhook is a closed port. */
const STALLED_GROUP = 'stalled.docs-commands.kubegc.test';
/** This run's: a reused cluster keeps earlier runs' WatchStalled events, which name theirs. */
const STALLED_SUFFIX = Date.now().toString(36);
const STALLED_PLURAL = `gadgets${STALLED_SUFFIX}`;
const STALLED_CRD = `${STALLED_PLURAL}.${STALLED_GROUP}`;
const DEBUGGER_BINDING = 'docs-commands-my-debugger';

/** A kubegc-system pod bound to NODE, Running and Ready as its kubelet would report it. */
async function markRunning(name: string, container: string): Promise<void> {
  const now = new Date().toISOString();
  await c.core.patchNamespacedPodStatus({
    namespace: SYSTEM_NS,
    name,
    // Field by field: the rest of the status (qosClass) stays as the API server set it.
    body: [
      { op: 'add', path: '/status/phase', value: 'Running' },
      { op: 'add', path: '/status/startTime', value: now },
      {
        op: 'add',
        path: '/status/conditions',
        value: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: now },
          { type: 'Ready', status: 'True', lastTransitionTime: now },
        ],
      },
      {
        op: 'add',
        path: '/status/containerStatuses',
        value: [
          {
            name: container,
            image: 'ghcr.io/kubegc/kubegc:0.1.0',
            imageID: '',
            ready: true,
            restartCount: 0,
            started: true,
            state: { running: { startedAt: now } },
          },
        ],
      },
    ],
  });
}

/** Lets a namespace go: its ConfigMaps' finalizers (this file's holds) removed. */
async function dropFinalizers(namespace: string): Promise<void> {
  for (const cm of (await c.core.listNamespacedConfigMap({ namespace })).items)
    if (cm.metadata?.finalizers?.length)
      await c.core
        .patchNamespacedConfigMap({
          namespace,
          name: cm.metadata.name ?? '',
          body: [{ op: 'remove', path: '/metadata/finalizers' }],
        })
        .catch(() => undefined);
}

/**
 * Removes what this file makes under fixed names (also a crashed run's): the
 * APIService first (an unavailable one stops every namespace deletion in the
 * cluster), the Deployment, its ReplicaSet and pod by hand (no GC in the e2e
 * kube-controller-manager, no kubelet to confirm a pod's end), the Node, the
 * namespace shop, the RBAC.
 */
async function removeFixtures(): Promise<void> {
  const ignore = (): undefined => undefined;
  await c.kc
    .makeApiClient(k8s.ApiregistrationV1Api)
    .deleteAPIService({ name: APISERVICE })
    .catch(ignore);
  const selector = Object.entries(MINE)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const mine = { namespace: SYSTEM_NS, labelSelector: selector };
  await c.apps.deleteCollectionNamespacedDeployment(mine).catch(ignore);
  await c.apps.deleteCollectionNamespacedReplicaSet(mine).catch(ignore);
  await c.core.deleteCollectionNamespacedPod({ ...mine, gracePeriodSeconds: 0 }).catch(ignore);
  await c.core.deleteNode({ name: NODE }).catch(ignore);
  // A DaemonSet of deploy/ (when an e2e file applied it) made a pod for that node.
  for (const p of (await c.core.listNamespacedPod({ namespace: SYSTEM_NS })).items)
    if (JSON.stringify(p.spec?.affinity ?? {}).includes(`"${NODE}"`) || p.spec?.nodeName === NODE)
      await c.core
        .deleteNamespacedPod({
          namespace: SYSTEM_NS,
          name: p.metadata?.name ?? '',
          gracePeriodSeconds: 0,
        })
        .catch(ignore);
  if (await exists(() => c.core.readNamespace({ name: 'shop' }))) {
    await dropFinalizers('shop');
    await c.core.deleteNamespace({ name: 'shop' }).catch(ignore);
    await waitFor(
      'namespace shop to go',
      async () => !(await exists(() => c.core.readNamespace({ name: 'shop' }))),
      { timeoutMs: 120_000 },
    );
  }
  const ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
  for (const crd of (await ext.listCustomResourceDefinition()).items)
    if (crd.spec.group === STALLED_GROUP)
      await ext.deleteCustomResourceDefinition({ name: crd.metadata?.name ?? '' }).catch(ignore);
  await c.rbac.deleteClusterRole({ name: ROLE }).catch(ignore);
  await c.rbac.deleteClusterRole({ name: STALLED_ROLE }).catch(ignore);
  await c.rbac.deleteClusterRoleBinding({ name: DEBUGGER_BINDING }).catch(ignore);
  await c.core
    .deleteNamespacedServiceAccount({ namespace: 'default', name: 'my-debugger' })
    .catch(ignore);
}

/**
 * A kubegc that may list and watch STALLED_CRD only, whose preferred version
 * (v2) cannot be listed: an object stored as v1 needs the conversion webhook,
 * a closed port. Its watch counts as stalled after two watch cycles and the
 * watchdog's grace (60 s; cycles of 1-2 s here), and kubegc records a
 * WatchStalled event. Started early: the other tests run meanwhile.
 */
async function startStalledKubegc(ns: string): Promise<KubegcProcess> {
  const ext = c.kc.makeApiClient(k8s.ApiextensionsV1Api);
  const schema = {
    openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
  };
  await ext.createCustomResourceDefinition({
    body: {
      metadata: { name: STALLED_CRD },
      spec: {
        group: STALLED_GROUP,
        scope: 'Cluster',
        names: {
          plural: STALLED_PLURAL,
          singular: `gadget${STALLED_SUFFIX}`,
          kind: `Gadget${STALLED_SUFFIX}`,
        },
        versions: [
          { name: 'v1', served: true, storage: true, schema },
          { name: 'v2', served: true, storage: false, schema },
        ],
      },
    },
  });
  const custom = c.kc.makeApiClient(k8s.CustomObjectsApi);
  await waitFor('the custom resource to be served', async () => {
    await custom.createClusterCustomObject({
      group: STALLED_GROUP,
      version: 'v1',
      plural: STALLED_PLURAL,
      body: {
        apiVersion: `${STALLED_GROUP}/v1`,
        kind: `Gadget${STALLED_SUFFIX}`,
        metadata: { name: 'one' },
      },
    });
    return true;
  });
  await breakConversion(ext, STALLED_CRD);
  await c.rbac.createClusterRole({
    body: {
      metadata: { name: STALLED_ROLE },
      rules: [
        { apiGroups: [STALLED_GROUP], resources: ['*'], verbs: ['list', 'watch'] },
        { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
      ],
    },
  });
  await c.core.createNamespacedServiceAccount({
    namespace: ns,
    body: { metadata: { name: 'kubegc-stalled' } },
  });
  await c.rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${ns}-kubegc-stalled` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: STALLED_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: 'kubegc-stalled', namespace: ns }],
    },
  });
  const kubeconfig = await serviceAccountKubeconfig(cluster, {
    namespace: ns,
    name: 'kubegc-stalled',
  });
  return runKubegc(
    controllerArgs(kubeconfig, [
      '--metrics-bind-address',
      '0',
      '--min-watch-timeout',
      '1s',
      '--initial-sync-timeout',
      '2s',
      '--discovery-period',
      '5s',
    ]),
  );
}

describe('docs/doctor.md and docs/runbooks/: a deletion held by a finalizer, an unavailable APIService, a kubegc pod to read', () => {
  let ns: string;
  let owner: { uid: string; name: string };
  let pod: KubegcProcess | undefined;
  /** A second kubegc, whose watch of STALLED_CRD stalls (KubegcWatchNotSynced's WatchStalled). */
  let stalledKubegc: KubegcProcess | undefined;
  let podLog = '';
  let kubelet: https.Server | undefined;

  podKubegcMetrics = (): string => {
    if (!pod) throw new Error('the pod’s kubegc is not running');
    return addresses(pod).metrics;
  };

  beforeAll(async () => {
    await removeFixtures();
    await applyMetricsReaderRoles(cluster);
    ns = await namespace('docs');
    placeholders.NAMESPACE = ns;

    // The pod's kubegc: the Deployment's flags, as a service account that may
    // list and watch the core group only (so WatchForbidden on everything
    // else), delete ConfigMaps but not Secrets (so GarbageCollectionForbidden).
    await c.rbac.createClusterRole({
      body: {
        metadata: { name: ROLE },
        rules: [
          { apiGroups: [''], resources: ['*'], verbs: ['list', 'watch', 'patch'] },
          { apiGroups: [''], resources: ['configmaps'], verbs: ['delete'] },
          { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
          { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
          {
            apiGroups: ['coordination.k8s.io'],
            resources: ['leases'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'],
          },
        ],
      },
    });
    await c.core.createNamespacedServiceAccount({
      namespace: ns,
      body: { metadata: { name: 'kubegc' } },
    });
    for (const role of [ROLE, 'system:auth-delegator'])
      await c.rbac.createClusterRoleBinding({
        body: {
          metadata: { name: `${ns}-kubegc-${role.replace(/:/g, '-')}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ kind: 'ServiceAccount', name: 'kubegc', namespace: ns }],
        },
      });
    const kubeconfig = await serviceAccountKubeconfig(cluster, { namespace: ns, name: 'kubegc' });
    pod = runKubegc(
      controllerArgs(kubeconfig, [
        '--leader-elect=true',
        '--discovery-period',
        '5s',
        '--initial-sync-timeout',
        '2s',
        '--blocked-deletion-event-after',
        '2s',
      ]),
    );
    // Exactly what it writes, as a kubelet would keep it.
    pod.child.stdout?.on('data', (b: Buffer) => (podLog += b.toString()));
    pod.child.stderr?.on('data', (b: Buffer) => (podLog += b.toString()));
    await pod.waitForLog(
      '"garbage collector started"',
      (l) => l.msg === 'garbage collector started',
      120_000,
    );

    stalledKubegc = await startStalledKubegc(ns);

    // The "kubelet": GET /containerLogs/<namespace>/<pod>/<container> from kube-apiserver.
    const { key, cert } = selfSignedCert(['127.0.0.1']);
    kubelet = https.createServer({ key, cert }, (req, res) => {
      const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/?]+)/.exec(req.url ?? '');
      const served = m && m[1] === SYSTEM_NS ? podLogs.get(m[2] ?? '') : undefined;
      if (!served) {
        res.writeHead(404).end(`no such container: ${req.url}`);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end(served());
    });
    await new Promise<void>((resolve) => kubelet?.listen(0, '127.0.0.1', resolve));
    const port = (kubelet.address() as AddressInfo).port;
    await c.core.createNode({ body: { metadata: { name: NODE } } });
    await c.core.patchNodeStatus({
      name: NODE,
      body: [
        {
          op: 'add',
          path: '/status',
          value: {
            addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
            daemonEndpoints: { kubeletEndpoint: { Port: port } },
          },
        },
      ],
    });

    // The Deployment as deploy/ names and labels it: deploy/'s own when an e2e file
    // applied it (operate.test.ts does; its pods stay Pending), else one of this
    // file's. One pod of it is bound to that node and Running.
    const deployed = await exists(() =>
      c.apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: 'kubegc-controller' }),
    );
    if (!deployed)
      await c.apps.createNamespacedDeployment({
        namespace: SYSTEM_NS,
        body: {
          metadata: { name: 'kubegc-controller', labels: { ...LABELS, ...MINE } },
          spec: {
            replicas: 1,
            selector: { matchLabels: LABELS },
            template: {
              metadata: { labels: { ...LABELS, ...MINE } },
              spec: {
                automountServiceAccountToken: false,
                // The node never reports Ready: the pod must not be evicted meanwhile.
                tolerations: [{ operator: 'Exists' }],
                containers: [
                  {
                    name: 'kubegc',
                    image: 'ghcr.io/kubegc/kubegc:0.1.0',
                    args: ['controller', '--leader-elect=true'],
                  },
                ],
              },
            },
          },
        },
      });
    const podName = await waitFor('a pod of the Deployment', async () => {
      const pods = await c.core.listNamespacedPod({
        namespace: SYSTEM_NS,
        labelSelector: Object.entries(LABELS)
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      });
      return pods.items
        .filter((p) => !p.metadata?.deletionTimestamp && !p.spec?.nodeName)
        .map((p) => p.metadata?.name)
        .sort()[0];
    });
    placeholders.POD = podName;
    podLogs.set(podName, () => podLog);
    await c.core.createNamespacedPodBinding({
      namespace: SYSTEM_NS,
      name: podName,
      body: { metadata: { name: podName }, target: { kind: 'Node', name: NODE } },
    });
    await markRunning(podName, 'kubegc');

    // A deletion held by a finalizer: the owner in foreground deletion, its dependent
    // deleted by the pod's kubegc but held by example.com/cleanup.
    const o = await configMap(c, ns, 'owner');
    owner = { uid: o.uid, name: 'owner' };
    placeholders.OWNER_UID = o.uid;
    await c.core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'held',
          finalizers: [FINALIZER],
          ownerReferences: [ownerRef(o, { blockOwnerDeletion: true })],
        },
      },
    });
    await c.core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'owner',
      propagationPolicy: 'Foreground',
    });
    await waitFor('the pod’s kubegc to delete the dependent (held by its finalizer)', async () => {
      const held = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'held' });
      return held.metadata?.deletionTimestamp !== undefined;
    });

    // docs/doctor.md's `-n shop`: a namespace named shop, a deletion held there.
    await c.core.createNamespace({ body: { metadata: { name: 'shop' } } });
    await c.core.createNamespacedConfigMap({
      namespace: 'shop',
      body: { metadata: { name: 'cart', finalizers: [FINALIZER] } },
    });
    await c.core.deleteNamespacedConfigMap({ namespace: 'shop', name: 'cart' });

    // An APIService whose Service does not exist: unavailable, discovery fails for its group.
    await c.kc.makeApiClient(k8s.ApiregistrationV1Api).createAPIService({
      body: {
        metadata: { name: APISERVICE },
        spec: {
          group: 'docs-commands.kubegc.test',
          version: 'v1alpha1',
          service: { namespace: ns, name: 'absent', port: 443 },
          insecureSkipTLSVerify: true,
          groupPriorityMinimum: 1000,
          versionPriority: 15,
        },
      },
    });
  }, 300_000);

  afterAll(async () => {
    await pod?.stop();
    await stalledKubegc?.stop();
    kubelet?.close();
    // The pod bound to the fake node (deploy/'s, or this file's): no kubelet will
    // confirm its end. Its ReplicaSet makes a Pending one again, as before.
    if (placeholders.POD)
      await c.core
        .deleteNamespacedPod({
          namespace: SYSTEM_NS,
          name: placeholders.POD,
          gracePeriodSeconds: 0,
        })
        .catch(() => undefined);
    await removeFixtures();
    if (ns) {
      await dropFinalizers(ns).catch(() => undefined);
      await deleteBindings(c, ns).catch(() => undefined);
      await c.core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
  }, 300_000);

  test('the blocked deletion: events, describe, get, doctor and explain show the owner and what holds it', async () => {
    const events = await retrying('a DeletionBlocked event', async () => {
      const r = await run('kubectl get events -A --field-selector reason=DeletionBlocked');
      return r.stdout.includes(ns) && r.stdout.includes('configmap/owner') ? r : undefined;
    });
    expect(events.stdout).toContain('DeletionBlocked');

    const described = await run('kubectl describe RESOURCE NAME -n NAMESPACE');
    expect(described.stdout).toMatch(/Events:[\s\S]*DeletionBlocked/);
    const got = await run(cmd('{.metadata.deletionTimestamp} {.metadata.finalizers}'));
    expect(got.stdout).toMatch(/^\d{4}-\d\d-\d\dT\S+Z \["foregroundDeletion"\]\n$/);

    // kubegc doctor exits 1 when it reports findings (docs/doctor.md).
    const doctor = await run('kubegc doctor', { code: 1 });
    expect(doctor.stdout).toContain(`ConfigMap ${ns}/owner: deleting for`);
    expect(doctor.stdout).toContain(`held by finalizer ${FINALIZER}`);
    const old = await run('kubegc doctor --older-than 30m', { code: 1 });
    expect(old.stdout).toContain(`ConfigMap ${ns}/owner`);
    const heldBy = await run(cmd('| .heldBy'));
    expect(heldBy.stdout).toContain('"name": "held"');
    expect(heldBy.stdout).toContain(FINALIZER);
    const stuck = await run(cmd('kubegc doctor --older-than 30m -o json'));
    expect(stuck.stdout).toContain('"kind": "stuck-deletion"');
    expect(stuck.stdout).toContain(owner.uid);
    const inShop = await run('kubegc doctor -n shop', { code: 1 });
    expect(inShop.stdout).toContain('ConfigMap shop/cart');
    expect(inShop.stdout).not.toContain(ns);

    const explained = await run('kubegc explain RESOURCE/NAME -n NAMESPACE');
    expect(explained.stdout).toContain('held');
    expect(explained.stdout).toContain(FINALIZER);
  });

  test('the pod: deploy and pods, describe, the Lease and its holder, the log greps', async () => {
    const listed = await run(
      'kubectl -n kubegc-system get deploy,pods -l app.kubernetes.io/component=controller',
    );
    expect(listed.stdout).toContain('deployment.apps/kubegc-controller');
    expect(listed.stdout).toMatch(new RegExp(`pod/${placeholders.POD}\\s+\\S+\\s+Running`));
    const described = await run(
      'kubectl -n kubegc-system describe pods -l app.kubernetes.io/component=controller',
    );
    expect(described.stdout).toMatch(new RegExp(`Node:\\s+${NODE}`));
    const wide = await run(cmd('app.kubernetes.io/component=controller -o wide'));
    expect(wide.stdout).toMatch(new RegExp(`${placeholders.POD}.*Running.*${NODE}`));

    const leader = pod?.lines.find((l) => l.msg === 'became leader');
    expect(leader).toBeDefined();
    const lease = await run('kubectl -n kubegc-system get lease kubegc -o yaml');
    expect(lease.stdout).toContain(`holderIdentity: ${String(leader?.identity)}`);
    expect(lease.stdout).toMatch(/renewTime: /);
    const holder = await run(cmd('{.spec.holderIdentity}'));
    expect(holder.stdout).toBe(`${String(leader?.identity)}\n`);

    const leaderLines = await run(cmd('logs deploy/kubegc-controller --all-containers'));
    expect(leaderLines.stdout).toContain('"msg":"became leader"');
    const warns = await retrying('a warning in the pod’s log', async () => {
      const r = await run(cmd(`grep '"level":"warn"'`));
      return r.stdout.trim() ? r : undefined;
    });
    for (const l of warns.stdout.trim().split('\n')) expect(l).toContain('"level":"warn"');
  });

  test('KubegcDiscoveryErrors: the unavailable APIService, and the pod’s log saying which group failed', async () => {
    await retrying('the APIService to be unavailable', async () => {
      const r = await run('kubectl get apiservices | grep -v True');
      return r.stdout.includes(APISERVICE) ? r : undefined;
    });
    const described = await run('kubectl describe apiservice VERSION.GROUP');
    expect(described.stdout).toMatch(/Type:\s+Available/);
    expect(described.stdout).toMatch(/Status:\s+False/);
    const failed = await waitFor(
      'the pod’s kubegc to log the failed discovery',
      async () => {
        const r = await run("kubectl -n kubegc-system logs POD | grep 'discovery failed'");
        return r.stdout.includes('docs-commands.kubegc.test') ? r : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    expect(failed.stdout).toContain('"level":"warn"');
    await c.kc.makeApiClient(k8s.ApiregistrationV1Api).deleteAPIService({ name: APISERVICE });
  });

  test('KubegcWatchNotSynced and KubegcDeletionsFailing: WatchForbidden, GarbageCollectionForbidden and WatchStalled events, the pod’s log, can-i, the resource itself', async () => {
    const forbidden = await retrying('a WatchForbidden event', async () => {
      const r = await run('kubectl get events -A --field-selector reason=WatchForbidden');
      // This run's: the refusal quoted in the note names this file's service account.
      return r.stdout
        .split('\n')
        .some((l) => l.includes(FORBIDDEN_RESOURCE) && l.includes(`serviceaccount:${ns}:kubegc`))
        ? r
        : undefined;
    });
    expect(forbidden.stdout).toContain('WatchForbidden');
    const inLog = await run('kubectl -n kubegc-system logs POD | grep RESOURCE');
    expect(inLog.stdout).toContain('"msg":"watch forbidden"');
    // The Deployment's own service account may (deploy/'s RBAC): the answer is yes.
    const can = await run(cmd('kubectl auth can-i list RESOURCE'));
    expect(can.stdout.trim()).toBe('yes');
    const listed = await run('kubectl get RESOURCE -A --request-timeout=30s | head');
    // `| head`: the first deployments of the cluster, ours among them or not.
    expect(listed.stdout).toMatch(/^NAMESPACE\s+NAME\s+READY/);
    expect(listed.stdout.trim().split('\n').length).toBeGreaterThan(1);

    // A Secret whose owner is gone: the pod's kubegc may not delete Secrets.
    const gcOwner = await configMap(c, ns, 'secret-owner');
    await c.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'orphaned-secret', ownerReferences: [ownerRef(gcOwner)] } },
    });
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'secret-owner' });
    const denied = await retrying('a GarbageCollectionForbidden event', async () => {
      const r = await run(
        'kubectl get events -A --field-selector reason=GarbageCollectionForbidden',
      );
      return r.stdout
        .split('\n')
        .some((l) => l.startsWith(`${ns} `) && l.includes('secret/orphaned-secret'))
        ? r
        : undefined;
    });
    expect(denied.stdout).toContain('may not collect this object');
    // The second kubegc's watch of a resource it cannot list (a broken conversion webhook).
    const stalled = await waitFor(
      'a WatchStalled event',
      async () => {
        const r = await run('kubectl get events -A --field-selector reason=WatchStalled');
        return r.stdout.includes(STALLED_CRD) ? r : undefined;
      },
      { timeoutMs: 150_000, intervalMs: 2000 },
    );
    expect(stalled.stdout).toContain(`apiservice/v2.${STALLED_GROUP}`);
    await stalledKubegc?.waitForLog(
      'the "watch stalled" log line',
      (l) => l.msg === 'watch stalled' && l.resource === STALLED_CRD,
      15_000,
    );
  }, 300_000);

  test('KubegcPendingCollectionsStuck: /metrics of the pod’s kubegc with a metrics reader’s token; operations.md: /debug/graph with my-debugger’s', async () => {
    const reader = await serviceAccountToken(c, ns, 'scraper', ['kubegc-metrics-reader']);
    const metrics = await retrying('the blocked deletion in /metrics', async () => {
      const r = await run(cmd('/metrics | grep'), { extraEnv: { TOKEN: reader } });
      return /^kubegc_blocked_deletions\{[^}]*\} [1-9]/m.test(r.stdout) ? r : undefined;
    });
    for (const l of metrics.stdout.trim().split('\n'))
      expect(l).toMatch(/^kubegc_(blocked|oldest|pending)/);
    expect(metrics.stdout).toMatch(/^kubegc_pending_collections /m);

    await c.core.createNamespacedServiceAccount({
      namespace: 'default',
      body: { metadata: { name: 'my-debugger' } },
    });
    await c.rbac.createClusterRoleBinding({
      body: {
        metadata: { name: DEBUGGER_BINDING },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'kubegc-debug-reader',
        },
        subjects: [{ kind: 'ServiceAccount', name: 'my-debugger', namespace: 'default' }],
      },
    });
    await run('TOKEN=$(kubectl create token my-debugger -n default)');
    expect(vars.TOKEN?.split('.')).toHaveLength(3);
    const graph = await retrying('the debug reader to be authorized', async () => {
      const r = await run(cmd('/debug/graph'));
      return r.stdout.startsWith('{') ? r : undefined;
    });
    const view = JSON.parse(graph.stdout) as { nodes: { uid: string }[]; continue?: string };
    expect(view.nodes.length).toBeGreaterThan(0);
    expect(view.nodes.length).toBeLessThanOrEqual(1000);
    // The whole graph in one page holds the owner; a bigger one says where to go on.
    if (view.continue === undefined) expect(view.nodes.map((n) => n.uid)).toContain(owner.uid);
    else expect(view.nodes).toHaveLength(1000);
  });

  test('the fixes: blockOwnerDeletion off lets the owner go; the finalizer removed lets the dependent go', async () => {
    const cleared = await run(cmd('/metadata/ownerReferences/0/uid'));
    expect(cleared.stdout.trim()).toBe('configmap/held patched');
    await waitFor(
      'the owner to go',
      async () =>
        !(await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: 'owner' }))),
    );
    const removed = await run(cmd('/metadata/finalizers/0'));
    expect(removed.stdout.trim()).toBe('configmap/held patched');
    await waitFor(
      'the dependent to go',
      async () =>
        !(await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: 'held' }))),
    );
  });

  describe('docs/runbooks/ of the node alerts: a kubegc node pod on that Node, its log from real runs', () => {
    let nc: TestContainerd | undefined;
    /** The note of each event the runs recorded on NODE (this run's Node), by reason. */
    const notes = new Map<string, string>();

    beforeAll(async () => {
      // A reused control plane keeps earlier runs' events about this Node's name.
      await c.core.deleteCollectionNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.kind=Node,involvedObject.name=${NODE}`,
      });
      nc = await startContainerd({ sizeMiB: 64 });
      const h = nc;
      // A pod running here that the API does not bind to NODE (ready-pods-unlisted),
      // and an image pulled just now (younger than --image-minimum-gc-age).
      await h.runPod({ name: 'not-in-the-api' });
      await h.importImages([{ name: 'kubegc.test/docs-fresh:1', layers: [randomLayer(4 << 20)] }]);
      const kubeconfig = await serviceAccountKubeconfig(cluster, KUBEGC_NODE_SERVICE_ACCOUNT);
      const api = ['--kubeconfig', kubeconfig, '--node-name', NODE];
      // A pressure reclaim is due and finds nothing it may remove. The state
      // file's directory is a file.
      const notADirectory = path.join(tmp, 'not-a-directory');
      await fs.writeFile(notADirectory, '');
      const pressure = await runNodeOnce(h, [
        ...api,
        ...imagefsPressureFlags(h, await availablePercent(h)),
        '--state-file',
        path.join(notADirectory, 'node-state.json'),
      ]);
      expect(pressure.code).toBe(3); // a pressure reclaim fell short
      // No runtime behind the socket.
      const down = await runNodeOnce(h, [
        ...api,
        '--cri-endpoint',
        `unix://${path.join(h.dir, 'no-runtime.sock')}`,
      ]);
      expect(down.code).toBe(1);
      // Its log: what both wrote (JSON.stringify of a parsed line gives the line back).
      const nodeLog = [...pressure.lines, ...down.lines]
        .map((l) => `${JSON.stringify(l)}\n`)
        .join('');
      podLogs.set(NODE_POD, () => nodeLog);
      await c.core.createNamespacedPod({
        namespace: SYSTEM_NS,
        body: {
          metadata: {
            name: NODE_POD,
            labels: {
              'app.kubernetes.io/name': 'kubegc-node',
              'app.kubernetes.io/component': 'node',
              ...MINE,
            },
          },
          spec: {
            nodeName: NODE,
            automountServiceAccountToken: false,
            tolerations: [{ operator: 'Exists' }],
            containers: [{ name: 'kubegc', image: 'ghcr.io/kubegc/kubegc:0.1.0', args: ['node'] }],
          },
        },
      });
      await markRunning(NODE_POD, 'kubegc');
      // Recorded before each run exited; read back as this run's (the Node's UID).
      const node = await c.core.readNode({ name: NODE });
      const events = await c.core.listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.uid=${node.metadata?.uid ?? ''}`,
      });
      for (const e of events.items) if (e.reason) notes.set(e.reason, e.message ?? '');
    }, 300_000);

    afterAll(async () => {
      podLogs.delete(NODE_POD);
      await c.core
        .deleteNamespacedPod({ namespace: SYSTEM_NS, name: NODE_POD, gracePeriodSeconds: 0 })
        .catch(() => undefined);
      await nc?.teardown();
    });

    test('the common steps: the pod on its node, its warnings and errors, the Node’s events', async () => {
      expect([...notes.keys()].sort()).toEqual([
        'ContainerGCFailed',
        'DiskPressureReclaimFailed',
        'ImageGCFailed',
        'PodsUnknown',
      ]);
      const pods = await run(
        'kubectl -n kubegc-system get pods -l app.kubernetes.io/name=kubegc-node -o wide',
      );
      expect(pods.stdout).toMatch(new RegExp(`${NODE_POD}\\s.*Running.*${NODE}`));
      const bad = await run(cmd(`grep -E '"level":"(warn|error)"'`));
      const lines = bad.stdout.trim().split('\n');
      for (const l of lines) expect(l).toMatch(/"level":"(warn|error)"/);
      expect(bad.stdout).toContain("this node's pods are unknown");
      expect(bad.stdout).toContain('container runtime unavailable');
      const events = await run(
        'kubectl get events -A --field-selector involvedObject.kind=Node,involvedObject.name=NODE',
      );
      for (const reason of notes.keys()) expect(events.stdout).toContain(reason);
    });

    test('KubegcNodePodsUnknown: the PodsUnknown event and error line, the Node and its pods, what kubegc node may read', async () => {
      expect(notes.get('PodsUnknown')).toContain(
        'include none of the pods whose sandboxes are ready here',
      );
      const events = await run('kubectl get events -A --field-selector reason=PodsUnknown');
      expect(events.stdout).toMatch(new RegExp(`PodsUnknown\\s+node/${NODE}\\s`));
      const unknown = await run(cmd(`grep "this node's pods"`));
      expect(unknown.stdout).toContain('"reason":"ready-pods-unlisted"');
      expect(unknown.stdout).toContain(`"node":"${NODE}"`);
      const nodes = await run('kubectl get nodes -o wide');
      expect(nodes.stdout).toMatch(new RegExp(`^${NODE}\\s`, 'm'));
      const onNode = await run('kubectl get pods -A --field-selector spec.nodeName=NODE -o wide');
      expect(onNode.stdout).toContain(NODE_POD);
      expect(onNode.stdout).toContain(placeholders.POD);
      for (const verb of ['list pods -A', 'get nodes']) {
        const can = await run(cmd(`kubectl auth can-i ${verb} --as`));
        expect(can.stdout.trim()).toBe('yes');
      }
    });

    test('KubegcNodeDiskPressureReclaimFailing: DiskPressureReclaimFailed says what was kept and why, so does the log; the Node shows it', async () => {
      // A dedicated imagefs (--root-dir is elsewhere): containerfs is imagefs's too.
      expect(notes.get('DiskPressureReclaimFailed')).toMatch(
        /^(imagefs|containerfs)\.available: .*; images left: the sandbox image [\d.]+ [kMG]?B in 1 image \([^)]*pause[^)]*\); younger than --image-minimum-gc-age [\d.]+ [kMG]?B in 1 image \(the first old enough at [^)]+\)$/,
      );
      const events = await run(
        'kubectl get events -A --field-selector reason=DiskPressureReclaimFailed',
      );
      expect(events.stdout).toContain('younger than --image-minimum-gc-age');
      const reclaim = await run(cmd("grep 'disk pressure'"));
      const done = jsonLines(reclaim.stdout).filter((l) => l.msg === 'disk pressure reclaim done');
      expect(done).toContainEqual(
        expect.objectContaining({
          level: 'warn',
          signal: 'imagefs.available',
          result: 'short',
          imagesKept: {
            'sandbox-image': expect.objectContaining({ images: 1 }),
            'too-young': expect.objectContaining({ images: 1 }),
          },
        }),
      );
      const described = await run('kubectl describe node NODE');
      expect(described.stdout).toMatch(/Events:[\s\S]*DiskPressureReclaimFailed/);
    });

    test('KubegcNodeGCFailing: the error lines, ImageGCFailed and ContainerGCFailed, the pod', async () => {
      const failing = await run(cmd("grep -E 'unavailable|failed|could not|state file'"));
      const msgs = new Set(jsonLines(failing.stdout).map((l) => l.msg));
      expect(msgs).toContain('container runtime unavailable');
      expect(msgs).toContain('cannot write the state file');
      for (const reason of ['ImageGCFailed', 'ContainerGCFailed']) {
        const events = await run(`kubectl get events -A --field-selector reason=${reason}`);
        expect(events.stdout).toMatch(new RegExp(`${reason}\\s+node/${NODE}\\s`));
        expect(notes.get(reason)).toContain('garbage collection failed');
      }
      const described = await run(cmd('describe pod POD'));
      expect(described.stdout).toMatch(new RegExp(`Node:\\s+${NODE}`));
    });
  });
});

test('every command RUN_BY_E2E names was run', () => {
  expect(RUN_BY_E2E.filter((t) => !ran.has(t))).toEqual([]);
});
