// A client-side token bucket with the semantics of golang.org/x/time/rate as
// client-go's flowcontrol uses it: the bucket starts full, refills continuously,
// and a caller that finds it empty takes a token anyway (the count goes
// negative) and is told how long to wait. Because every reservation pushes the
// balance further down, later callers always wait longer than earlier ones, so
// waiting is FIFO-fair without keeping a queue of waiters.

import { setTimeout as sleep } from 'node:timers/promises';

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  private readonly now: () => number;
  private tokens: number;
  private last: number;

  /**
   * @param qps tokens added per second; `<= 0` (or not finite) means unlimited.
   * @param burst bucket size, at least 1 when limited.
   * @param now millisecond clock; monotonic by default so wall-clock jumps do not
   *   grant or withhold tokens.
   */
  constructor(qps: number, burst: number, now: () => number = () => performance.now()) {
    if (qps > 0 && Number.isFinite(qps) && !(burst >= 1)) {
      // x/time/rate with burst 0 refuses every request, which is never what a
      // caller of a rate-limited client means.
      throw new RangeError(`token bucket burst must be at least 1, got ${burst}`);
    }
    this.qps = qps;
    this.burst = burst;
    this.now = now;
    this.tokens = burst;
    this.last = now();
  }

  get unlimited(): boolean {
    return !(this.qps > 0 && Number.isFinite(this.qps));
  }

  /** Takes one token now and returns the milliseconds to wait before using it (0 = go). */
  reserve(): number {
    if (this.unlimited) return 0;
    const t = this.now();
    // A clock that steps backwards must not mint tokens when it steps forward again.
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
      this.last = t;
    }
    this.tokens -= 1;
    if (this.tokens >= 0) return 0;
    // The epsilon absorbs float error in the refill so 1/qps spacing stays exact;
    // rounding up guarantees the token really exists when the caller wakes.
    return Math.max(0, Math.ceil((-this.tokens * 1000) / this.qps - 1e-6));
  }

  /** Waits until a token is available for the caller. */
  async take(): Promise<void> {
    const ms = this.reserve();
    if (ms > 0) await sleep(ms);
  }
}
