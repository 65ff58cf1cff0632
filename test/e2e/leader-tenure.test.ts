// Writes bounded by lease time, judged by the API server's audit log (not by
// anything kubegc says about itself): two replicas with leader election on
// short durations and a client rate limit low enough that writes always wait
// in the token bucket. The leader is frozen (SIGSTOP) for longer than its
// lease, the standby takes over, the old leader resumes (SIGCONT) with its
// queued writes; then the new leader is stopped with SIGTERM mid-cascade.
// Every write of each replica must have been received inside one of its own
// tenures of the Lease, and the SIGTERM'd replica's release must come after
// its last write.
import * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';
import { controllerArgs } from '../../cluster/kubegc-command.ts';
import { auditTimeMs, readAuditLog, WRITE_VERBS, type AuditEvent } from '../../soak/lib/audit.ts';
import {
  kubegcIdentityFromUserAgent,
  leaseTenures,
  writesOutsideTenure,
} from '../../soak/lib/tenure.ts';
import { clients, e2eCluster, testNamespace, waitFor, type Clients } from '../support/cluster.ts';
import { runKubegc, type KubegcProcess, type LogLine } from '../support/kubegc.ts';
import { configMap, configMapNames, ownerRef, times } from '../support/objects.ts';
import { KUBEGC_SERVICE_ACCOUNT, serviceAccountKubeconfig } from '../support/service-account.ts';

let cluster: Cluster;
let c: Clients;

beforeAll(async () => {
  cluster = await e2eCluster();
  c = clients(cluster);
});

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

const deletedIn =
  (ns: string) =>
  (l: LogLine): boolean =>
    l.msg === 'deleted' && l.namespace === ns;

test('a leader frozen past its lease writes nothing after it resumes, and SIGTERM releases the Lease only after the last write', async () => {
  const auditLog = cluster.auditLog;
  if (!auditLog) throw new Error('the e2e cluster runs without its audit log');
  const ns = await testNamespace(c.core, 'leader-tenure');
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

    const isRelease = (e: AuditEvent): boolean =>
      e.verb === 'update' &&
      e.objectRef?.resource === 'leases' &&
      e.objectRef.namespace === lease.namespace &&
      e.objectRef.name === lease.name &&
      kubegcIdentityFromUserAgent(e.userAgent) === idB &&
      (e.requestObject as { spec?: { holderIdentity?: string } } | undefined)?.spec
        ?.holderIdentity === '';
    const events = await waitFor(
      "B's release in the audit log",
      async () => {
        const all = await readAuditLog(auditLog);
        return all.some(isRelease) ? all : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const ours = (e: AuditEvent): string | undefined => {
      const id = kubegcIdentityFromUserAgent(e.userAgent);
      return id === idA || id === idB ? id : undefined;
    };
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
