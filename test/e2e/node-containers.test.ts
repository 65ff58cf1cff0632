// Container GC of `kubegc node` against a real containerd: the per-container
// cap, the minimum TTL, unidentified containers, running containers, the
// global cap with the per-unit average rule then oldest-first, and (with API
// access) containers, sandboxes and log directories of pods deleted from the API,
// and none of them when the node name is wrong (no such Node, or another node);
// and a container started between kubegc's listing and its removal (through a
// CRI proxy that starts it when kubegc asks its status before the removal).
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import {
  CREATED_CONTAINER_GRACE_MS,
  legacyLogSymlinkName,
} from '../../src/node/container-gc-policy.ts';
import { testNamespace } from '../support/cluster.ts';
import { e2e } from '../support/e2e.ts';
import { nodeObject } from '../support/objects.ts';
import { fileContainerd, type PodSandboxHandle } from '../support/containerd.ts';
import { criProxy } from '../support/cri-proxy.ts';
import { runNodeOnce } from '../support/kubegc-node.ts';

const { cluster, c } = await e2e();
const h = await fileContainerd({ sizeMiB: 128, resetBeforeEach: true });

/** `count` dead containers of one (pod, container name), oldest first. */
async function deadContainers(
  pod: PodSandboxHandle,
  name: string,
  count: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (let attempt = 0; attempt < count; attempt++)
    ids.push(
      await h.runContainer(
        pod,
        { name, image: h.pause.name, command: ['/bin/true'], attempt },
        'exited',
      ),
    );
  return ids;
}

/** The kubelet's /var/log/containers symlink to a container's log file. */
function linkLog(pod: PodSandboxHandle, name: string, attempt: number, id: string): string {
  mkdirSync(h.containerLogsDir, { recursive: true });
  const link = path.join(
    h.containerLogsDir,
    legacyLogSymlinkName(pod.name, pod.namespace, name, id),
  );
  symlinkSync(path.join(pod.logDirectory, name, `${attempt}.log`), link);
  return link;
}

/** A Pod in the API bound to `nodeName`, with one container (no kubelet runs it); its object. */
function apiPod(
  namespace: string,
  name: string,
  nodeName: string,
  container: { name: string; image: string },
  restartPolicy = 'Always',
): Promise<V1Pod> {
  return c.core.createNamespacedPod({
    namespace,
    body: { metadata: { name }, spec: { nodeName, restartPolicy, containers: [container] } },
  });
}

