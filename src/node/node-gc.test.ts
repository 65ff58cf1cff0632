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

const HOUR = 3_600_000;

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

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
  const containers = new ContainerGarbageCollector(
    runtime,
    {
      policy: DEFAULT_CONTAINER_GC_POLICY,
      podLogsDir: '/nonexistent/kubegc-test/pods',
      containerLogsDir: '/nonexistent/kubegc-test/containers',
      dryRun: false,
    },
    quietLog,
    metrics,
  );
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
