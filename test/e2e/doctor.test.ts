// `kubegc doctor` against the real control plane, with no garbage collector
// running (kube-controller-manager here runs without its own, and this file
// starts no kubegc): each finding is built for real in a namespace of its
// own, reported with its object and blocker, then its blocker is removed and
// the finding must go. The shared cluster may hold other tests' leftovers, so
// every assertion looks only at this file's namespaces.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';
import { readAuditLog, WRITE_VERBS } from '../../soak/lib/audit.ts';
import type {
  BlockingCycle,
  Finding,
  LeakedDependent,
  Report,
  StuckDeletion,
  TerminatingNamespace,
  UnresolvableOwnerKind,
} from '../../src/doctor/analyze.ts';
import { exists, statusOf, waitFor } from '../support/cluster.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { configMap, isGone, ownerRef } from '../support/objects.ts';

const execFileAsync = promisify(execFile);
const HOLD = 'kubegc.test/hold';
const APISERVICE = 'v1alpha1.doctor.kubegc.test';

/** `mine`: every namespace this file made, the only ones its assertions look at (deleted after the file). */
const { cluster, c, namespace, namespaces: mine } = await e2e({ deleteNamespaces: true });

// Before the namespaces go (cleanups run last first): a broken APIService stops every namespace deletion in the cluster.
afterFile(async () => {
  await c.kc
    .makeApiClient(k8s.ApiregistrationV1Api)
    .deleteAPIService({ name: APISERVICE })
    .catch(() => undefined);
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function doctor(...args: string[]): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      kubegcArgv(['doctor', '--kubeconfig', cluster.kubeconfig, ...args]),
      { maxBuffer: 256 * 1024 * 1024 },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** `doctor -o json`, its findings narrowed to this file's namespaces. */
async function report(...args: string[]): Promise<{ run: Run; json: Report; ours: Finding[] }> {
  const run = await doctor('-o', 'json', ...args);
  if (run.code !== 0 && run.code !== 1)
    throw new Error(`kubegc doctor exited ${run.code}: ${run.stderr}`);
  const json = JSON.parse(run.stdout) as Report;
  const ours = json.findings.filter((f) =>
    f.kind === 'terminating-namespace'
      ? mine.has(f.object.name)
      : f.object.namespace !== undefined && mine.has(f.object.namespace),
  );
  return { run, json, ours };
}

const inNs = (fs: Finding[], ns: string): Finding[] =>
  fs.filter((f) => f.object.namespace === ns || f.object.name === ns);

async function removeFinalizers(ns: string, name: string): Promise<void> {
  await c.core.patchNamespacedConfigMap({
    namespace: ns,
    name,
    body: [{ op: 'remove', path: '/metadata/finalizers' }],
  });
}

async function deleting(ns: string, name: string): Promise<boolean> {
  const cm = await c.core.readNamespacedConfigMap({ namespace: ns, name });
  return cm.metadata?.deletionTimestamp !== undefined;
}

test('an owner in foreground deletion: the chain down to the dependent held by a foreign finalizer, then gone once unblocked', async () => {
  const ns = await namespace('doctor-stuck');
  const owner = await configMap(c, ns, 'owner');
  const mid = await configMap(c, ns, 'mid', [ownerRef(owner, { blockOwnerDeletion: true })]);
  await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: {
        name: 'holder',
        finalizers: [HOLD],
        ownerReferences: [ownerRef(mid, { blockOwnerDeletion: true })],
      },
    },
  });
  // What a garbage collector would have done on the way down, and then cannot finish.
  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'holder' });
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'mid',
    propagationPolicy: 'Foreground',
  });
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Foreground',
  });
  await waitFor('all three to be deleting', async () =>
    (await Promise.all(['owner', 'mid', 'holder'].map((n) => deleting(ns, n)))).every(Boolean),
  );

  const { run, ours } = await report();
  expect(run.code).toBe(1);
  const stuck = inNs(ours, ns) as StuckDeletion[];
  expect(stuck.map((f) => f.kind)).toEqual(['stuck-deletion', 'stuck-deletion', 'stuck-deletion']);
  expect(stuck.map((f) => f.object.name).sort()).toEqual(['holder', 'mid', 'owner']);
  const top = stuck.find((f) => f.object.name === 'owner') as StuckDeletion;
  expect(top).toMatchObject({
    object: { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'owner', uid: owner.uid },
    reason: 'waiting-for-dependents',
    gcFinalizers: ['foregroundDeletion'],
    blockingDependents: 1,
    heldBy: { object: { name: 'holder' }, finalizers: [HOLD], deleting: true },
  });
  expect(top.chain.map((o) => o.name)).toEqual(['owner', 'mid', 'holder']);
  expect(top.blockers[0]?.state).toBe('foreign-finalizer');
  expect(stuck.find((f) => f.object.name === 'holder')).toMatchObject({
    reason: 'foreign-finalizers',
    foreignFinalizers: [HOLD],
  });

  const text = await doctor('-n', ns);
  expect(text.code).toBe(1);
  expect(text.stdout).toContain(`ConfigMap ${ns}/owner: deleting for`);
  expect(text.stdout).toContain(
    `ConfigMap ${ns}/mid → ConfigMap ${ns}/holder: held by finalizer ${HOLD}`,
  );
  // Young findings left out by --older-than: nothing older than an hour here.
  const old = await report('-n', ns, '--older-than', '1h');
  expect(old.run.code).toBe(0);
  expect(old.json.summary.hiddenByOlderThan).toBe(3);

  // The foreign finalizer goes: the holder goes, and mid has nothing left below it.
  await removeFinalizers(ns, 'holder');
  await waitFor(
    'the holder to go',
    async () =>
      !(await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: 'holder' }))),
  );
  const after = inNs((await report()).ours, ns) as StuckDeletion[];
  expect(after.find((f) => f.object.name === 'holder')).toBeUndefined();
  expect(after.find((f) => f.object.name === 'mid')).toMatchObject({
    reason: 'foreground-no-blockers',
  });
  expect(after.find((f) => f.object.name === 'owner')?.blockers[0]).toMatchObject({
    state: 'awaiting-gc',
  });
  // Play the garbage collector's last step for each.
  await removeFinalizers(ns, 'mid');
  await removeFinalizers(ns, 'owner');
  await waitFor(
    'mid and owner to go',
    async () =>
      !(await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: 'owner' }))) &&
      !(await exists(() => c.core.readNamespacedConfigMap({ namespace: ns, name: 'mid' }))),
  );
  const clean = await report('-n', ns);
  expect(clean.ours).toEqual([]);
  expect(clean.run.code).toBe(0);
});

