// kubegc runs in the e2e tests as its real service account, with the RBAC of
// deploy/ and the guardrails component (test/e2e/sa-overlay), not as the
// cluster admin: every refusal the shipped manifests can produce is real.
//
// The overlay is applied once per run (the e2e global setup); each test file
// mints its own token (module state is per test file), because control planes
// are reused across runs and tokens expire. Imports only Node and
// cluster/controlplane.ts, so the global setup can load it under type stripping.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiRequest, delay, REPO_ROOT, type Cluster } from '../../cluster/controlplane.ts';

const execFileAsync = promisify(execFile);

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

/** deploy/controller/rbac.yaml's ServiceAccount, the identity the guardrails confine. */
export const KUBEGC_SERVICE_ACCOUNT: ServiceAccountRef = {
  namespace: 'kubegc-system',
  name: 'kubegc-controller',
};

/** The user name the API server gives a service account's tokens. */
export function serviceAccountUser(sa: ServiceAccountRef): string {
  return `system:serviceaccount:${sa.namespace}:${sa.name}`;
}

export const KUBEGC_USER = serviceAccountUser(KUBEGC_SERVICE_ACCOUNT);

/** deploy/node/rbac.yaml's ServiceAccount, the node DaemonSet's identity (kubegc-node-guardrails). */
export const KUBEGC_NODE_SERVICE_ACCOUNT: ServiceAccountRef = {
  namespace: 'kubegc-system',
  name: 'kubegc-node',
};

/** deploy/ + components/guardrails, minus the workloads (these control planes have no node). */
export const SA_OVERLAY = path.join(REPO_ROOT, 'test', 'e2e', 'sa-overlay');

/** Every refusal of deploy/components/guardrails starts with this. */
export const GUARDRAILS_PREFIX = 'kubegc-guardrails:';

/** Long enough for the longest test file; each file mints its own. */
const TOKEN_SECONDS = 4 * 3600;

async function kubectl(cluster: Cluster, kubeconfig: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(cluster.kubectl, ['--kubeconfig', kubeconfig, ...args], {
    cwd: REPO_ROOT,
  });
  return stdout;
}

function errorText(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr ?? e.message ?? String(err)).trim();
}

/**
 * `kubectl apply -k test/e2e/sa-overlay` (idempotent), then waits until the
 * guardrails are in force: the API server loads a new policy asynchronously,
 * and a test that starts kubegc before that would prove nothing about them.
 * Retries while kubegc-system is still terminating (a test that deleted deploy/).
 */
export async function applyKubegcServiceAccount(
  cluster: Cluster,
  log: (line: string) => void = () => undefined,
): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      await kubectl(cluster, cluster.kubeconfig, 'apply', '-k', SA_OVERLAY);
      break;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`kubectl apply -k ${SA_OVERLAY} failed: ${errorText(err)}`);
      log(`applying ${SA_OVERLAY} failed, retrying: ${errorText(err).split('\n')[0]}`);
      await delay(2000);
    }
  }
  // The probe: a server-side dry run of a DELETE, as kubegc's service account
  // (impersonated by the admin, so that the audit log does not count it among
  // kubegc's own writes), of an object without owner references: its own
  // ServiceAccount. RBAC allows it; only the policy refuses it. A dry run changes nothing.
  for (;;) {
    let answer: string;
    try {
      answer = await kubectl(
        cluster,
        cluster.kubeconfig,
        '--as',
        KUBEGC_USER,
        'delete',
        'serviceaccount',
        KUBEGC_SERVICE_ACCOUNT.name,
        '-n',
        KUBEGC_SERVICE_ACCOUNT.namespace,
        '--dry-run=server',
      );
    } catch (err) {
      answer = errorText(err);
      if (answer.includes(GUARDRAILS_PREFIX)) return;
    }
    if (Date.now() > deadline)
      throw new Error(`the guardrails policy is not in force after 180 s; last answer: ${answer}`);
    await delay(250);
  }
}

interface KubeconfigFile {
  clusters?: { cluster?: { server?: string; 'certificate-authority-data'?: string } }[];
}

/**
 * A fresh token (TokenRequest API) for `sa`, and a kubeconfig file for it in
 * the cluster dir. Bound to `pod` if given (as a pod's projected token is:
 * the API server then names the pod's node in the token's user info).
 */
export async function mintServiceAccountKubeconfig(
  cluster: Cluster,
  sa: ServiceAccountRef,
  seconds = TOKEN_SECONDS,
  pod?: { name: string; uid: string },
): Promise<string> {
  const res = await apiRequest(
    cluster.dir,
    'POST',
    `/api/v1/namespaces/${sa.namespace}/serviceaccounts/${sa.name}/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        expirationSeconds: seconds,
        ...(pod ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', ...pod } } : {}),
      },
    },
  );
  if (res.status !== 201)
    throw Object.assign(
      new Error(`TokenRequest for ${serviceAccountUser(sa)}: ${res.status} ${res.body}`),
      { status: res.status },
    );
  const token = (JSON.parse(res.body) as { status?: { token?: string } }).status?.token;
  if (!token) throw new Error(`TokenRequest for ${serviceAccountUser(sa)} returned no token`);
  const admin = JSON.parse(readFileSync(cluster.kubeconfig, 'utf8')) as KubeconfigFile;
  const ca = admin.clusters?.[0]?.cluster?.['certificate-authority-data'];
  if (!ca) throw new Error(`${cluster.kubeconfig} has no certificate-authority-data`);
  const user = serviceAccountUser(sa);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'kubegc-local',
        cluster: { server: cluster.server, 'certificate-authority-data': ca },
      },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'kubegc-local', context: { cluster: 'kubegc-local', user } }],
    'current-context': 'kubegc-local',
  };
  const dir = path.join(cluster.dir, 'users');
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(
    dir,
    `sa.${sa.namespace}.${sa.name}${pod ? `.pod-${pod.name}` : ''}.kubeconfig`,
  );
  // Atomic: a kubegc started by another test file may be reading the previous one.
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(config, null, 2), { mode: 0o600 });
  await fs.rename(tmp, file);
  return file;
}

/** Per test file: one token per service account. */
const minted = new Map<string, Promise<string>>();

/**
 * A kubeconfig with a token of `sa` (kubegc's by default), minted once per
 * test file. If kubegc's ServiceAccount is gone (a test deleted deploy/), the
 * overlay is applied again first.
 */
export function serviceAccountKubeconfig(
  cluster: Cluster,
  sa: ServiceAccountRef = KUBEGC_SERVICE_ACCOUNT,
): Promise<string> {
  const key = serviceAccountUser(sa);
  let p = minted.get(key);
  if (!p) {
    p = mintServiceAccountKubeconfig(cluster, sa).catch(async (err: unknown) => {
      const isKubegc = key === KUBEGC_USER;
      const status = (err as { status?: number }).status;
      // 404: the ServiceAccount is gone; 403: its namespace is terminating.
      if (!isKubegc || (status !== 404 && status !== 403)) throw err;
      await applyKubegcServiceAccount(cluster);
      return mintServiceAccountKubeconfig(cluster, sa);
    });
    p.catch(() => minted.delete(key));
    minted.set(key, p);
  }
  return p;
}
