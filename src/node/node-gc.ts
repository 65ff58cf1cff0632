// The node GC loop: a container pass every --container-gc-period and an image
// pass every --image-gc-period, each timed, counted and reported; a failed
// pass (runtime down, API down, disk unreadable) is one error line, an event
// and a retry at the next period. `--once` runs one of each and exits.
import type { Logger } from '../log.ts';
import { diskReport, type DiskReport } from './disk-report.ts';
import { MAX_TIMER_MS } from '../timers.ts';
import type { ContainerGarbageCollector, ContainerPassResult } from './container-gc.ts';
import {
  FilesystemError,
  IMAGE_PRESENCE_PERIOD_MS,
  type ImageGarbageCollector,
  type ImagePassResult,
} from './image-gc.ts';
import type { ErrorKind, GcKind, NodeMetrics } from './metrics.ts';
import type { NodeEvents } from './node-events.ts';
import type { PressureCheck, PressureMonitor } from './pressure.ts';
import { RuntimeUnavailableError, type RuntimeConnection } from './runtime.ts';

export interface NodeGcOptions {
  imagePeriodMs: number;
  containerPeriodMs: number;
  /** How often disk pressure is checked (0: pressure reclaim off). */
  pressurePeriodMs?: number;
  /** false: no periodic image pass (high threshold 100, no maximum age: the kubelet's "off"). */
  imageGc?: boolean;
}

/** Exit codes of `kubegc node --once`. */
export const EXIT_OK = 0;
export const EXIT_PASS_FAILED = 1;
/** The image pass could not free enough to reach the low threshold. */
export const EXIT_SHORTFALL = 3;

export type PassOutcome<T> = { ok: true; result: T } | { ok: false; error: Error };

export class NodeGc {
  private readonly runtime: RuntimeConnection;
  private readonly images: ImageGarbageCollector;
  private readonly containers: ContainerGarbageCollector;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly events: NodeEvents;
  private readonly opts: NodeGcOptions;
  private readonly pressure: PressureMonitor | undefined;
  private readonly podLists: { cutShort(): number } | undefined;
  /** One pass of each kind at a time: periodic passes and pressure reclaims queue here. */
  private readonly queues: Record<'image' | 'container', Promise<unknown>> = {
    image: Promise.resolve(),
    container: Promise.resolve(),
  };
  private timers = new Set<NodeJS.Timeout>();
  private running = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(deps: {
    runtime: RuntimeConnection;
    images: ImageGarbageCollector;
    containers: ContainerGarbageCollector;
    log: Logger;
    metrics: NodeMetrics;
    events: NodeEvents;
    options: NodeGcOptions;
    pressure?: PressureMonitor;
    /** The pod lists of both passes, cut short when a reclaim needs a pass's lock. */
    podLists?: { cutShort(): number };
  }) {
    this.runtime = deps.runtime;
    this.images = deps.images;
    this.containers = deps.containers;
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.events = deps.events;
    this.opts = deps.options;
    this.pressure = deps.pressure;
    this.podLists = deps.podLists;
  }

  private exclusive<T>(kind: 'image' | 'container', run: () => Promise<T>): Promise<T> {
    const next = this.queues[kind].then(run, run);
    this.queues[kind] = next.catch(() => undefined);
    return next;
  }

  private async timed<T>(gc: GcKind, pass: () => Promise<T>): Promise<PassOutcome<T>> {
    const started = process.hrtime.bigint();
    const end = this.metrics.runDuration.startTimer({ gc });
    try {
      const result = await pass();
      this.metrics.lastSuccessTimestamp.set({ gc }, Date.now() / 1000);
      return { ok: true, result };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      const unavailable = error instanceof RuntimeUnavailableError;
      const kind: ErrorKind = unavailable
        ? 'runtime'
        : error instanceof FilesystemError
          ? 'filesystem'
          : 'other';
      this.metrics.errors.inc({ gc, kind });
      this.log.error(unavailable ? 'container runtime unavailable' : `${gc} GC pass failed`, {
        gc,
        endpoint: this.runtime.endpoint,
        error: error.message,
        durationMs: Number((process.hrtime.bigint() - started) / 1_000_000n),
      });
      this.events.warning(
        gc === 'image' ? 'ImageGCFailed' : 'ContainerGCFailed',
        `${gc} garbage collection failed: ${error.message}`,
      );
      return { ok: false, error };
    } finally {
      end();
      this.metrics.lastRunTimestamp.set({ gc }, Date.now() / 1000);
    }
  }

