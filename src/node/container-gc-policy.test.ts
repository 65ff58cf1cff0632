import type { ContainerState, SandboxState } from './cri/client.ts';
import {
  containerIdOfLogSymlink,
  CREATED_CONTAINER_GRACE_MS,
  DEFAULT_CONTAINER_GC_POLICY,
  isEvictable,
  legacyLogSymlinkName,
  listMissesReadyPods,
  planContainerRemovals,
  planSandboxRemovals,
  removablePods,
  podsDeletedFromApi,
  stillRemovable,
  podUidOfLogDirectory,
  type ContainerGcPolicy,
  type GcContainer,
  type GcSandbox,
} from './container-gc-policy.ts';

const S = 1_000_000_000n; // ns per second
const NOW = 10_000n * S;

/** A container of pod `pod` (UID = pod name), container `name`, created `ageS` seconds ago. */
const ctr = (
  id: string,
  pod: string | undefined,
  name: string | undefined,
  ageS: number,
  state: ContainerState = 'exited',
): GcContainer => ({
  id,
  sandboxId: `sb-${pod ?? 'none'}`,
  state,
  createdAtNs: NOW - BigInt(ageS) * S,
  labels: {
    ...(pod ? { 'io.kubernetes.pod.uid': pod } : {}),
    ...(name ? { 'io.kubernetes.container.name': name } : {}),
  },
});

const policy = (p: Partial<ContainerGcPolicy>): ContainerGcPolicy => ({
  ...DEFAULT_CONTAINER_GC_POLICY,
  ...p,
});

function plan(
  containers: GcContainer[],
  p: Partial<ContainerGcPolicy>,
  deleted: string[] = [],
): Record<string, string> {
  const removals = planContainerRemovals({
    containers,
    nowNs: NOW,
    policy: policy(p),
    removablePods: new Map(deleted.map((uid) => [uid, 'pod-deleted'])),
  });
  return Object.fromEntries(removals.map((r) => [r.container.id, r.reason]));
}

