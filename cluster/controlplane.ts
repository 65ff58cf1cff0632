// The local test control plane: etcd + kube-apiserver + kube-controller-manager
// built from Go modules (cluster/build.sh) and run as plain processes.
//
// Used by `npm run cluster` (cluster/cli.ts), by jest's e2e global setup, by the
// demo and by the benchmarks. Runs directly under Node's type stripping, so it
// uses only erasable TypeScript syntax.

import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import https from 'node:https';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

const CLUSTER_SRC = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.dirname(CLUSTER_SRC);

/**
 * Every address the cluster uses is in 198.18.0.0/15 (RFC 2544, never routed):
 * the node's bridge address (which the apiserver also advertises), pods, and
 * Services. `up --node` (cluster/node.ts) configures them on a local bridge.
 */
export const NODE_IP = '198.18.0.1';
const ADVERTISE_ADDRESS = NODE_IP;
export const SERVICE_CIDR = '198.19.0.0/24';
/** The `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR. */
export const KUBERNETES_SERVICE_IP = '198.19.0.1';
/** Bumped when makePki's output changes, so that an old pki/ is made again. */
const PKI_LAYOUT = '2';

export type Component = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';
const COMPONENTS: Component[] = ['etcd', 'kube-apiserver', 'kube-controller-manager'];

/** Controllers for the normal test cluster: everything except the garbage collector. */
export const CONTROLLERS_WITHOUT_GC = '*,-garbage-collector-controller';
export const CONTROLLERS_ALL = '*';
export const CONTROLLERS_GC_ONLY = 'garbage-collector-controller';

export interface ProcessRecord {
  pid: number;
  bin: string;
}

interface State {
  version: string;
  binDir: string;
  dataDir: string;
  ports: { etcdClient: number; etcdPeer: number; apiserver: number };
  builtinGc: boolean;
  /** kube-apiserver writes an audit log of every write (cluster/controlplane.ts auditPolicy). */
  audit?: boolean;
  processes: Partial<Record<Component, ProcessRecord>>;
}

export interface Cluster {
  dir: string;
  version: string;
  binDir: string;
  kubeconfig: string;
  kubectl: string;
  server: string;
  builtinGc: boolean;
  /** The audit log (JSON lines) when the cluster was started with `audit`, else undefined. */
  auditLog: string | undefined;
  /** true when `up` found a running cluster and reused it. */
  reused: boolean;
}

export interface UpOptions {
  dir: string;
  builtinGc?: boolean;
  /**
   * Have kube-apiserver write an audit log of every write (create, update,
   * patch, delete) with its request body: the independent record tests and
   * the soak check kubegc against (who deleted what, with which preconditions,
   * while holding which Lease).
   */
  audit?: boolean;
  /** With `audit`: also log these users' get and list requests (Metadata level). */
  auditReadsOf?: string[];
  log?: (line: string) => void;
}

export class ControlPlaneError extends Error {}

const noop = (): void => undefined;

// ---------------------------------------------------------------------------
// Binaries

/** The pinned Kubernetes release, read from the wrapper module's go.mod. */
export async function kubernetesVersion(): Promise<string> {
  const gomod = await fs.readFile(path.join(CLUSTER_SRC, 'k8s', 'go.mod'), 'utf8');
  const m = /^(?:require)?\s*k8s\.io\/kubernetes\s+(v\S+)/m.exec(gomod);
  if (!m?.[1])
    throw new ControlPlaneError(
      'cannot read the k8s.io/kubernetes version from cluster/k8s/go.mod',
    );
  return m[1];
}

export async function binaryDir(): Promise<string> {
  const cache = process.env.KUBEGC_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'kubegc');
  return path.join(cache, 'k8s', await kubernetesVersion());
}

const BINARIES = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kubectl',
  'kube-scheduler',
  'kubelet',
];