  /**
   * The disk as a pass would find it now, changing nothing (`kubegc explain
   * node/NAME`). Not queued behind a pass: it reads, and a reclaim must never
   * wait on an operator's question.
   */
  async explain(nodeName: string): Promise<DiskReport> {
    const [images, pressure] = await Promise.all([this.images.explain(), this.pressure?.levels()]);
    return diskReport(nodeName, Date.now(), images, pressure);
  }

  async imagePass(): Promise<PassOutcome<ImagePassResult>> {
    const started = Date.now();
    const outcome = await this.timed('image', () =>
      this.exclusive('image', () => this.images.run()),
    );
    if (outcome.ok) {
      const r = outcome.result;
      this.log.info('image GC pass done', {
        removed: r.removed.length,
        byReason: {
          age: r.removed.filter((x) => x.reason === 'age').length,
          space: r.removed.filter((x) => x.reason === 'space').length,
        },
        usagePercentBefore: r.usagePercentBefore,
        usagePercentAfter: r.usagePercentAfter,
        wantedBytes: r.wantedBytes,
        reportedFreedBytes: r.reportedFreedBytes,
        measuredFreedBytes: r.measuredFreedBytes,
        shortfallBytes: r.shortfallBytes,
        capped: r.capped,
        dryRun: r.dryRun,
        durationMs: Date.now() - started,
      });
    }
    return outcome;
  }

  async containerPass(): Promise<PassOutcome<ContainerPassResult>> {
    const started = Date.now();
    const outcome = await this.timed('container', () =>
      this.exclusive('container', () => this.containers.run()),
    );
    if (outcome.ok) {
      const r = outcome.result;
      this.log.info('container GC pass done', {
        containers: r.containers.length,
        sandboxes: r.sandboxes.length,
        podLogDirectories: r.podLogDirectories.length,
        logSymlinks: r.logSymlinks.length,
        podsKnown: r.podsKnown,
        kept: r.kept.length,
        failures: r.failures,
        dryRun: r.dryRun,
        durationMs: Date.now() - started,
      });
    }
    return outcome;
  }

  /**
   * One pressure check, and the reclaims it calls for. A failure is one error
   * line and a metric (no event: it runs every few seconds).
   */
  async pressurePass(): Promise<PassOutcome<PressureCheck> | undefined> {
    const monitor = this.pressure;
    if (!monitor) return undefined;
    const end = this.metrics.runDuration.startTimer({ gc: 'pressure' });
    try {
      // A periodic pass holding a lock may be waiting on the API server (its
      // pod list times out after 5 s, its expected-back reads as long); the
      // kubelet evicts meanwhile. Its list is cut short (that pass keeps what
      // pods could own), and its reads (nothing is expected back), before the
      // reclaim queues for the lock (PodListGate, cutShortChecks).
      const cut = (): void => {
        const n = this.podLists?.cutShort() ?? 0;
        if (n > 0)
          this.log.info('pod lists of periodic passes cut short for a pressure reclaim', {
            lists: n,
          });
        // Likewise its reads of workloads (images expected back).
        if (this.images.cutShortChecks() > 0)
          this.log.info(
            'expected-back reads of the periodic image pass cut short for a pressure reclaim',
          );
      };
      const result = await monitor.check({
        containers: () => {
          cut();
          return this.exclusive('container', () => this.containers.run({ pressure: true }));
        },
        images: (reclaim) => {
          cut();
          return this.exclusive('image', () => this.images.run({ reclaim }));
        },
      });
      this.metrics.lastSuccessTimestamp.set({ gc: 'pressure' }, Date.now() / 1000);
      return { ok: true, result };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      const kind: ErrorKind =
        error instanceof RuntimeUnavailableError
          ? 'runtime'
          : error instanceof FilesystemError
            ? 'filesystem'
            : 'other';
      this.metrics.errors.inc({ gc: 'pressure', kind });
      this.log.error(
        kind === 'runtime' ? 'container runtime unavailable' : 'disk pressure check failed',
        {
          gc: 'pressure',
          endpoint: this.runtime.endpoint,
          error: error.message,
        },
      );
      return { ok: false, error };
    } finally {
      end();
      this.metrics.lastRunTimestamp.set({ gc: 'pressure' }, Date.now() / 1000);
    }
  }

