import { jest } from '@jest/globals';
import type { Lane } from './lanes.ts';
import { LaneTokenBucket, TokenBucket } from './token-bucket.ts';

function fakeClock(start = 1000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

describe('TokenBucket.reserve', () => {
  test('the full burst is available at once, then tokens are spaced 1/qps apart', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(10, 3, clock.now);
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([0, 0, 0]);
    // Each reservation queues behind the previous one: FIFO-fair waits.
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([100, 200, 300]);
  });

  test('refills at qps while time passes', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(4, 2, clock.now);
    bucket.reserve();
    bucket.reserve();
    expect(bucket.reserve()).toBe(250);
    clock.advance(250); // pays back the reservation, balance is 0
    expect(bucket.reserve()).toBe(250);
    clock.advance(125);
    expect(bucket.reserve()).toBe(375);
  });

  test('refill is capped at burst', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(10, 2, clock.now);
    bucket.reserve();
    bucket.reserve();
    clock.advance(60_000); // enough for 600 tokens, but the bucket holds 2
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([0, 0, 100]);
  });

  test('partial tokens accumulate', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(2, 1, clock.now);
    expect(bucket.reserve()).toBe(0);
    clock.advance(250); // half a token
    expect(bucket.reserve()).toBe(250);
  });

  test('a clock stepping backwards grants nothing', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(10, 1, clock.now);
    bucket.reserve();
    clock.advance(-5000);
    expect(bucket.reserve()).toBe(100);
    clock.advance(5000);
    expect(bucket.reserve()).toBe(200);
  });

  test('rounds waits up to whole milliseconds', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(3, 1, clock.now);
    bucket.reserve();
    expect(bucket.reserve()).toBe(334);
    expect(bucket.reserve()).toBe(667);
  });

  test.each([0, -1, Infinity])('qps %p is unlimited', (qps) => {
    const bucket = new TokenBucket(qps, 1, fakeClock().now);
    const waits = Array.from({ length: 1000 }, () => bucket.reserve());
    expect(waits.every((w) => w === 0)).toBe(true);
    expect(bucket.unlimited).toBe(true);
  });

  test('rejects a burst below 1 when limited', () => {
    expect(() => new TokenBucket(5, 0)).toThrow(RangeError);
    expect(() => new TokenBucket(0, 0)).not.toThrow();
  });
});

describe('TokenBucket.take', () => {
  test('returns at once within the burst and waits once it is spent', async () => {
    const bucket = new TokenBucket(50, 2); // one token every 20 ms
    const start = performance.now();
    await bucket.take();
    await bucket.take();
    const afterBurst = performance.now();
    await bucket.take();
    await bucket.take();
    const end = performance.now();
    // Timers may fire up to a millisecond early by rounding; allow for it.
    expect(end - afterBurst).toBeGreaterThanOrEqual(39);
    expect(end - start).toBeGreaterThanOrEqual(39);
  });
});

describe('LaneTokenBucket', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  /** Takes a token for each of `lanes` (named by index and lane) and records the order they are granted in. */
  function taker(bucket: LaneTokenBucket) {
    const granted: string[] = [];
    let n = 0;
    return {
      granted,
      take(lane: Lane, count = 1): void {
        for (let i = 0; i < count; i++) {
          const name = `${lane === 'user' ? 'u' : 'h'}${n++}`;
          void bucket.take(lane).then(() => granted.push(name));
        }
      },
    };
  }

  /** Advances the fake clock (Date.now(), the bucket's clock here) and runs what came due. */
  async function advance(ms: number): Promise<void> {
    await jest.advanceTimersByTimeAsync(ms);
  }

  test('the burst goes at once, in either lane; then tokens come 1/qps apart', async () => {
    const bucket = new LaneTokenBucket(10, 3, 0.5, () => Date.now());
    const t = taker(bucket);
    t.take('housekeeping', 2);
    t.take('user', 2);
    await advance(0);
    expect(t.granted).toEqual(['h0', 'h1', 'u2']);
    await advance(99);
    expect(t.granted).toHaveLength(3);
    await advance(1);
    expect(t.granted).toEqual(['h0', 'h1', 'u2', 'u3']);
  });

  test('a user request overtakes the housekeeping requests already waiting (share 0)', async () => {
    const bucket = new LaneTokenBucket(10, 1, 0, () => Date.now());
    const t = taker(bucket);
    t.take('housekeeping', 4); // h0 takes the burst, h1-h3 wait
    await advance(0);
    t.take('user', 2); // u4, u5
    await advance(1000);
    expect(t.granted).toEqual(['h0', 'u4', 'u5', 'h1', 'h2', 'h3']);
  });

  test('while both lanes wait, housekeeping gets its share and no more; alone it gets every token', async () => {
    const bucket = new LaneTokenBucket(10, 1, 0.25, () => Date.now());
    const t = taker(bucket);
    t.take('user'); // u0: the burst
    t.take('housekeeping', 6); // h1..h6
    t.take('user', 6); // u7..u12
    await advance(100 * 12);
    // One token in four to housekeeping while user requests wait, then the rest at the full rate.
    expect(t.granted).toEqual([
      'u0',
      'u7',
      'u8',
      'u9',
      'h1',
      'u10',
      'u11',
      'u12',
      'h2',
      'h3',
      'h4',
      'h5',
      'h6',
    ]);
    expect(bucket.waiters('housekeeping') + bucket.waiters('user')).toBe(0);
  });

  test('within a lane, first come first served; the waiters are counted per lane', async () => {
    const bucket = new LaneTokenBucket(100, 1, 0.5, () => Date.now());
    const t = taker(bucket);
    t.take('user', 4);
    await advance(0);
    expect([bucket.waiters('user'), bucket.waiters('housekeeping')]).toEqual([3, 0]);
    await advance(30);
    expect(t.granted).toEqual(['u0', 'u1', 'u2', 'u3']);
  });

  test('unlimited: every request goes at once', async () => {
    const bucket = new LaneTokenBucket(0, 1, 0.5);
    const t = taker(bucket);
    t.take('housekeeping', 100);
    t.take('user', 100);
    await advance(0);
    expect(t.granted).toHaveLength(200);
  });

  test('a share of 1 or more (user work behind housekeeping) or below 0 is refused', () => {
    expect(() => new LaneTokenBucket(10, 1, 1)).toThrow(RangeError);
    expect(() => new LaneTokenBucket(10, 1, -0.1)).toThrow(RangeError);
    expect(() => new LaneTokenBucket(10, 0, 0.5)).toThrow(RangeError);
  });
});
