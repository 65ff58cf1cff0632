// A validating admission webhook served by the test's own process (HTTPS on
// 127.0.0.1, a self-signed certificate in the configuration's caBundle), so
// that a test decides what the API server answers a chosen request: let it
// through, refuse it with any status (404 with a Status naming the object,
// 409, 429, 500...), or hold it (and with it whatever the request occupies,
// an APF seat, a write in flight) until released. The API server answers the
// client with the Status of a refusal, its code as the HTTP status.
//
//   const w = await admissionWebhook(c.kc, { name, rules: [{ operations: ['UPDATE'], … }] });
//   w.on((r) => r.userInfo.username === KUBEGC_USER && r.name === 'owner', notFound, { times: 1 });
//
// A request no rule takes is allowed. Rules see dry runs too (`!r.dryRun` leaves
// them out, as a probe that the configuration is live wants).
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { waitFor } from './cluster.ts';
import { afterFile } from './e2e.ts';
import { selfSignedCert } from './tls.ts';

/** The AdmissionReview request (admission.k8s.io/v1), the fields a rule picks requests by. */
export interface AdmissionRequest {
  uid: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  resource: { group: string; version: string; resource: string };
  subResource?: string;
  /** Empty for a CREATE whose name the server generates. */
  name?: string;
  namespace?: string;
  userInfo: { username?: string; groups?: string[] };
  dryRun?: boolean;
  object?: unknown;
  oldObject?: unknown;
}

/** The webhook rule for these operations on a namespaced core (v1) resource, ConfigMaps by default. */
export function coreRule(
  operations: AdmissionRequest['operation'][],
  resource = 'configmaps',
): k8s.V1RuleWithOperations {
  return {
    operations,
    apiGroups: [''],
    apiVersions: ['v1'],
    resources: [resource],
    scope: 'Namespaced',
  };
}

/** The Status a refusal carries back to the client. */
export interface Refusal {
  /** The HTTP status the client gets. */
  code: number;
  reason?: string;
  message?: string;
  details?: { name?: string; group?: string; kind?: string };
}

/** What the webhook answers a request. */
export type Verdict =
  | { allow: true }
  | { refuse: Refusal }
  /** Held until `ms` pass or release() is called, then answered `then`. */
  | { hold: { ms: number; then: Verdict } };

export const allow: Verdict = { allow: true };

export function refuse(code: number, reason?: string, message?: string): Verdict {
  return { refuse: { code, reason, message } };
}

/** 404 with a Status naming the object, as the API server's own NotFound reads. */
export function notFound(r: AdmissionRequest): Verdict {
  const gr = r.resource.group ? `${r.resource.resource}.${r.resource.group}` : r.resource.resource;
  return {
    refuse: {
      code: 404,
      reason: 'NotFound',
      message: `${gr} "${r.name ?? ''}" not found`,
      details: { name: r.name, group: r.resource.group, kind: r.resource.resource },
    },
  };
}

export function hold(ms: number, then: Verdict = allow): Verdict {
  return { hold: { ms, then } };
}

export interface Rule {
  /** How many requests this rule has answered. */
  readonly matched: number;
  /** Takes the rule away: later requests go to the next rule that takes them. */
  remove(): void;
}

export interface WebhookConfig {
  /** The ValidatingWebhookConfiguration's name. */
  name: string;
  /** The webhook's name in it (a fully qualified name); default `<name>.e2e.kubegc.io`. */
  webhook?: string;
  rules: k8s.V1RuleWithOperations[];
  namespaceSelector?: k8s.V1LabelSelector;
  objectSelector?: k8s.V1LabelSelector;
  /** Default 'Fail': a held request the API server gives up on fails (it never takes effect). */
  failurePolicy?: 'Fail' | 'Ignore';
  /** Default 30 (the most the API server allows). */
  timeoutSeconds?: number;
}

export interface AdmissionWebhook {
  /**
   * Answers the requests `when` picks with `verdict` (`times` of them at most,
   * default every one). Rules are tried in the order they were added.
   */
  on(
    when: (r: AdmissionRequest) => boolean,
    verdict: Verdict | ((r: AdmissionRequest) => Verdict),
    opts?: { times?: number },
  ): Rule;
  /** Every request received, dry runs included, in order. */
  readonly requests: readonly AdmissionRequest[];
  /** Requests held now. */
  held(): number;
  /** Held requests the API server gave up on (its call to the webhook was cancelled). */
  abandoned(): number;
  /** Answers every held request now (as its rule said: allowed unless `then` says otherwise). */
  release(): void;
  /** Waits until a call of `probe` (a dry run, say) reaches the webhook: the configuration is live. */
  untilCalled(what: string, probe: () => Promise<unknown>): Promise<void>;
  /** Removes every rule. */
  clear(): void;
  /** Releases what is held, deletes the configuration, stops the server. */
  close(): Promise<void>;
}

