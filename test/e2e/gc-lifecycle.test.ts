// kubegc's life cycle against the real control plane: orphans that predate
// it, a SIGKILL in the middle of a cascade, an apiserver restart under it,
// and --dry-run. Each test starts (and stops) its own kubegc process.
import { randomUUID } from 'node:crypto';
import { restartApiServer } from '../../cluster/controlplane.ts';
import { staysTrue, waitFor } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { startController, type KubegcProcess } from '../support/kubegc.ts';
import {
  configMap,
  configMapNames,
  isGone,
  ownerRef,
  times,
  type Ref,
} from '../support/objects.ts';

const { cluster, c, namespace } = await e2e();
let gc: KubegcProcess | undefined;

afterEach(async () => {
  await gc?.stop();
  gc = undefined;
});

async function resourceVersions(
  namespace: string,
  names: string[],
): Promise<Record<string, string>> {
  const list = await c.core.listNamespacedConfigMap({ namespace });
  const out: Record<string, string> = {};
  for (const cm of list.items) {
    const name = cm.metadata?.name ?? '';
    if (names.includes(name)) out[name] = cm.metadata?.resourceVersion ?? '';
  }
  return out;
}

test('orphans that exist before kubegc starts are collected after its initial sync', async () => {
  const ns = await namespace('life-preexisting');
  const owner = await configMap(c, ns, 'owner');
  await times(20, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
  await configMap(c, ns, 'dep-of-nothing', [
    ownerRef({ apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: randomUUID() }),
  ]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  await waitFor('the owner to be gone', () => isGone(c, owner));
  expect(await configMapNames(c, ns)).toHaveLength(21);

  gc = await startController(cluster);
  await waitFor(
    'every pre-existing orphan to be collected',
    async () => (await configMapNames(c, ns)).length === 0,
  );
});

test('kubegc SIGKILLed while collecting 1,000 dependents and started again: all collected, live-owned objects untouched', async () => {
  const ns = await namespace('life-sigkill');
  const doomed = await configMap(c, ns, 'doomed-owner');
  const living = await configMap(c, ns, 'living-owner');
  await times(1000, (i) => configMap(c, ns, `doomed-${i}`, [ownerRef(doomed)]), 40);
  const keptNames = (
    await times(50, (i) => configMap(c, ns, `kept-${i}`, [ownerRef(living, { controller: true })]))
  ).map((r) => r.name);
  // Also one object owned by both: it must keep the living reference only.
  await configMap(c, ns, 'shared', [ownerRef(doomed), ownerRef(living)]);
  const keptBefore = await resourceVersions(ns, keptNames);

  gc = await startController(cluster);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'doomed-owner',
    propagationPolicy: 'Background',
  });
  const deletedInNs = (p: KubegcProcess): number =>
    p.lines.filter((l) => l.msg === 'deleted' && l.namespace === ns).length;
  const first = gc;
  await waitFor('kubegc to delete at least 100 dependents', async () => deletedInNs(first) >= 100, {
    intervalMs: 20,
  });
  await gc.kill();
  const leftAfterKill = (await configMapNames(c, ns)).filter((n) => n.startsWith('doomed-')).length;
  expect(leftAfterKill).toBeGreaterThan(0);

  gc = await startController(cluster);
  await waitFor(
    'the rest of the 1,000 dependents to be collected',
    async () => (await configMapNames(c, ns)).filter((n) => n.startsWith('doomed-')).length === 0,
    { timeoutMs: 150_000 },
  );
  const shared = await waitFor(
    'the shared object to lose its reference to the deleted owner',
    async () => {
      const cm = await c.core.readNamespacedConfigMap({ namespace: ns, name: 'shared' });
      return cm.metadata?.ownerReferences?.length === 1 ? cm : undefined;
    },
  );
  expect(shared.metadata?.ownerReferences?.[0]?.uid).toBe(living.uid);
  expect(await resourceVersions(ns, keptNames)).toEqual(keptBefore);
});

test('kube-apiserver restarted under a running kubegc: watches resume and later orphans are collected', async () => {
  const ns = await namespace('life-apiserver');
  gc = await startController(cluster);
  const pid = gc.child.pid;
  await restartApiServer(cluster);
  const running = gc;
  await waitFor('kubegc to notice the broken watches', async () =>
    running.lines.some((l) => l.msg === 'list/watch failed; retrying'),
  );

  const owner = await configMap(c, ns, 'owner');
  const deps: Ref[] = await times(10, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  await waitFor(
    'the dependents made after the restart to be collected',
    async () => (await configMapNames(c, ns)).length === 0,
  );
  // The owner's delete reached kubegc through a resumed watch, not a restart of kubegc.
  expect(gc.child.pid).toBe(pid);
  expect(gc.child.exitCode).toBeNull();
  await running.waitForLines('a "deleted" line for every dependent', (lines) => {
    const deleted = new Set(lines.filter((l) => l.msg === 'deleted').map((l) => l.uid));
    return deps.every((d) => deleted.has(d.uid));
  });
});

test('--dry-run decides and logs but patches and deletes nothing', async () => {
  const ns = await namespace('life-dry-run');
  const owner = await configMap(c, ns, 'owner');
  const other = await configMap(c, ns, 'other-owner');
  const deps = await times(10, (i) => configMap(c, ns, `dep-${i}`, [ownerRef(owner)]));
  const mixed = await configMap(c, ns, 'mixed', [ownerRef(owner), ownerRef(other)]);
  await c.core.deleteNamespacedConfigMap({
    namespace: ns,
    name: 'owner',
    propagationPolicy: 'Background',
  });
  await waitFor('the owner to be gone', () => isGone(c, owner));
  const names = [...deps.map((d) => d.name), mixed.name, other.name];
  const before = await resourceVersions(ns, names);

  gc = await startController(cluster, ['--dry-run']);
  const running = gc;
  await waitFor('a "would delete" line for every dependent', async () => {
    const would = new Set(
      running.lines.filter((l) => l.msg === 'dry run: would delete').map((l) => l.uid),
    );
    return deps.every((d) => would.has(d.uid));
  });
  await gc.waitForLog(
    'a "would remove owner references" line for the mixed object',
    (l) => l.msg === 'dry run: would remove owner references' && l.uid === mixed.uid,
  );
  await staysTrue(
    'every object to be unchanged',
    async () => JSON.stringify(await resourceVersions(ns, names)) === JSON.stringify(before),
    3000,
  );
  expect(
    gc.lines.filter((l) => l.msg === 'deleted' || l.msg === 'removed owner references'),
  ).toEqual([]);
});
