import { setTimeout as sleep } from 'node:timers/promises';
import { ItemExponentialFailureRateLimiter, type RateLimiter } from './rate-limiter.ts';
import type { Lane } from '../api/lanes.ts';
import {
  defaultHousekeepingWorkers,
  done,
  failed,
  requeue,
  retryAfter,
  WorkQueue,
  type ProcessResult,
  type WorkQueueOptions,
} from './workqueue.ts';

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Lets pending promise callbacks and p-queue dispatch run. */
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await settle();
}

function queue(
  process: WorkQueueOptions['process'],
  opts: Partial<WorkQueueOptions> = {},
): WorkQueue {
  return new WorkQueue({
    name: 'test',
    concurrency: 1,
    process,
    // Tiny backoff so retry tests run in milliseconds.
    rateLimiter: new ItemExponentialFailureRateLimiter(1, 20),
    onError: () => undefined,
    ...opts,
  });
}

/** Records calls and the peak number of concurrent runs, overall and per key. */
function recorder(body: (key: string, attempt: number) => Promise<ProcessResult> | ProcessResult) {
  const calls: string[] = [];
  const inFlight = new Map<string, number>();
  let running = 0;
  let maxRunning = 0;
  let maxPerKey = 0;
  const process = async (key: string): Promise<ProcessResult> => {
    calls.push(key);
    const attempt = calls.filter((k) => k === key).length;
    running++;
    maxRunning = Math.max(maxRunning, running);
    const n = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, n);
    maxPerKey = Math.max(maxPerKey, n);
    try {
      return await body(key, attempt);
    } finally {
      running--;
      inFlight.set(key, n - 1);
    }
  };
  return {
    process,
    calls,
    get maxRunning() {
      return maxRunning;
    },
    get maxPerKey() {
      return maxPerKey;
    },
  };
}

describe('WorkQueue ordering and de-duplication', () => {
  test('processes distinct keys FIFO with concurrency 1', async () => {
    const r = recorder(() => done);
    const q = queue(r.process);
    const keys = ['e', 'a', 'd', 'b', 'c'];
    for (const k of keys) q.add(k, 'user');
    q.start();
    await q.onIdle();
    expect(r.calls).toEqual(keys);
  });

  test('nothing runs before start(); keys added earlier are kept in order', async () => {
    const r = recorder(() => done);
    const q = queue(r.process);
    q.add('x', 'user');
    q.add('y', 'user');
    await sleep(5);
    expect(r.calls).toEqual([]);
    expect(q.depth).toBe(2);
    q.start();
    await q.onIdle();
    expect(r.calls).toEqual(['x', 'y']);
  });

  test('add() on a started queue never runs process() synchronously inside the caller', async () => {
    const r = recorder(() => done);
    const q = queue(r.process);
    q.start();
    q.add('a', 'user');
    // The caller may still be mid-way through the state change that caused the add.
    expect(r.calls).toEqual([]);
    await q.onIdle();
    expect(r.calls).toEqual(['a']);
  });

  test('adding a key that is already waiting is a no-op', async () => {
    const r = recorder(() => done);
    const q = queue(r.process);
    for (const k of ['a', 'b', 'a', 'a', 'b', 'c']) q.add(k, 'user');
    expect(q.depth).toBe(3);
    q.start();
    await q.onIdle();
    expect(r.calls).toEqual(['a', 'b', 'c']);
  });

  test('a key re-added while in flight runs exactly once more, after, never concurrently', async () => {
    const gate = deferred();
    const r = recorder(async (key, attempt) => {
      if (key === 'a' && attempt === 1) await gate.promise;
      return done;
    });
    const q = queue(r.process, { concurrency: 4 });
    q.start();
    q.add('a', 'user');
    await until(() => q.processingCount === 1);
    for (let i = 0; i < 5; i++) q.add('a', 'user');
    q.add('b', 'user');
    await until(() => r.calls.includes('b'));
    // Free workers must not pick up 'a' while it is still being processed.
    expect(r.calls.filter((k) => k === 'a')).toHaveLength(1);
    expect(q.depth).toBe(0);
    gate.resolve();
    await q.onIdle();
    expect(r.calls.filter((k) => k === 'a')).toHaveLength(2);
    expect(r.maxPerKey).toBe(1);
  });

  test('never runs one key on two workers under churn', async () => {
    const r = recorder(async () => {
      await sleep(1);
      return done;
    });
    const q = queue(r.process, { concurrency: 8 });
    q.start();
    for (let round = 0; round < 20; round++) {
      for (const k of ['a', 'b', 'c', 'd']) q.add(k, 'user');
      await sleep(0);
    }
    await q.onIdle();
    expect(r.maxPerKey).toBe(1);
    expect(r.maxRunning).toBeLessThanOrEqual(4);
  });
});