interface Review {
  request: AdmissionRequest;
}

class WebhookRule implements Rule {
  matched = 0;
  private left: number;
  private readonly when: (r: AdmissionRequest) => boolean;
  private readonly verdict: Verdict | ((r: AdmissionRequest) => Verdict);
  private readonly rules: WebhookRule[];

  constructor(
    rules: WebhookRule[],
    when: (r: AdmissionRequest) => boolean,
    verdict: Verdict | ((r: AdmissionRequest) => Verdict),
    times: number,
  ) {
    this.rules = rules;
    this.when = when;
    this.verdict = verdict;
    this.left = times;
  }

  /** The verdict on `r` if this rule takes it (and counts it), else undefined. */
  take(r: AdmissionRequest): Verdict | undefined {
    if (this.left <= 0 || !this.when(r)) return undefined;
    this.left--;
    this.matched++;
    return typeof this.verdict === 'function' ? this.verdict(r) : this.verdict;
  }

  remove(): void {
    const i = this.rules.indexOf(this);
    if (i >= 0) this.rules.splice(i, 1);
  }
}

/** Starts a webhook and registers it with the API server; the caller closes it. */
export async function startAdmissionWebhook(
  kc: k8s.KubeConfig,
  config: WebhookConfig,
): Promise<AdmissionWebhook> {
  const tls = selfSignedCert(['127.0.0.1']);
  const rules: WebhookRule[] = [];
  const requests: AdmissionRequest[] = [];
  /** Held requests: each answers when called (at its hold's end, or at release()). */
  const held = new Set<() => void>();
  let abandoned = 0;

  const verdictFor = (r: AdmissionRequest): Verdict => {
    for (const rule of rules) {
      const v = rule.take(r);
      if (v) return v;
    }
    return allow;
  };

  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const review = JSON.parse(body) as Review;
      requests.push(review.request);
      const respond = (v: Verdict): void => {
        if (res.writableEnded || res.destroyed) return;
        const response =
          'refuse' in v
            ? {
                uid: review.request.uid,
                allowed: false,
                status: { metadata: {}, status: 'Failure', ...v.refuse },
              }
            : { uid: review.request.uid, allowed: true };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }),
        );
      };
      const v = verdictFor(review.request);
      if (!('hold' in v)) return respond(v);
      const answer = (): void => {
        held.delete(answer);
        clearTimeout(timer);
        respond(v.hold.then);
      };
      const timer = setTimeout(answer, v.hold.ms);
      held.add(answer);
      res.on('close', () => {
        if (res.writableEnded) return;
        abandoned++;
        held.delete(answer);
        clearTimeout(timer);
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const release = (): void => {
    for (const answer of [...held]) answer();
  };
  const stopServer = async (): Promise<void> => {
    release();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };

  const admission = kc.makeApiClient(k8s.AdmissionregistrationV1Api);
  try {
    await admission.createValidatingWebhookConfiguration({
      body: {
        metadata: { name: config.name },
        webhooks: [
          {
            name: config.webhook ?? `${config.name}.e2e.kubegc.io`,
            clientConfig: {
              url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/validate`,
              caBundle: tls.cert.toString('base64'),
            },
            rules: config.rules,
            namespaceSelector: config.namespaceSelector,
            objectSelector: config.objectSelector,
            failurePolicy: config.failurePolicy ?? 'Fail',
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            timeoutSeconds: config.timeoutSeconds ?? 30,
          },
        ],
      },
    });
  } catch (err) {
    await stopServer();
    throw err;
  }

  let closed: Promise<void> | undefined;
  return {
    on(when, verdict, opts = {}) {
      const rule = new WebhookRule(rules, when, verdict, opts.times ?? Infinity);
      rules.push(rule);
      return rule;
    },
    requests,
    held: () => held.size,
    abandoned: () => abandoned,
    release,
    async untilCalled(what, probe) {
      await waitFor(what, async () => {
        const before = requests.length;
        await probe();
        return requests.length > before;
      });
    },
    clear: () => void rules.splice(0),
    close: () =>
      (closed ??= (async () => {
        release();
        await admission
          .deleteValidatingWebhookConfiguration({ name: config.name })
          .catch(() => undefined);
        await stopServer();
      })()),
  };
}

/** A webhook for the whole test file: its rules cleared after each test, closed after the file. */
export async function admissionWebhook(
  kc: k8s.KubeConfig,
  config: WebhookConfig,
): Promise<AdmissionWebhook> {
  const w = await startAdmissionWebhook(kc, config);
  afterEach(() => w.clear());
  afterFile(() => w.close());
  return w;
}