test('a namespace held by a finalizer on an object in it: its conditions and what is left, then gone', async () => {
  const ns = await namespace('doctor-ns-held');
  await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'held', finalizers: [HOLD] } },
  });
  await c.core.deleteNamespace({ name: ns });
  await waitFor('the namespace controller to report the finalizer', async () => {
    const n = await c.core.readNamespace({ name: ns });
    return n.status?.conditions?.some(
      (x) => x.type === 'NamespaceFinalizersRemaining' && x.status === 'True',
    );
  });

  const { run, ours } = await report();
  expect(run.code).toBe(1);
  const f = ours.find(
    (x) => x.kind === 'terminating-namespace' && x.object.name === ns,
  ) as TerminatingNamespace;
  expect(f).toMatchObject({
    object: { apiVersion: 'v1', kind: 'Namespace', name: ns },
    phase: 'Terminating',
    remainingTotal: 1,
    remaining: [
      {
        resource: 'configmaps',
        kind: 'ConfigMap',
        count: 1,
        deleting: 1,
        finalizers: { [HOLD]: 1 },
        examples: ['held'],
      },
    ],
  });
  expect(f.conditions.find((x) => x.type === 'NamespaceFinalizersRemaining')?.message).toContain(
    HOLD,
  );
  // The object in it is stuck in its own right.
  expect(ours.find((x) => x.kind === 'stuck-deletion' && x.object.namespace === ns)).toMatchObject({
    object: { name: 'held' },
    foreignFinalizers: [HOLD],
  });
  const text = await doctor();
  expect(text.stdout).toContain(`Namespace ${ns}: terminating for`);
  expect(text.stdout).toMatch(new RegExp(`remaining: configmaps 1 .*${HOLD.replace('.', '\\.')}`));

  await removeFinalizers(ns, 'held');
  await waitFor(
    'the namespace to go',
    async () => !(await exists(() => c.core.readNamespace({ name: ns }))),
    { timeoutMs: 120_000 },
  );
  expect(inNs((await report()).ours, ns)).toEqual([]);
});

