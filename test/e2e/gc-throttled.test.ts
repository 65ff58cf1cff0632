// A DELETE the API server answers 429 (API Priority and Fairness rejecting
// kubegc's user) is not re-sent after Retry-After on the decision it was made
// on: the object goes back to the queue and is decided again. Found by the
// soak (squeeze-429): an owner switched from Foreground to Orphan during the
// wait lost its dependent. This test failed on the code before the fix.
//
// The 429s are the API server's own: a FlowSchema puts the ConfigMap DELETEs
// of kubegc's service account (and of the test's own user) in a priority level
// with one seat and no queue, and the test holds that seat with a DELETE of its
// own user's that a validating webhook (in this process) keeps waiting. The
// seat holder is a user of its own: kubegc's token may not delete an object
// without owner references (deploy/components/guardrails).
import * as k8s from '@kubernetes/client-node';
import { grantClusterAdmin, userKubeconfig } from '../../cluster/controlplane.ts';
import type { InterceptedRequest } from '../../src/api/request.ts';
import { admissionWebhook, coreRule, hold } from '../support/admission-webhook.ts';
import { liftSqueeze, squeeze, squeezeInEffect } from '../support/apf.ts';
import { statusOf, waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { e2eLogger, heldChain, inProcessGc } from '../support/in-process-gc.ts';
import { configMap, isGone, ownerRef, read, releaseConfigMap } from '../support/objects.ts';
import { KUBEGC_SERVICE_ACCOUNT } from '../support/service-account.ts';

const USER = 'kubegc-e2e-throttled';
const SQUEEZE = 'kubegc-e2e-reject-deletes';
const HOLD_LABEL = 'e2e.kubegc.io/hold-seat';

const { cluster, c, namespace } = await e2e();
await grantClusterAdmin(cluster, USER);
const userKc = new k8s.KubeConfig();
userKc.loadFromFile(await userKubeconfig(cluster, USER));
/** USER's own API client (the seat holder's DELETE). */
const asUser = userKc.makeApiClient(k8s.CoreV1Api);
/** kubegc's DELETEs of ConfigMaps answered 429, by path. */
const rejected: string[] = [];
/** kubegc's PATCHes answered 429. */
let patchesRejected = 0;
const g = await inProcessGc(cluster, {
  userAgent: 'kubegc-e2e-throttled',
  log: e2eLogger('error'),
  client: {
    onRequest: (verb, status) => {
      if (verb === 'DELETE' && status === 429) rejected.push(verb);
      if (verb === 'PATCH' && status === 429) patchesRejected++;
    },
  },
});
/** Holds the seat holder's DELETE (the webhook sees only objects labelled HOLD_LABEL). */
const webhook = await admissionWebhook(c.kc, {
  name: SQUEEZE,
  webhook: 'hold-seat.e2e.kubegc.io',
  rules: [coreRule(['DELETE'])],
  objectSelector: { matchLabels: { [HOLD_LABEL]: 'true' } },
});
afterFile(() => allowDeletes());

/** Every DELETE (and any other of `verbs`) of a ConfigMap by USER or kubegc is rejected (no seats: nominal shares 0, nothing to borrow). */
function rejectDeletes(verbs: string[] = ['delete']): Promise<void> {
  return squeeze(c.kc, {
    name: SQUEEZE,
    nominalConcurrencyShares: 0,
    subjects: [
      { kind: 'User', user: { name: USER } },
      { kind: 'ServiceAccount', serviceAccount: KUBEGC_SERVICE_ACCOUNT },
    ],
    resourceRules: [{ verbs, apiGroups: [''], resources: ['configmaps'], namespaces: ['*'] }],
  });
}

function allowDeletes(): Promise<void> {
  return liftSqueeze(c.kc, SQUEEZE);
}

test('a DELETE answered 429, its owner switched to Orphan before a retry: the dependent is orphaned, not deleted', async () => {
  /** DELETEs of ConfigMap `d` kubegc put on the wire (retries included). */
  let deletesOfD = 0;
  /** While set, kubegc's PATCHes of `d` wait until a DELETE of it goes out after this count (5 s at most). */
  let holdPatchesOfDAfter: number | undefined;
  g.intercept = async (r) => {
    if (!r.path.endsWith('/configmaps/d')) return;
    if (r.method === 'DELETE') deletesOfD++;
    const after = holdPatchesOfDAfter;
    if (r.method === 'PATCH' && after !== undefined)
      await waitFor('another DELETE of D', () => Promise.resolve(deletesOfD > after), {
        timeoutMs: 5_000,
        intervalMs: 50,
      }).catch(() => undefined);
  };
  const ns = await namespace('throttled');
  const o = await configMap(c, ns, 'o');
  const d = await configMap(c, ns, 'd', [ownerRef(o, { blockOwnerDeletion: true })]);
  await g.observed(o, d);
  // The seat holder: a ConfigMap whose DELETE by USER the webhook keeps waiting.
  await holdSeat(ns);
  await rejectDeletes();
  let held: Promise<unknown> | undefined;
  try {
    ({ held } = await takeSeat(ns));
    await waitFor("USER's other DELETEs to be rejected", async () => {
      try {
        await asUser.deleteNamespacedConfigMap({ name: 'absent', namespace: ns });
        return false;
      } catch (err) {
        return statusOf(err) === 429;
      }
    });
    rejected.length = 0;
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Foreground' },
    });
    // kubegc decided to delete D (its owner waits for it) and was refused.
    await waitFor('a DELETE of D answered 429', () => Promise.resolve(rejected.length > 0));
    // The switch to Orphan. kubegc's orphaning PATCH of D is held until
    // another DELETE of D goes out (5 s at most), as the squeeze held it in
    // the soak: a DELETE re-sent on the old decision would find D unchanged.
    holdPatchesOfDAfter = deletesOfD;
    await c.core.deleteNamespacedConfigMap({
      name: 'o',
      namespace: ns,
      body: { propagationPolicy: 'Orphan' },
    });
    const now = await read(c, o);
    expect(now?.metadata?.finalizers).toContain('orphan');
  } finally {
    await allowDeletes();
    webhook.release();
    await held?.catch(() => undefined);
  }
  await waitFor('O to be gone', () => isGone(c, o), { timeoutMs: 60_000 });
  await waitFor('D to be orphaned or deleted', async () => {
    const dep = await read(c, d);
    return dep === undefined || !(dep.metadata?.ownerReferences ?? []).some((r) => r.uid === o.uid);
  });
  holdPatchesOfDAfter = undefined;
  const dep = await read(c, d);
  expect(dep).toBeDefined();
  expect(dep?.metadata?.deletionTimestamp).toBeUndefined();
});

