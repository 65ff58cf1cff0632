// Where kubegc's API credentials come from. The common cases are read here,
// natively: a pod's service account (in-cluster), and kubeconfig files whose
// user is a client certificate or a bearer token (literal or tokenFile).
// Anything else (exec plugins, auth-provider, proxy-url, several files in
// $KUBECONFIG, basic auth) is handed to @kubernetes/client-node, imported
// only then: importing it costs about 0.5 s and 85 MB of RSS before the first
// request (it loads every generated API class), most of kubegc's fixed cost.
import fs from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { load as parseYaml } from 'js-yaml';

/** What KubeClient needs of a kubeconfig; client-node's KubeConfig has the same two methods. */
export interface KubeConfigLike {
  getCurrentCluster(): { server: string } | null;
  /** TLS material and auth headers, freshly derived (rotated tokens are re-read). */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

export const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

interface Cluster {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
  'proxy-url'?: string;
}
interface User {
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  token?: string;
  tokenFile?: string;
  [other: string]: unknown;
}
interface Named<T> {
  name?: string;
  cluster?: T;
  user?: T;
  context?: { cluster?: string; user?: string };
}
interface Document {
  clusters?: Named<Cluster>[];
  users?: Named<User>[];
  contexts?: Named<never>[];
  'current-context'?: string;
}

/** The fields a native credential may use; any other user field sends the file to client-node. */
const NATIVE_USER_FIELDS = new Set([
  'client-certificate',
  'client-certificate-data',
  'client-key',
  'client-key-data',
  'token',
  'tokenFile',
]);

const b64 = (s: string): Buffer => Buffer.from(s, 'base64');

/** A kubeconfig read natively: one cluster, one user with a certificate and/or a token. */
export class NativeKubeConfig implements KubeConfigLike {
  readonly server: string;
  private readonly ca: Buffer | undefined;
  private readonly cert: Buffer | undefined;
  private readonly key: Buffer | undefined;
  private readonly servername: string | undefined;
  private readonly insecure: boolean;
  private readonly token: string | undefined;
  private readonly tokenFile: string | undefined;

  constructor(o: {
    server: string;
    ca?: Buffer;
    cert?: Buffer;
    key?: Buffer;
    servername?: string;
    insecure?: boolean;
    token?: string;
    tokenFile?: string;
  }) {
    this.server = o.server;
    this.ca = o.ca;
    this.cert = o.cert;
    this.key = o.key;
    this.servername = o.servername;
    this.insecure = o.insecure ?? false;
    this.token = o.token;
    this.tokenFile = o.tokenFile;
  }

  getCurrentCluster(): { server: string } {
    return { server: this.server };
  }

  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    if (this.ca) opts.ca = this.ca;
    if (this.cert) opts.cert = this.cert;
    if (this.key) opts.key = this.key;
    if (this.servername) opts.servername = this.servername;
    if (this.insecure) opts.rejectUnauthorized = false;
    // A projected service-account token is rotated on disk: read it every time.
    const token = this.tokenFile ? fs.readFileSync(this.tokenFile, 'utf8').trim() : this.token;
    if (token) opts.headers = { ...opts.headers, Authorization: `Bearer ${token}` };
    return Promise.resolve();
  }
}

/** The pod's service account, as client-go's rest.InClusterConfig. Undefined outside a pod. */
export function inClusterConfig(
  env: NodeJS.ProcessEnv = process.env,
  dir = SA_DIR,
): NativeKubeConfig | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  const tokenFile = path.join(dir, 'token');
  if (!host || !port || !fs.existsSync(tokenFile)) return undefined;
  const caFile = path.join(dir, 'ca.crt');
  return new NativeKubeConfig({
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: fs.existsSync(caFile) ? fs.readFileSync(caFile) : undefined,
    tokenFile,
  });
}

/**
 * The file, read natively when its current context's user and cluster only
 * use what NativeKubeConfig supports; undefined when client-node must read it.
 * Relative paths are relative to the file, as client-go resolves them.
 */
export function nativeFromFile(file: string, context?: string): NativeKubeConfig | undefined {
  const doc = parseYaml(fs.readFileSync(file, 'utf8')) as Document | null;
  if (!doc || typeof doc !== 'object') throw new Error(`${file} is not a kubeconfig`);
  const name = context ?? doc['current-context'];
  const ctx = doc.contexts?.find((c) => c.name === name)?.context;
  if (context !== undefined && !ctx) throw new Error(`context "${context}" not found in ${file}`);
  if (!ctx) return undefined; // client-node gives the error (or its own defaults)
  const cluster = doc.clusters?.find((c) => c.name === ctx.cluster)?.cluster;
  const user = doc.users?.find((u) => u.name === ctx.user)?.user ?? {};
  if (!cluster?.server || cluster['proxy-url']) return undefined;
  if (Object.keys(user).some((k) => !NATIVE_USER_FIELDS.has(k))) return undefined;
  const dir = path.dirname(path.resolve(file));
  const read = (p: string | undefined): Buffer | undefined =>
    p ? fs.readFileSync(path.resolve(dir, p)) : undefined;
  const data = (d: string | undefined, p: string | undefined): Buffer | undefined =>
    d ? b64(d) : read(p);
  return new NativeKubeConfig({
    server: cluster.server,
    ca: data(cluster['certificate-authority-data'], cluster['certificate-authority']),
    insecure: cluster['insecure-skip-tls-verify'] === true,
    servername: cluster['tls-server-name'],
    cert: data(user['client-certificate-data'], user['client-certificate']),
    key: data(user['client-key-data'], user['client-key']),
    token: user.token,
    tokenFile: user.tokenFile ? path.resolve(dir, user.tokenFile) : undefined,
  });
}

/** client-node's KubeConfig, imported now, for what the native reader does not cover. */
async function clientNodeConfig(
  file: string | undefined,
  context: string | undefined,
): Promise<KubeConfigLike> {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  if (context !== undefined) {
    if (!kc.getContextObject(context))
      throw new Error(`context "${context}" not found${file ? ` in ${file}` : ''}`);
    kc.setCurrentContext(context);
  }
  return kc;
}

/**
 * kubectl's order: the given file, else $KUBECONFIG, else ~/.kube/config,
 * else the pod's service account; its current context, or `context`
 * (kubectl's --context), which must exist.
 */
export async function loadKubeConfig(file?: string, context?: string): Promise<KubeConfigLike> {
  let kc: KubeConfigLike | undefined;
  try {
    if (file) kc = nativeFromFile(file, context) ?? (await clientNodeConfig(file, context));
    else {
      const env = process.env.KUBECONFIG;
      const home = path.join(os.homedir(), '.kube', 'config');
      if (env && !env.includes(path.delimiter) && fs.existsSync(env))
        kc = nativeFromFile(env, context) ?? (await clientNodeConfig(undefined, context));
      else if (env)
        kc = await clientNodeConfig(undefined, context); // several files to merge
      else if (fs.existsSync(home))
        kc = nativeFromFile(home, context) ?? (await clientNodeConfig(home, context));
      else if (context !== undefined)
        throw new Error(`context "${context}" given, but no kubeconfig was found`);
      else kc = inClusterConfig() ?? (await clientNodeConfig(undefined, undefined));
    }
  } catch (err) {
    throw new Error(`cannot load kubeconfig${file ? ` ${file}` : ''}: ${(err as Error).message}`);
  }
  if (!kc.getCurrentCluster()) {
    throw new Error(
      file
        ? `kubeconfig ${file} has no current cluster`
        : 'no kubeconfig found (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster',
    );
  }
  return kc;
}