test('a namespace held by an unavailable APIService: NamespaceDeletionDiscoveryFailure and the APIService named, then gone', async () => {
  const svcNs = await namespace('doctor-apisvc');
  const reg = c.kc.makeApiClient(k8s.ApiregistrationV1Api);
  await reg.createAPIService({
    body: {
      metadata: { name: APISERVICE },
      spec: {
        group: 'doctor.kubegc.test',
        version: 'v1alpha1',
        // No such Service: the aggregator reports it unavailable.
        service: { namespace: svcNs, name: 'absent', port: 443 },
        insecureSkipTLSVerify: true,
        groupPriorityMinimum: 1000,
        versionPriority: 15,
      },
    },
  });
  try {
    await waitFor('the APIService to be unavailable', async () => {
      const a = await reg.readAPIService({ name: APISERVICE });
      return a.status?.conditions?.some((x) => x.type === 'Available' && x.status === 'False');
    });
    const ns = await namespace('doctor-ns-discovery');
    await c.core.deleteNamespace({ name: ns });
    await waitFor(
      'the namespace controller to report the discovery failure',
      async () => {
        const n = await c.core.readNamespace({ name: ns });
        return n.status?.conditions?.some(
          (x) => x.type === 'NamespaceDeletionDiscoveryFailure' && x.status === 'True',
        );
      },
      { timeoutMs: 90_000 },
    );

    const { run, json, ours } = await report();
    expect(run.code).toBe(1);
    const f = ours.find(
      (x) => x.kind === 'terminating-namespace' && x.object.name === ns,
    ) as TerminatingNamespace;
    expect(f).toBeDefined();
    expect(f.reason).toBe('NamespaceDeletionDiscoveryFailure');
    expect(f.conditions[0]?.message).toContain('doctor.kubegc.test');
    expect(f.unavailableAPIServices?.map((a) => a.name)).toContain(APISERVICE);
    expect(f.unavailableAPIServices?.find((a) => a.name === APISERVICE)).toMatchObject({
      service: `${svcNs}/absent`,
    });
    // The group cannot be listed: named, and nothing concluded from it.
    expect(json.notScanned.map((n) => n.resource)).toContain('*.doctor.kubegc.test');
    const text = await doctor();
    expect(text.stdout).toContain(`Namespace ${ns}: terminating for`);
    expect(text.stdout).toContain(`unavailable APIService ${APISERVICE}`);

    await reg.deleteAPIService({ name: APISERVICE });
    // The namespace controller retries at least every minute.
    await waitFor(
      'the namespace to go once the APIService is gone',
      async () => !(await exists(() => c.core.readNamespace({ name: ns }))),
      { timeoutMs: 150_000, intervalMs: 1000 },
    );
    const clean = await report();
    expect(inNs(clean.ours, ns)).toEqual([]);
    expect(clean.json.notScanned.map((n) => n.resource)).not.toContain('*.doctor.kubegc.test');
  } finally {
    await reg.deleteAPIService({ name: APISERVICE }).catch((err: unknown) => {
      if (statusOf(err) !== 404) throw err;
    });
  }
}, 300_000);

test("a dependent whose owner was deleted while no garbage collector ran: leaked, and still leaked when a new object takes the owner's name", async () => {
  const ns = await namespace('doctor-leak');
  const owner = await configMap(c, ns, 'owner');
  const dep = await configMap(c, ns, 'dep', [ownerRef(owner, { controller: true })]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  await waitFor('the owner to go', () => isGone(c, owner));

  const first = await report();
  expect(first.run.code).toBe(1);
  const leak = inNs(first.ours, ns) as LeakedDependent[];
  expect(leak).toHaveLength(1);
  expect(leak[0]).toMatchObject({
    kind: 'leaked-dependent',
    object: { kind: 'ConfigMap', namespace: ns, name: 'dep', uid: dep.uid },
    sinceBasis: 'creationTimestamp',
    owners: [
      { kind: 'ConfigMap', name: 'owner', uid: owner.uid, state: 'absent', controller: true },
    ],
  });
  const text = await doctor('-n', ns);
  expect(text.stdout).toContain(`ConfigMap ${ns}/dep: exists for`);
  expect(text.stdout).toContain(`owner ConfigMap owner (v1, uid ${owner.uid}): absent`);

  // Same name, another UID: the owner is still gone.
  const reborn = await configMap(c, ns, 'owner');
  const second = inNs((await report()).ours, ns) as LeakedDependent[];
  expect(second[0]?.owners[0]).toMatchObject({ state: 'replaced', uid: owner.uid });
  expect(second[0]?.owners[0]?.detail).toContain(reborn.uid);

  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'dep' });
  await waitFor('the dependent to go', () => isGone(c, dep));
  const clean = await report('-n', ns);
  expect(clean.ours).toEqual([]);
  expect(clean.run.code).toBe(0);
});

