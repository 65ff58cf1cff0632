// client-go workqueue semantics (dirty set, processing set, delayed adds,
// per-key rate-limited retries) with p-queue supplying only the worker pool:
// up to `concurrency` worker loops, each taking keys from one FIFO per lane
// (src/api/lanes.ts), the user lane's first.
//
// The guarantees that controllers rely on:
//   - a key is processed by at most one worker at a time, whatever lanes it
//     was asked for in;
//   - adding a key that is already waiting is a no-op, so bursts of events for
//     one object collapse into one sync; asked for in a higher lane than the
//     one it waits in, it moves there (promoted, never demoted);
//   - adding a key while it is being processed runs it exactly once more,
//     after the current run, in the higher of the lanes asked for, so no
//     event is lost;
//   - the outcome of process() is turned into forget / requeue / backoff here,
//     in one place, instead of in every controller; a retry keeps its lane;
//   - housekeeping never holds every worker: `housekeepingWorkers` of them at
//     most, so user work always finds one free soon.

import PQueue from 'p-queue';
import { higherLane, type Lane } from '../api/lanes.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiter.ts';

export type ProcessResult =
  | { result: 'done' }
  | { result: 'retryAfter'; delayMs: number }
  | { result: 'requeue' }
  | { result: 'error'; error: unknown };

/** Processed: the key's backoff is reset. */
export const done: ProcessResult = Object.freeze({ result: 'done' });
/** Not an error, but look again after `ms` (e.g. waiting on another object); resets backoff. */
export function retryAfter(ms: number): ProcessResult {
  return { result: 'retryAfter', delayMs: ms };
}
/** Try again with per-key backoff, without reporting an error. */
export function requeue(): ProcessResult {
  return { result: 'requeue' };
}
/** Try again with per-key backoff and report `error` through `onError`. */
export function failed(error: unknown): ProcessResult {
  return { result: 'error', error };
}

/** Hooks named after client-go's workqueue metrics; a metrics module implements the ones it exports. */
export interface WorkQueueMetrics {
  /** workqueue_adds_total: a key was accepted (not a no-op re-add). */
  add?(name: string): void;
  /** workqueue_depth: keys waiting for a worker (not processing, not delayed). */
  depth?(name: string, depth: number): void;
  /** workqueue_queue_duration_seconds: from becoming ready to processing start. */
  queueLatency?(name: string, seconds: number): void;
  /** workqueue_work_duration_seconds. */
  workDuration?(name: string, seconds: number): void;
  /** workqueue_retries_total: each addRateLimited. */
  retry?(name: string): void;
}

export interface WorkQueueOptions {
  /** Metric label, e.g. 'garbage_collector_attempt_to_delete'. */
  name: string;
  /** Number of workers. */
  concurrency: number;
  /**
   * How many workers may process housekeeping keys at once; the rest are
   * kept for the user lane. Default: all but a quarter (at least one) of
   * `concurrency`, or the one worker there is.
   */
  housekeepingWorkers?: number;
  /** Decides `key`; `lane` is the lane it was taken from. */
  process: (key: string, lane: Lane) => Promise<ProcessResult>;
  /** Defaults to defaultControllerRateLimiter(). */
  rateLimiter?: RateLimiter;
  metrics?: WorkQueueMetrics;
  /**
   * Called for an 'error' result or a thrown exception, after the key was
   * requeued with backoff; `retries` is how many times the key had already been
   * requeued before this failure. Defaults to logging to stderr.
   */
  onError?: (key: string, error: unknown, retries: number) => void;
  /** Millisecond clock for the latency and duration figures. */
  now?: () => number;
}

// setTimeout fires at once for longer delays (with a warning); clamp instead.
const MAX_TIMER_MS = 2_147_483_647;

/** A key waiting for a worker, linked into its lane's list. */
interface Waiting {
  key: string;
  lane: Lane;
  /** When it became ready (the queue-latency metric). */
  since: number;
  /** When it entered this lane (the lane's oldest-item gauge). */
  laneSince: number;
  prev: Waiting | undefined;
  next: Waiting | undefined;
}

/**
 * The keys waiting in one lane, oldest first: a doubly linked list, so that
 * a key promoted to the user lane leaves the housekeeping lane in O(1).
 */
class LaneList {
  private head: Waiting | undefined;
  private tail: Waiting | undefined;
  length = 0;

  push(w: Waiting): void {
    w.prev = this.tail;
    w.next = undefined;
    if (this.tail) this.tail.next = w;
    else this.head = w;
    this.tail = w;
    this.length++;
  }

  remove(w: Waiting): void {
    if (w.prev) w.prev.next = w.next;
    else this.head = w.next;
    if (w.next) w.next.prev = w.prev;
    else this.tail = w.prev;
    w.prev = w.next = undefined;
    this.length--;
  }

