import {
  PodListGate,
  PodsUnknownError,
  toNodePod,
  URGENT_LIST_TIMEOUT_MS,
  URGENT_SKIP_AFTER_FAILURE_MS,
  type PodListOptions,
  type PodLister,
} from './pods.ts';

describe('toNodePod', () => {
  test('images of containers, init and ephemeral containers, and of image volumes (KEP-4639)', () => {
    const pod = toNodePod({
      metadata: { uid: 'u1', name: 'web-0', namespace: 'shop' },
      spec: {
        containers: [{ image: 'app:1' }, { image: 'app:1' }],
        initContainers: [{ image: 'init:1' }],
        ephemeralContainers: [{ image: 'debug:1' }],
        volumes: [
          { image: { reference: 'docker.io/team/data:1' } },
          { image: { reference: 'models@sha256:' + 'a'.repeat(64) } },
          { image: {} },
          {},
        ],
      },
      status: { phase: 'Running' },
    });
    expect(pod).toEqual({
      uid: 'u1',
      ref: 'shop/web-0',
      namespace: 'shop',
      phase: 'Running',
      evicted: false,
      images: ['app:1', 'init:1', 'debug:1'],
      volumeImages: ['docker.io/team/data:1', 'models@sha256:' + 'a'.repeat(64)],
    });
  });

  test('the controller ownerReference (controller: true), for the images expected back; none for a bare pod or an incomplete one', () => {
    const owner = { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29000000', uid: 'j1' };
    const pod = (ownerReferences: unknown[]) =>
      toNodePod({
        metadata: {
          uid: 'u3',
          name: 'nightly-29000000-x',
          namespace: 'shop',
          ownerReferences: ownerReferences as never,
        },
        status: { phase: 'Succeeded' },
      });
    expect(
      pod([
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', uid: 'c1' },
        { ...owner, controller: true, blockOwnerDeletion: true },
      ]),
    ).toEqual({
      uid: 'u3',
      ref: 'shop/nightly-29000000-x',
      namespace: 'shop',
      controller: owner,
      phase: 'Succeeded',
      evicted: false,
      images: [],
    });
    // An owner that is not the controller, or a controller reference missing its UID.
    expect(pod([{ ...owner, controller: false }])?.controller).toBeUndefined();
    expect(pod([{ ...owner, uid: '', controller: true }])?.controller).toBeUndefined();
  });

  test('a pod without image volumes has none', () => {
    expect(toNodePod({ metadata: { uid: 'u2' }, spec: { volumes: [{}] } })).toEqual({
      uid: 'u2',
      phase: 'Pending',
      evicted: false,
      images: [],
    });
  });
});

describe('PodListGate: a pressure reclaim never waits on the API server', () => {
  /** A lister whose answers the test gives: each call waits for `answer` (or its signal). */
  function scripted() {
    const asked: PodListOptions[] = [];
    const pending: { resolve(): void; reject(e: Error): void }[] = [];
    const lister: PodLister = {
      nodePods: (o = {}) =>
        new Promise((resolve, reject) => {
          asked.push(o);
          o.signal?.addEventListener('abort', () => reject(new Error('aborted')));
          pending.push({ resolve: () => resolve([]), reject });
        }),
    };
    return { lister, asked, pending };
  }
  const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

  test('an urgent list gets the short timeout; a periodic one its own', async () => {
    const s = scripted();
    const gate = new PodListGate(s.lister);
    const urgent = gate.nodePods({ urgent: true });
    const periodic = gate.nodePods();
    await flush();
    expect(s.asked.map((o) => o.timeoutMs)).toEqual([URGENT_LIST_TIMEOUT_MS, undefined]);
    for (const p of s.pending) p.resolve();
    await expect(urgent).resolves.toEqual([]);
    await expect(periodic).resolves.toEqual([]);
  });

  test('cutShort aborts the periodic lists waiting, not the urgent one', async () => {
    const s = scripted();
    const gate = new PodListGate(s.lister);
    const periodic = gate.nodePods();
    const urgent = gate.nodePods({ urgent: true });
    await flush();
    expect(gate.cutShort()).toBe(1);
    await expect(periodic).rejects.toThrow(/cut short/);
    (s.pending[1] as { resolve(): void }).resolve();
    await expect(urgent).resolves.toEqual([]);
    // A cut is not a failure of the API: the next urgent list is asked.
    const again = gate.nodePods({ urgent: true });
    await flush();
    expect(s.asked).toHaveLength(3);
    (s.pending[2] as { resolve(): void }).resolve();
    await again;
  });

  test('after a failed list, urgent lists are not asked for a while; periodic ones are, and a success ends it', async () => {
    const s = scripted();
    const clock = { t: 1_000_000 };
    const gate = new PodListGate(s.lister, () => clock.t);
    const failing = gate.nodePods();
    await flush();
    (s.pending[0] as { reject(e: Error): void }).reject(new Error('timed out after 5000 ms'));
    await expect(failing).rejects.toThrow(/timed out/);
    clock.t += URGENT_SKIP_AFTER_FAILURE_MS - 1;
    await expect(gate.nodePods({ urgent: true })).rejects.toThrow(/not asked/);
    expect(s.asked).toHaveLength(1);
    const periodic = gate.nodePods();
    await flush();
    (s.pending[1] as { resolve(): void }).resolve();
    await periodic;
    const urgent = gate.nodePods({ urgent: true });
    await flush();
    expect(s.asked).toHaveLength(3);
    (s.pending[2] as { resolve(): void }).resolve();
    await urgent;
  });

  test('no such Node is an answer, not an API failure: urgent lists are still asked', async () => {
    let calls = 0;
    const gate = new PodListGate({
      nodePods: () => {
        calls++;
        return Promise.reject(new PodsUnknownError('node-not-found', 'no Node "x"'));
      },
    });
    await expect(gate.nodePods()).rejects.toBeInstanceOf(PodsUnknownError);
    await expect(gate.nodePods({ urgent: true })).rejects.toBeInstanceOf(PodsUnknownError);
    expect(calls).toBe(2);
  });
});