describe('WorkQueue concurrency', () => {
  test.each([1, 3, 7])(
    'runs at most %d keys at once, and that many when there is work',
    async (n) => {
      const r = recorder(async () => {
        await sleep(2);
        return done;
      });
      const q = queue(r.process, { concurrency: n });
      for (let i = 0; i < 40; i++) q.add(`k${i}`, 'user');
      q.start();
      await q.onIdle();
      expect(r.calls).toHaveLength(40);
      expect(r.maxRunning).toBe(n);
    },
  );

  test('drains 200,000 keys in order (dequeue is O(1), compaction keeps FIFO)', async () => {
    let count = 0;
    let outOfOrder = 0;
    const q = queue(
      async (key) => {
        // Workers start keys in queue order even with concurrency > 1.
        if (key !== `ns/pod-${count}`) outOfOrder++;
        count++;
        return done;
      },
      { concurrency: 16 },
    );
    const n = 200_000;
    for (let i = 0; i < n; i++) q.add(`ns/pod-${i}`, 'user');
    expect(q.depth).toBe(n);
    q.start();
    await q.onIdle();
    expect(count).toBe(n);
    expect(outOfOrder).toBe(0);
    expect(q.depth).toBe(0);
  });
});

describe('WorkQueue retries', () => {
  test('errors and exceptions back off per key, are reported, and done forgets', async () => {
    const seen: number[] = [];
    const errors: [string, unknown, number][] = [];
    const boom = new Error('boom');
    const process = async (key: string): Promise<ProcessResult> => {
      seen.push(q.numRequeues(key));
      if (seen.length === 1) return failed('first');
      if (seen.length <= 3) throw boom;
      return done;
    };
    const limiter = new ItemExponentialFailureRateLimiter(1, 20);
    const delays: number[] = [];
    const spy: RateLimiter = {
      when: (key) => {
        const d = limiter.when(key);
        delays.push(d);
        return d;
      },
      forget: (key) => limiter.forget(key),
      numRequeues: (key) => limiter.numRequeues(key),
    };
    const q = queue(process, {
      rateLimiter: spy,
      onError: (key, error, retries) => errors.push([key, error, retries]),
    });
    q.add('a', 'user');
    q.start();
    await until(() => seen.length === 4);
    await q.onIdle();
    expect(seen).toEqual([0, 1, 2, 3]);
    expect(delays).toEqual([1, 2, 4]);
    expect(errors).toEqual([
      ['a', 'first', 0],
      ['a', boom, 1],
      ['a', boom, 2],
    ]);
    expect(q.numRequeues('a')).toBe(0);
  });

  test('requeue backs off without reporting an error', async () => {
    const errors: unknown[] = [];
    const onError = (_key: string, error: unknown) => errors.push(error);
    const r = recorder((_key, attempt) => (attempt < 3 ? requeue() : done));
    const q = queue(r.process, { onError });
    q.add('a', 'user');
    q.start();
    await until(() => r.calls.length === 3);
    await q.onIdle();
    expect(r.calls).toEqual(['a', 'a', 'a']);
    expect(errors).toEqual([]);
  });

  test('the rate limiter history grows while failing', async () => {
    const requeues: number[] = [];
    const gate = deferred();
    const q = queue(async (key) => {
      requeues.push(q.numRequeues(key));
      if (requeues.length < 3) return failed(new Error('x'));
      await gate.promise;
      return done;
    });
    q.add('a', 'user');
    q.start();
    await until(() => requeues.length === 3);
    expect(q.numRequeues('a')).toBe(2);
    gate.resolve();
    await q.onIdle();
    expect(q.numRequeues('a')).toBe(0);
  });

  test('retryAfter forgets the backoff and runs the key again after the delay', async () => {
    const times: number[] = [];
    const requeuesAtRetry: number[] = [];
    const q = queue(async (key) => {
      times.push(performance.now());
      requeuesAtRetry.push(q.numRequeues(key));
      if (times.length === 1) return failed(new Error('x'));
      if (times.length === 2) return retryAfter(30);
      return done;
    });
    q.add('a', 'user');
    q.start();
    await until(() => times.length === 2);
    await until(() => q.delayedCount === 1);
    expect(q.numRequeues('a')).toBe(0);
    await q.onIdle();
    expect(times).toHaveLength(3);
    expect(requeuesAtRetry).toEqual([0, 1, 0]);
    // Timers can fire up to a millisecond early by rounding.
    expect((times[2] ?? 0) - (times[1] ?? 0)).toBeGreaterThanOrEqual(29);
  });
});