describe('planContainerRemovals (the kubelet cases)', () => {
  // Five dead attempts of one (pod, container): c4 newest … c0 oldest.
  const fiveDead = [4, 3, 2, 1, 0].map((i) => ctr(`c${i}`, 'p', 'app', 100 - i));

  test.each<[string, GcContainer[], Partial<ContainerGcPolicy>, string[], Record<string, string>]>([
    [
      'per-container cap 1 keeps only the newest',
      fiveDead,
      { maxPerPodContainer: 1 },
      [],
      {
        c3: 'max-per-pod-container',
        c2: 'max-per-pod-container',
        c1: 'max-per-pod-container',
        c0: 'max-per-pod-container',
      },
    ],
    [
      'per-container cap 2 keeps the two newest',
      fiveDead,
      { maxPerPodContainer: 2 },
      [],
      { c2: 'max-per-pod-container', c1: 'max-per-pod-container', c0: 'max-per-pod-container' },
    ],
    ['no limits: nothing removed', fiveDead, { maxPerPodContainer: -1, maxContainers: -1 }, [], {}],
    [
      'max containers without a per-container cap: oldest first',
      fiveDead,
      { maxPerPodContainer: -1, maxContainers: 4 },
      [],
      { c0: 'max-containers' },
    ],
    [
      'max containers 0 removes every dead container',
      [ctr('a', 'p', 'x', 10), ctr('b', 'q', 'y', 20)],
      { maxPerPodContainer: -1, maxContainers: 0 },
      [],
      { a: 'max-containers', b: 'max-containers' },
    ],
    [
      'running containers are never removed nor counted',
      [
        ctr('run', 'p', 'app', 1000, 'running'),
        ctr('c1', 'p', 'app', 50),
        ctr('c0', 'p', 'app', 60),
      ],
      { maxPerPodContainer: 1 },
      [],
      { c0: 'max-per-pod-container' },
    ],
    [
      'containers younger than the minimum age are kept',
      [ctr('new', 'p', 'app', 5), ctr('mid', 'p', 'app', 30), ctr('old', 'p', 'app', 90)],
      { maxPerPodContainer: 0, minAgeMs: 60_000 },
      [],
      { old: 'max-per-pod-container' },
    ],
    [
      'the per-container cap applies per (pod UID, container name)',
      [
        ctr('p-a-2', 'p', 'a', 10),
        ctr('p-a-1', 'p', 'a', 20),
        ctr('p-b-1', 'p', 'b', 30),
        ctr('q-a-2', 'q', 'a', 40),
        ctr('q-a-1', 'q', 'a', 50),
      ],
      { maxPerPodContainer: 1 },
      [],
      { 'p-a-1': 'max-per-pod-container', 'q-a-1': 'max-per-pod-container' },
    ],
    [
      'unidentified dead containers are removed (no pod UID or no container name)',
      [
        ctr('bare', undefined, undefined, 10),
        ctr('no-name', 'p', undefined, 10),
        ctr('ok', 'p', 'a', 10),
      ],
      { maxPerPodContainer: 1 },
      [],
      { bare: 'unidentified', 'no-name': 'unidentified' },
    ],
    [
      'unidentified running containers are left alone',
      [ctr('bare', undefined, undefined, 10, 'running')],
      {},
      [],
      {},
    ],
    [
      'every dead container of a deleted pod goes, even the newest',
      [ctr('d2', 'gone', 'a', 10), ctr('d1', 'gone', 'a', 20), ctr('l1', 'live', 'a', 30)],
      { maxPerPodContainer: 5 },
      ['gone'],
      { d2: 'pod-deleted', d1: 'pod-deleted' },
    ],
    [
      'a deleted pod keeps its running containers and its young ones',
      [
        ctr('r', 'gone', 'a', 100, 'running'),
        ctr('young', 'gone', 'b', 1),
        ctr('dead', 'gone', 'b', 100),
      ],
      { minAgeMs: 10_000 },
      ['gone'],
      { dead: 'pod-deleted' },
    ],
  ])('%s', (_name, containers, p, deleted, expected) => {
    expect(plan(containers, p, deleted)).toEqual(expected);
  });

  test('global cap: an equal share per unit first (the per-unit average rule)', () => {
    // Unit A's four are all older than unit B's four: plain oldest-first would
    // remove three of A; the average rule keeps the newest two of each.
    const containers = [
      ...[1, 2, 3, 4].map((i) => ctr(`a${i}`, 'pa', 'app', 100 - i)),
      ...[1, 2, 3, 4].map((i) => ctr(`b${i}`, 'pb', 'app', 50 - i)),
    ];
    expect(plan(containers, { maxPerPodContainer: 10, maxContainers: 5 })).toEqual({
      a1: 'max-containers',
      a2: 'max-containers',
      b1: 'max-containers',
      b2: 'max-containers',
    });
  });

  test('global cap below the number of units: one each, then the oldest go', () => {
    const containers = [
      ...[1, 2, 3, 4].map((i) => ctr(`a${i}`, 'pa', 'app', 100 - i)),
      ...[1, 2, 3, 4].map((i) => ctr(`b${i}`, 'pb', 'app', 50 - i)),
      ctr('c1', 'pc', 'app', 10),
    ];
    expect(plan(containers, { maxPerPodContainer: 10, maxContainers: 2 })).toEqual({
      a1: 'max-containers',
      a2: 'max-containers',
      a3: 'max-containers',
      b1: 'max-containers',
      b2: 'max-containers',
      b3: 'max-containers',
      a4: 'max-containers', // the oldest of the three survivors a4, b4, c1
    });
  });

  test('the global cap wins over the per-container cap', () => {
    const containers = [
      ctr('a2', 'pa', 'x', 10),
      ctr('a1', 'pa', 'x', 20),
      ctr('b1', 'pb', 'x', 30),
    ];
    expect(plan(containers, { maxPerPodContainer: 2, maxContainers: 1 })).toEqual({
      a1: 'max-containers',
      b1: 'max-containers',
    });
  });

  test('seven units with two dead each and a cap of 6: one each, then the oldest unit survivor', () => {
    const containers = [0, 1, 2, 3, 4, 5, 6].flatMap((u) => [
      ctr(`u${u}-new`, `p${u}`, 'c', 100 - u * 10),
      ctr(`u${u}-old`, `p${u}`, 'c', 105 - u * 10),
    ]);
    const removed = plan(containers, { maxPerPodContainer: -1, maxContainers: 6 });
    expect(Object.keys(removed).sort()).toEqual(
      [...[0, 1, 2, 3, 4, 5, 6].map((u) => `u${u}-old`), 'u0-new'].sort(),
    );
  });
});