/** Builds the binaries into the version-keyed cache unless they are all there. */
export async function ensureBinaries(log: (line: string) => void = noop): Promise<string> {
  const dir = await binaryDir();
  if (BINARIES.every((b) => existsSync(path.join(dir, b)))) return dir;
  const go = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (go.error || go.status !== 0) {
    throw new ControlPlaneError(
      'no Go toolchain found: the control plane is built from Go modules. ' +
        'Install Go >= 1.25 (https://go.dev/doc/install, or `apt-get install golang-go` where it is recent enough) and put `go` on PATH.',
    );
  }
  log(`building the control plane into ${dir} (cold cache: this takes 20-40 minutes on 2 cores)`);
  const started = Date.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [path.join(CLUSTER_SRC, 'build.sh'), dir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(
            new ControlPlaneError(
              `building the control plane failed (cluster/build.sh exit ${code}); its output is above`,
            ),
          ),
    );
  });
  log(`control plane built in ${Math.round((Date.now() - started) / 1000)}s`);
  return dir;
}

// ---------------------------------------------------------------------------
// Files in the cluster directory

export function paths(dir: string) {
  const pki = path.join(dir, 'pki');
  return {
    state: path.join(dir, 'state.json'),
    kubeconfig: path.join(dir, 'kubeconfig'),
    kubectl: path.join(dir, 'bin', 'kubectl'),
    logs: path.join(dir, 'logs'),
    pki,
    caCrt: path.join(pki, 'ca.crt'),
    caKey: path.join(pki, 'ca.key'),
    apiCrt: path.join(pki, 'apiserver.crt'),
    apiKey: path.join(pki, 'apiserver.key'),
    adminCrt: path.join(pki, 'admin.crt'),
    adminKey: path.join(pki, 'admin.key'),
    kubeletClientCrt: path.join(pki, 'apiserver-kubelet-client.crt'),
    kubeletClientKey: path.join(pki, 'apiserver-kubelet-client.key'),
    layout: path.join(pki, 'layout'),
    saKey: path.join(pki, 'sa.key'),
    saPub: path.join(pki, 'sa.pub'),
  };
}

/**
 * Every write, with its request (DeleteOptions, patch bodies, Lease specs); no
 * Events; no reads but the get and list requests of `readsOf` (Metadata level:
 * who read which object when; the soak's oracle times a GC's reads of an owner).
 */
