// An aggregated API server of our own, for e2e tests and the soak: a Node
// HTTPS server on 127.0.0.1 that serves one namespaced resource (by default
// `widgets` of `agg.e2e.kubegc.io/v1`, kind AggWidget) from memory, registered
// with the local control plane's kube-apiserver through an APIService, so that
// every request kubegc makes to it goes through kube-apiserver's aggregator
// (authentication, RBAC, API Priority and Fairness, the proxy) as it would to
// metrics-server or any other aggregated API.
//
// How kube-apiserver reaches it without any cluster networking: the APIService
// names a Service of type ExternalName whose externalName is `localhost`, and
// kube-apiserver's service resolver (k8s.io/apiserver/pkg/util/proxy
// ResolveCluster) turns that into https://localhost:<the APIService's
// spec.service.port>; the availability controller checks no endpoints for an
// ExternalName Service, only GET /apis/<group>/<version>. No front-proxy PKI
// is needed: without --proxy-client-cert-file kube-apiserver proxies without a
// client certificate (kube-aggregator handler_proxy.go), and this server
// trusts every caller (it listens on loopback only); `insecureSkipTLSVerify`
// spares it a certificate kube-apiserver would verify. (Checked against
// kube-aggregator and k8s.io/apiserver v0.35.4.)
//
// What it does on purpose unlike kube-apiserver's own storage:
// - its resourceVersions come from a counter of its own, by default starting
//   at 10^12, far above any etcd revision of a test cluster: they compare as
//   decimal numbers, and mean nothing next to etcd's;
// - with `fieldSelectors: 'refuse'` it answers 400 ("field label not
//   supported") to any fieldSelector, as some aggregated servers do;
// - strategic merge patch is 415 (as for custom resources), and so are JSON
//   patch and apply: merge patch only.
// And what it does as kube-apiserver does: discovery (aggregated discovery v2
// when asked for it, which the 1.35 aggregator does first, else the legacy
// documents it falls back to), list with limit/continue, watch (JSON lines,
// a watch-list with its initial-events-end bookmark, 410 for a version older
// than its counter), PartialObjectMetadata(List) when the Accept header asks
// for it (protobuf is refused with 406: kubegc's Accept lists JSON after it),
// get, create, delete with preconditions and propagationPolicy (Background
// removes at once unless finalizers hold it; Orphan and Foreground set their
// finalizer and deletionTimestamp), merge patch with the uid and
// resourceVersion preconditions a patch may carry; 404s name the object.
//
// For tests of a group that disappears: unregister()/register() delete and
// re-create the APIService (the group leaves discovery and comes back), and
// setAvailable(false) makes the server answer 503 to everything (discovery
// included) while the APIService stays. holdWatches() stops delivering watch
// events (a watch that is behind), releaseWatches() delivers what was held.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Cluster } from '../../cluster/controlplane.ts';
import { KubeClient } from '../../src/api/client.ts';
import { ApiError } from '../../src/api/errors.ts';
import { discover } from '../../src/api/discovery.ts';
import type { OwnerReference, ResourceInfo } from '../../src/api/resources.ts';
import { kubeConfig, waitFor } from './cluster.ts';
import type { Ref } from './objects.ts';
import { selfSignedCert } from './tls.ts';

export interface AggregatedApiOptions {
  /** Default `agg.e2e.kubegc.io`; test files running at the same time need groups of their own. */
  group: string;
  version: string;
  /** Plural, e.g. `widgets`. */
  resource: string;
  kind: string;
  /** 'refuse': a 400 for any fieldSelector; 'support': metadata.name and metadata.namespace (=, ==, !=). */
  fieldSelectors: 'refuse' | 'support';
  /** The first resourceVersion; default 10^12. */
  resourceVersionStart: bigint;
  /** Serve aggregated discovery (apidiscovery.k8s.io/v2) when asked for it; false: the legacy documents only. */
  aggregatedDiscovery: boolean;
  /** Where the ExternalName Service lives. */
  serviceNamespace: string;
}

export const DEFAULT_AGGREGATED_API: AggregatedApiOptions = {
  group: 'agg.e2e.kubegc.io',
  version: 'v1',
  resource: 'widgets',
  kind: 'AggWidget',
  fieldSelectors: 'support',
  resourceVersionStart: 10n ** 12n,
  aggregatedDiscovery: true,
  serviceNamespace: 'default',
};

/** One request the server received (after kube-apiserver's proxy), for tests to assert on. */
export interface ReceivedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  /** The user kube-apiserver authenticated (X-Remote-User), e.g. kubegc's service account. */
  user: string | undefined;
  status: number;
}