describe('isEvictable', () => {
  test.each<[ContainerState, number, number, boolean]>([
    ['exited', 0, 0, true],
    ['exited', 59, 60_000, false],
    ['exited', 60, 60_000, true],
    ['unknown', 0, 0, true],
    ['running', 10_000, 0, false],
    // Created but never started: a fixed grace, whatever the minimum age.
    ['created', CREATED_CONTAINER_GRACE_MS / 1000 - 1, 0, false],
    ['created', CREATED_CONTAINER_GRACE_MS / 1000, 0, true],
  ])('%s, %d s old, min age %d ms → %p', (state, ageS, minAgeMs, expected) => {
    expect(isEvictable(ctr('x', 'p', 'c', ageS, state), NOW, policy({ minAgeMs }))).toBe(expected);
  });
});

describe('stillRemovable (the status just before a removal)', () => {
  test.each<[ContainerState, ContainerState, boolean]>([
    ['exited', 'exited', true],
    // Started since the listing: alive again.
    ['exited', 'running', false],
    ['exited', 'created', false],
    ['exited', 'unknown', false],
    // Stopped first (the kubelet's rule for unknown containers): exited now, or still unknown.
    ['unknown', 'exited', true],
    ['unknown', 'unknown', false],
    // Never started, past its grace: still never started, or started meanwhile.
    ['created', 'created', true],
    ['created', 'running', false],
  ])('listed %s, now %s → %p', (listed, now, expected) => {
    expect(stillRemovable(listed, now)).toBe(expected);
  });
});

describe("listMissesReadyPods (is the API list this node's?)", () => {
  const sb = (
    uid: string,
    state: SandboxState,
  ): { state: SandboxState; labels: Record<string, string> } => ({
    state,
    labels: uid ? { 'io.kubernetes.pod.uid': uid } : {},
  });
  test.each<[string, ReturnType<typeof sb>[], string[], boolean]>([
    ['no ready sandbox: nothing to check against', [sb('a', 'notready')], [], false],
    ['a ready pod listed', [sb('a', 'ready'), sb('b', 'ready')], ['b'], false],
    ['no ready pod listed', [sb('a', 'ready'), sb('b', 'notready')], ['b', 'c'], true],
    ['an empty list with a pod running', [sb('a', 'ready')], [], true],
    // A static pod's sandbox carries its own UID, which its mirror pod names (podUidsOf).
    [
      'a static pod, listed by its mirror pod',
      [sb('static', 'ready')],
      ['mirror', 'static'],
      false,
    ],
    // Not the kubelet's (no pod UID label): says nothing about the list.
    ['a ready sandbox without the label', [sb('', 'ready')], [], false],
  ])('%s → missed %p', (_name, sandboxes, apiUids, missed) => {
    expect(listMissesReadyPods({ sandboxes, apiUids: new Set(apiUids) }).missed).toBe(missed);
  });
});

describe('planSandboxRemovals', () => {
  const sb = (
    id: string,
    uid: string,
    ageS: number,
    state: SandboxState = 'notready',
  ): GcSandbox => ({
    id,
    uid,
    state,
    createdAtNs: NOW - BigInt(ageS) * S,
  });
  const run = (sandboxes: GcSandbox[], containerSandboxes: string[], deleted: string[] = []) =>
    Object.fromEntries(
      planSandboxRemovals({
        sandboxes,
        containers: containerSandboxes.map((sandboxId) => ({ sandboxId })),
        removablePods: new Map(deleted.map((uid) => [uid, 'pod-deleted'])),
      }).map((r) => [r.sandbox.id, r.reason]),
    );

  test.each<[string, GcSandbox[], string[], string[], Record<string, string>]>([
    [
      'a live pod keeps its newest sandbox',
      [sb('s2', 'p', 10), sb('s1', 'p', 20), sb('s0', 'p', 30)],
      [],
      [],
      { s1: 'superseded', s0: 'superseded' },
    ],
    ['the only sandbox of a live pod stays even when not ready', [sb('s', 'p', 10)], [], [], {}],
    ['ready sandboxes are active', [sb('s2', 'p', 10), sb('s1', 'p', 20, 'ready')], [], [], {}],
    [
      'sandboxes referenced by a container are active',
      [sb('s2', 'p', 10), sb('s1', 'p', 20)],
      ['s1'],
      [],
      {},
    ],
    [
      'a deleted pod loses every inactive sandbox',
      [sb('s2', 'p', 10), sb('s1', 'p', 20)],
      [],
      ['p'],
      { s2: 'pod-deleted', s1: 'pod-deleted' },
    ],
    [
      'a deleted pod keeps a ready sandbox',
      [sb('s2', 'p', 10, 'ready'), sb('s1', 'p', 20)],
      [],
      ['p'],
      { s1: 'pod-deleted' },
    ],
    [
      'pods are independent',
      [sb('a2', 'a', 10), sb('a1', 'a', 20), sb('b1', 'b', 30)],
      [],
      [],
      { a1: 'superseded' },
    ],
  ])('%s', (_name, sandboxes, referenced, deleted, expected) => {
    expect(run(sandboxes, referenced, deleted)).toEqual(expected);
  });
});