  shift(): Waiting | undefined {
    const w = this.head;
    if (w) this.remove(w);
    return w;
  }

  /** The oldest. */
  peek(): Waiting | undefined {
    return this.head;
  }

  clear(): void {
    this.head = this.tail = undefined;
    this.length = 0;
  }
}

/** All but a quarter (at least one) of the workers, or the only one. */
export function defaultHousekeepingWorkers(concurrency: number): number {
  return concurrency <= 1 ? concurrency : concurrency - Math.max(1, Math.floor(concurrency / 4));
}

export class WorkQueue {
  readonly name: string;
  private readonly process: (key: string, lane: Lane) => Promise<ProcessResult>;
  private readonly rateLimiter: RateLimiter;
  private readonly metrics: WorkQueueMetrics;
  private readonly onError: (key: string, error: unknown, retries: number) => void;
  private readonly now: () => number;
  private readonly housekeepingWorkers: number;
  /** Worker loops queued in or running on `workers`; at most its concurrency. */
  private workerCount = 0;
  private readonly workers: PQueue;

  private readonly ready: Record<Lane, LaneList> = {
    user: new LaneList(),
    housekeeping: new LaneList(),
  };
  /** Keys that need processing (waiting, or re-added while processing), and the lane they run in. */
  private readonly dirty = new Map<string, Lane>();
  /** Keys waiting in a lane's list (not processing). */
  private readonly waiting = new Map<string, Waiting>();
  /** Key → processing start time and lane. */
  private readonly processing = new Map<string, { start: number; lane: Lane }>();
  /** Keys being processed, per lane. */
  private readonly running: Record<Lane, number> = { user: 0, housekeeping: 0 };
  private readonly delayed = new Map<string, { at: number; lane: Lane; timer: NodeJS.Timeout }>();
  private idleWaiters: (() => void)[] = [];
  private started = false;
  private shuttingDown = false;

  constructor(opts: WorkQueueOptions) {
    this.name = opts.name;
    this.process = opts.process;
    this.rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter();
    this.metrics = opts.metrics ?? {};
    this.onError =
      opts.onError ??
      ((key, error, retries) =>
        console.error(`${this.name}: error processing ${key} (retries ${retries}):`, error));
    this.now = opts.now ?? (() => performance.now());
    this.housekeepingWorkers =
      opts.housekeepingWorkers ?? defaultHousekeepingWorkers(opts.concurrency);
    if (!(this.housekeepingWorkers >= 1))
      throw new RangeError(`${this.name}: housekeepingWorkers must be at least 1`);
    // Paused until start(): keys added before then wait in `ready`, in order.
    this.workers = new PQueue({ concurrency: opts.concurrency, autoStart: false });
  }

  add(key: string, lane: Lane): void {
    if (this.shuttingDown) return;
    const was = this.dirty.get(key);
    if (was !== undefined) {
      if (higherLane(was, lane) !== was) this.promote(key, lane);
      return;
    }
    this.dirty.set(key, lane);
    this.metrics.add?.(this.name);
    // The worker that holds the key re-enqueues it when it finishes.
    if (this.processing.has(key)) return;
    this.enqueue(key, lane, this.now());
  }

  /** A key already asked for, now asked for in a higher lane: it runs there (next, if it is being processed). */
  private promote(key: string, lane: Lane): void {
    this.dirty.set(key, lane);
    const w = this.waiting.get(key);
    if (!w) return;
    this.ready[w.lane].remove(w);
    this.enqueue(key, lane, w.since);
  }

