// An admission webhook that refuses some of the GC's writes (issue 32, item 6):
// a ValidatingWebhookConfiguration on a local HTTPS server (127.0.0.1), matched
// only for the GC users (matchConditions on the username) and for the
// workload's objects (its label), answering a seeded fraction of their UPDATEs
// (patches) and DELETEs with 404 (a Status naming the object, as if it were
// gone), 409, 429 or 500. failurePolicy Ignore: a dead or slow webhook blocks
// nothing. Nobody else's requests reach it, so the workload and the
// controllers are unaffected. A GC must take none of these answers at its
// word: a 404 is "gone" only once a live read agrees.
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { selfSignedCert } from '../../test/support/tls.ts';
import type { Kube } from './kube.ts';
import type { Prng } from './prng.ts';
import { CRD_GROUP, RBAC_GROUP, SOAK_LABEL } from './resources.ts';

export const WEBHOOK_NAME = 'soak-gc-writes.soak.kubegc.io';
const CONFIG_PATH = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';

export const DENIAL_CODES = [404, 409, 429, 500] as const;
export type DenialCode = (typeof DENIAL_CODES)[number];

interface AdmissionRequest {
  uid: string;
  operation: string;
  name?: string;
  namespace?: string;
  dryRun?: boolean;
  resource: { group: string; resource: string };
  kind: { kind: string };
  userInfo: { username: string };
}

/** The Status a denial carries (kube-apiserver hands it to the client as is, its message prefixed). */
export function denialStatus(code: DenialCode, req: AdmissionRequest): Record<string, unknown> {
  const what = `${req.resource.resource}${req.resource.group ? `.${req.resource.group}` : ''} "${req.name ?? ''}"`;
  const details = { name: req.name, group: req.resource.group, kind: req.resource.resource };
  switch (code) {
    case 404:
      // Exactly what a real NotFound for the object says.
      return { code, reason: 'NotFound', message: `${what} not found`, details };
    case 409:
      return {
        code,
        reason: 'Conflict',
        message: `Operation cannot be fulfilled on ${what}: the soak's webhook says so`,
        details,
      };
    case 429:
      return {
        code,
        reason: 'TooManyRequests',
        message: 'the soak webhook: too many requests, try again later',
        details: { ...details, retryAfterSeconds: 1 },
      };
    case 500:
      return { code, reason: 'InternalError', message: 'the soak webhook: internal error' };
  }
}

/** Whether to refuse, and with what: the seeded choice for one request. */
export function decide(p: Prng, fraction: number): DenialCode | undefined {
  if (!p.chance(fraction)) return undefined;
  return p.pick(DENIAL_CODES);
}

export class DenyingWebhook {
  /** "webhook: <operation> <code>" → count (allowed ones as "allowed"). */
  readonly counts = new Map<string, number>();
  private server: https.Server | undefined;
  private readonly p: Prng;
  private readonly fraction: number;
  private readonly users: readonly string[];

  constructor(p: Prng, users: readonly string[], fraction = 0.1) {
    this.p = p;
    this.users = users;
    this.fraction = fraction;
  }

  private count(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      let review: { request: AdmissionRequest };
      try {
        review = JSON.parse(body) as { request: AdmissionRequest };
      } catch {
        res.writeHead(400).end();
        return;
      }
      const r = review.request;
      // matchConditions already narrowed it to the GC users; a dry run changes nothing.
      const code =
        r.dryRun || !this.users.includes(r.userInfo.username)
          ? undefined
          : decide(this.p, this.fraction);
      this.count(`webhook: ${r.operation} ${code ?? 'allowed'}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: {
            uid: r.uid,
            allowed: code === undefined,
            ...(code === undefined ? {} : { status: denialStatus(code, r) }),
          },
        }),
      );
    });
  }

  /** Starts the server on 127.0.0.1 and registers it with the API server. */
  async start(admin: Kube): Promise<void> {
    const tls = selfSignedCert(['127.0.0.1']);
    const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) =>
      this.handle(req, res),
    );
    this.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const rule = (apiGroups: string[], resources: string[]) => ({
      operations: ['UPDATE', 'DELETE'],
      apiGroups,
      apiVersions: ['*'],
      resources,
      scope: '*',
    });
    const res = await admin.raw('POST', CONFIG_PATH, {
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: WEBHOOK_NAME },
        webhooks: [
          {
            name: WEBHOOK_NAME,
            clientConfig: {
              url: `https://127.0.0.1:${port}/validate`,
              caBundle: tls.cert.toString('base64'),
            },
            rules: [
              rule([''], ['configmaps', 'secrets', 'pods']),
              rule(['apps'], ['replicasets']),
              rule([CRD_GROUP], ['widgets', 'gadgets']),
              rule([RBAC_GROUP], ['roles', 'clusterroles']),
            ],
            // The workload's objects only (for a DELETE, the old object's labels).
            objectSelector: { matchLabels: { [SOAK_LABEL]: 'true' } },
            matchConditions: [
              {
                name: 'gc-users',
                expression: `request.userInfo.username in [${this.users.map((u) => `'${u}'`).join(', ')}]`,
              },
            ],
            failurePolicy: 'Ignore',
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            timeoutSeconds: 5,
          },
        ],
      },
    });
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`ValidatingWebhookConfiguration: ${res.status} ${res.text}`);
  }

  /** Unregisters it (best effort: the control plane goes with the run) and stops the server. */
  async stop(admin: Kube): Promise<void> {
    await admin.raw('DELETE', `${CONFIG_PATH}/${WEBHOOK_NAME}`).catch(() => undefined);
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}
