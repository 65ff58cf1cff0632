// Callers of kubegc's metrics port in e2e tests: service accounts bound to the
// shipped reader ClusterRoles (deploy/metrics-readers.yaml), their tokens, and
// HTTPS GETs that present them (kubegc's certificate is self-signed in memory).
import { execFile } from 'node:child_process';
import https from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, type Cluster } from '../../cluster/controlplane.ts';
import type { Clients } from './cluster.ts';
import { afterFile, type ClusterFixture } from './e2e.ts';

const run = promisify(execFile);

/** Applies the shipped reader ClusterRoles (idempotent). */
export async function applyMetricsReaderRoles(cluster: Cluster): Promise<void> {
  await run(cluster.kubectl, [
    '--kubeconfig',
    cluster.kubeconfig,
    'apply',
    '-f',
    path.join(REPO_ROOT, 'deploy', 'metrics-readers.yaml'),
  ]);
}

/**
 * A service account in `namespace` bound to `clusterRoles` (none: a valid
 * identity without any permission), and a fresh token for it.
 */
export async function serviceAccountToken(
  c: Clients,
  namespace: string,
  name: string,
  clusterRoles: string[] = [],
): Promise<string> {
  await c.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  for (const role of clusterRoles) {
    await c.rbac.createClusterRoleBinding({
      body: {
        metadata: { name: `${namespace}-${name}-${role}`.slice(0, 253) },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      },
    });
  }
  const tr = await c.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { expirationSeconds: 3600 } } as k8s.AuthenticationV1TokenRequest,
  });
  const token = tr.status?.token;
  if (!token) throw new Error(`no token for ${namespace}/${name}`);
  return token;
}

/** Deletes the ClusterRoleBindings serviceAccountToken made (namespaces go with their tests). */
export async function deleteBindings(c: Clients, namespace: string): Promise<void> {
  const all = await c.rbac.listClusterRoleBinding();
  await Promise.all(
    all.items
      .filter((b) => b.metadata?.name?.startsWith(`${namespace}-`))
      .map((b) => c.rbac.deleteClusterRoleBinding({ name: b.metadata?.name ?? '' })),
  );
}

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint256?: string;
}

/** GET https://host:port/path, with a bearer token when given; `ca` verifies, else any certificate is taken. */
export function httpsGet(
  hostPort: string,
  urlPath: string,
  token?: string,
  ca?: string,
): Promise<Answer> {
  const url = new URL(`https://${hostPort}${urlPath}`);
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        ...(ca ? { ca, servername: 'localhost' } : { rejectUnauthorized: false }),
        agent: false,
        timeout: 30_000,
      },
      (res) => {
        const cert = (res.socket as import('node:tls').TLSSocket).getPeerCertificate?.();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            headers: res.headers,
            fingerprint256: cert?.fingerprint256,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${url.href}: timeout`)));
    req.on('error', reject);
  });
}

/**
 * A token of a service account bound to kubegc-metrics-reader, in a
 * namespace of the file's own (`prefix`), for the whole file: the roles
 * applied first, the binding deleted after the file.
 */
export async function metricsReaderToken(f: ClusterFixture, prefix: string): Promise<string> {
  await applyMetricsReaderRoles(f.cluster);
  const ns = await f.namespace(prefix);
  afterFile(() => deleteBindings(f.c, ns));
  return serviceAccountToken(f.c, ns, 'scraper', ['kubegc-metrics-reader']);
}
