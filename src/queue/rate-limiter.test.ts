import {
  defaultControllerRateLimiter,
  ItemBucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  type RateLimiter,
} from './rate-limiter.ts';

function whenN(limiter: RateLimiter, key: string, n: number): number[] {
  return Array.from({ length: n }, () => limiter.when(key));
}

describe('ItemExponentialFailureRateLimiter', () => {
  test.each([
    [1, 5],
    [2, 10],
    [3, 20],
    [4, 40],
    [10, 2560],
    [18, 655_360],
    [19, 1_000_000],
    [30, 1_000_000],
    [2000, 1_000_000],
  ])('failure #%d waits %d ms by default', (n, delay) => {
    const limiter = new ItemExponentialFailureRateLimiter();
    expect(whenN(limiter, 'k', n).at(-1)).toBe(delay);
    expect(limiter.numRequeues('k')).toBe(n);
  });

  test('custom base and cap', () => {
    expect(whenN(new ItemExponentialFailureRateLimiter(1, 10), 'k', 6)).toEqual([
      1, 2, 4, 8, 10, 10,
    ]);
  });

  test('keys back off independently and forget resets one key', () => {
    const limiter = new ItemExponentialFailureRateLimiter();
    whenN(limiter, 'a', 3);
    expect(limiter.when('b')).toBe(5);
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);
    expect(limiter.when('a')).toBe(5);
    expect(limiter.when('b')).toBe(10);
  });
});

describe('ItemBucketRateLimiter', () => {
  test('shares one bucket across keys and keeps no per-key history', () => {
    const limiter = new ItemBucketRateLimiter(10, 2, () => 0);
    expect([limiter.when('a'), limiter.when('b'), limiter.when('c'), limiter.when('a')]).toEqual([
      0, 0, 100, 200,
    ]);
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);
  });
});

describe('MaxOfRateLimiter', () => {
  test('takes the largest delay and the largest requeue count, forgets everywhere', () => {
    const limiter = new MaxOfRateLimiter(
      new ItemExponentialFailureRateLimiter(1, 1000),
      new ItemBucketRateLimiter(10, 2, () => 0),
    );
    // Bucket: 0, 0, 100, 200; exponential: 1, 2, 4, 8.
    expect(whenN(limiter, 'k', 4)).toEqual([1, 2, 100, 200]);
    expect(limiter.numRequeues('k')).toBe(4);
    limiter.forget('k');
    expect(limiter.numRequeues('k')).toBe(0);
    // The bucket is not reset by forget: it limits the overall rate.
    expect(limiter.when('k')).toBe(300);
  });

  test('calls every limiter even when an earlier one already dominates', () => {
    const calls: string[] = [];
    const spy = (name: string, delay: number): RateLimiter => ({
      when: () => {
        calls.push(name);
        return delay;
      },
      forget: () => calls.push(`forget ${name}`),
      numRequeues: () => 0,
    });
    const limiter = new MaxOfRateLimiter(spy('big', 1000), spy('small', 1));
    expect(limiter.when('k')).toBe(1000);
    limiter.forget('k');
    expect(calls).toEqual(['big', 'small', 'forget big', 'forget small']);
  });

  test('with no limiters never delays', () => {
    expect(new MaxOfRateLimiter().when('k')).toBe(0);
  });
});

describe('defaultControllerRateLimiter', () => {
  test('starts at 5 ms per key and doubles', () => {
    const limiter = defaultControllerRateLimiter();
    expect(whenN(limiter, 'k', 4)).toEqual([5, 10, 20, 40]);
    expect(limiter.when('other')).toBe(5);
    expect(limiter.numRequeues('k')).toBe(4);
  });
});
