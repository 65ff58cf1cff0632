// A client-side token bucket with the semantics of golang.org/x/time/rate as
// client-go's flowcontrol uses it: the bucket starts full, refills continuously,
// and a caller that finds it empty takes a token anyway (the count goes
// negative) and is told how long to wait. Because every reservation pushes the
// balance further down, later callers always wait longer than earlier ones, so
// waiting is FIFO-fair without keeping a queue of waiters (TokenBucket: the
// work queues' overall retry limit). The API client's bucket keeps a queue per
// lane instead, because a user request must overtake housekeeping requests
// already waiting (LaneTokenBucket).

import { setTimeout as sleep } from 'node:timers/promises';
import type { Lane } from './lanes.ts';

/**
 * The refill both buckets share: it starts full, gains `qps` tokens a second,
 * holds at most `burst`.
 */
abstract class Refill {
  readonly qps: number;
  readonly burst: number;
  private readonly now: () => number;
  protected tokens: number;
  private last: number;

  /**
   * @param qps tokens added per second; `<= 0` (or not finite) means unlimited.
   * @param burst bucket size, at least 1 when limited.
   * @param now millisecond clock; monotonic by default so wall-clock jumps do not
   *   grant or withhold tokens.
   */
  constructor(qps: number, burst: number, now: () => number) {
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

  /** Adds what the time since the last refill earned. */
  protected refill(): void {
    const t = this.now();
    // A clock that steps backwards must not mint tokens when it steps forward again.
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
      this.last = t;
    }
  }

  /** Milliseconds until the balance reaches `balance` tokens (0: it has). */
  protected msUntil(balance: number): number {
    // The epsilon absorbs float error in the refill so 1/qps spacing stays exact;
    // rounding up guarantees the token really exists when the caller wakes.
    return Math.max(0, Math.ceil(((balance - this.tokens) * 1000) / this.qps - 1e-6));
  }
}

export class TokenBucket extends Refill {
  constructor(qps: number, burst: number, now: () => number = () => performance.now()) {
    super(qps, burst, now);
  }

  /** Takes one token now and returns the milliseconds to wait before using it (0 = go). */
  reserve(): number {
    if (this.unlimited) return 0;
    this.refill();
    this.tokens -= 1;
    // The reservation is paid once the balance is back at 0.
    return this.tokens >= 0 ? 0 : this.msUntil(0);
  }

  /** Waits until a token is available for the caller. */
  async take(): Promise<void> {
    const ms = this.reserve();
    if (ms > 0) await sleep(ms);
  }
}

/** FIFO of waiters with O(1) amortized shift (Array#shift is O(n) on large arrays). */
class Waiters {
  private items: ((() => void) | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(wake: () => void): void {
    this.items.push(wake);
  }

  shift(): (() => void) | undefined {
    const wake = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return wake;
  }
}

const GO: Promise<void> = Promise.resolve();

/**
 * The client's token bucket, with two lanes (src/api/lanes.ts). The same
 * refill as TokenBucket (starts full, `qps` a second, at most `burst`), but
 * callers that find it empty wait in a queue of their lane instead of
 * reserving ahead: a reservation, once made, cannot be overtaken, and a user
 * request must overtake the housekeeping requests already waiting. Each token
 * goes to the oldest waiter of the user lane, except that while both lanes
 * wait, housekeeping gets `housekeepingShare` of the tokens (every
 * 1/share-th one), so that it never stops altogether; while no user request
 * waits, housekeeping gets every token.
 */
export class LaneTokenBucket extends Refill {
  readonly housekeepingShare: number;
  private readonly waiting: Record<Lane, Waiters> = {
    user: new Waiters(),
    housekeeping: new Waiters(),
  };
  /** Housekeeping's claim on contested tokens: +share per contested token, one token per whole unit. */
  private credit = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param housekeepingShare 0 ≤ share < 1: housekeeping's part of the tokens while user requests wait.
   * The rest as TokenBucket's.
   */
  constructor(
    qps: number,
    burst: number,
    housekeepingShare: number,
    now: () => number = () => performance.now(),
  ) {
    super(qps, burst, now);
    // At 1 housekeeping would take every contested token: user work would wait behind it.
    if (!(housekeepingShare >= 0 && housekeepingShare < 1))
      throw new RangeError(
        `housekeeping share must be at least 0 and below 1, got ${housekeepingShare}`,
      );
    this.housekeepingShare = housekeepingShare;
  }

  /** Requests of `lane` waiting for a token. */
  waiters(lane: Lane): number {
    return this.waiting[lane].length;
  }

  /** Resolves when the caller may send one request of `lane`. */
  take(lane: Lane): Promise<void> {
    if (this.unlimited) return GO;
    this.refill();
    if (this.tokens >= 1 && this.waiting.user.length + this.waiting.housekeeping.length === 0) {
      this.tokens -= 1;
      return GO;
    }
    return new Promise((resolve) => {
      this.waiting[lane].push(resolve);
      this.schedule();
    });
  }

  /** The lane the next token goes to, or undefined when nobody waits. */
  private nextLane(): Lane | undefined {
    const user = this.waiting.user.length > 0;
    const housekeeping = this.waiting.housekeeping.length > 0;
    if (!user) return housekeeping ? 'housekeeping' : undefined;
    if (!housekeeping) return 'user';
    this.credit += this.housekeepingShare;
    if (this.credit < 1) return 'user';
    this.credit -= 1;
    return 'housekeeping';
  }

  private dispatch(): void {
    this.timer = undefined;
    this.refill();
    while (this.tokens >= 1) {
      const lane = this.nextLane();
      if (lane === undefined) break;
      this.tokens -= 1;
      this.waiting[lane].shift()?.();
    }
    this.schedule();
  }

  /** Wakes dispatch() when the next token exists, if anyone waits for it. */
  private schedule(): void {
    if (this.timer !== undefined) return;
    if (this.waiting.user.length + this.waiting.housekeeping.length === 0) return;
    // A timer that fires a hair early finds no whole token and schedules itself again.
    this.timer = setTimeout(() => this.dispatch(), this.msUntil(1));
  }
}