describe('WorkQueue.addAfter', () => {
  test('keeps only the earliest of several pending delays for a key, in the higher lane asked for', async () => {
    const r = laneRecorder();
    const q = queue(r.process);
    q.start();
    q.addAfter('a', 60_000, 'user');
    q.addAfter('a', 5, 'housekeeping');
    q.addAfter('a', 30_000, 'housekeeping');
    q.addAfter('b', 5, 'user');
    q.addAfter('b', 60_000, 'housekeeping');
    q.addAfter('c', 5, 'housekeeping');
    expect(q.delayedCount).toBe(3);
    expect(q.depth).toBe(0);
    // Were a 30 s or 60 s timer kept, this would time out.
    await q.onIdle();
    expect(r.calls.sort()).toEqual(['a@user', 'b@user', 'c@housekeeping']);
    expect(q.delayedCount).toBe(0);
  });

  test('a delay of zero or less adds at once', () => {
    const q = queue(async () => done);
    q.addAfter('a', 0, 'user');
    q.addAfter('b', -5, 'user');
    expect(q.depth).toBe(2);
    expect(q.delayedCount).toBe(0);
  });

  test('pending timers do not keep the process alive', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((t) => t === 'Timeout').length;
    const q = queue(async () => done);
    const before = timers();
    q.addAfter('a', 60_000, 'user');
    expect(q.delayedCount).toBe(1);
    expect(timers()).toBe(before);
    await q.shutDown();
  });

  test('addRateLimited uses the rate limiter delay', async () => {
    const r = recorder(() => done);
    const q = queue(r.process, { rateLimiter: new ItemExponentialFailureRateLimiter(60_000) });
    q.start();
    q.addRateLimited('a', 'user');
    expect(q.delayedCount).toBe(1);
    expect(q.numRequeues('a')).toBe(1);
    await sleep(5);
    expect(r.calls).toEqual([]);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
    await q.shutDown();
  });
});