  addAfter(key: string, delayMs: number, lane: Lane): void {
    if (this.shuttingDown) return;
    if (!(delayMs > 0)) {
      this.add(key, lane);
      return;
    }
    const at = this.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending !== undefined) {
      // One timer per key: the earliest, in the higher of the lanes asked for.
      const higher = higherLane(pending.lane, lane);
      if (pending.at <= at) {
        pending.lane = higher;
        return;
      }
      clearTimeout(pending.timer);
      lane = higher;
    }
    const timer = setTimeout(
      () => {
        const entry = this.delayed.get(key);
        this.delayed.delete(key);
        this.add(key, entry?.lane ?? lane);
        this.checkIdle();
      },
      Math.min(delayMs, MAX_TIMER_MS),
    );
    // A pending retry alone must not keep the process alive.
    timer.unref();
    this.delayed.set(key, { at, lane, timer });
  }

  addRateLimited(key: string, lane: Lane): void {
    if (this.shuttingDown) return;
    this.metrics.retry?.(this.name);
    this.addAfter(key, this.rateLimiter.when(key), lane);
  }

  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** Keys waiting for a worker, both lanes. */
  get depth(): number {
    return this.ready.user.length + this.ready.housekeeping.length;
  }

  /** Keys waiting for a worker in `lane`. */
  laneDepth(lane: Lane): number {
    return this.ready[lane].length;
  }

  /** How long the key waiting longest in `lane` has been there (0: none waits). */
  oldestWaitingSeconds(lane: Lane): number {
    const oldest = this.ready[lane].peek();
    return oldest ? (this.now() - oldest.laneSince) / 1000 : 0;
  }

  get processingCount(): number {
    return this.processing.size;
  }

  get delayedCount(): number {
    return this.delayed.size;
  }

  unfinishedWorkSeconds(): number {
    const now = this.now();
    let total = 0;
    for (const { start } of this.processing.values()) total += now - start;
    return total / 1000;
  }

  longestRunningProcessorSeconds(): number {
    const now = this.now();
    let longest = 0;
    for (const { start } of this.processing.values()) longest = Math.max(longest, now - start);
    return longest / 1000;
  }

  start(): void {
    if (this.started || this.shuttingDown) return;
    this.started = true;
    this.workers.start();
  }

  async shutDown(): Promise<void> {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.ready.user.clear();
    this.ready.housekeeping.clear();
    this.waiting.clear();
    this.dirty.clear();
    this.metrics.depth?.(this.name, 0);
    // Workers not yet started are dropped (their promises reject with an
    // AbortError that p-queue marks handled); running ones find `ready` empty.
    this.workers.clear();
    this.checkIdle();
    await this.onIdle();
  }

  onIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return this.depth === 0 && this.processing.size === 0 && this.delayed.size === 0;
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0 || !this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private enqueue(key: string, lane: Lane, since: number): void {
    const w: Waiting = {
      key,
      lane,
      since,
      laneSince: this.now(),
      prev: undefined,
      next: undefined,
    };
    this.ready[lane].push(w);
    this.waiting.set(key, w);
    this.metrics.depth?.(this.name, this.depth);
    // Workers are long-lived loops, like client-go's goroutines calling Get():
    // one p-queue task per key would cost ~10 µs of p-queue bookkeeping per key
    // (12 s to add 1,000,000 keys). A loop not busy with user work can take a
    // housekeeping key only while fewer than housekeepingWorkers run: when
    // that many loops already could, none is added (it would exit at once).
    // Rejections other than clear()'s can only come from a throwing hook and
    // should surface as unhandled, not vanish.
    const couldTake =
      lane === 'user' || this.workerCount - this.running.user < this.housekeepingWorkers;
    if (this.workerCount < this.workers.concurrency && couldTake) {
      this.workerCount++;
      void this.workers.add(() => this.work());
    }
  }

  /** The next key for a free worker: the user lane first; housekeeping only below its share of workers. */
  private next(): Waiting | undefined {
    const user = this.ready.user.shift();
    if (user) return user;
    if (this.running.housekeeping >= this.housekeepingWorkers) return undefined;
    return this.ready.housekeeping.shift();
  }

  private async work(): Promise<void> {
    try {
      // p-queue may start a task synchronously inside add(): never run process()
      // re-entrantly from the caller's add(), whose own state change (e.g. the
      // propagator's graph write) may not be complete yet.
      await Promise.resolve();
      for (let next = this.next(); next !== undefined; next = this.next()) {
        await this.processOne(next);
      }
    } finally {
      this.workerCount--;
    }
  }

  private async processOne({ key, lane, since }: Waiting): Promise<void> {
    const start = this.now();
    this.waiting.delete(key);
    this.dirty.delete(key);
    this.processing.set(key, { start, lane });
    this.running[lane]++;
    this.metrics.depth?.(this.name, this.depth);
    this.metrics.queueLatency?.(this.name, (start - since) / 1000);

    let outcome: ProcessResult;
    try {
      outcome = await this.process(key, lane);
    } catch (error) {
      outcome = failed(error);
    }

    try {
      this.metrics.workDuration?.(this.name, (this.now() - start) / 1000);
      // Still marked as processing, so an immediate re-add only sets it dirty
      // and the key is re-enqueued below rather than run concurrently.
      this.settle(key, outcome, lane);
    } finally {
      this.processing.delete(key);
      this.running[lane]--;
      const again = this.dirty.get(key);
      if (again !== undefined && !this.shuttingDown) this.enqueue(key, again, this.now());
      this.checkIdle();
    }
  }

  private settle(key: string, outcome: ProcessResult, lane: Lane): void {
    switch (outcome.result) {
      case 'done':
        this.forget(key);
        return;
      case 'retryAfter':
        this.forget(key);
        this.addAfter(key, outcome.delayMs, lane);
        return;
      case 'requeue':
        this.addRateLimited(key, lane);
        return;
      case 'error': {
        const retries = this.numRequeues(key);
        this.addRateLimited(key, lane);
        this.onError(key, outcome.error, retries);
        return;
      }
    }
  }
}
