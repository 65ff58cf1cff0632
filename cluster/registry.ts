// The local node's image registry: Debian's docker-registry (the CNCF
// distribution registry) on the node bridge, over TLS with a certificate of
// the cluster's CA, so that the kubelet pulls the kubegc image (and helm the
// chart, as an OCI artifact) the way every real cluster does, instead of an
// image imported with `ctr` behind the kubelet's back.
//
// It listens on the node address only (198.18.0.0/15, never routed): the host
// pushes to it and containerd pulls from it without a packet leaving the
// machine. No authentication: nothing but this machine can reach it.
import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { NODE_IP, paths, signCert } from './controlplane.ts';

export const REGISTRY_PORT = 5000;
/** host:port, as image references and containerd's hosts directory name it. */
export const REGISTRY_HOST = `${NODE_IP}:${REGISTRY_PORT}`;

export function registryPaths(nodeDir: string) {
  const dir = path.join(nodeDir, 'registry');
  return {
    dir,
    config: path.join(dir, 'config.yml'),
    data: path.join(dir, 'data'),
    pki: path.join(dir, 'pki'),
    /** containerd's `config_path`: one directory per registry host, each with a hosts.toml. */
    hostsDir: path.join(nodeDir, 'certs.d'),
  };
}

/**
 * Writes the registry's serving certificate (signed by the cluster CA, for the
 * node address), its configuration, and containerd's hosts.toml that trusts it.
 */
export async function prepareRegistry(clusterDir: string, nodeDir: string): Promise<void> {
  const r = registryPaths(nodeDir);
  const ca = paths(clusterDir).caCrt;
  await fs.mkdir(r.data, { recursive: true });
  await fs.mkdir(r.pki, { recursive: true });
  await signCert(
    clusterDir,
    r.pki,
    'registry',
    '/CN=kubegc-local-registry',
    `subjectAltName=IP:${NODE_IP}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`,
  );
  await fs.writeFile(r.config, registryConfig(r));
  const hostDir = path.join(r.hostsDir, REGISTRY_HOST);
  await fs.mkdir(hostDir, { recursive: true });
  await fs.writeFile(path.join(hostDir, 'hosts.toml'), hostsToml(ca));
}

export function registryConfig(r: ReturnType<typeof registryPaths>): string {
  return `version: 0.1
log:
  level: info
  fields:
    service: kubegc-local-registry
storage:
  filesystem:
    rootdirectory: ${r.data}
  delete:
    enabled: true
http:
  addr: ${REGISTRY_HOST}
  tls:
    certificate: ${path.join(r.pki, 'registry.crt')}
    key: ${path.join(r.pki, 'registry.key')}
  headers:
    X-Content-Type-Options: [nosniff]
`;
}

/** containerd (CRI, config_path) trusts the registry through the cluster CA; pulls only. */
export function hostsToml(caFile: string): string {
  return `server = "https://${REGISTRY_HOST}"

[host."https://${REGISTRY_HOST}"]
  capabilities = ["pull", "resolve"]
  ca = "${caFile}"
`;
}

/** Whether the registry answers its API root (/v2/) over TLS with the cluster CA. */
export function registryServes(caFile: string, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: NODE_IP,
        port: REGISTRY_PORT,
        path: '/v2/',
        method: 'GET',
        ca: readFileSync(caFile),
        timeout: timeoutMs,
      },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** The repositories the registry holds (its catalog), for tests and `cluster status`. */
export function registryCatalog(caFile: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: NODE_IP,
        port: REGISTRY_PORT,
        path: '/v2/_catalog',
        method: 'GET',
        ca: readFileSync(caFile),
        timeout: 5_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          if (res.statusCode !== 200) {
            reject(new Error(`registry catalog: HTTP ${res.statusCode}: ${body.slice(0, 200)}`));
            return;
          }
          resolve((JSON.parse(body) as { repositories?: string[] }).repositories ?? []);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('registry catalog: timed out')));
    req.on('error', reject);
    req.end();
  });
}