describe('WorkQueue.shutDown and onIdle', () => {
  test('waits for in-flight work, drops waiting and delayed keys, ignores later adds', async () => {
    const gate = deferred();
    const r = recorder(async (key) => {
      if (key === 'a') await gate.promise;
      return key === 'a' ? failed(new Error('late failure')) : done;
    });
    const q = queue(r.process);
    q.add('a', 'user');
    q.add('b', 'user');
    q.addAfter('c', 60_000, 'user');
    q.start();
    await until(() => q.processingCount === 1);

    let finished = false;
    const stopping = q.shutDown().then(() => {
      finished = true;
    });
    expect(q.delayedCount).toBe(0);
    expect(q.depth).toBe(0);
    q.add('d', 'user');
    q.add('a', 'user');
    q.addAfter('e', 1, 'user');
    q.addRateLimited('f', 'user');
    await sleep(5);
    expect(finished).toBe(false);

    gate.resolve();
    await stopping;
    expect(r.calls).toEqual(['a']);
    // The failure after shutdown is not requeued.
    expect(q.delayedCount).toBe(0);
    expect(q.depth).toBe(0);
    expect(q.processingCount).toBe(0);

    q.start();
    q.add('g', 'user');
    await sleep(5);
    expect(r.calls).toEqual(['a']);
  });

  test('shutDown of an idle or never-started queue resolves', async () => {
    const q = queue(async () => done);
    q.add('a', 'user');
    await q.shutDown();
    expect(q.depth).toBe(0);
    await queue(async () => done).shutDown();
  });

  test('onIdle resolves at once when empty, and waits for delayed keys otherwise', async () => {
    const r = recorder(() => done);
    const q = queue(r.process);
    await q.onIdle();
    q.start();
    q.addAfter('a', 10, 'user');
    let idle = false;
    const waiting = q.onIdle().then(() => {
      idle = true;
    });
    await settle();
    expect(idle).toBe(false);
    await waiting;
    expect(r.calls).toEqual(['a']);
  });
});

describe('WorkQueue metrics', () => {
  test('reports adds, depth, retries and durations', async () => {
    let t = 1000;
    const now = () => t;
    const events: string[] = [];
    const depths: number[] = [];
    const latencies: number[] = [];
    const durations: number[] = [];
    let attempts = 0;
    const q = queue(
      async (key) => {
        attempts++;
        t += 2000; // each run takes 2 s of fake time
        return key === 'b' && attempts <= 2 ? requeue() : done;
      },
      {
        name: 'gc',
        now,
        rateLimiter: new ItemExponentialFailureRateLimiter(1, 1),
        metrics: {
          add: (name) => events.push(`add ${name}`),
          depth: (_name, d) => depths.push(d),
          queueLatency: (_name, s) => latencies.push(s),
          workDuration: (_name, s) => durations.push(s),
          retry: (name) => events.push(`retry ${name}`),
        },
      },
    );
    q.add('a', 'user');
    q.add('b', 'user');
    q.add('a', 'user'); // no-op, not counted
    t += 500; // both wait 0.5 s before start
    q.start();
    await q.onIdle();

    expect(events).toEqual(['add gc', 'add gc', 'retry gc', 'add gc']);
    expect(depths).toEqual([1, 2, 1, 0, 1, 0]);
    // a: 0.5 s; b: 0.5 s + a's 2 s; b again: added by its timer, started at once.
    expect(latencies).toEqual([0.5, 2.5, 0]);
    expect(durations).toEqual([2, 2, 2]);
  });

  test('unfinished work and the longest-running processor', async () => {
    let t = 0;
    const gates = new Map([
      ['a', deferred()],
      ['b', deferred()],
    ]);
    const q = queue(
      async (key) => {
        await gates.get(key)?.promise;
        return done;
      },
      { concurrency: 2, now: () => t },
    );
    expect(q.unfinishedWorkSeconds()).toBe(0);
    expect(q.longestRunningProcessorSeconds()).toBe(0);
    q.start();
    q.add('a', 'user');
    await until(() => q.processingCount === 1);
    t = 3000;
    q.add('b', 'user');
    await until(() => q.processingCount === 2);
    t = 4000;
    expect(q.unfinishedWorkSeconds()).toBe(4 + 1);
    expect(q.longestRunningProcessorSeconds()).toBe(4);
    gates.get('a')?.resolve();
    await until(() => q.processingCount === 1);
    expect(q.longestRunningProcessorSeconds()).toBe(1);
    gates.get('b')?.resolve();
    await q.onIdle();
    expect(q.unfinishedWorkSeconds()).toBe(0);
  });
});

