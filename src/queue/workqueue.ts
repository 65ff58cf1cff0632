// client-go workqueue semantics (dirty set, processing set, delayed adds,
// per-key rate-limited retries) with p-queue supplying only the worker pool:
// up to `concurrency` worker loops, each taking keys from one FIFO.
//
// The guarantees that controllers rely on:
//   - a key is processed by at most one worker at a time;
//   - adding a key that is already waiting is a no-op, so bursts of events for
//     one object collapse into one sync;
//   - adding a key while it is being processed runs it exactly once more,
//     after the current run, so no event is lost;
//   - the outcome of process() is turned into forget / requeue / backoff here,
//     in one place, instead of in every controller.

import PQueue from 'p-queue';
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
  process: (key: string) => Promise<ProcessResult>;
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
// Dequeued slots are dropped in batches so dequeue stays O(1) amortized.
const COMPACT_AFTER = 1024;

interface Ready {
  key: string;
  since: number;
}

/** FIFO with O(1) amortized dequeue (Array#shift is O(n) on large arrays). */
class Fifo {
  private items: (Ready | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: Ready): void {
    this.items.push(item);
  }

  shift(): Ready | undefined {
    if (this.head === this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > COMPACT_AFTER && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

export class WorkQueue {
  readonly name: string;
  private readonly process: (key: string) => Promise<ProcessResult>;
  private readonly rateLimiter: RateLimiter;
  private readonly metrics: WorkQueueMetrics;
  private readonly onError: (key: string, error: unknown, retries: number) => void;
  private readonly now: () => number;
  /** Worker loops queued in or running on `workers`; at most its concurrency. */
  private workerCount = 0;
  private readonly workers: PQueue;

  private readonly ready = new Fifo();
  /** Keys that need processing: waiting in `ready`, or re-added while processing. */
  private readonly dirty = new Set<string>();
  /** Key → processing start time. */
  private readonly processing = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
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
    // Paused until start(): keys added before then wait in `ready`, in order.
    this.workers = new PQueue({ concurrency: opts.concurrency, autoStart: false });
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.metrics.add?.(this.name);
    // The worker that holds the key re-enqueues it when it finishes.
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const at = this.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending !== undefined) {
      if (pending.at <= at) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(
      () => {
        this.delayed.delete(key);
        this.add(key);
        this.checkIdle();
      },
      Math.min(delayMs, MAX_TIMER_MS),
    );
    // A pending retry alone must not keep the process alive.
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  addRateLimited(key: string): void {
    if (this.shuttingDown) return;
    this.metrics.retry?.(this.name);
    this.addAfter(key, this.rateLimiter.when(key));
  }

  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  get depth(): number {
    return this.ready.length;
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
    for (const start of this.processing.values()) total += now - start;
    return total / 1000;
  }

  longestRunningProcessorSeconds(): number {
    const now = this.now();
    let longest = 0;
    for (const start of this.processing.values()) longest = Math.max(longest, now - start);
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
    this.ready.clear();
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
    return this.ready.length === 0 && this.processing.size === 0 && this.delayed.size === 0;
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0 || !this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private enqueue(key: string): void {
    this.ready.push({ key, since: this.now() });
    this.metrics.depth?.(this.name, this.ready.length);
    // Workers are long-lived loops, like client-go's goroutines calling Get():
    // one p-queue task per key would cost ~10 µs of p-queue bookkeeping per key
    // (12 s to add 1,000,000 keys). Rejections other than clear()'s can only
    // come from a throwing hook and should surface as unhandled, not vanish.
    if (this.workerCount < this.workers.concurrency) {
      this.workerCount++;
      void this.workers.add(() => this.work());
    }
  }

  private async work(): Promise<void> {
    try {
      // p-queue may start a task synchronously inside add(): never run process()
      // re-entrantly from the caller's add(), whose own state change (e.g. the
      // propagator's graph write) may not be complete yet.
      await Promise.resolve();
      for (let next = this.ready.shift(); next !== undefined; next = this.ready.shift()) {
        await this.processOne(next);
      }
    } finally {
      this.workerCount--;
    }
  }

  private async processOne({ key, since }: Ready): Promise<void> {
    const start = this.now();
    this.dirty.delete(key);
    this.processing.set(key, start);
    this.metrics.depth?.(this.name, this.ready.length);
    this.metrics.queueLatency?.(this.name, (start - since) / 1000);

    let outcome: ProcessResult;
    try {
      outcome = await this.process(key);
    } catch (error) {
      outcome = failed(error);
    }

    try {
      this.metrics.workDuration?.(this.name, (this.now() - start) / 1000);
      // Still marked as processing, so an immediate re-add only sets it dirty
      // and the key is re-enqueued below rather than run concurrently.
      this.settle(key, outcome);
    } finally {
      this.processing.delete(key);
      if (this.dirty.has(key) && !this.shuttingDown) this.enqueue(key);
      this.checkIdle();
    }
  }

  private settle(key: string, outcome: ProcessResult): void {
    switch (outcome.result) {
      case 'done':
        this.forget(key);
        return;
      case 'retryAfter':
        this.forget(key);
        this.addAfter(key, outcome.delayMs);
        return;
      case 'requeue':
        this.addRateLimited(key);
        return;
      case 'error': {
        const retries = this.numRequeues(key);
        this.addRateLimited(key);
        this.onError(key, outcome.error, retries);
        return;
      }
    }
  }
}
