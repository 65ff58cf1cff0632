// Writes bounded by lease time, judged by the API server's audit log (not by
// anything kubegc says about itself): two replicas with leader election on
// short durations and a client rate limit low enough that writes always wait
// in the token bucket. The leader is frozen (SIGSTOP) for longer than its
// lease, the standby takes over, the old leader resumes (SIGCONT) with its
// queued writes; then the new leader is stopped with SIGTERM mid-cascade.
// Every write of each replica must have been received inside one of its own
// tenures of the Lease, and the SIGTERM'd replica's release must come after
// its last write.
//
// And (issue 19, item 5) a write is bounded by when it takes effect, not when
// it is sent: two replicas in this process, an admission webhook (here too)
// holding kubegc's DELETEs, and the leader's renewals failing while one of
// its DELETEs is held. No write of the old leader may take effect (by the
// audit log's ResponseComplete) after the new leader's first write.
import { randomUUID } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { controllerArgs } from '../../cluster/kubegc-command.ts';
import { auditTimeMs, readAuditLog, WRITE_VERBS, type AuditEvent } from '../../soak/lib/audit.ts';
import {
  kubegcIdentityFromUserAgent,
  leaseTenures,
  tookEffectAt,
  writesOutsideTenure,
} from '../../soak/lib/tenure.ts';
import { KubeClient } from '../../src/api/client.ts';
import { LeaderElector } from '../../src/leader/lease.ts';
import { coreRule, hold, startAdmissionWebhook } from '../support/admission-webhook.ts';
import { kubegcKubeConfig, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { e2eLogger, startInProcessGc } from '../support/in-process-gc.ts';
import { runKubegc, type KubegcProcess, type LogLine } from '../support/kubegc.ts';
import { configMap, configMapNames, isGone, ownerRef, times } from '../support/objects.ts';
import { KUBEGC_SERVICE_ACCOUNT, serviceAccountKubeconfig } from '../support/service-account.ts';

const { cluster, c, namespace } = await e2e();

const DEPENDENTS = 300;

function exited(p: KubegcProcess): boolean {
  return p.child.exitCode !== null || p.child.signalCode !== null;
}

async function waitForExit(p: KubegcProcess, what: string): Promise<number | null> {
  await waitFor(what, async () => exited(p), { timeoutMs: 60_000, intervalMs: 100 });
  return (await p.exited).code;
}

function identityOf(p: KubegcProcess): string {
  const l = p.lines.find((x) => x.msg === 'kubegc controller starting');
  if (typeof l?.identity !== 'string') throw new Error('kubegc did not log its identity');
  return l.identity;
}

/** The audit event of replica `identity` releasing `lease` (an update that empties its holder). */
const releaseOf =
  (lease: { namespace: string; name: string }, identity: string) =>
  (e: AuditEvent): boolean =>
    e.verb === 'update' &&
    e.objectRef?.resource === 'leases' &&
    e.objectRef.namespace === lease.namespace &&
    e.objectRef.name === lease.name &&
    kubegcIdentityFromUserAgent(e.userAgent) === identity &&
    (e.requestObject as { spec?: { holderIdentity?: string } } | undefined)?.spec
      ?.holderIdentity === '';

/** The whole audit log, once it holds an event `last` picks (30 s at most). */
function auditLogWith(
  what: string,
  auditLog: string,
  last: (e: AuditEvent) => boolean,
): Promise<AuditEvent[]> {
  return waitFor(
    `${what} in the audit log`,
    async () => {
      const all = await readAuditLog(auditLog);
      return all.some(last) ? all : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

/** The kubegc identity of an audit event's User-Agent, if it is one of `ids`. */
const identityIn =
  (...ids: string[]) =>
  (e: AuditEvent): string | undefined => {
    const id = kubegcIdentityFromUserAgent(e.userAgent);
    return id !== undefined && ids.includes(id) ? id : undefined;
  };

const deletedIn =
  (ns: string) =>
  (l: LogLine): boolean =>
    l.msg === 'deleted' && l.namespace === ns;

test('a leader frozen past its lease writes nothing after it resumes, and SIGTERM releases the Lease only after the last write', async () => {
  const auditLog = cluster.auditLog;
  if (!auditLog) throw new Error('the e2e cluster runs without its audit log');
  const ns = await namespace('leader-tenure');
  // Where the shipped Role lets kubegc's service account keep a Lease; a name of this test's own.
  const lease = { namespace: KUBEGC_SERVICE_ACCOUNT.namespace, name: ns };
  const flags = controllerArgs(await serviceAccountKubeconfig(cluster), [
    '--leader-elect',
    '--leader-elect-resource-namespace',
    lease.namespace,
    '--leader-elect-resource-name',
    lease.name,
    '--leader-elect-lease-duration',
    '4s',
    '--leader-elect-renew-deadline',
    '3s',
    '--leader-elect-retry-period',
    '500ms',
    // 10 writes/s for 20 workers: a backlog of writes always waits in the token bucket.
    '--kube-api-qps',
    '10',
    '--kube-api-burst',
    '1',
    // 'write refused: not leading' is a debug line.
    '--log-level',
    'debug',
  ]);
  const a = runKubegc(flags);
  let b: KubegcProcess | undefined;
  try {
    await a.waitForLog('replica A to lead', (l) => l.msg === 'became leader');
    b = runKubegc(flags);
    const standby = b;
    await standby.waitForLog(
      'replica B to campaign',
      (l) => l.msg === 'waiting to acquire the leader lease',
    );
    const [idA, idB] = [identityOf(a), identityOf(standby)];
    expect(idA).not.toBe(idB);

    const owner = await configMap(c, ns, 'owner');
    await times(DEPENDENTS, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]), 40);
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    await a.waitForLines(
      'replica A to delete 20 dependents',
      (ls) => ls.filter(deletedIn(ns)).length >= 20,
      30_000,
    );

    // Freeze A with its writes queued in the token bucket, for longer than the lease.
    a.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    const took = await standby.waitForLog(
      'replica B to take over',
      (l) => l.msg === 'became leader',
      30_000,
    );
    await standby.waitForLog('replica B to delete', deletedIn(ns), 30_000);
    const takeoverMs = Date.parse(String(took.ts)) - frozenAt;
    const resumedAfterMs = Date.now() - frozenAt;
    a.child.kill('SIGCONT');
    await a.waitForLog(
      'replica A to notice it lost the lease',
      (l) => l.msg.startsWith('lost the leader lease'),
      30_000,
    );
    expect(await waitForExit(a, 'replica A to exit')).toBe(1);
    // A did have writes queued when it resumed, and its guard refused them.
    const refused = a.lines.filter((l) => l.msg === 'write refused: not leading').length;

    // B, mid-cascade (a backlog in its token bucket), is stopped with SIGTERM.
    const bBefore = standby.lines.filter(deletedIn(ns)).length;
    await standby.waitForLines(
      'replica B to delete 10 more',
      (ls) => ls.filter(deletedIn(ns)).length >= bBefore + 10,
      30_000,
    );
    const left = (await configMapNames(c, ns)).length;
    expect(left).toBeGreaterThan(20);
    standby.child.kill('SIGTERM');
    expect(await waitForExit(standby, 'replica B to exit after SIGTERM')).toBe(0);
    expect(standby.lines.some((l) => l.msg === 'released the leader lease')).toBe(true);

    const isRelease = releaseOf(lease, idB);
    const events = await auditLogWith("B's release", auditLog, isRelease);
    const ours = identityIn(idA, idB);
    const tenures = leaseTenures(events, lease);
    expect(tenures.map((t) => t.identity)).toEqual([idA, idB]);
    const gcWrites = (id: string): AuditEvent[] =>
      events.filter(
        (e) => WRITE_VERBS.has(e.verb) && ours(e) === id && e.objectRef?.resource === 'configmaps',
      );
    const writesA = gcWrites(idA);
    const writesB = gcWrites(idB);
    process.stderr.write(
      `\nleader-tenure: B took over ${takeoverMs} ms after A was frozen (A resumed after ${resumedAfterMs} ms); ` +
        `writes A ${writesA.length}, B ${writesB.length}; A refused ${refused} queued writes on resuming; ` +
        `tenures ${tenures.map((t) => `${t.identity.slice(-8)} ${((t.to - t.from) / 1000).toFixed(1)}s`).join(', ')}\n`,
    );
    // Both replicas wrote, so the check below can fail...
    expect(writesA.length).toBeGreaterThan(0);
    expect(writesB.length).toBeGreaterThan(0);
    // ...and neither wrote outside its own tenure.
    expect(writesOutsideTenure(events, tenures, ours, lease).map((v) => v.reason)).toEqual([]);
    // SIGTERM: B's writes all completed before its release reached the server.
    const release = events.find(isRelease);
    const lastWriteB = Math.max(...writesB.map((e) => auditTimeMs(e.stageTimestamp)));
    expect(auditTimeMs(release?.requestReceivedTimestamp ?? '')).toBeGreaterThan(lastWriteB);
    expect(refused).toBeGreaterThan(0);
  } finally {
    // SIGKILL ends a stopped process too.
    await a.kill();
    await b?.kill();
    await c.kc
      .makeApiClient(k8s.CoordinationV1Api)
      .deleteNamespacedLease(lease)
      .catch(() => undefined);
  }
});

const HOLD_LABEL = 'e2e.kubegc.io/hold-delete';
/** How long the webhook holds a DELETE (unless the API server gives up on it first). */
const HOLD_MS = 20_000;

/**
 * One replica in this process, wired as `kubegc controller --leader-elect`
 * wires it: the write guard, each write's tenure signal and timeout, the GC
 * started only once it leads, stopped (writes drained) when it loses.
 */
async function replica(
  name: string,
  lease: { namespace: string; name: string },
  durations: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number },
) {
  const identity = `tenure-${name}-${randomUUID().slice(0, 8)}`;
  const kc = await kubegcKubeConfig(cluster);
  let leaseBlocked = false;
  const leaseClient = await KubeClient.create(kc, {
    qps: 0,
    userAgent: `kubegc/e2e (${identity}) leader-election`,
    // The test's seam: while set, this replica's Lease requests fail before the wire.
    intercept: () => {
      if (leaseBlocked) throw new Error('e2e: Lease requests blocked');
    },
  });
  const log = e2eLogger('silent', `${name} `);
  const elector = new LeaderElector(leaseClient, log, {
    ...lease,
    identity,
    ...durations,
  });
  let stopping = false;
  const { gc, stop: stopCollector } = await startInProcessGc(cluster, {
    userAgent: `kubegc/e2e (${identity})`,
    kubeConfig: kc,
    log,
    gc: {
      allowWrites: () => !stopping && elector.mayWrite(),
      writeTenure: {
        writeSignal: () => elector.writeSignal(),
        writeTimeoutMs: Math.min(30_000, durations.leaseDurationMs - durations.renewDeadlineMs),
      },
    },
    // The GC starts its workers only once it leads.
    run: 'sync',
  });
  let lost = false;
  const stopGc = (): Promise<void> => {
    stopping = true;
    return stopCollector();
  };
  const leads = elector
    .run(() => {
      lost = true;
      void stopGc();
    })
    .then(() => {
      if (!stopping && elector.isLeader) gc.startWorkers();
    });
  return {
    identity,
    gc,
    elector,
    leads,
    lost: () => lost,
    blockLease: () => (leaseBlocked = true),
    /** Stops the GC (drains its writes), then the elector (releases the Lease if it holds it). */
    async stop(): Promise<void> {
      await stopGc();
      leaseBlocked = false;
      await elector.stop();
      leaseClient.close();
    },
  };
}

test('a leader whose DELETE is held by an admission webhook while its renewals fail: none of its writes takes effect after the new leader writes', async () => {
  const auditLog = cluster.auditLog;
  if (!auditLog) throw new Error('the e2e cluster runs without its audit log');
  const ns = await namespace('leader-held');
  const lease = { namespace: KUBEGC_SERVICE_ACCOUNT.namespace, name: ns };
  // The existing test's durations: a write's timeout is at most 4 s − 3 s.
  const durations = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };
  const webhook = await startAdmissionWebhook(c.kc, {
    name: `kubegc-e2e-hold-deletes-${ns}`.slice(0, 63),
    webhook: 'hold-delete.e2e.kubegc.io',
    rules: [coreRule(['DELETE'])],
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
    objectSelector: { matchLabels: { [HOLD_LABEL]: 'true' } },
    // A cancelled admission call fails the DELETE: it never takes effect.
    failurePolicy: 'Fail',
  });
  // Every DELETE of an object labelled HOLD_LABEL waits HOLD_MS (dry runs are answered at once), then is allowed.
  const holding = webhook.on((r) => !r.dryRun, hold(HOLD_MS));
  let a: Awaited<ReturnType<typeof replica>> | undefined;
  let b: Awaited<ReturnType<typeof replica>> | undefined;
  try {
    // The webhook is live once a dry-run DELETE of a labelled object reaches it.
    await c.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'probe', labels: { [HOLD_LABEL]: 'true' } } },
    });
    await webhook.untilCalled('the webhook to be called (a dry-run DELETE)', () =>
      c.core.deleteNamespacedConfigMap({ name: 'probe', namespace: ns, dryRun: 'All' }),
    );

    a = await replica('a', lease, durations);
    await a.leads;
    expect(a.elector.isLeader).toBe(true);
    b = await replica('b', lease, durations);
    const standby = b;
    let bLeads = false;
    void standby.leads.then(() => (bLeads = standby.elector.isLeader));

    // `held`: its DELETE waits in the webhook. `dep-*`: deleted at once, by whoever leads.
    const heldOwner = await configMap(c, ns, 'held-owner');
    const held = await c.core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'held',
          labels: { [HOLD_LABEL]: 'true' },
          ownerReferences: [ownerRef(heldOwner)],
        },
      },
    });
    const owner = await configMap(c, ns, 'owner');
    const deps = await times(5, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
    const leader = a;
    await waitFor('both graphs to observe the objects', () =>
      Promise.resolve(
        [leader, standby].every((r) =>
          [held.metadata?.uid ?? '', ...deps.map((d) => d.uid)].every(
            (uid) => r.gc.graph.get(uid)?.virtual === false,
          ),
        ),
      ),
    );

    // A's DELETE of `held` goes out and waits in the webhook; then A's renewals fail.
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'held-owner' });
    await waitFor('A’s DELETE of held to wait in the webhook', () =>
      Promise.resolve(webhook.held() > 0),
    );
    a.blockLease();
    await waitFor('A to lose the lease', () => Promise.resolve(leader.lost()), {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    await waitFor('B to take over', () => Promise.resolve(bLeads), { timeoutMs: 30_000 });
    // B writes: it deletes the dependents of `owner`.
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    for (const d of deps)
      await waitFor(`B to delete ${d.name}`, () => isGone(c, d), {
        timeoutMs: 30_000,
      });
    // Whatever the webhook still holds is allowed now: a DELETE of A's still
    // in flight would take effect here, after B's writes.
    const abandoned = webhook.abandoned();
    holding.remove();
    webhook.release();
    await b.stop();
    await a.stop();
    const idA = a.identity;
    const idB = b.identity;

    const events = await auditLogWith("B's release", auditLog, releaseOf(lease, idB));
    const ours = identityIn(idA, idB);
    const gcWrites = (id: string): AuditEvent[] =>
      events.filter(
        (e) =>
          WRITE_VERBS.has(e.verb) &&
          ours(e) === id &&
          e.objectRef?.resource === 'configmaps' &&
          e.objectRef.namespace === ns,
      );
    const writesA = gcWrites(idA);
    const writesB = gcWrites(idB);
    const firstB = Math.min(...writesB.map((e) => auditTimeMs(e.requestReceivedTimestamp)));
    const heldByA = writesA.filter((e) => e.verb === 'delete' && e.objectRef?.name === 'held');
    const lateA = writesA.filter((e) => (tookEffectAt(e) ?? -Infinity) >= firstB);
    process.stderr.write(
      `\nleader-tenure (held write): A's DELETEs of held ${heldByA.length} ` +
        `(codes ${heldByA.map((e) => e.responseStatus?.code ?? '?').join(',')}; ` +
        `completed ${heldByA.map((e) => ((auditTimeMs(e.stageTimestamp) - firstB) / 1000).toFixed(1)).join(',')} s after B's first write); ` +
        `admission calls the API server abandoned: ${abandoned}; writes A ${writesA.length}, B ${writesB.length}\n`,
    );
    // The scenario happened: A had its DELETE of `held` on the wire, and B wrote.
    expect(heldByA.length).toBeGreaterThan(0);
    expect(writesB.length).toBeGreaterThan(0);
    expect(leaseTenures(events, lease).map((t) => t.identity)).toEqual([idA, idB]);
    // No write of A took effect after B's first write...
    expect(lateA.map((e) => `${e.verb} ${e.objectRef?.name} ${e.stageTimestamp}`)).toEqual([]);
    // ...nor outside A's tenure (the oracle, judging by when writes took effect).
    expect(
      writesOutsideTenure(events, leaseTenures(events, lease), ours, lease).map((v) => v.reason),
    ).toEqual([]);
  } finally {
    await a?.stop().catch(() => undefined);
    await b?.stop().catch(() => undefined);
    await webhook.close();
    await c.kc
      .makeApiClient(k8s.CoordinationV1Api)
      .deleteNamespacedLease(lease)
      .catch(() => undefined);
  }
});