/** Records `key@lane` of each run, and holds the runs of the keys in `held` until released. */
function laneRecorder(
  result: (key: string, lane: Lane, attempt: number) => ProcessResult = () => done,
) {
  const calls: string[] = [];
  const held = new Map<string, Deferred>();
  const inFlight = new Map<string, number>();
  let maxPerKey = 0;
  const running: Record<Lane, number> = { user: 0, housekeeping: 0 };
  const maxRunning: Record<Lane, number> = { user: 0, housekeeping: 0 };
  const process = async (key: string, lane: Lane): Promise<ProcessResult> => {
    calls.push(`${key}@${lane}`);
    const attempt = calls.filter((c) => c.startsWith(`${key}@`)).length;
    const n = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, n);
    maxPerKey = Math.max(maxPerKey, n);
    running[lane]++;
    maxRunning[lane] = Math.max(maxRunning[lane], running[lane]);
    try {
      await held.get(key)?.promise;
      return result(key, lane, attempt);
    } finally {
      running[lane]--;
      inFlight.set(key, n - 1);
    }
  };
  return {
    process,
    calls,
    /** Runs of `key` wait until release(key). */
    hold(...keys: string[]) {
      for (const k of keys) held.set(k, deferred());
    },
    release(...keys: string[]) {
      for (const k of keys) {
        held.get(k)?.resolve();
        held.delete(k);
      }
    },
    running,
    maxRunning,
    get maxPerKey() {
      return maxPerKey;
    },
  };
}

