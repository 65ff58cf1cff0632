// Per-key requeue delays, after client-go's workqueue rate limiters. A limiter
// answers "how long until this key may be retried" and keeps whatever per-key
// history it needs until the key is forgotten.

import { TokenBucket } from '../api/token-bucket.ts';

export interface RateLimiter {
  /** Delay in milliseconds before `key` should be processed again; records a failure. */
  when(key: string): number;
  /** Clears the history of `key`, typically after it was processed successfully. */
  forget(key: string): void;
  /** How many times `key` has been requeued since it was last forgotten. */
  numRequeues(key: string): number;
}

/** `base * 2^failures`, capped at `max`: a key that keeps failing backs off, others are unaffected. */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  private readonly failures = new Map<string, number>();

  constructor(baseDelayMs = 5, maxDelayMs = 1_000_000) {
    this.baseDelayMs = baseDelayMs;
    this.maxDelayMs = maxDelayMs;
  }

  when(key: string): number {
    const exp = this.failures.get(key) ?? 0;
    this.failures.set(key, exp + 1);
    // 2^exp overflows to Infinity after ~1000 failures; min() still caps it.
    return Math.min(this.baseDelayMs * 2 ** exp, this.maxDelayMs);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/** One token bucket shared by all keys: bounds the overall retry rate, not any one key's. */
export class ItemBucketRateLimiter implements RateLimiter {
  private readonly bucket: TokenBucket;

  constructor(qps: number, burst: number, now?: () => number) {
    this.bucket = new TokenBucket(qps, burst, now);
  }

  when(_key: string): number {
    return this.bucket.reserve();
  }

  forget(_key: string): void {}

  numRequeues(_key: string): number {
    return 0;
  }
}

/** The longest delay any of the limiters asks for. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    // Every limiter must see the call (each records it), so no early exit.
    let delay = 0;
    for (const l of this.limiters) delay = Math.max(delay, l.when(key));
    return delay;
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    let n = 0;
    for (const l of this.limiters) n = Math.max(n, l.numRequeues(key));
    return n;
  }
}

/** client-go's DefaultControllerRateLimiter: per-key 5 ms..1000 s backoff, overall 10 qps with burst 100. */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(5, 1_000_000),
    new ItemBucketRateLimiter(10, 100),
  );
}
