// The node GC loop's scheduling under Jest's fake timers (which, as Node.js,
// fire a delay above 2^31−1 ms after 1 ms): a period longer than one timer can
// wait still means one pass per period. The passes run over a runtime in memory.
import { jest } from '@jest/globals';
import {
  FakeRuntime,
  quietLog,
  recordingEvents,
  testMetrics,
} from '../../test/support/fake-cri-runtime.ts';
import { MAX_TIMER_MS } from '../timers.ts';
import { ContainerGarbageCollector } from './container-gc.ts';
import { DEFAULT_CONTAINER_GC_POLICY } from './container-gc-policy.ts';
import { ImageGarbageCollector } from './image-gc.ts';
import { NodeGc } from './node-gc.ts';
import { PodListGate, type PodListOptions, type PodLister } from './pods.ts';
import { PressureMonitor } from './pressure.ts';
import { DEFAULT_EVICTION_HARD, parseEvictionHard } from './pressure-policy.ts';

const HOUR = 3_600_000;

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

/** A container GC over `runtime` with no log directories, and this node's pods from `pods`. */
function containerGc(
  runtime: ReturnType<FakeRuntime['connection']>,
  metrics: ReturnType<typeof testMetrics>['metrics'],
  pods?: PodLister,
): ContainerGarbageCollector {
  return new ContainerGarbageCollector(
    runtime,
    {
      policy: DEFAULT_CONTAINER_GC_POLICY,
      podLogsDir: '/nonexistent/kubegc-test/pods',
      containerLogsDir: '/nonexistent/kubegc-test/containers',
      dryRun: false,
      ...(pods ? { pods } : {}),
    },
    quietLog,
    metrics,
  );
}

/** A NodeGc over an empty runtime whose image passes are counted (one ImageFsInfo look each). */
function nodeGc(imagePeriodMs: number, containerPeriodMs: number) {
  const rt = new FakeRuntime(100, 0);
  const passes = { image: 0 };
  const { metrics } = testMetrics();
  const events = recordingEvents();
  const runtime = rt.connection();
  const images = new ImageGarbageCollector(
    runtime,
    rt.imageGcOptions({
      imageStore: (mountpoint) => {
        passes.image++;
        return rt.imageStore(mountpoint);
      },
    }),
    quietLog,
    metrics,
    events,
  );
  const containers = containerGc(runtime, metrics);
  const gc = new NodeGc({
    runtime,
    images,
    containers,
    log: quietLog,
    metrics,
    events,
    options: { imagePeriodMs, containerPeriodMs },
  });
  return { gc, passes };
}

test('--image-gc-period=600h (above the 2^31−1 ms one timer can wait): one pass at start, the next 600h later, none between', async () => {
  const period = 600 * HOUR;
  expect(period).toBeGreaterThan(MAX_TIMER_MS);
  const { gc, passes } = nodeGc(period, period);
  gc.start();
  await jest.advanceTimersByTimeAsync(3000);
  expect(passes.image).toBe(1);
  await jest.advanceTimersByTimeAsync(period - 3000 - 1);
  expect(passes.image).toBe(1);
  await jest.advanceTimersByTimeAsync(1);
  expect(passes.image).toBe(2);
  await gc.stop();
});

test('stop() during a long wait: no pass after it, whichever step of the wait it falls in', async () => {
  const period = 3 * MAX_TIMER_MS;
  const { gc, passes } = nodeGc(period, period);
  gc.start();
  await jest.advanceTimersByTimeAsync(3000);
  expect(passes.image).toBe(1);
  await jest.advanceTimersByTimeAsync(MAX_TIMER_MS);
  expect(passes.image).toBe(1);
  await gc.stop();
  await jest.advanceTimersByTimeAsync(3 * period);
  expect(passes.image).toBe(1);
  expect(jest.getTimerCount()).toBe(0);
});

test('the API server not answering: a pressure reclaim cuts short the pod list a periodic pass holds its lock for, asks none itself, and frees the disk', async () => {
  jest.useRealTimers();
  const MB = 1_000_000;
  // 100 MB, 19 MB available: the kubelet evicts below 15 MB, kubegc starts at 20.
  const rt = new FakeRuntime(100 * MB, 50 * MB).addApps(6, 5 * MB, (i) => String(i).repeat(64));
  rt.addImage({
    id: 'p'.repeat(64),
    repoTags: ['registry.k8s.io/pause:3.10'],
    layers: { p: 1 * MB },
  });
  const runtime = rt.connection();
  const { metrics } = testMetrics();
  const events = recordingEvents();
  // The first list fails (a timeout); every later one waits until aborted, as
  // a request to an unreachable API server does until its timeout.
  const asked: PodListOptions[] = [];
  const pods = new PodListGate({
    nodePods: (o = {}) => {
      asked.push(o);
      if (asked.length === 1) return Promise.reject(new Error('timed out after 5000 ms'));
      return new Promise((_, reject) =>
        o.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    },
  });
  const clock = { t: Date.now() - 3_600_000 };
  const images = new ImageGarbageCollector(
    runtime,
    rt.imageGcOptions({ pods, now: () => clock.t }),
    quietLog,
    metrics,
    events,
  );
  await images.detectImages(await runtime.get()); // every image old enough from now on
  clock.t = Date.now();
  const containers = containerGc(runtime, metrics, pods);
  rt.imageFs = [{ mountpoint: '/var/lib/containerd' }];
  const pressure = new PressureMonitor(
    runtime,
    {
      thresholds: parseEvictionHard(DEFAULT_EVICTION_HARD).thresholds,
      margin: { percent: 5 },
      rootDir: '/var/lib/kubelet',
      dryRun: false,
      statfs: rt.statfs,
      device: () => Promise.resolve(1n),
    },
    quietLog,
    metrics,
    events,
  );
  const gc = new NodeGc({
    ...{ runtime, images, containers, metrics, events, log: quietLog, pressure, podLists: pods },
    options: { imagePeriodMs: HOUR, containerPeriodMs: HOUR },
  });
  expect(asked).toHaveLength(1); // the failed one, in detectImages above
  // A periodic container pass holds its lock, waiting on the API.
  const periodic = gc.containerPass();
  for (const until = Date.now() + 5_000; asked.length < 2 && Date.now() < until;)
    await new Promise((r) => setTimeout(r, 5));
  expect(asked).toHaveLength(2);

  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'still waiting'>((r) => {
    timer = setTimeout(() => r('still waiting'), 5_000);
  });
  const outcome = await Promise.race([gc.pressurePass(), deadline]);
  clearTimeout(timer);
  expect(outcome).not.toBe('still waiting');
  if (outcome === 'still waiting' || !outcome?.ok) throw new Error('no reclaim');
  expect(outcome.result.reclaims).toMatchObject([
    { signal: 'imagefs.available', result: 'recovered', imagesRemoved: 2 },
  ]);
  // The periodic pass was cut short (pods unknown: it removed nothing for a
  // pod reason); the reclaim asked the API nothing (its last answer failed).
  const p = await periodic;
  expect(p.ok && p.result.podsKnown).toBe(false);
  expect(asked).toHaveLength(2);
  expect(rt.images.has('p'.repeat(64))).toBe(true);
});