describe('WorkQueue lanes', () => {
  test('user keys are taken before housekeeping keys that waited longer', async () => {
    const r = laneRecorder();
    const q = queue(r.process);
    for (const k of ['h1', 'h2', 'h3']) q.add(k, 'housekeeping');
    q.add('u1', 'user');
    q.start();
    // A user key arriving while housekeeping runs goes next, ahead of the rest.
    r.hold('h1');
    await until(() => r.calls.length === 2);
    q.add('u2', 'user');
    r.release('h1');
    await q.onIdle();
    expect(r.calls).toEqual([
      'u1@user',
      'h1@housekeeping',
      'u2@user',
      'h2@housekeeping',
      'h3@housekeeping',
    ]);
  });

  test('a waiting housekeeping key asked for as user moves to the user lane, once', async () => {
    const r = laneRecorder();
    const q = queue(r.process);
    for (const k of ['h1', 'h2', 'h3']) q.add(k, 'housekeeping');
    q.add('u1', 'user');
    q.add('h3', 'user');
    expect([q.laneDepth('user'), q.laneDepth('housekeeping'), q.depth]).toEqual([2, 2, 4]);
    q.start();
    await q.onIdle();
    expect(r.calls).toEqual(['u1@user', 'h3@user', 'h1@housekeeping', 'h2@housekeeping']);
  });

  test('never demoted: a user key asked for as housekeeping stays in the user lane', async () => {
    const r = laneRecorder();
    const q = queue(r.process);
    q.add('h1', 'housekeeping');
    q.add('u1', 'user');
    q.add('u1', 'housekeeping');
    expect([q.laneDepth('user'), q.laneDepth('housekeeping')]).toEqual([1, 1]);
    q.start();
    await q.onIdle();
    expect(r.calls).toEqual(['u1@user', 'h1@housekeeping']);
  });

  test('re-added while processing in any lanes: once more after, in the higher, never concurrently', async () => {
    const r = laneRecorder();
    const q = queue(r.process, { concurrency: 4 });
    q.start();
    r.hold('k');
    q.add('k', 'housekeeping');
    await until(() => r.calls.length === 1);
    q.add('k', 'housekeeping');
    q.add('k', 'user');
    q.add('k', 'housekeeping');
    // Waiting for the current run, not in a lane (a worker would take it).
    expect(q.depth).toBe(0);
    r.release('k');
    await q.onIdle();
    expect(r.calls).toEqual(['k@housekeeping', 'k@user']);
    expect(r.maxPerKey).toBe(1);
  });

  test('promotion under churn never runs a key on two workers', async () => {
    const r = laneRecorder();
    const q = queue(r.process, { concurrency: 8 });
    q.start();
    const lanes: Lane[] = ['housekeeping', 'user'];
    for (let round = 0; round < 200; round++) {
      for (const k of ['a', 'b', 'c', 'd'])
        q.add(k, lanes[(round + k.charCodeAt(0)) % 2] ?? 'user');
      if (round % 3 === 0) await settle();
    }
    await q.onIdle();
    expect(r.maxPerKey).toBe(1);
  });

  test('a retry keeps its lane and its own backoff', async () => {
    const r = laneRecorder((key, _lane, attempt) => (attempt < 3 ? requeue() : done));
    const q = queue(r.process, { rateLimiter: new ItemExponentialFailureRateLimiter(1, 50) });
    q.add('h', 'housekeeping');
    q.add('u', 'user');
    q.start();
    await until(() => r.calls.filter((c) => c.startsWith('h@')).length === 2);
    // Each key counts its own failures.
    expect(q.numRequeues('h')).toBe(2);
    await q.onIdle();
    expect(r.calls.filter((c) => c.startsWith('h@'))).toEqual(Array(3).fill('h@housekeeping'));
    expect(r.calls.filter((c) => c.startsWith('u@'))).toEqual(Array(3).fill('u@user'));
    expect([q.numRequeues('h'), q.numRequeues('u')]).toEqual([0, 0]);
  });

  test('housekeeping never holds every worker; user work may take them all', async () => {
    const r = laneRecorder();
    const q = queue(r.process, { concurrency: 4 });
    const hk = Array.from({ length: 10 }, (_, i) => `h${i}`);
    const user = Array.from({ length: 6 }, (_, i) => `u${i}`);
    r.hold(...hk, ...user);
    for (const k of hk) q.add(k, 'housekeeping');
    q.start();
    await until(() => r.running.housekeeping === 3);
    await settle();
    expect(r.running.housekeeping).toBe(3);
    for (const k of user) q.add(k, 'user');
    // The worker housekeeping left free.
    await until(() => r.running.user === 1);
    expect(r.running.housekeeping).toBe(3);
    // Each worker done with housekeeping takes user work first.
    r.release(...hk);
    await until(() => r.running.user === 4);
    r.release(...user);
    await q.onIdle();
    expect(r.maxRunning).toEqual({ user: 4, housekeeping: 3 });
    expect(r.calls).toHaveLength(16);
  });

  test.each([
    [1, 1],
    [2, 1],
    [4, 3],
    [20, 15],
  ])('%i workers: housekeeping may hold %i', (workers, housekeeping) => {
    expect(defaultHousekeepingWorkers(workers)).toBe(housekeeping);
  });

  test("each lane's depth and oldest waiting key's age; a promoted key's age counts from its promotion", () => {
    let t = 0;
    const q = queue(() => Promise.resolve(done), { now: () => t });
    expect([q.oldestWaitingSeconds('user'), q.oldestWaitingSeconds('housekeeping')]).toEqual([
      0, 0,
    ]);
    q.add('h1', 'housekeeping');
    t = 1000;
    q.add('h2', 'housekeeping');
    t = 3000;
    q.add('u1', 'user');
    t = 4000;
    expect([q.oldestWaitingSeconds('user'), q.oldestWaitingSeconds('housekeeping')]).toEqual([
      1, 4,
    ]);
    q.add('h1', 'user');
    t = 4500;
    expect([q.laneDepth('user'), q.laneDepth('housekeeping')]).toEqual([2, 1]);
    expect([q.oldestWaitingSeconds('user'), q.oldestWaitingSeconds('housekeeping')]).toEqual([
      1.5, 3.5,
    ]);
  });
});