describe('podsDeletedFromApi', () => {
  test.each<[string, string[], string[], string[], string[]]>([
    ['in the API', ['a'], ['a'], [], []],
    ['absent and inactive', ['a'], [], [], ['a']],
    ['absent but running (a static pod without its mirror)', ['a'], [], ['a'], []],
    ['mixed', ['a', 'b', 'c', ''], ['a'], ['c'], ['b']],
  ])('%s', (_name, seen, api, active, deleted) => {
    expect([
      ...podsDeletedFromApi({ seenUids: seen, apiUids: new Set(api), activeUids: new Set(active) }),
    ]).toEqual(deleted);
  });
});

describe('log paths', () => {
  const id = 'a'.repeat(64);
  test('legacy symlink name and its container ID', () => {
    const name = legacyLogSymlinkName('web-1', 'default', 'nginx', id);
    expect(name).toBe(`web-1_default_nginx-${id}.log`);
    expect(containerIdOfLogSymlink(name)).toBe(id);
  });
  test('long names are cut to 255 bytes', () => {
    expect(legacyLogSymlinkName('p'.repeat(250), 'ns', 'c', id)).toHaveLength(255);
  });
  test.each(['x.log', `web_default_c-${'z'.repeat(64)}.log`, `web_default_c-${id}.txt`])(
    'no container ID in %s',
    (name) => expect(containerIdOfLogSymlink(name)).toBeUndefined(),
  );
  test.each([
    ['default_web-1_0b6c4f2e-uid', '0b6c4f2e-uid'],
    ['kube-system_my_pod_with_underscores_u1', 'u1'],
  ])('pod UID of %s', (dir, uid) => expect(podUidOfLogDirectory(dir)).toBe(uid));
});

describe('removablePods (deleted, evicted, and under pressure terminated)', () => {
  const pod = (uid: string, phase: string, evicted = false, mirrorOf?: string) => ({
    uid,
    phase,
    evicted,
    ...(mirrorOf ? { mirrorOf } : {}),
  });
  const pods = [
    pod('run', 'Running'),
    pod('done', 'Succeeded'),
    pod('failed', 'Failed'),
    pod('evicted', 'Failed', true),
    pod('mirror', 'Succeeded', false, 'static-uid'),
    pod('evicted-still-running', 'Failed', true),
  ];
  const run = (pressure: boolean) =>
    Object.fromEntries(
      removablePods({
        deleted: new Set(['gone']),
        pods,
        activeUids: new Set(['evicted-still-running']),
        pressure,
      }),
    );

  test('normal pass: deleted pods and evicted ones (as the kubelet: content of an evicted pod goes while its Pod exists)', () => {
    expect(run(false)).toEqual({ gone: 'pod-deleted', evicted: 'pod-evicted' });
  });

  test('under pressure: every terminated pod too (DeleteAllUnusedContainers), a static pod by its own UID; never a running one', () => {
    expect(run(true)).toEqual({
      gone: 'pod-deleted',
      evicted: 'pod-evicted',
      done: 'pod-terminated',
      failed: 'pod-terminated',
      mirror: 'pod-terminated',
      'static-uid': 'pod-terminated',
    });
  });

  test('the dead containers of an evicted pod go beyond the per-container cap; a Running pod keeps its newest', () => {
    const containers = [
      ctr('e1', 'evicted', 'app', 10),
      ctr('e0', 'evicted', 'app', 20),
      ctr('r1', 'run', 'app', 10),
      ctr('r0', 'run', 'app', 20),
    ];
    const removals = planContainerRemovals({
      containers,
      nowNs: NOW,
      policy: policy({}),
      removablePods: removablePods({
        deleted: new Set(),
        pods,
        activeUids: new Set(),
        pressure: false,
      }),
    });
    expect(Object.fromEntries(removals.map((r) => [r.container.id, r.reason]))).toEqual({
      e1: 'pod-evicted',
      e0: 'pod-evicted',
      r0: 'max-per-pod-container',
    });
  });
});