  /**
   * One container pass (dead containers release their images) then one image
   * pass; the exit code says whether both worked and the low threshold was reached.
   */
  async once(): Promise<number> {
    const containers = await this.containerPass();
    const images = this.opts.imageGc === false ? undefined : await this.imagePass();
    const pressure = await this.pressurePass();
    if (!containers.ok || (images && !images.ok) || pressure?.ok === false) return EXIT_PASS_FAILED;
    if (containers.result.failures > 0) return EXIT_PASS_FAILED;
    if (images?.ok && images.result.shortfallBytes > 0) return EXIT_SHORTFALL;
    if (pressure?.ok && pressure.result.reclaims.some((r) => r.result !== 'recovered'))
      return EXIT_SHORTFALL;
    return EXIT_OK;
  }

  /** Runs both loops until stop(); each pass starts one period after the previous one ended. */
  start(): void {
    const loop = (gc: GcKind, periodMs: number, pass: () => Promise<unknown>): void => {
      const tick = (): void => {
        if (this.stopped) return;
        const p = pass().finally(() => {
          this.running.delete(p);
          this.after(periodMs, tick);
        });
        this.running.add(p);
      };
      this.log.debug('starting GC loop', { gc, periodMs });
      tick();
    };
    // Containers first: a dead container keeps its image in use.
    loop('container', this.opts.containerPeriodMs, () => this.containerPass());
    if (this.opts.imageGc === false)
      this.log.info(
        'periodic image GC off (--image-gc-high-threshold=100 and no --image-maximum-gc-age, as on the kubelet)',
      );
    else {
      loop('image', this.opts.imagePeriodMs, () => this.imagePass());
      // Between passes, images alone, so a re-pull under a known ID is seen as new.
      if (this.opts.imagePeriodMs > IMAGE_PRESENCE_PERIOD_MS)
        loop('image', IMAGE_PRESENCE_PERIOD_MS, () =>
          this.exclusive('image', () => this.images.notePresence()).catch((err: unknown) =>
            this.log.debug('image listing between passes failed', {
              error: (err as Error).message,
            }),
          ),
        );
    }
    if (this.pressure && (this.opts.pressurePeriodMs ?? 0) > 0)
      loop('pressure', this.opts.pressurePeriodMs as number, () => this.pressurePass());
  }

  /**
   * Calls `fn` once `ms` from now, unless stopped first. A period longer than
   * setTimeout can wait (--image-gc-period=600h is legitimate) is waited in
   * steps of at most MAX_TIMER_MS; one timer of that length would fire after
   * 1 ms, and the loop would run a pass (a pod LIST among it) every millisecond.
   */
  private after(ms: number, fn: () => void): void {
    if (this.stopped) return;
    const step = Math.min(ms, MAX_TIMER_MS);
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (ms > step) this.after(ms - step, fn);
      else fn();
    }, step);
    this.timers.add(t);
  }

  /** Stops scheduling and waits for passes in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
    this.runtime.close();
  }
}