interface StoredObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    ownerReferences?: OwnerReference[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: StoredObject;
  rv: bigint;
}

/** One open watch: its filter, what it is still to be sent, and where it is in the event log. */
interface Watcher {
  res: ServerResponse;
  namespace: string | undefined;
  match: (o: StoredObject) => boolean;
  metadataOnly: boolean;
  /** Lines made when it opened (initial events, their bookmark), not yet written. */
  pending: string[];
  /** Index into the event log of the next event to send. */
  cursor: number;
  /** The stream ends once `pending` is written (an ERROR event). */
  endAfterPending: boolean;
}

const MAX_REQUEST_LOG = 10_000;
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

class HttpError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
}

/** A JSON value, deep-copied (objects handed out must not alias the store). */
function clone<T>(v: T): T {
  return structuredClone(v);
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return clone(patch);
  const out = new Map<string, unknown>(
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? Object.entries(target)
      : [],
  );
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) out.delete(k);
    else out.set(k, mergePatch(out.get(k), v));
  }
  return Object.fromEntries(out);
}

/** The media types of an Accept header, in order, each with its parameters. */
function acceptList(accept: string | undefined): { type: string; params: Map<string, string> }[] {
  return (accept ?? '*/*').split(',').map((part) => {
    const [type = '', ...rest] = part.split(';').map((s) => s.trim());
    const params = new Map<string, string>();
    for (const p of rest) {
      const eq = p.indexOf('=');
      if (eq > 0) params.set(p.slice(0, eq).trim(), p.slice(eq + 1).trim());
    }
    return { type: type.toLowerCase(), params };
  });
}

/**
 * What the client will take, of what this server can give: JSON, as the full
 * object or as PartialObjectMetadata(List) (`as=`). Undefined: 406.
 */
function negotiate(accept: string | undefined): { metadataOnly: boolean } | undefined {
  for (const { type, params } of acceptList(accept)) {
    if (!['application/json', 'application/*', '*/*'].includes(type)) continue;
    const as = params.get('as');
    if (as === undefined) return { metadataOnly: false };
    if (
      (as === 'PartialObjectMetadata' || as === 'PartialObjectMetadataList') &&
      params.get('g') === 'meta.k8s.io' &&
      params.get('v') === 'v1'
    )
      return { metadataOnly: true };
    // as=Table and anything else: not served; a later entry may be.
  }
  return undefined;
}

/** Splits a field selector on unescaped commas and decodes each `field op value` (fields.EscapeValue). */
function parseFieldSelector(
  selector: string,
): { field: string; op: '=' | '!='; value: string }[] | string {
  const terms: { field: string; op: '=' | '!='; value: string }[] = [];
  let current = '';
  const raw: string[] = [];
  for (let i = 0; i < selector.length; i++) {
    const ch = selector[i];
    if (ch === '\\' && i + 1 < selector.length) {
      current += ch + selector[i + 1];
      i++;
    } else if (ch === ',') {
      raw.push(current);
      current = '';
    } else current += ch;
  }
  raw.push(current);
  for (const term of raw) {
    if (term === '') continue;
    const m = /^([^=!]+?)(==|=|!=)(.*)$/.exec(term);
    if (!m) return `invalid field selector term ${JSON.stringify(term)}`;
    const [, field = '', op = '', escaped = ''] = m;
    let value = '';
    for (let i = 0; i < escaped.length; i++) {
      const ch = escaped[i];
      if (ch === '\\') {
        const next = escaped[i + 1];
        if (next !== '\\' && next !== ',' && next !== '=')
          return `invalid escape in field selector value ${JSON.stringify(escaped)}`;
        value += next;
        i++;
      } else if (ch === ',' || ch === '=') {
        return `unescaped ${ch} in field selector value ${JSON.stringify(escaped)}`;
      } else value += ch;
    }
    terms.push({ field: field.trim(), op: op === '!=' ? '!=' : '=', value });
  }
  return terms;
}

export class AggregatedApi {
  readonly opts: AggregatedApiOptions;
  readonly apiVersion: string;
  /** `<version>.<group>`: the APIService's name. */
  readonly apiServiceName: string;
  readonly serviceName: string;
  /** The resource as discovery shows it (what kubegc's informer and GcApi take). */
  readonly resourceInfo: ResourceInfo;
  /** Every request received, newest last (at most 10,000). */
  readonly requests: ReceivedRequest[] = [];
  /** Mutable: a test may switch field-selector support at any time. */
  fieldSelectors: AggregatedApiOptions['fieldSelectors'];