const linkExists = (p: string): boolean => {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

test('per-container cap, minimum TTL, unidentified and running containers, logs', async () => {
  const pod = await h.runPod({ name: 'web' });
  const jobs = await deadContainers(pod, 'job', 5);
  const server = await h.runContainer(
    pod,
    { name: 'server', image: h.pause.name, command: ['/bin/sleep', 'infinity'] },
    'running',
  );
  const unidentified = await h.runContainer(
    pod,
    { name: 'stray', image: h.pause.name, command: ['/bin/true'], unlabelled: true },
    'exited',
  );
  const links = jobs.map((id, attempt) => linkLog(pod, 'job', attempt, id));
  const serverLink = linkLog(pod, 'server', 0, server);
  const all = new Set([...jobs, server, unidentified]);

  // Every dead container is younger than the minimum TTL: nothing goes.
  const young = await runNodeOnce(h, ['--minimum-container-ttl-duration', '1h']);
  expect(young.code).toBe(0);
  expect(await h.containerIds()).toEqual(all);

  // A symlink whose log file is gone, of a container the runtime does not know.
  const dangling = path.join(
    h.containerLogsDir,
    legacyLogSymlinkName('gone', 'default', 'c', randomBytes(32).toString('hex')),
  );
  symlinkSync(path.join(h.podLogsDir, 'default_gone_x', 'c', '0.log'), dangling);
  const run = await runNodeOnce(h, []);
  expect(run.code).toBe(0);
  const newest = jobs[4] ?? '';
  expect(await h.containerIds()).toEqual(new Set([newest, server]));
  expect(Object.fromEntries(run.logged('removed container').map((l) => [l.id, l.reason]))).toEqual({
    ...Object.fromEntries(jobs.slice(0, 4).map((id) => [id, 'max-per-pod-container'])),
    [unidentified]: 'unidentified',
  });
  // Removed containers lose their log file and symlink; `kubectl logs --previous`
  // still finds the newest dead one's, and the running one's.
  for (let attempt = 0; attempt < 4; attempt++) {
    expect(existsSync(path.join(pod.logDirectory, 'job', `${attempt}.log`))).toBe(false);
    expect(linkExists(links[attempt] ?? '')).toBe(false);
  }
  expect(existsSync(path.join(pod.logDirectory, 'job', '4.log'))).toBe(true);
  expect(existsSync(links[4] ?? '')).toBe(true);
  expect(existsSync(serverLink)).toBe(true);
  expect(linkExists(dangling)).toBe(false);
  expect(run.logged('removed dangling log symlink').map((l) => l.path)).toEqual([dangling]);
  // The pod's sandbox is ready: kept.
  expect(await h.sandboxIds()).toEqual(new Set([pod.id]));
});

test('a container started between the listing and its removal is kept (issue 33 item 3)', async () => {
  const pod = await h.runPod({ name: 'race' });
  // Attempt 0 created and never started, attempt 1 exited: both dead to the
  // GC, and attempt 0 beyond the per-container cap of one.
  const early = await h.runContainer(
    pod,
    {
      name: 'job',
      image: h.pause.name,
      command: ['/bin/sleep', 'infinity'],
      attempt: 0,
      createOnly: true,
    },
    'created',
  );
  const later = await h.runContainer(
    pod,
    { name: 'job', image: h.pause.name, command: ['/bin/true'], attempt: 1 },
    'exited',
  );
  // A never-started container is dead to the GC only after a fixed grace (as
  // the kubelet's): wait that long from its creation, not a guess.
  const createdMs = Date.now();
  await new Promise((resolve) =>
    setTimeout(resolve, createdMs + CREATED_CONTAINER_GRACE_MS + 1_000 - Date.now()),
  );
  let listed = false;
  let started = false;
  const proxy = await criProxy(h.endpoint, h.dir, async (method, request) => {
    if (method === 'ListContainers') listed = true;
    else if (method === 'ContainerStatus' && listed && !started && request.container_id === early) {
      started = true;
      await h.cri.call(h.cri.runtime, 'StartContainer', { container_id: early });
    }
  });
  try {
    const run = await runNodeOnce({ ...h, endpoint: proxy.endpoint }, []);
    expect(run.code).toBe(0);
    expect(started).toBe(true);
    expect(await h.containerIds()).toEqual(new Set([early, later]));
    expect(run.removedContainers()).toEqual([]);
    expect(run.logged('kept container: no longer exited').map((l) => l.id)).toEqual([early]);
  } finally {
    await proxy.close();
  }
});

test('global cap: an equal share per (pod, container) first, then the oldest', async () => {
  const a = await deadContainers(await h.runPod({ name: 'a' }), 'app', 4);
  const b = await deadContainers(await h.runPod({ name: 'b' }), 'app', 4);
  const perContainer = ['--maximum-dead-containers-per-container', '10'];

  // 8 dead in 2 units, cap 5: each unit keeps its newest 5 ÷ 2 = 2 (plain
  // oldest-first would have taken three of a's).
  const share = await runNodeOnce(h, [...perContainer, '--maximum-dead-containers', '5']);
  expect(share.code).toBe(0);
  expect(await h.containerIds()).toEqual(new Set([a[2], a[3], b[2], b[3]]));
  for (const l of share.logged('removed container')) expect(l.reason).toBe('max-containers');

  // Cap 1 with 2 units: one each, then the oldest of those goes.
  const oldest = await runNodeOnce(h, [...perContainer, '--maximum-dead-containers', '1']);
  expect(oldest.code).toBe(0);
  expect(await h.containerIds()).toEqual(new Set([b[3]]));
});

describe('with API access', () => {
  const { name: nodeName } = nodeObject(c, 'kubegc-e2e');

  test('containers, sandboxes and log directories of pods deleted from the API are removed; live pods keep their newest', async () => {
    const namespace = await testNamespace(c.core, 'node-gc');
    const livePod = await apiPod(namespace, 'live', nodeName, {
      name: 'app',
      image: 'kubegc.test/app:1',
    });
    const liveUid = livePod.metadata?.uid ?? '';

    // The live pod: a superseded sandbox and its current one, both stopped, one dead container each.
    const liveOld = await h.runPod({ name: 'live', namespace, uid: liveUid, attempt: 0 });
    const liveOldContainer = (await deadContainers(liveOld, 'app', 1))[0];
    await h.stopPod(liveOld);
    const liveNew = await h.runPod({ name: 'live', namespace, uid: liveUid, attempt: 1 });
    await h.stopPod(liveNew);
    // A pod the API no longer has: dead containers and a stopped sandbox.
    const gone = await h.runPod({ name: 'gone', namespace });
    const goneContainers = await deadContainers(gone, 'app', 2);
    await h.stopPod(gone);
    expect(existsSync(gone.logDirectory)).toBe(true);

    const run = await runNodeOnce(h, ['--kubeconfig', cluster.kubeconfig, '--node-name', nodeName]);
    expect(run.code).toBe(0);
    expect(run.logged('container GC pass done')[0]?.podsKnown).toBe(true);

    // The live pod's one dead container is the newest of its unit: kept, and
    // with it the old sandbox it runs in. The deleted pod loses everything.
    expect(await h.containerIds()).toEqual(new Set([liveOldContainer]));
    expect(await h.sandboxIds()).toEqual(new Set([liveOld.id, liveNew.id]));
    expect(
      Object.fromEntries(run.logged('removed container').map((l) => [l.id, l.reason])),
    ).toEqual(Object.fromEntries(goneContainers.map((id) => [id, 'pod-deleted'])));
    expect(run.logged('removed sandbox').map((l) => [l.id, l.reason])).toEqual([
      [gone.id, 'pod-deleted'],
    ]);
    expect(existsSync(gone.logDirectory)).toBe(false);
    expect(existsSync(liveOld.logDirectory)).toBe(true);

    // Once the live pod's container is gone (a stricter cap), its superseded sandbox goes too.
    const strict = await runNodeOnce(h, [
      '--kubeconfig',
      cluster.kubeconfig,
      '--node-name',
      nodeName,
      '--maximum-dead-containers-per-container',
      '0',
    ]);
    expect(strict.code).toBe(0);
    expect(await h.containerIds()).toEqual(new Set());
    expect(await h.sandboxIds()).toEqual(new Set([liveNew.id]));
    expect(strict.logged('removed sandbox').map((l) => [l.id, l.reason])).toEqual([
      [liveOld.id, 'superseded'],
    ]);
    await c.core.deleteNamespace({ name: namespace });
  });
});

describe('a wrong node name', () => {
  const { name: nodeName } = nodeObject(c, 'kubegc-e2e-n');
  const { name: otherNode } = nodeObject(c, 'kubegc-e2e-other');

  test("no Node of that name, or one whose pods are not those running here: a Succeeded Job pod's container, sandbox and log directory are kept", async () => {
    const namespace = await testNamespace(c.core, 'node-wrong');
    const created = await apiPod(
      namespace,
      'job',
      nodeName,
      { name: 'work', image: 'kubegc.test/job:1' },
      'Never',
    );
    await c.core.replaceNamespacedPodStatus({
      namespace,
      name: 'job',
      body: { ...created, status: { phase: 'Succeeded' } },
    });
    const job = await h.runPod({ name: 'job', namespace, uid: created.metadata?.uid ?? '' });
    const [work] = await deadContainers(job, 'work', 1);
    await h.stopPod(job);
    const kept = async (): Promise<void> => {
      expect(await h.containerIds()).toEqual(new Set([work]));
      expect(await h.sandboxIds()).toContain(job.id);
      expect(existsSync(job.logDirectory)).toBe(true);
    };

    // A name the API has no Node of: its pod list is [] (the Job pod is bound elsewhere).
    const wrong = `wrong-${process.pid}`;
    const run = await runNodeOnce(h, ['--kubeconfig', cluster.kubeconfig, '--node-name', wrong]);
    await kept();
    expect(run.code).toBe(0);
    expect(run.logged('container GC pass done')[0]?.podsKnown).toBe(false);
    const errors = run.lines.filter((l) => l.level === 'error');
    // One line at start (with where the name came from), one from the pass.
    expect(errors).toEqual([
      expect.objectContaining({
        msg: expect.stringMatching(`no Node "${wrong}" in the API.*--node-name or NODE_NAME`),
        nameFrom: '--node-name',
      }),
      expect.objectContaining({ node: wrong, reason: 'node-not-found' }),
    ]);

    // A Node that exists but is not this one, while a pod of this one runs
    // here (its sandbox READY).
    const webPod = await apiPod(namespace, 'web', nodeName, {
      name: 'server',
      image: 'kubegc.test/web:1',
    });
    const web = await h.runPod({ name: 'web', namespace, uid: webPod.metadata?.uid ?? '' });
    const other = await runNodeOnce(h, [
      '--kubeconfig',
      cluster.kubeconfig,
      '--node-name',
      otherNode,
    ]);
    await kept();
    expect(other.code).toBe(0);
    expect(other.logged('container GC pass done')[0]?.podsKnown).toBe(false);
    expect(other.lines.filter((l) => l.level === 'error')).toEqual([
      expect.objectContaining({ node: otherNode, reason: 'ready-pods-unlisted' }),
    ]);

    // The right name: the list is complete, and the Job pod exists, so its
    // newest dead container stays (`kubectl logs --previous`), as on the kubelet.
    const right = await runNodeOnce(h, [
      '--kubeconfig',
      cluster.kubeconfig,
      '--node-name',
      nodeName,
    ]);
    expect(right.code).toBe(0);
    expect(right.logged('container GC pass done')[0]?.podsKnown).toBe(true);
    await kept();
    expect(await h.sandboxIds()).toEqual(new Set([job.id, web.id]));
    await c.core.deleteNamespace({ name: namespace });
  });
});

test('without API access, containers of pods unknown to the API are kept', async () => {
  const gone = await h.runPod({ name: 'gone' });
  const [only] = await deadContainers(gone, 'app', 1);
  await h.stopPod(gone);
  const run = await runNodeOnce(h, []);
  expect(run.code).toBe(0);
  expect(run.logged('container GC pass done')[0]?.podsKnown).toBe(false);
  expect(await h.containerIds()).toEqual(new Set([only]));
  expect(await h.sandboxIds()).toEqual(new Set([gone.id]));
  expect(existsSync(gone.logDirectory)).toBe(true);
});
