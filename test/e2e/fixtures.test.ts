// The e2e fixtures' own promises, against the real API server, where a test
// that relies on them could not tell a broken fixture from a broken kubegc:
// a webhook refusal reaches the client with the status and the Status the
// webhook chose (a 404 naming the object is read as the object missing).
import * as k8s from '@kubernetes/client-node';
import {
  admissionWebhook,
  coreRule,
  notFound,
  refuse,
  type AdmissionRequest,
} from '../support/admission-webhook.ts';
import { statusOf } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';

const LABEL = 'e2e.kubegc.io/webhook-fixture';

const { c, namespace } = await e2e();
const webhook = await admissionWebhook(c.kc, {
  name: 'kubegc-e2e-webhook-fixture',
  rules: [coreRule(['UPDATE', 'DELETE'])],
  objectSelector: { matchLabels: { [LABEL]: 'true' } },
});

/** What the client got: the HTTP status and the Status in the body. */
async function failure(
  call: () => Promise<unknown>,
): Promise<{ code?: number; status?: k8s.V1Status }> {
  try {
    await call();
    return {};
  } catch (err) {
    const body = err instanceof k8s.ApiException ? String(err.body) : '';
    return { code: statusOf(err), status: body ? (JSON.parse(body) as k8s.V1Status) : undefined };
  }
}

test('a refusal reaches the client as the webhook answered it: 404 naming the object once, then 409, 429 and 500', async () => {
  const ns = await namespace('fixture-webhook');
  await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'x', labels: { [LABEL]: 'true' } } },
  });
  const patchX = (n: number): Promise<unknown> =>
    c.core.patchNamespacedConfigMap(
      { name: 'x', namespace: ns, body: { metadata: { annotations: { n: String(n) } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  const ofX = (r: AdmissionRequest): boolean =>
    r.operation === 'UPDATE' && r.namespace === ns && r.name === 'x' && !r.dryRun;

  const once = webhook.on(ofX, notFound, { times: 1 });
  const gone = await failure(() => patchX(1));
  expect(gone.code).toBe(404);
  expect(gone.status).toMatchObject({ reason: 'NotFound', details: { name: 'x' } });
  expect(once.matched).toBe(1);
  // Once: the next PATCH goes through.
  expect(await failure(() => patchX(2))).toEqual({});

  for (const [code, reason] of [
    [409, 'Conflict'],
    [429, 'TooManyRequests'],
    [500, 'InternalError'],
  ] as const) {
    webhook.on(ofX, refuse(code, reason, `refused by the test (${code})`), { times: 1 });
    const got = await failure(() => patchX(code));
    expect(got.code).toBe(code);
    expect(got.status).toMatchObject({ reason });
  }
  expect(webhook.requests.filter(ofX)).toHaveLength(5);
});