/**
 * Once the squeeze's FlowSchema has taken effect (the API server reports it
 * not dangling), USER's DELETE of the seat holder, which the webhook keeps
 * waiting: it holds the priority level's one seat. Returns the DELETE (wrapped: awaiting it would wait for the webhook).
 */
async function takeSeat(ns: string): Promise<{ held: Promise<unknown> }> {
  await squeezeInEffect(c.kc, SQUEEZE);
  // Held for 25 s at most (the webhook's timeout is 30 s), then allowed.
  webhook.on((r) => !r.dryRun, hold(25_000));
  const held = asUser.deleteNamespacedConfigMap({ name: 'seat', namespace: ns });
  held.catch(() => undefined);
  await waitFor('the seat holder to reach the webhook', () => Promise.resolve(webhook.held() > 0));
  return { held };
}

/** The seat holder's ConfigMap, and the webhook seen called for its DELETE. */
async function holdSeat(ns: string): Promise<void> {
  await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'seat', labels: { [HOLD_LABEL]: 'true' } } },
  });
  await webhook.untilCalled('the webhook to be called (a dry-run DELETE)', () =>
    c.core.deleteNamespacedConfigMap({ name: 'seat', namespace: ns, dryRun: 'All' }),
  );
}

// Issue 19, item 4: the cycle breaker's unblock PATCH was re-sent by the
// client after Retry-After, on the decision made before the wait, and the
// Foreground DELETE followed at once. This test failed on the code before the fix.
test("the cycle breaker's unblock PATCH answered 429, the owner switched to Orphan during the wait: X is orphaned, not deleted", async () => {
  const ns = await namespace('throttled-unblock');
  // A -> X -> Y -> Z, every reference blocking; Y in foreground deletion, held there by Z.
  const { a, x } = await heldChain(c, g, ns);
  await holdSeat(ns);
  await rejectDeletes(['delete', 'patch']);
  let held: Promise<unknown> | undefined;
  const unblockOfX = (r: InterceptedRequest): boolean =>
    r.method === 'PATCH' &&
    r.path.endsWith(`/namespaces/${ns}/configmaps/x`) &&
    JSON.stringify(r.body).includes('"blockOwnerDeletion":false');
  /** Set once A is switched to Orphan; resolved once the squeeze is lifted. */
  let lifted: Promise<void> | undefined;
  let unblocks = 0;
  let deletesOfX = 0;
  const lift = async (): Promise<void> => {
    await waitFor('the unblock PATCH to be answered 429', () =>
      Promise.resolve(patchesRejected > 0),
    );
    await allowDeletes();
    webhook.release();
    await held?.catch(() => undefined);
    // The API server lets kubegc's PATCHes through again.
    await waitFor("USER's PATCHes to be let through", async () => {
      try {
        await asUser.patchNamespacedConfigMap(
          { name: 'a', namespace: ns, body: { metadata: { labels: { seen: 'yes' } } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
        return true;
      } catch (err) {
        if (statusOf(err) === 429) return false;
        // A is gone already (orphaned and deleted): PATCHes are answered again.
        return statusOf(err) === 404;
      }
    });
  };
  g.intercept = async (r) => {
    const aboutX = r.path.endsWith(`/namespaces/${ns}/configmaps/x`);
    if (r.method === 'DELETE' && aboutX) deletesOfX++;
    if (unblockOfX(r) && unblocks++ === 0) {
      // The decision to unblock and delete X is made (A waits for it); before
      // its PATCH leaves, A is switched to Orphan. The PATCH is then refused (429).
      await c.core.deleteNamespacedConfigMap({
        name: 'a',
        namespace: ns,
        body: { propagationPolicy: 'Orphan' },
      });
      lifted = lift();
      return;
    }
    // Anything else kubegc sends after that waits until the squeeze is lifted,
    // and the orphaning PATCH of X until a DELETE of X went out (5 s at most), so a
    // PATCH re-sent on the old decision finds X unchanged.
    if (lifted && aboutX) {
      await lifted;
      if (r.method === 'PATCH' && !unblockOfX(r))
        await waitFor('a DELETE of X', () => Promise.resolve(deletesOfX > 0), {
          timeoutMs: 5_000,
          intervalMs: 50,
        }).catch(() => undefined);
    }
  };
  try {
    ({ held } = await takeSeat(ns));
    await waitFor("USER's PATCHes to be rejected", async () => {
      try {
        await asUser.patchNamespacedConfigMap(
          { name: 'a', namespace: ns, body: { metadata: { labels: { probe: 'yes' } } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
        return false;
      } catch (err) {
        return statusOf(err) === 429;
      }
    });
    patchesRejected = 0;
    await c.core.deleteNamespacedConfigMap({
      name: 'a',
      namespace: ns,
      body: { propagationPolicy: 'Foreground' },
    });
    await waitFor('kubegc to try to unblock X', () => Promise.resolve(unblocks > 0), {
      timeoutMs: 30_000,
    });
    await lifted;
    await waitFor('A to be gone', () => isGone(c, a), { timeoutMs: 60_000 });
    await waitFor('X to be orphaned or deleted', async () => {
      const now = await read(c, x);
      return (
        now === undefined ||
        now.metadata?.deletionTimestamp !== undefined ||
        !(now.metadata?.ownerReferences ?? []).some((o) => o.uid === a.uid)
      );
    });
    const now = await read(c, x);
    expect(now).toBeDefined();
    expect(now?.metadata?.deletionTimestamp).toBeUndefined();
    expect(deletesOfX).toBe(0);
  } finally {
    g.intercept = undefined;
    await allowDeletes();
    webhook.release();
    await held?.catch(() => undefined);
    await releaseConfigMap(c, ns, 'z');
  }
});