function auditPolicy(readsOf: readonly string[] = []): string {
  const reads = readsOf.length
    ? `  - level: Metadata
    users: [${readsOf.map((u) => JSON.stringify(u)).join(', ')}]
    verbs: [get, list]
`
    : '';
  return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - { group: '', resources: [events] }
      - { group: events.k8s.io, resources: [events] }
${reads}  - level: None
    verbs: [get, list, watch]
  - level: Request
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`;
}

export function auditLogFile(dir: string): string {
  return path.join(paths(dir).logs, 'audit.log');
}

export function logFile(dir: string, component: string): string {
  return path.join(paths(dir).logs, `${component}.log`);
}

async function readState(dir: string): Promise<State | undefined> {
  try {
    return JSON.parse(await fs.readFile(paths(dir).state, 'utf8')) as State;
  } catch {
    return undefined;
  }
}

async function writeState(dir: string, state: State): Promise<void> {
  const file = paths(dir).state;
  await fs.writeFile(`${file}.tmp`, JSON.stringify(state, null, 2));
  await fs.rename(`${file}.tmp`, file);
}

async function openssl(args: string[]): Promise<void> {
  try {
    await execFileAsync('openssl', args);
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') {
      throw new ControlPlaneError(
        'openssl is not installed (Debian: apt-get install openssl); it makes the cluster PKI',
      );
    }
    throw new ControlPlaneError(`openssl ${args[0]} failed: ${e.stderr ?? e.message}`);
  }
}

/** A key and a certificate signed by the cluster CA: `outDir/name.{key,crt}`. */
export async function signCert(
  dir: string,
  outDir: string,
  name: string,
  subject: string,
  ext: string,
): Promise<void> {
  const p = paths(dir);
  const key = path.join(outDir, `${name}.key`);
  const csr = path.join(outDir, `${name}.csr`);
  const extFile = path.join(outDir, `${name}.ext`);
  await fs.writeFile(extFile, ext);
  await openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    subject,
  ]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    p.caCrt,
    '-CAkey',
    p.caKey,
    '-CAcreateserial',
    '-out',
    path.join(outDir, `${name}.crt`),
    '-days',
    '3650',
    '-extfile',
    extFile,
  ]);
}

export const CLIENT_CERT_EXT =
  'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n';

/** A CA, the apiserver's serving cert, an admin client cert (system:masters), the service-account key pair. */
async function makePki(dir: string): Promise<void> {
  const p = paths(dir);
  if (existsSync(p.layout) && readFileSync(p.layout, 'utf8') === PKI_LAYOUT) return;
  await fs.rm(p.pki, { recursive: true, force: true });
  // Users' certificates were signed by the CA being replaced.
  await fs.rm(path.join(dir, 'users'), { recursive: true, force: true });
  await fs.mkdir(p.pki, { recursive: true });
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    p.caKey,
    '-out',
    p.caCrt,
    '-days',
    '3650',
    '-subj',
    '/CN=kubegc-local-ca',
  ]);
  const sign = (name: string, subject: string, ext: string): Promise<void> =>
    signCert(dir, p.pki, name, subject, ext);
  await sign(
    'apiserver',
    '/CN=kube-apiserver',
    `subjectAltName=IP:127.0.0.1,IP:${KUBERNETES_SERVICE_IP},DNS:localhost,` +
      'DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' +
      'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n',
  );
  await sign('admin', '/O=system:masters/CN=admin', CLIENT_CERT_EXT);
  // kube-apiserver's client certificate for kubelets (logs, exec).
  await sign(
    'apiserver-kubelet-client',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
    CLIENT_CERT_EXT,
  );
  await openssl(['genrsa', '-out', p.saKey, '2048']);
  await openssl(['rsa', '-in', p.saKey, '-pubout', '-out', p.saPub]);
  await fs.writeFile(p.layout, PKI_LAYOUT);
}

/**
 * A kubeconfig for a user of its own (client certificate CN=user, O=group...
 * signed by the cluster CA), so that the audit log, RBAC and API Priority and
 * Fairness can tell its requests apart (system:masters is exempt from APF).
 * The caller grants it what it needs. Idempotent.
 */
export async function userKubeconfig(
  cluster: Cluster,
  user: string,
  groups: string[] = [],
): Promise<string> {
  const p = paths(cluster.dir);
  const safe = user.replace(/[^A-Za-z0-9_.-]/g, '_');
  const dir = path.join(cluster.dir, 'users');
  const file = path.join(dir, `${safe}.kubeconfig`);
  if (existsSync(file)) return file;
  await fs.mkdir(dir, { recursive: true });
  const subject = [...groups.map((g) => `/O=${g}`), `/CN=${user}`].join('');
  await signCert(cluster.dir, dir, safe, subject, CLIENT_CERT_EXT);
  const config = await kubeconfigFor(
    cluster.server,
    p.caCrt,
    user,
    path.join(dir, `${safe}.crt`),
    path.join(dir, `${safe}.key`),
  );
  await fs.writeFile(`${file}.tmp`, JSON.stringify(config, null, 2), { mode: 0o600 });
  await fs.rename(`${file}.tmp`, file);
  return file;
}

/** Binds `user` to the cluster-admin ClusterRole (idempotent). */
export async function grantClusterAdmin(cluster: Cluster, user: string): Promise<void> {
  const name = `kubegc-test:${user}`.replace(/[^a-z0-9:.-]/gi, '-').toLowerCase();
  const res = await apiRequest(
    cluster.dir,
    'POST',
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'cluster-admin',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  );
  if (res.status !== 201 && res.status !== 409)
    throw new ControlPlaneError(`binding ${user} to cluster-admin: ${res.status} ${res.body}`);
}

/** A kubeconfig (JSON, which is valid YAML) with one cluster, one client-certificate user. */
export async function kubeconfigFor(
  server: string,
  caCrt: string,
  user: string,
  crt: string,
  key: string,
): Promise<object> {
  const b64 = async (f: string): Promise<string> => (await fs.readFile(f)).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'kubegc-local',
        cluster: { server, 'certificate-authority-data': await b64(caCrt) },
      },
    ],
    users: [
      {
        name: user,
        user: {
          'client-certificate-data': await b64(crt),
          'client-key-data': await b64(key),
        },
      },
    ],
    contexts: [{ name: 'kubegc-local', context: { cluster: 'kubegc-local', user } }],
    'current-context': 'kubegc-local',
  };
}

async function writeKubeconfig(dir: string, server: string): Promise<void> {
  const p = paths(dir);
  const config = await kubeconfigFor(server, p.caCrt, 'admin', p.adminCrt, p.adminKey);
  // JSON is valid YAML; kubectl and client-node both read it.
  await fs.writeFile(p.kubeconfig, JSON.stringify(config, null, 2), { mode: 0o600 });
}

// ---------------------------------------------------------------------------
// Processes

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() =>
        addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Alive and still the binary we started (guards against PID reuse). */
export function isOurs(rec: ProcessRecord | undefined): boolean {
  if (!rec) return false;
  try {
    process.kill(rec.pid, 0);
  } catch {
    return false;
  }
  try {
    const cmdline = readFileSync(`/proc/${rec.pid}/cmdline`, 'utf8');
    return cmdline.split('\0')[0] === rec.bin;
  } catch {
    return false;
  }
}

export function startProcess(
  dir: string,
  logName: string,
  bin: string,
  args: string[],
): ProcessRecord {
  const log = openSync(logFile(dir, logName), 'a');
  const child = spawn(bin, args, { detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  child.unref();
  if (child.pid === undefined) throw new ControlPlaneError(`${logName} did not start`);
  return { pid: child.pid, bin };
}

export async function stopProcess(
  rec: ProcessRecord | undefined,
  timeoutMs = 15_000,
): Promise<boolean> {
  if (!isOurs(rec) || !rec) return false;
  process.kill(rec.pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isOurs(rec)) return true;
    await delay(100);
  }
  try {
    process.kill(rec.pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
  while (isOurs(rec)) await delay(50);
  return true;
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function logTail(dir: string, component: string, lines = 30): Promise<string> {
  try {
    const text = await fs.readFile(logFile(dir, component), 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

async function failure(dir: string, component: string, what: string): Promise<ControlPlaneError> {
  return new ControlPlaneError(
    `${component} ${what}. Last lines of ${logFile(dir, component)}:\n${await logTail(dir, component)}`,
  );
}

/** Polls `check` until it returns true, failing early if `rec` dies. */
async function waitFor(
  dir: string,
  component: string,
  rec: ProcessRecord,
  timeoutMs: number,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isOurs(rec)) throw await failure(dir, component, 'exited during start-up');
    if (await check().catch(() => false)) return;
    await delay(250);
  }
  throw await failure(dir, component, `was not ready within ${timeoutMs / 1000}s`);
}

function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/** A request to the apiserver as the admin user. */
export async function apiRequest(
  dir: string,
  method: string,
  urlPath: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const p = paths(dir);
  const state = await readState(dir);
  if (!state) throw new ControlPlaneError(`no cluster state in ${dir}`);
  const [ca, cert, key] = await Promise.all([
    fs.readFile(p.caCrt),
    fs.readFile(p.adminCrt),
    fs.readFile(p.adminKey),
  ]);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: state.ports.apiserver,
        path: urlPath,
        method,
        ca,
        cert,
        key,
        timeout: 5000,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function apiReady(dir: string): Promise<boolean> {
  const res = await apiRequest(dir, 'GET', '/readyz');
  return res.status === 200 && res.body.trim() === 'ok';
}

function etcdArgs(dataDir: string, ports: State['ports']): string[] {
  const client = `http://127.0.0.1:${ports.etcdClient}`;
  const peer = `http://127.0.0.1:${ports.etcdPeer}`;
  return [
    '--name=kubegc',
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=kubegc=${peer}`,
    '--unsafe-no-fsync',
    '--quota-backend-bytes=8589934592',
    '--log-level=warn',
  ];
}

function apiserverArgs(dir: string, ports: State['ports'], audit = false): string[] {
  const p = paths(dir);
  const auditArgs = audit
    ? [
        `--audit-policy-file=${path.join(dir, 'audit-policy.yaml')}`,
        `--audit-log-path=${auditLogFile(dir)}`,
        '--audit-log-format=json',
        // Rotated so a long e2e run or soak cannot fill the disk; readers read both files.
        '--audit-log-maxsize=200',
        '--audit-log-maxbackup=1',
      ]
    : [];
  return [
    ...auditArgs,
    `--etcd-servers=http://127.0.0.1:${ports.etcdClient}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${ports.apiserver}`,
    `--advertise-address=${ADVERTISE_ADDRESS}`,
    '--endpoint-reconciler-type=none',
    `--tls-cert-file=${p.apiCrt}`,
    `--tls-private-key-file=${p.apiKey}`,
    `--client-ca-file=${p.caCrt}`,
    '--authorization-mode=Node,RBAC',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${p.saPub}`,
    `--service-account-signing-key-file=${p.saKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    // Logs and exec through the node's kubelet (cluster/node.ts): by its address, not a DNS name.
    '--kubelet-preferred-address-types=InternalIP',
    `--kubelet-client-certificate=${p.kubeletClientCrt}`,
    `--kubelet-client-key=${p.kubeletClientKey}`,
    '--allow-privileged=true',
    '--v=0',
  ];
}

/** Flags for a kube-controller-manager; `controllers` picks which run (see the CONTROLLERS_* constants). */
export function controllerManagerArgs(
  dir: string,
  controllers: string,
  extra: string[] = [],
): string[] {
  const p = paths(dir);
  return [
    `--kubeconfig=${p.kubeconfig}`,
    `--controllers=${controllers}`,
    '--leader-elect=false',
    '--use-service-account-credentials=false',
    `--service-account-private-key-file=${p.saKey}`,
    `--root-ca-file=${p.caCrt}`,
    '--secure-port=0',
    '--v=0',
    ...extra,
  ];
}

async function clusterFrom(dir: string, state: State, reused: boolean): Promise<Cluster> {
  const p = paths(dir);
  return {
    dir,
    version: state.version,
    binDir: state.binDir,
    kubeconfig: p.kubeconfig,
    kubectl: p.kubectl,
    server: `https://127.0.0.1:${state.ports.apiserver}`,
    builtinGc: state.builtinGc,
    auditLog: state.audit ? auditLogFile(dir) : undefined,
    reused,
  };
}

async function startControllerManagerFor(dir: string, state: State): Promise<ProcessRecord> {
  const rec = startProcess(
    dir,
    'kube-controller-manager',
    path.join(state.binDir, 'kube-controller-manager'),
    controllerManagerArgs(dir, state.builtinGc ? CONTROLLERS_ALL : CONTROLLERS_WITHOUT_GC),
  );
  // Readiness: its service-account controller has made the `default` ServiceAccount.
  await waitFor(dir, 'kube-controller-manager', rec, 90_000, async () => {
    const res = await apiRequest(dir, 'GET', '/api/v1/namespaces/default/serviceaccounts/default');
    return res.status === 200;
  });
  return rec;
}

function allRunning(state: State): boolean {
  return COMPONENTS.every((c) => isOurs(state.processes[c]));
}

/**
 * Starts the control plane in `opts.dir`, or reuses the one running there.
 * Idempotent: a running cluster in another controller mode gets its
 * kube-controller-manager restarted in the requested mode.
 */
export async function up(opts: UpOptions): Promise<Cluster> {
  const dir = path.resolve(opts.dir);
  const log = opts.log ?? noop;
  const builtinGc = opts.builtinGc ?? false;
  const audit = opts.audit ?? false;
  const existing = await readState(dir);
  if (existing && allRunning(existing) && (await apiReady(dir).catch(() => false))) {
    if ((existing.audit ?? false) !== audit) {
      log(`restarting kube-apiserver ${audit ? 'with' : 'without'} its audit log`);
      existing.audit = audit;
      if (audit)
        await fs.writeFile(path.join(dir, 'audit-policy.yaml'), auditPolicy(opts.auditReadsOf));
      await writeState(dir, existing);
      await restartApiServer(await clusterFrom(dir, existing, true));
      // It recorded the new process in the state file: keep that record, or the
      // write below (a controller-mode change in the same call) puts the old pid
      // back and `down` leaves the new kube-apiserver running.
      const restarted = await readState(dir);
      if (restarted) existing.processes['kube-apiserver'] = restarted.processes['kube-apiserver'];
    }
    if (existing.builtinGc !== builtinGc) {
      log(
        `restarting kube-controller-manager ${builtinGc ? 'with' : 'without'} its garbage collector`,
      );
      await stopProcess(existing.processes['kube-controller-manager']);
      existing.builtinGc = builtinGc;
      existing.processes['kube-controller-manager'] = await startControllerManagerFor(
        dir,
        existing,
      );
      await writeState(dir, existing);
    }
    return clusterFrom(dir, existing, true);
  }
  if (existing) {
    log('a previous cluster in this directory is not fully running; replacing it');
    await down(dir);
  }

  const binDir = await ensureBinaries(log);
  const p = paths(dir);
  await fs.mkdir(p.logs, { recursive: true });
  await fs.mkdir(path.dirname(p.kubectl), { recursive: true });
  await makePki(dir);

  const ports = {
    etcdClient: await freePort(),
    etcdPeer: await freePort(),
    apiserver: await freePort(),
  };
  const dirHash = createHash('sha256').update(dir).digest('hex').slice(0, 12);
  const dataDir = existsSync('/dev/shm')
    ? path.join('/dev/shm', `kubegc-etcd-${dirHash}`)
    : path.join(dir, 'etcd-data');
  await fs.rm(dataDir, { recursive: true, force: true });
  const state: State = {
    version: await kubernetesVersion(),
    binDir,
    dataDir,
    ports,
    builtinGc,
    audit,
    processes: {},
  };
  if (audit)
    await fs.writeFile(path.join(dir, 'audit-policy.yaml'), auditPolicy(opts.auditReadsOf));
  await writeState(dir, state);
  await writeKubeconfig(dir, `https://127.0.0.1:${ports.apiserver}`);
  await fs.rm(p.kubectl, { force: true });
  await fs.symlink(path.join(binDir, 'kubectl'), p.kubectl);

  try {
    log(`starting etcd on 127.0.0.1:${ports.etcdClient}`);
    const etcd = startProcess(dir, 'etcd', path.join(binDir, 'etcd'), etcdArgs(dataDir, ports));
    state.processes.etcd = etcd;
    await writeState(dir, state);
    await waitFor(dir, 'etcd', etcd, 30_000, async () => {
      const res = await httpGet(`http://127.0.0.1:${ports.etcdClient}/health`);
      return res.status === 200 && res.body.includes('"health":"true"');
    });

    log(`starting kube-apiserver on 127.0.0.1:${ports.apiserver}`);
    const api = startProcess(
      dir,
      'kube-apiserver',
      path.join(binDir, 'kube-apiserver'),
      apiserverArgs(dir, ports, audit),
    );
    state.processes['kube-apiserver'] = api;
    await writeState(dir, state);
    await waitFor(dir, 'kube-apiserver', api, 120_000, () => apiReady(dir));

    log(
      `starting kube-controller-manager (${builtinGc ? 'all controllers' : 'all controllers except the garbage collector'})`,
    );
    state.processes['kube-controller-manager'] = await startControllerManagerFor(dir, state);
    await writeState(dir, state);
  } catch (err) {
    await down(dir).catch(noop);
    throw err;
  }
  return clusterFrom(dir, state, false);
}

/** Stops exactly the processes recorded in `dir` and removes the data. Returns what it stopped. */
export async function down(dirArg: string): Promise<Component[]> {
  const dir = path.resolve(dirArg);
  const state = await readState(dir);
  if (!state) return [];
  const stopped: Component[] = [];
  // Reverse order: controllers first, etcd last.
  for (const c of [...COMPONENTS].reverse()) {
    if (await stopProcess(state.processes[c])) stopped.push(c);
  }
  const p = paths(dir);
  await fs.rm(state.dataDir, { recursive: true, force: true });
  await fs.rm(p.pki, { recursive: true, force: true });
  await fs.rm(p.kubeconfig, { force: true });
  await fs.rm(p.state, { force: true });
  // Users' certificates and kubeconfigs belong to this cluster's CA and port.
  await fs.rm(path.join(dir, 'users'), { recursive: true, force: true });
  return stopped;
}

export interface Status {
  running: Partial<Record<Component, number>>;
  ready: boolean;
  cluster?: Cluster;
}

export async function status(dirArg: string): Promise<Status> {
  const dir = path.resolve(dirArg);
  const state = await readState(dir);
  if (!state) return { running: {}, ready: false };
  const running: Partial<Record<Component, number>> = {};
  for (const c of COMPONENTS) {
    const rec = state.processes[c];
    if (rec && isOurs(rec)) running[c] = rec.pid;
  }
  const ready = running['kube-apiserver'] !== undefined && (await apiReady(dir).catch(() => false));
  return { running, ready, cluster: await clusterFrom(dir, state, true) };
}

// ---------------------------------------------------------------------------
// Extra processes for tests and benchmarks

export interface ManagedProcess {
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts an extra kube-controller-manager against the cluster, e.g. one running
 * only the built-in garbage collector to compare kubegc with. The caller stops it.
 */
export async function startExtraControllerManager(
  cluster: Cluster,
  logName: string,
  controllers: string,
  extra: string[] = [],
): Promise<ManagedProcess> {
  await fs.mkdir(paths(cluster.dir).logs, { recursive: true });
  const rec = startProcess(
    cluster.dir,
    logName,
    path.join(cluster.binDir, 'kube-controller-manager'),
    controllerManagerArgs(cluster.dir, controllers, extra),
  );
  return { pid: rec.pid, stop: async () => void (await stopProcess(rec)) };
}

/** Stops and starts kube-apiserver with the same flags and port (watches break, data stays). */
export async function restartApiServer(cluster: Cluster): Promise<void> {
  const state = await readState(cluster.dir);
  if (!state) throw new ControlPlaneError(`no cluster state in ${cluster.dir}`);
  await stopProcess(state.processes['kube-apiserver']);
  const api = startProcess(
    cluster.dir,
    'kube-apiserver',
    path.join(state.binDir, 'kube-apiserver'),
    apiserverArgs(cluster.dir, state.ports, state.audit),
  );
  state.processes['kube-apiserver'] = api;
  await writeState(cluster.dir, state);
  await waitFor(cluster.dir, 'kube-apiserver', api, 120_000, () => apiReady(cluster.dir));
}
