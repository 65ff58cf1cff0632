// One container pass over a runtime in memory: the paths the kubelet's rules
// take through the API's view of the node's pods. The real-runtime proof is
// test/e2e/node-containers.test.ts (containerd).
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  FakeRuntime,
  quietLog,
  recordingEvents,
  testMetrics,
} from '../../test/support/fake-cri-runtime.ts';
import { standInPerTest } from '../api/stand-in-server.testing.ts';
import { ContainerGarbageCollector } from './container-gc.ts';
import { DEFAULT_CONTAINER_GC_POLICY, legacyLogSymlinkName } from './container-gc-policy.ts';
import { apiPodLister, type NodePod, type PodLister } from './pods.ts';

const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kubegc-cgc-'));
  await mkdir(path.join(dir, 'pods'));
  await mkdir(path.join(dir, 'containers'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

function collector(rt: FakeRuntime, pods?: NodePod[] | PodLister) {
  const lister = Array.isArray(pods) ? { nodePods: () => Promise.resolve(pods) } : pods;
  const { metrics, registry } = testMetrics();
  const events = recordingEvents();
  const gc = new ContainerGarbageCollector(
    rt.connection(),
    {
      policy: DEFAULT_CONTAINER_GC_POLICY,
      podLogsDir: path.join(dir, 'pods'),
      containerLogsDir: path.join(dir, 'containers'),
      dryRun: false,
      ...(lister ? { pods: lister } : {}),
      nodeName: 'wrong',
      now: () => NOW,
    },
    quietLog,
    metrics,
    events,
  );
  return { gc, registry, events };
}

const pod = (uid: string, phase: string, evicted = false): NodePod => ({
  uid,
  phase,
  evicted,
  images: [],
});

test('a container in unknown state is stopped before it is removed (it might still run)', async () => {
  const rt = new FakeRuntime(1, 0)
    .addPodContainer('u1', 'gone', 'app', 'unknown', NOW - HOUR)
    .addPodContainer('u0', 'gone', 'app', 'exited', NOW - 2 * HOUR);
  const { gc } = collector(rt, []);
  const r = await gc.run();
  expect(r.containers.map((c) => c.id).sort()).toEqual(['u0', 'u1']);
  expect(rt.calls.indexOf('stop u1')).toBeGreaterThanOrEqual(0);
  expect(rt.calls.indexOf('stop u1')).toBeLessThan(rt.calls.indexOf('remove u1'));
  expect(rt.calls).not.toContain('stop u0');
});

test('an evicted pod that still exists in the API: every dead container, its sandbox and its log directory go; a Running pod keeps its newest', async () => {
  const rt = new FakeRuntime(1, 0)
    .addPodContainer('e1', 'evicted', 'app', 'exited', NOW - HOUR)
    .addPodContainer('e0', 'evicted', 'app', 'exited', NOW - 2 * HOUR)
    .addPodContainer('r1', 'run', 'app', 'exited', NOW - HOUR)
    .addPodContainer('r0', 'run', 'app', 'exited', NOW - 2 * HOUR);
  await mkdir(path.join(dir, 'pods', 'default_evicted_evicted'));
  await mkdir(path.join(dir, 'pods', 'default_run_run'));
  const { gc, registry } = collector(rt, [pod('evicted', 'Failed', true), pod('run', 'Running')]);
  const r = await gc.run();
  expect(Object.fromEntries(r.containers.map((c) => [c.id, c.reason]))).toEqual({
    e1: 'pod-evicted',
    e0: 'pod-evicted',
    r0: 'max-per-pod-container',
  });
  expect(r.sandboxes).toEqual([{ id: 'sb-evicted', reason: 'pod-evicted' }]);
  expect(await readdir(path.join(dir, 'pods'))).toEqual(['default_run_run']);
  expect(await registry.getSingleMetricAsString('kubegc_node_containers_removed_total')).toContain(
    'kubegc_node_containers_removed_total{reason="pod-evicted",dry_run="false"} 2',
  );
});

test('a Succeeded pod: its newest dead container stays in a normal pass and goes under pressure (the kubelet DeleteAllUnusedContainers); its logs stay', async () => {
  const rt = new FakeRuntime(1, 0)
    .addPodContainer('d1', 'done', 'app', 'exited', NOW - HOUR)
    .addPodContainer('d0', 'done', 'app', 'exited', NOW - 2 * HOUR);
  await mkdir(path.join(dir, 'pods', 'default_done_done'));
  const { gc } = collector(rt, [pod('done', 'Succeeded')]);
  const normal = await gc.run();
  expect(normal.containers).toEqual([{ id: 'd0', reason: 'max-per-pod-container' }]);
  const pressure = await gc.run({ pressure: true });
  expect(pressure.containers).toEqual([{ id: 'd1', reason: 'pod-terminated' }]);
  expect(pressure.sandboxes).toEqual([{ id: 'sb-done', reason: 'pod-terminated' }]);
  expect(await readdir(path.join(dir, 'pods'))).toEqual(['default_done_done']);
});

test('without the pod list (API down): nothing goes for a pod reason, even under pressure', async () => {
  const rt = new FakeRuntime(1, 0).addPodContainer('x0', 'evicted', 'app', 'exited', NOW - HOUR);
  const { gc } = collector(rt, { nodePods: () => Promise.reject(new Error('503')) });
  const r = await gc.run({ pressure: true });
  expect(r.podsKnown).toBe(false);
  expect(r.containers).toEqual([]);
});

test('a container started between the listing and its removal is kept, with its logs, its sandbox and its pod log directory', async () => {
  const rt = new FakeRuntime(1, 0)
    .addPodContainer('back', 'gone', 'app', 'exited', NOW - HOUR)
    .addPodContainer('dead', 'other', 'app', 'exited', NOW - HOUR);
  const podDir = path.join(dir, 'pods', 'default_gone_gone');
  await mkdir(path.join(podDir, 'app'), { recursive: true });
  const logFile = path.join(podDir, 'app', '0.log');
  await writeFile(logFile, 'still writing\n');
  const link = path.join(dir, 'containers', legacyLogSymlinkName('gone', 'default', 'app', 'back'));
  await symlink(logFile, link);
  // Both pods are gone from the API; 'back' is started again (as a runtime
  // may: a restarted static pod, another client) after the pass listed it.
  const client = await rt.connection().get();
  const status = client.containerStatus.bind(client);
  client.containerStatus = async (id) => {
    if (id === 'back')
      rt.containers = rt.containers.map((c) => (c.id === id ? { ...c, state: 'running' } : c));
    const s = await status(id);
    return s && id === 'back' ? { ...s, logPath: logFile } : s;
  };
  const { gc, registry } = collector(rt, []);
  const r = await gc.run();
  expect(rt.calls).not.toContain('remove back');
  expect(rt.containers.map((c) => c.id)).toEqual(['back']);
  expect(r.containers).toEqual([{ id: 'dead', reason: 'pod-deleted' }]);
  expect(r.kept).toEqual([{ id: 'back', state: 'running' }]);
  expect(r.sandboxes).toEqual([{ id: 'sb-other', reason: 'pod-deleted' }]);
  expect(await readdir(path.join(podDir, 'app'))).toEqual(['0.log']);
  expect(await readdir(path.join(dir, 'containers'))).toEqual([path.basename(link)]);
  expect(await registry.getSingleMetricAsString('kubegc_node_containers_kept_total')).toContain(
    'kubegc_node_containers_kept_total{state="running"} 1',
  );
});

describe('a wrong node name: pods unknown, nothing goes for a pod reason', () => {
  /**
   * A Job pod that Succeeded (two dead containers, a stopped sandbox, a log
   * directory) and a container without the kubelet's labels. Its Pod exists,
   * bound to the node's real name.
   */
  async function jobNode(): Promise<FakeRuntime> {
    const rt = new FakeRuntime(1, 0)
      .addPodContainer('j1', 'job', 'work', 'exited', NOW - HOUR)
      .addPodContainer('j0', 'job', 'work', 'exited', NOW - 2 * HOUR)
      .addContainer('stray', 'docker.io/library/app:1', 'exited');
    await mkdir(path.join(dir, 'pods', 'default_job_job', 'work'), { recursive: true });
    return rt;
  }

  /** What a pass left of the Job pod, and which removals were for pod reasons. */
  async function jobLeft(rt: FakeRuntime) {
    return {
      containers: rt.containers.map((c) => c.id).sort(),
      sandboxes: rt.sandboxes.map((s) => s.id),
      podLogDirectories: await readdir(path.join(dir, 'pods')),
    };
  }

  const connect = standInPerTest();

  test('no Node of that name in the API (its pod LIST answers []): the Succeeded Job pod keeps its newest container, sandbox and log directory; an error, a metric and one event say why', async () => {
    const rt = await jobNode();
    const requests: string[] = [];
    // The API server's answers for a name no Node has: GET 404 naming it, LIST [].
    const client = await connect((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      res.setHeader('content-type', 'application/json');
      if (req.url?.startsWith('/api/v1/nodes/wrong')) {
        res.statusCode = 404;
        res.end(
          JSON.stringify({
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            message: 'nodes "wrong" not found',
            reason: 'NotFound',
            details: { name: 'wrong', kind: 'nodes' },
            code: 404,
          }),
        );
      } else res.end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', items: [] }));
    });
    const { gc, registry, events } = collector(rt, apiPodLister(client, 'wrong'));

    const r = await gc.run();
    expect(r.podsKnown).toBe(false);
    // What does not depend on which pods exist goes on, as on the kubelet.
    expect(Object.fromEntries(r.containers.map((c) => [c.id, c.reason]))).toEqual({
      stray: 'unidentified',
      j0: 'max-per-pod-container',
    });
    expect(await jobLeft(rt)).toEqual({
      containers: ['j1'],
      sandboxes: ['sb-job'],
      podLogDirectories: ['default_job_job'],
    });
    expect(requests[0]).toMatch(/^GET \/api\/v1\/nodes\/wrong$/);
    expect(await registry.getSingleMetricAsString('kubegc_node_pods_unknown_total')).toContain(
      'kubegc_node_pods_unknown_total{reason="node-not-found"} 1',
    );
    expect(events.seen).toEqual([
      {
        reason: 'PodsUnknown',
        note: expect.stringMatching(/no Node "wrong".*--node-name or NODE_NAME/),
      },
    ]);

    // Every pass checks again; the event is not repeated while nothing changes.
    await gc.run();
    expect(await jobLeft(rt)).toEqual({
      containers: ['j1'],
      sandboxes: ['sb-job'],
      podLogDirectories: ['default_job_job'],
    });
    expect(await registry.getSingleMetricAsString('kubegc_node_pods_unknown_total')).toContain(
      'kubegc_node_pods_unknown_total{reason="node-not-found"} 2',
    );
    expect(events.seen).toHaveLength(1);
  });

  test("a Node that exists but a list that names none of the pods running here (another node's name): the Job pod is kept, even under pressure", async () => {
    const rt = (await jobNode())
      .addPodContainer('w1', 'web', 'server', 'running', NOW - HOUR)
      .readySandbox('web');
    const { gc, registry, events } = collector(rt, [pod('elsewhere', 'Running')]);
    for (const pressure of [false, true]) {
      const r = await gc.run({ pressure });
      expect(r.podsKnown).toBe(false);
      expect(r.containers.map((c) => c.reason).sort()).toEqual(
        pressure ? [] : ['max-per-pod-container', 'unidentified'],
      );
    }
    expect(await jobLeft(rt)).toEqual({
      containers: ['j1', 'w1'],
      sandboxes: ['sb-job', 'sb-web'],
      podLogDirectories: ['default_job_job'],
    });
    expect(await registry.getSingleMetricAsString('kubegc_node_pods_unknown_total')).toContain(
      'kubegc_node_pods_unknown_total{reason="ready-pods-unlisted"} 2',
    );
    expect(events.seen.map((e) => e.reason)).toEqual(['PodsUnknown']);
    expect(events.seen[0]?.note).toMatch(
      /include none of the pods whose sandboxes are ready here \(1\).*--node-name/,
    );
  });

  test('the right list (it names the running pod) is complete: a pod it does not name is deleted', async () => {
    const rt = (await jobNode())
      .addPodContainer('w1', 'web', 'server', 'running', NOW - HOUR)
      .readySandbox('web');
    const { gc } = collector(rt, [pod('web', 'Running')]);
    const r = await gc.run();
    expect(r.podsKnown).toBe(true);
    expect(await jobLeft(rt)).toEqual({
      containers: ['w1'],
      sandboxes: ['sb-web'],
      podLogDirectories: [],
    });
  });
});