  private readonly cluster: Cluster;
  private readonly admin: KubeClient;
  private readonly server: https.Server;
  private port = 0;
  private readonly objects = new Map<string, StoredObject>();
  private readonly log: WatchEvent[] = [];
  private readonly watchers = new Set<Watcher>();
  private counter: bigint;
  private available = true;
  private held = false;

  private constructor(cluster: Cluster, admin: KubeClient, opts: AggregatedApiOptions) {
    this.cluster = cluster;
    this.admin = admin;
    this.opts = opts;
    this.fieldSelectors = opts.fieldSelectors;
    this.counter = opts.resourceVersionStart;
    this.apiVersion = `${opts.group}/${opts.version}`;
    this.apiServiceName = `${opts.version}.${opts.group}`;
    this.serviceName = `kubegc-agg-${opts.group.replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);
    this.resourceInfo = {
      group: opts.group,
      version: opts.version,
      resource: opts.resource,
      kind: opts.kind,
      namespaced: true,
      verbs: ['create', 'delete', 'get', 'list', 'patch', 'watch'],
    };
    const { key, cert } = selfSignedCert(['127.0.0.1']);
    this.server = https.createServer({ key, cert }, (req, res) => this.handle(req, res));
  }

  /**
   * Starts the server on 127.0.0.1 and registers it (Service + APIService),
   * then waits until kube-apiserver's discovery shows the resource, as kubegc
   * will see it. Replaces an APIService or Service of the same names left by
   * a run that did not tear down.
   */
  static async start(
    cluster: Cluster,
    options: Partial<AggregatedApiOptions> = {},
  ): Promise<AggregatedApi> {
    const admin = await KubeClient.create(kubeConfig(cluster), {
      userAgent: 'kubegc-e2e-aggregated-api',
    });
    const api = new AggregatedApi(cluster, admin, { ...DEFAULT_AGGREGATED_API, ...options });
    await new Promise<void>((resolve, reject) => {
      api.server.once('error', reject);
      api.server.listen(0, '127.0.0.1', () => resolve());
    });
    api.port = (api.server.address() as AddressInfo).port;
    try {
      await api.register();
    } catch (err) {
      await api.close();
      throw err;
    }
    return api;
  }

  // ---- registration --------------------------------------------------------

  private get apiServicePath(): string {
    return `/apis/apiregistration.k8s.io/v1/apiservices/${this.apiServiceName}`;
  }

  private get servicePath(): string {
    return `/api/v1/namespaces/${this.opts.serviceNamespace}/services/${this.serviceName}`;
  }

  /** DELETE that takes 404 as done. */
  private async deleteIfThere(path: string): Promise<void> {
    try {
      await this.admin.request('DELETE', path);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  }

  /** Does kube-apiserver's discovery (as kubegc reads it) show the resource, and the group fresh? */
  async inDiscovery(): Promise<boolean> {
    const d = await discover(this.admin);
    return (
      !d.failedGroups.includes(this.opts.group) &&
      d.all.some(
        (r) =>
          r.group === this.opts.group &&
          r.version === this.opts.version &&
          r.resource === this.opts.resource,
      )
    );
  }

  /** Is the group absent from kube-apiserver's discovery (neither served nor failing)? */
  async goneFromDiscovery(): Promise<boolean> {
    const d = await discover(this.admin);
    return (
      !d.failedGroups.includes(this.opts.group) && !d.all.some((r) => r.group === this.opts.group)
    );
  }

  /** Creates (or replaces) the Service and the APIService; resolves once the resource is in discovery. */
  async register(): Promise<void> {
    await this.deleteIfThere(this.apiServicePath);
    await this.deleteIfThere(this.servicePath);
    await this.admin.request('POST', `/api/v1/namespaces/${this.opts.serviceNamespace}/services`, {
      body: {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: this.serviceName, labels: { 'e2e.kubegc.io/aggregated-api': 'true' } },
        spec: {
          type: 'ExternalName',
          externalName: 'localhost',
          ports: [{ name: 'https', port: this.port, protocol: 'TCP' }],
        },
      },
    });
    await this.admin.request('POST', '/apis/apiregistration.k8s.io/v1/apiservices', {
      body: {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: {
          name: this.apiServiceName,
          labels: { 'e2e.kubegc.io/aggregated-api': 'true' },
        },
        spec: {
          group: this.opts.group,
          version: this.opts.version,
          groupPriorityMinimum: 1000,
          versionPriority: 15,
          insecureSkipTLSVerify: true,
          service: {
            namespace: this.opts.serviceNamespace,
            name: this.serviceName,
            port: this.port,
          },
        },
      },
    });
    await waitFor(
      `APIService ${this.apiServiceName} available and its resource in discovery`,
      () => this.inDiscovery(),
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  }

  /** Deletes the APIService (the Service stays); resolves once the group has left discovery. */
  async unregister(): Promise<void> {
    await this.deleteIfThere(this.apiServicePath);
    await waitFor(`group ${this.opts.group} gone from discovery`, () => this.goneFromDiscovery(), {
      timeoutMs: 90_000,
      intervalMs: 500,
    });
  }

  /**
   * false: every request is answered 503 (discovery, the availability check,
   * reads, writes; open watches are ended), as an aggregated server that is
   * down behind a live Service. kube-apiserver then marks the APIService
   * unavailable at its next check and its discovery stale at its next refresh.
   */
  setAvailable(available: boolean): void {
    this.available = available;
    if (!available) for (const w of [...this.watchers]) this.endWatch(w);
  }

  /** Watch events (and new watches' initial events) are kept back until releaseWatches(). */
  holdWatches(): void {
    this.held = true;
  }

  releaseWatches(): void {
    this.held = false;
    for (const w of this.watchers) this.pump(w);
  }

  /** Unregisters (APIService and Service), ends every watch and stops the server. */
  async close(): Promise<void> {
    try {
      await this.deleteIfThere(this.apiServicePath);
      await this.deleteIfThere(this.servicePath);
    } finally {
      for (const w of [...this.watchers]) this.endWatch(w);
      this.server.closeAllConnections();
      await new Promise<void>((r) => this.server.close(() => r()));
      this.admin.close();
    }
  }

  // ---- objects, for tests (through kube-apiserver, as the admin) -------------

  private collection(namespace: string): string {
    return `/apis/${this.apiVersion}/namespaces/${encodeURIComponent(namespace)}/${this.opts.resource}`;
  }

  /** Creates an object through kube-apiserver (as the cluster admin). */
  async create(
    namespace: string,
    name: string,
    meta: { ownerReferences?: OwnerReference[]; finalizers?: string[] } = {},
  ): Promise<Ref> {
    const obj = await this.admin.request<StoredObject>('POST', this.collection(namespace), {
      body: {
        apiVersion: this.apiVersion,
        kind: this.opts.kind,
        metadata: { name, ...meta },
        spec: { size: 1 },
      },
    });
    return {
      apiVersion: this.apiVersion,
      kind: this.opts.kind,
      name,
      namespace,
      uid: obj.metadata.uid,
    };
  }

  /** Reads an object through kube-apiserver; undefined for a 404 that names it. */
  async get(namespace: string, name: string): Promise<StoredObject | undefined> {
    try {
      return await this.admin.request<StoredObject>(
        'GET',
        `${this.collection(namespace)}/${encodeURIComponent(name)}`,
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 404 && err.body.includes(`"name":"${name}"`))
        return undefined;
      throw err;
    }
  }

  /** Deletes an object through kube-apiserver. */
  async delete(
    namespace: string,
    name: string,
    propagationPolicy: 'Background' | 'Foreground' | 'Orphan' = 'Background',
  ): Promise<void> {
    await this.admin.request(
      'DELETE',
      `${this.collection(namespace)}/${encodeURIComponent(name)}`,
      {
        body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy },
      },
    );
  }

  /** The object as this server holds it (no request through kube-apiserver): for asserting when it is unavailable. */
  stored(namespace: string, name: string): StoredObject | undefined {
    const o = this.objects.get(`${namespace}/${name}`);
    return o && clone(o);
  }

  // ---- the server ------------------------------------------------------------

  private nextVersion(): string {
    this.counter += 1n;
    return this.counter.toString();
  }

  private record(req: IncomingMessage, url: URL, status: number): void {
    const user = req.headers['x-remote-user'];
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      user: Array.isArray(user) ? user[0] : user,
      status,
    });
    if (this.requests.length > MAX_REQUEST_LOG)
      this.requests.splice(0, this.requests.length - MAX_REQUEST_LOG);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let status = 500;
      try {
        status = this.route(req, res, url, Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        const e = err instanceof HttpError ? err : new HttpError(500, 'InternalError', String(err));
        status = e.code;
        this.status(res, e);
      }
      this.record(req, url, status);
    });
  }

  private json(
    res: ServerResponse,
    code: number,
    body: unknown,
    contentType = 'application/json',
  ): number {
    res.writeHead(code, { 'content-type': contentType });
    res.end(JSON.stringify(body));
    return code;
  }

  private status(res: ServerResponse, e: HttpError): number {
    if (res.headersSent) {
      res.end();
      return e.code;
    }
    return this.json(res, e.code, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: e.message,
      reason: e.reason,
      ...(e.details ? { details: e.details } : {}),
      code: e.code,
    });
  }

  private notFound(name: string): HttpError {
    return new HttpError(
      404,
      'NotFound',
      `${this.opts.resource}.${this.opts.group} "${name}" not found`,
      { name, group: this.opts.group, kind: this.opts.resource },
    );
  }

  private conflict(name: string, why: string): HttpError {
    return new HttpError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${this.opts.resource}.${this.opts.group} "${name}": ${why}`,
      { name, group: this.opts.group, kind: this.opts.resource },
    );
  }

  /** Answers one request; returns the status written (a watch: 200 once opened). */
  private route(req: IncomingMessage, res: ServerResponse, url: URL, body: string): number {
    if (!this.available)
      throw new HttpError(503, 'ServiceUnavailable', 'the aggregated API server is unavailable');
    const p = url.pathname.replace(/\/+$/, '') || '/';
    const { group, version, resource } = this.opts;
    if (p === '/healthz' || p === '/readyz' || p === '/livez') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return 200;
    }
    if (p === '/apis') return this.discoveryRoot(req, res);
    if (p === `/apis/${group}`)
      return this.json(res, 200, {
        kind: 'APIGroup',
        apiVersion: 'v1',
        ...this.apiGroup(),
      });
    if (p === `/apis/${group}/${version}`)
      return this.json(res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: this.apiVersion,
        resources: [
          {
            name: resource,
            singularName: this.opts.kind.toLowerCase(),
            namespaced: true,
            kind: this.opts.kind,
            verbs: this.resourceInfo.verbs,
          },
        ],
      });
    const base = `/apis/${group}/${version}`;
    const all = p === `${base}/${resource}`;
    const m = new RegExp(
      `^${base.replace(/\./g, '\\.')}/namespaces/([^/]+)/${resource}(?:/([^/]+))?$`,
    ).exec(p);
    if (!all && !m)
      throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    const namespace = m?.[1] !== undefined ? decodeURIComponent(m[1]) : undefined;
    const name = m?.[2] !== undefined ? decodeURIComponent(m[2]) : undefined;
    const method = req.method ?? 'GET';
    if (name === undefined) {
      if (method === 'GET')
        return url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1'
          ? this.watch(req, res, url, namespace)
          : this.list(req, res, url, namespace);
      if (method === 'POST' && namespace !== undefined)
        return this.create_(req, res, namespace, body);
      throw new HttpError(405, 'MethodNotAllowed', `${method} is not supported on the collection`);
    }
    if (namespace === undefined) throw new HttpError(404, 'NotFound', 'not found');
    switch (method) {
      case 'GET':
        return this.get_(req, res, namespace, name);
      case 'DELETE':
        return this.delete_(req, res, namespace, name, body);
      case 'PATCH':
        return this.patch_(req, res, namespace, name, body);
      default:
        throw new HttpError(405, 'MethodNotAllowed', `${method} is not supported`);
    }
  }

  private apiGroup(): object {
    const gv = { groupVersion: this.apiVersion, version: this.opts.version };
    return { name: this.opts.group, versions: [gv], preferredVersion: gv };
  }

  /**
   * /apis: aggregated discovery v2 when the Accept header asks for it (the
   * 1.35 aggregator asks for v2 and v2beta1 first, and falls back to
   * GET /apis/<group>/<version> on any other answer), else the legacy APIGroupList.
   */
  private discoveryRoot(req: IncomingMessage, res: ServerResponse): number {
    const wantsV2 = acceptList(req.headers.accept).some(
      ({ params }) =>
        params.get('g') === 'apidiscovery.k8s.io' &&
        params.get('v') === 'v2' &&
        params.get('as') === 'APIGroupDiscoveryList',
    );
    if (!wantsV2 || !this.opts.aggregatedDiscovery)
      return this.json(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [this.apiGroup()],
      });
    return this.json(
      res,
      200,
      {
        kind: 'APIGroupDiscoveryList',
        apiVersion: 'apidiscovery.k8s.io/v2',
        metadata: {},
        items: [
          {
            metadata: { name: this.opts.group },
            versions: [
              {
                version: this.opts.version,
                freshness: 'Current',
                resources: [
                  {
                    resource: this.opts.resource,
                    responseKind: {
                      group: this.opts.group,
                      version: this.opts.version,
                      kind: this.opts.kind,
                    },
                    scope: 'Namespaced',
                    singularResource: this.opts.kind.toLowerCase(),
                    verbs: this.resourceInfo.verbs,
                  },
                ],
              },
            ],
          },
        ],
      },
      'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    );
  }

  private accepted(req: IncomingMessage): { metadataOnly: boolean } {
    const a = negotiate(req.headers.accept);
    if (!a)
      throw new HttpError(
        406,
        'NotAcceptable',
        `only application/json (whole objects or PartialObjectMetadata) is served; asked for ${req.headers.accept ?? ''}`,
      );
    return a;
  }

  /** The filter a fieldSelector asks for; a 400 in 'refuse' mode or for a field it does not know. */
  private selector(url: URL): (o: StoredObject) => boolean {
    const raw = url.searchParams.get('fieldSelector');
    if (url.searchParams.get('labelSelector'))
      throw new HttpError(400, 'BadRequest', 'labelSelector is not supported by this server');
    if (!raw) return () => true;
    const terms = parseFieldSelector(raw);
    if (typeof terms === 'string') throw new HttpError(400, 'BadRequest', terms);
    if (this.fieldSelectors === 'refuse')
      throw new HttpError(
        400,
        'BadRequest',
        `field label not supported: ${terms[0]?.field ?? raw}`,
      );
    for (const t of terms)
      if (t.field !== 'metadata.name' && t.field !== 'metadata.namespace')
        throw new HttpError(400, 'BadRequest', `field label not supported: ${t.field}`);
    return (o) =>
      terms.every((t) => {
        const v = t.field === 'metadata.name' ? o.metadata.name : o.metadata.namespace;
        return t.op === '=' ? v === t.value : v !== t.value;
      });
  }

  private render(o: StoredObject, metadataOnly: boolean): object {
    return metadataOnly
      ? { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: clone(o.metadata) }
      : clone(o);
  }

  private reply(res: ServerResponse, code: number, o: StoredObject, metadataOnly: boolean): number {
    return this.json(
      res,
      code,
      this.render(o, metadataOnly),
      metadataOnly
        ? 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1'
        : 'application/json',
    );
  }

  private inScope(namespace: string | undefined, match: (o: StoredObject) => boolean) {
    return (o: StoredObject): boolean =>
      (namespace === undefined || o.metadata.namespace === namespace) && match(o);
  }

  /** Sorted by namespace/name, as etcd's keys; `continue` is the last key sent. */
  private list(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    namespace: string | undefined,
  ): number {
    const { metadataOnly } = this.accepted(req);
    const keep = this.inScope(namespace, this.selector(url));
    const limit = Number(url.searchParams.get('limit') ?? '0');
    const after = url.searchParams.get('continue') ?? '';
    const keys = [...this.objects.keys()].sort().filter((k) => k > after);
    const items: StoredObject[] = [];
    let lastKey = '';
    let cont: string | undefined;
    for (const k of keys) {
      const o = this.objects.get(k);
      if (!o || !keep(o)) continue;
      if (limit > 0 && items.length === limit) {
        cont = lastKey;
        break;
      }
      items.push(o);
      lastKey = k;
    }
    return this.json(
      res,
      200,
      {
        kind: metadataOnly ? 'PartialObjectMetadataList' : `${this.opts.kind}List`,
        apiVersion: metadataOnly ? 'meta.k8s.io/v1' : this.apiVersion,
        metadata: { resourceVersion: this.counter.toString(), ...(cont ? { continue: cont } : {}) },
        items: items.map((o) => this.render(o, metadataOnly)),
      },
      metadataOnly
        ? 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1'
        : 'application/json',
    );
  }

  private line(type: string, object: object): string {
    return `${JSON.stringify({ type, object })}\n`;
  }

  private watch(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    namespace: string | undefined,
  ): number {
    const { metadataOnly } = this.accepted(req);
    const match = this.inScope(namespace, this.selector(url));
    const q = url.searchParams;
    const rv = q.get('resourceVersion') ?? '';
    const sendInitialEvents = q.get('sendInitialEvents') === 'true';
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    if (sendInitialEvents && q.get('resourceVersionMatch') !== 'NotOlderThan')
      throw new HttpError(
        422,
        'Invalid',
        'resourceVersionMatch: Forbidden: sendInitialEvents requires resourceVersionMatch=NotOlderThan',
      );
    const w: Watcher = {
      res,
      namespace,
      match,
      metadataOnly,
      pending: [],
      cursor: this.log.length,
      endAfterPending: false,
    };
    // No content-length: Node sends it chunked, and kube-apiserver's proxy flushes each write.
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    if (rv === '' || rv === '0' || sendInitialEvents) {
      // The current state as ADDED events, then what happens next.
      for (const k of [...this.objects.keys()].sort()) {
        const o = this.objects.get(k);
        if (o && match(o)) w.pending.push(this.line('ADDED', this.render(o, metadataOnly)));
      }
      if (sendInitialEvents && bookmarks)
        w.pending.push(
          this.line('BOOKMARK', {
            kind: this.opts.kind,
            apiVersion: this.apiVersion,
            metadata: {
              resourceVersion: this.counter.toString(),
              annotations: { [INITIAL_EVENTS_END]: 'true' },
            },
          }),
        );
    } else {
      if (!/^\d+$/.test(rv)) {
        w.endAfterPending = true;
        w.pending.push(
          this.line('ERROR', {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'BadRequest',
            code: 400,
            message: `invalid resourceVersion ${JSON.stringify(rv)}`,
          }),
        );
      } else if (BigInt(rv) < this.opts.resourceVersionStart) {
        // Older than anything this server ever counted (an etcd revision, say): expired, as kube-apiserver says.
        w.endAfterPending = true;
        w.pending.push(
          this.line('ERROR', {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'Expired',
            code: 410,
            message: `too old resource version: ${rv} (${this.opts.resourceVersionStart})`,
          }),
        );
      } else {
        const from = BigInt(rv);
        w.cursor = this.log.findIndex((e) => e.rv > from);
        if (w.cursor === -1) w.cursor = this.log.length;
      }
    }
    this.watchers.add(w);
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => this.endWatch(w), timeout * 1000) : undefined;
    timer?.unref();
    res.on('close', () => {
      clearTimeout(timer);
      this.watchers.delete(w);
    });
    this.pump(w);
    return 200;
  }

  private endWatch(w: Watcher): void {
    this.watchers.delete(w);
    if (!w.res.writableEnded) w.res.end();
  }

  /** Writes what `w` is owed, unless watches are held. */
  private pump(w: Watcher): void {
    if (this.held || w.res.writableEnded) return;
    for (const l of w.pending.splice(0)) w.res.write(l);
    if (w.endAfterPending) {
      this.endWatch(w);
      return;
    }
    for (; w.cursor < this.log.length; w.cursor++) {
      const e = this.log[w.cursor];
      if (e && w.match(e.object))
        w.res.write(this.line(e.type, this.render(e.object, w.metadataOnly)));
    }
  }

  private emit(type: WatchEvent['type'], o: StoredObject): void {
    this.log.push({ type, object: clone(o), rv: BigInt(o.metadata.resourceVersion) });
    for (const w of this.watchers) this.pump(w);
  }

  private parse(body: string): Record<string, unknown> {
    if (body.trim() === '') return {};
    try {
      const v = JSON.parse(body) as unknown;
      if (typeof v === 'object' && v !== null && !Array.isArray(v))
        return v as Record<string, unknown>;
    } catch {
      /* below */
    }
    throw new HttpError(400, 'BadRequest', 'the request body is not a JSON object');
  }

  private get_(req: IncomingMessage, res: ServerResponse, namespace: string, name: string): number {
    const { metadataOnly } = this.accepted(req);
    const o = this.objects.get(`${namespace}/${name}`);
    if (!o) throw this.notFound(name);
    return this.reply(res, 200, o, metadataOnly);
  }

  private create_(
    req: IncomingMessage,
    res: ServerResponse,
    namespace: string,
    body: string,
  ): number {
    const { metadataOnly } = this.accepted(req);
    const input = this.parse(body) as Partial<StoredObject>;
    const meta = (input.metadata ?? {}) as Partial<StoredObject['metadata']>;
    const name = meta.name;
    if (typeof name !== 'string' || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name))
      throw new HttpError(422, 'Invalid', `metadata.name: Invalid value: ${JSON.stringify(name)}`);
    if (meta.namespace !== undefined && meta.namespace !== namespace)
      throw new HttpError(
        400,
        'BadRequest',
        'the namespace of the object does not match the request',
      );
    const key = `${namespace}/${name}`;
    if (this.objects.has(key))
      throw new HttpError(
        409,
        'AlreadyExists',
        `${this.opts.resource}.${this.opts.group} "${name}" already exists`,
        {
          name,
          group: this.opts.group,
          kind: this.opts.resource,
        },
      );
    for (const ref of meta.ownerReferences ?? [])
      if (!ref.apiVersion || !ref.kind || !ref.name || !ref.uid)
        throw new HttpError(
          422,
          'Invalid',
          'metadata.ownerReferences: apiVersion, kind, name and uid are required',
        );
    const o: StoredObject = {
      ...input,
      apiVersion: this.apiVersion,
      kind: this.opts.kind,
      metadata: {
        ...meta,
        name,
        namespace,
        uid: randomUUID(),
        resourceVersion: this.nextVersion(),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      },
    };
    delete o.metadata.deletionTimestamp;
    this.objects.set(key, o);
    this.emit('ADDED', o);
    return this.reply(res, 201, o, metadataOnly);
  }

  private remove(o: StoredObject): void {
    this.objects.delete(`${o.metadata.namespace}/${o.metadata.name}`);
    o.metadata.resourceVersion = this.nextVersion();
    this.emit('DELETED', o);
  }

  private delete_(
    req: IncomingMessage,
    res: ServerResponse,
    namespace: string,
    name: string,
    body: string,
  ): number {
    const { metadataOnly } = this.accepted(req);
    const o = this.objects.get(`${namespace}/${name}`);
    if (!o) throw this.notFound(name);
    const opts = this.parse(body) as {
      preconditions?: { uid?: string; resourceVersion?: string };
      propagationPolicy?: string;
    };
    const pre = opts.preconditions ?? {};
    if (pre.uid !== undefined && pre.uid !== o.metadata.uid)
      throw this.conflict(
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${o.metadata.uid}`,
      );
    if (pre.resourceVersion !== undefined && pre.resourceVersion !== o.metadata.resourceVersion)
      throw this.conflict(
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${o.metadata.resourceVersion}`,
      );
    const policy = opts.propagationPolicy ?? 'Background';
    if (!['Background', 'Foreground', 'Orphan'].includes(policy))
      throw new HttpError(
        422,
        'Invalid',
        `propagationPolicy: Unsupported value: ${JSON.stringify(policy)}`,
      );
    const finalizers = [...(o.metadata.finalizers ?? [])];
    const gcFinalizer =
      policy === 'Orphan' ? 'orphan' : policy === 'Foreground' ? 'foregroundDeletion' : undefined;
    if (gcFinalizer && !finalizers.includes(gcFinalizer)) finalizers.push(gcFinalizer);
    if (finalizers.length === 0) {
      this.remove(o);
      return this.reply(res, 200, o, metadataOnly);
    }
    // Held by finalizers: marked, and gone when the last one is removed.
    const changed =
      !o.metadata.deletionTimestamp || finalizers.length !== (o.metadata.finalizers ?? []).length;
    o.metadata.finalizers = finalizers;
    o.metadata.deletionTimestamp ??= new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    if (changed) {
      o.metadata.resourceVersion = this.nextVersion();
      this.emit('MODIFIED', o);
    }
    return this.reply(res, 202, o, metadataOnly);
  }

  private patch_(
    req: IncomingMessage,
    res: ServerResponse,
    namespace: string,
    name: string,
    body: string,
  ): number {
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
    if (contentType !== 'application/merge-patch+json')
      throw new HttpError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json`,
      );
    const { metadataOnly } = this.accepted(req);
    const o = this.objects.get(`${namespace}/${name}`);
    if (!o) throw this.notFound(name);
    const patch = this.parse(body);
    const pm = (patch.metadata ?? {}) as { uid?: unknown; resourceVersion?: unknown };
    // A patch that names a uid or a resourceVersion is applied only to that object, at that version.
    if (pm.uid !== undefined && pm.uid !== o.metadata.uid)
      throw this.conflict(
        name,
        `Precondition failed: UID in precondition: ${String(pm.uid)}, UID in object meta: ${o.metadata.uid}`,
      );
    if (pm.resourceVersion !== undefined && pm.resourceVersion !== o.metadata.resourceVersion)
      throw this.conflict(
        name,
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    const next = mergePatch(o, patch) as StoredObject;
    // What a patch cannot change.
    next.apiVersion = o.apiVersion;
    next.kind = o.kind;
    next.metadata = {
      ...next.metadata,
      name: o.metadata.name,
      namespace: o.metadata.namespace,
      uid: o.metadata.uid,
      creationTimestamp: o.metadata.creationTimestamp,
      resourceVersion: o.metadata.resourceVersion,
    };
    if (o.metadata.deletionTimestamp)
      next.metadata.deletionTimestamp = o.metadata.deletionTimestamp;
    else delete next.metadata.deletionTimestamp;
    // An empty list is stored as none, as kube-apiserver does.
    if (next.metadata.finalizers?.length === 0) delete next.metadata.finalizers;
    if (next.metadata.ownerReferences?.length === 0) delete next.metadata.ownerReferences;
    if (JSON.stringify(next) === JSON.stringify(o)) return this.reply(res, 200, o, metadataOnly);
    next.metadata.resourceVersion = this.nextVersion();
    this.objects.set(`${namespace}/${name}`, next);
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
      this.remove(next);
      return this.reply(res, 200, next, metadataOnly);
    }
    this.emit('MODIFIED', next);
    return this.reply(res, 200, next, metadataOnly);
  }
}