test('a cycle of blocking owner references: reported with every member, then gone', async () => {
  const ns = await namespace('doctor-cycle');
  const a = await configMap(c, ns, 'a');
  const b = await configMap(c, ns, 'b', [ownerRef(a, { blockOwnerDeletion: true })]);
  const cc = await configMap(c, ns, 'c', [ownerRef(b, { blockOwnerDeletion: true })]);
  await c.core.patchNamespacedConfigMap({
    namespace: ns,
    name: 'a',
    body: [
      {
        op: 'add',
        path: '/metadata/ownerReferences',
        value: [ownerRef(cc, { blockOwnerDeletion: true })],
      },
    ],
  });

  const { run, ours } = await report();
  expect(run.code).toBe(1);
  const cycles = inNs(ours, ns) as BlockingCycle[];
  expect(cycles).toHaveLength(1);
  expect(cycles[0]).toMatchObject({
    kind: 'blocking-cycle',
    object: { name: 'a', uid: a.uid },
    members: 3,
  });
  // Each member is owned (blocking) by the next: a by c, c by b, b by a.
  expect(cycles[0]?.chain.map((o) => o.name)).toEqual(['a', 'c', 'b']);
  const text = await doctor('-n', ns);
  expect(text.stdout).toContain(
    `ConfigMap ${ns}/a → ConfigMap ${ns}/c → ConfigMap ${ns}/b → ConfigMap ${ns}/a`,
  );

  for (const r of [a, b, cc])
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: r.name });
  await waitFor('the three to go', async () =>
    (await Promise.all([a, b, cc].map((r) => isGone(c, r)))).every(Boolean),
  );
  expect((await report('-n', ns)).ours).toEqual([]);
});

test('an owner reference to a kind no API serves: its own finding, not a leak; gone with the dependent', async () => {
  const ns = await namespace('doctor-nokind');
  const dep = await configMap(c, ns, 'nothing-owned', [
    { apiVersion: 'nothing.kubegc.test/v1', kind: 'Nothing', name: 'nothing', uid: randomUUID() },
  ]);
  const { run, ours } = await report();
  expect(run.code).toBe(1);
  const f = inNs(ours, ns) as UnresolvableOwnerKind[];
  expect(f.map((x) => x.kind)).toEqual(['unresolvable-owner-kind']);
  expect(f[0]).toMatchObject({
    object: { name: 'nothing-owned', uid: dep.uid },
    owners: [{ apiVersion: 'nothing.kubegc.test/v1', kind: 'Nothing', state: 'unresolvable' }],
  });
  const text = await doctor('-n', ns);
  expect(text.stdout).toContain('no API serves Nothing in nothing.kubegc.test/v1');

  await c.core.deleteNamespacedConfigMap({ namespace: ns, name: 'nothing-owned' });
  await waitFor('the dependent to go', () => isGone(c, dep));
  expect((await report('-n', ns)).ours).toEqual([]);
});

test('doctor wrote nothing (audit log), and exits 2 on a usage error, 3 when the API server cannot be reached', async () => {
  if (!cluster.auditLog) throw new Error('the e2e cluster runs without its audit log');
  const writes = (await readAuditLog(cluster.auditLog)).filter(
    (e) => WRITE_VERBS.has(e.verb) && (e.userAgent ?? '').includes(' doctor'),
  );
  expect(writes).toEqual([]);

  const usage = await doctor('--older-than', 'soon');
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain('--older-than: invalid duration "soon"');

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-doctor-e2e-'));
  try {
    const kubeconfig = path.join(dir, 'kubeconfig');
    await fs.writeFile(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    const down = await execFileAsync(
      process.execPath,
      kubegcArgv(['doctor', '--kubeconfig', kubeconfig]),
    ).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(down.code).toBe(3);
    expect(down.stderr).toContain('the scan could not complete: cannot reach the API server');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});
