import { TokenBucket } from './token-bucket.ts';

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
