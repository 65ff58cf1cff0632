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
import { OCI_MANIFEST_TYPE, imageBlobs, type ImageSpec } from './oci-image.ts';

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
  // Docker Hub is this registry too: an image named `nginx:1.25` or
  // `docker.io/library/nginx:1.25` is pulled from here (repository
  // `library/nginx`), so pods may name images in every spelling Docker Hub
  // allows without a packet leaving the machine (containerd normalises
  // `index.docker.io` to `docker.io` before it looks for a hosts directory).
  const hubDir = path.join(r.hostsDir, 'docker.io');
  await fs.mkdir(hubDir, { recursive: true });
  await fs.writeFile(path.join(hubDir, 'hosts.toml'), hostsToml(ca));
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

/** One request to the registry over TLS with the cluster CA; resolves with status, headers and body. */
function registryRequest(
  caFile: string,
  method: string,
  target: string,
  body?: Buffer,
  contentType = 'application/octet-stream',
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}> {
  const url = new URL(target, `https://${REGISTRY_HOST}`);
  if (url.host !== REGISTRY_HOST) throw new Error(`registry: refusing to send to ${url.host}`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: NODE_IP,
        port: REGISTRY_PORT,
        path: `${url.pathname}${url.search}`,
        method,
        ca: readFileSync(caFile),
        timeout: 60_000,
        headers: body
          ? { 'content-type': contentType, 'content-length': body.length }
          : { 'content-length': 0 },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
        );
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`registry ${method} ${url.pathname}: timed out`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Pushes a made-up image to the local registry as `repository:tag` through the
 * registry API (blobs it lacks, then the manifest), without podman: for tests
 * that need the kubelet to pull images by tag and by digest. Resolves with the
 * manifest digest (what `repository@sha256:…` names).
 */
export async function pushImageSpec(
  caFile: string,
  img: ImageSpec,
  repository: string,
  tag: string,
): Promise<string> {
  const b = imageBlobs(img);
  const fail = (what: string, r: { status: number; body: string }): never => {
    throw new Error(
      `registry: ${what} of ${repository}:${tag}: HTTP ${r.status} ${r.body.slice(0, 200)}`,
    );
  };
  for (const [digest, blob] of [
    [b.configDigest, b.config],
    ...b.layers.map((l): [string, Buffer] => [l.digest, l.blob]),
  ] as [string, Buffer][]) {
    const head = await registryRequest(caFile, 'HEAD', `/v2/${repository}/blobs/${digest}`);
    if (head.status === 200) continue;
    const start = await registryRequest(caFile, 'POST', `/v2/${repository}/blobs/uploads/`);
    const location = start.headers.location;
    if (start.status !== 202 || typeof location !== 'string') fail('starting a blob upload', start);
    const sep = String(location).includes('?') ? '&' : '?';
    const put = await registryRequest(
      caFile,
      'PUT',
      `${String(location)}${sep}digest=${encodeURIComponent(digest)}`,
      blob,
    );
    if (put.status !== 201) fail(`uploading ${digest}`, put);
  }
  const res = await registryRequest(
    caFile,
    'PUT',
    `/v2/${repository}/manifests/${tag}`,
    b.manifest,
    OCI_MANIFEST_TYPE,
  );
  if (res.status !== 201) fail('putting the manifest', res);
  return b.manifestDigest;
}
