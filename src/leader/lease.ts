// Leader election on a coordination.k8s.io/v1 Lease, with client-go's
// semantics: a candidate takes the lease when the holder has not renewed it
// within the lease duration (measured on OUR clock from when we last saw the
// record change, so clock skew between replicas does not matter); the leader
// renews every retry period and gives up if it cannot renew within the renew
// deadline; a clean stop releases the lease so a standby takes over at once.
//
// Writes are bounded by lease time. `lastRenew` is the moment (monotonic
// clock) the last successful acquire/renew attempt STARTED: its renewTime was
// written at that moment, and a standby counts the lease duration from when it
// sees that record, which is later still. So while
//   now − lastRenew < renewDeadline   (< leaseDuration)
// no standby can have taken over, and `mayWrite()` says exactly that. The
// write guard checks it right before every write goes on the wire (after the
// rate limiter, before every retry), so a write that waited in the token
// bucket, a Retry-After sleep or a stalled event loop cannot leave after the
// lease is gone. Each renewal's requests are aborted at lastRenew +
// renewDeadline, and the elector stops leading at that moment even if a
// request is still outstanding.
//
// The guard bounds when a write is SENT; a write can still take effect much
// later (a header refresh, a reconnect and TLS handshake, APF queuing,
// admission webhooks). So every write also carries `writeSignal()`, which
// aborts when the tenure ends (the deadline above passes without a renewal,
// a renewal read shows another holder, stop), cancelling the write on the
// wire; and a request timeout of at most leaseDuration − renewDeadline
// (`writeTimeoutMs`): a write sent before the renew deadline is over by the
// lease duration, before any standby can have taken over. A renewal read that
// shows another holder ends the tenure at once.
import { setMaxListeners } from 'node:events';
import { ApiError, isConflict, isNotFound } from '../api/errors.ts';
import { type RequestOptions } from '../api/request.ts';
import type { Logger } from '../log.ts';

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Monotonic millisecond clock (default performance.now()); tests substitute it. */
  now?: () => number;
  /** Wall clock for the Lease's acquireTime/renewTime (default new Date()). */
  wallClock?: () => Date;
}

/**
 * What bounds a write in time beyond the guard: what LeaderElector offers to
 * the writers (GcApi).
 */
/**
 * What a write carries under a tenure: its signal (none yet: the guard
 * refuses the write anyway) and a timeout of at most writeTimeoutMs.
 */
export function tenureRequestOptions(tenure: WriteTenure | undefined): {
  signal?: AbortSignal;
  timeoutMs?: number;
} {
  if (!tenure) return {};
  const signal = tenure.writeSignal();
  return { ...(signal ? { signal } : {}), timeoutMs: Math.max(1, tenure.writeTimeoutMs) };
}

/** A write refused because this replica is not (or no longer) the leader: not a failure of the write. */
export class NotLeaderError extends Error {}

export interface WriteTenure {
  /**
   * Aborts when this replica's right to write ends; every write in flight
   * carries it and is cancelled on the wire then. undefined: no tenure yet
   * (the guard refuses every write anyway).
   */
  writeSignal(): AbortSignal | undefined;
  /** The longest one write may take (its request timeout). */
  readonly writeTimeoutMs: number;
}

/** The part of KubeClient the elector uses (a stand-in in unit tests). */
export interface LeaseClient {
  request<T>(method: string, path: string, o?: RequestOptions): Promise<T>;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
interface Lease {
  metadata?: { resourceVersion?: string; name?: string; namespace?: string };
  spec?: LeaseSpec;
}

/** MicroTime as the API server wants it (RFC 3339 with microseconds). */
function microTime(d = new Date()): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** An acquire/renew attempt in flight, abortable when its deadline passes or on stop. */
interface Attempt {
  abort: AbortController;
  done: Promise<boolean>;
}

export class LeaderElector implements WriteTenure {
  private readonly client: LeaseClient;
  private readonly log: Logger;
  private readonly opts: LeaderElectionOptions;
  private readonly now: () => number;
  private readonly wallClock: () => Date;
  /** The last Lease record seen and when (monotonic), for the standby's expiry check. */
  private observed: { record: string; at: number } | undefined;
  private leading = false;
  private stopped = false;
  private renewTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** Monotonic start of the last successful acquire/renew attempt. */
  private lastRenew = -Infinity;
  private attempt: Attempt | undefined;
  /** Aborted when the current tenure ends (lost, or stopped); a new one per acquisition. */
  private tenure: AbortController | undefined;
  private onLost: (() => void) | undefined;
  private wake: (() => void) | undefined;

  constructor(client: LeaseClient, log: Logger, opts: LeaderElectionOptions) {
    this.client = client;
    this.log = log;
    this.opts = opts;
    this.now = opts.now ?? (() => performance.now());
    this.wallClock = opts.wallClock ?? (() => new Date());
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * Whether a write may go on the wire now: this replica leads and its last
   * successful renewal started less than the renew deadline ago. Reads the
   * clock itself, so it turns false the moment the deadline passes, also when
   * the event loop was stalled and no timer has run yet.
   */
  mayWrite(): boolean {
    return this.leading && !this.stopped && this.now() - this.lastRenew < this.opts.renewDeadlineMs;
  }

  /**
   * When (monotonic) the right to write ends unless a renewal succeeds first:
   * lastRenew + renewDeadline; undefined when not leading.
   */
  writeDeadline(): number | undefined {
    return this.leading && !this.stopped ? this.lastRenew + this.opts.renewDeadlineMs : undefined;
  }

  /**
   * Aborts when the tenure ends: at writeDeadline() (re-armed by every
   * successful renewal), when a renewal read shows another holder, or on
   * stop(). Already aborted once the tenure is over.
   */
  writeSignal(): AbortSignal | undefined {
    return this.tenure?.signal;
  }

  /**
   * A write's request timeout: sent before the renew deadline, it is over
   * before the lease duration, so it cannot take effect after a standby
   * could have taken over.
   */
  get writeTimeoutMs(): number {
    return this.opts.leaseDurationMs - this.opts.renewDeadlineMs;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
  }

  private get leaseRef(): string {
    return `${this.opts.namespace}/${this.opts.name}`;
  }

  /**
   * Campaigns until this process leads (resolves), then keeps renewing in the
   * background; `onLost` is called once if the lease is lost.
   */
  async run(onLost: () => void): Promise<void> {
    this.onLost = onLost;
    this.log.info('waiting to acquire the leader lease', {
      lease: this.leaseRef,
      identity: this.opts.identity,
    });
    while (!this.stopped) {
      const start = this.now();
      const ok = await this.attemptOnce(start + this.opts.renewDeadlineMs, 'acquire');
      // An acquire that completed only after its renew deadline is not used:
      // the next attempt renews the record (we are its holder) with a fresh start.
      if (ok && !this.stopped && this.now() - start < this.opts.renewDeadlineMs) {
        this.leading = true;
        this.lastRenew = start;
        this.tenure = new AbortController();
        // Every write in flight listens on it.
        setMaxListeners(0, this.tenure.signal);
        break;
      }
      if (this.stopped) break;
      await this.sleep(this.opts.retryPeriodMs);
    }
    if (this.stopped) return;
    this.armDeadline();
    this.log.info('became leader', { lease: this.leaseRef, identity: this.opts.identity });
    this.renewTimer = setTimeout(() => void this.renew(), this.opts.retryPeriodMs);
  }

  private async renew(): Promise<void> {
    this.renewTimer = undefined;
    if (this.stopped || !this.leading) return;
    const start = this.now();
    const deadline = this.lastRenew + this.opts.renewDeadlineMs;
    const ok = await this.attemptOnce(deadline, 'renew');
    if (this.stopped || !this.leading) return;
    if (ok && this.now() < deadline) {
      this.lastRenew = start;
      this.armDeadline();
    } else if (this.now() >= deadline) {
      // The deadline timer may not have run yet (a stalled event loop).
      this.lose('could not renew it within the renew deadline');
      return;
    }
    this.renewTimer = setTimeout(() => void this.renew(), this.opts.retryPeriodMs);
  }

  /** Stops leading when lastRenew + renewDeadline passes without a successful renewal. */
  private armDeadline(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    const left = this.lastRenew + this.opts.renewDeadlineMs - this.now();
    this.deadlineTimer = setTimeout(
      () => {
        this.deadlineTimer = undefined;
        if (!this.leading || this.stopped) return;
        if (this.now() - this.lastRenew >= this.opts.renewDeadlineMs)
          this.lose('could not renew it within the renew deadline');
        else this.armDeadline();
      },
      Math.max(1, Math.ceil(left)),
    );
  }

  private lose(why: string, fields: Record<string, unknown> = {}): void {
    if (!this.leading) return;
    this.leading = false;
    this.clearTimers();
    // Writes in flight are cancelled on the wire: none may take effect from now on.
    this.tenure?.abort(new Error(`the leader lease was lost: ${why}`));
    this.attempt?.abort.abort(new Error(`lost the leader lease: ${why}`));
    this.log.error(`lost the leader lease: ${why}`, {
      identity: this.opts.identity,
      renewDeadlineMs: this.opts.renewDeadlineMs,
      ...fields,
    });
    this.onLost?.();
  }

  private clearTimers(): void {
    if (this.renewTimer) clearTimeout(this.renewTimer);
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.renewTimer = undefined;
    this.deadlineTimer = undefined;
  }

  /**
   * One tryAcquireOrRenew, stamped with the wall-clock time of this call (the
   * caller read the monotonic clock just before), whose requests are aborted
   * when `deadline` (monotonic) passes.
   */
  private attemptOnce(deadline: number, what: string): Promise<boolean> {
    if (this.now() >= deadline) return Promise.resolve(false);
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new Error(`${what}: renew deadline passed`)),
      Math.max(1, Math.ceil(deadline - this.now())),
    );
    const attempt: Attempt = {
      abort,
      done: this.tryAcquireOrRenew(this.wallClock(), abort.signal, deadline)
        .catch((err: unknown) => this.failed(what, err))
        .finally(() => {
          clearTimeout(timer);
          if (this.attempt === attempt) this.attempt = undefined;
        }),
    };
    this.attempt = attempt;
    return attempt.done;
  }

  private failed(what: string, err: unknown): false {
    this.log.warn(`leader election: ${what} failed`, { error: (err as Error).message });
    return false;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((r) => {
      const t = setTimeout(r, ms);
      this.wake = () => {
        clearTimeout(t);
        r();
      };
    });
  }

  /**
   * Request options bounded by the attempt's deadline: aborted when it passes,
   * and never sent (nor retried after a 429) once it has passed.
   */
  private bounded(signal: AbortSignal, deadline: number, verb: string): RequestOptions {
    const check = (): void => {
      if (signal.aborted || this.now() >= deadline)
        throw new Error(`leader election ${verb}: the renew deadline passed`);
    };
    check();
    return {
      verb,
      signal,
      timeoutMs: Math.max(1, Math.ceil(deadline - this.now())),
      beforeSend: check,
    };
  }

  /**
   * One step of client-go's tryAcquireOrRenew, stamped with `at` (the moment
   * the attempt started). True when we hold the lease afterwards.
   */
  private async tryAcquireOrRenew(
    at: Date,
    signal: AbortSignal,
    deadline: number,
  ): Promise<boolean> {
    const mine: LeaseSpec = {
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.ceil(this.opts.leaseDurationMs / 1000),
      acquireTime: microTime(at),
      renewTime: microTime(at),
      leaseTransitions: 0,
    };
    let current: Lease;
    try {
      current = await this.client.request<Lease>(
        'GET',
        `${this.path}/${encodeURIComponent(this.opts.name)}`,
        this.bounded(signal, deadline, 'GET'),
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.client.request('POST', this.path, {
          ...this.bounded(signal, deadline, 'CREATE'),
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec: mine,
          },
        });
        this.observed = { record: JSON.stringify(mine), at: this.now() };
        return true;
      } catch (createErr) {
        if (createErr instanceof ApiError && createErr.status === 409) return false;
        throw createErr;
      }
    }
    const spec = current.spec ?? {};
    const record = JSON.stringify(spec);
    if (!this.observed || this.observed.record !== record)
      this.observed = { record, at: this.now() };
    // Leading, and the Lease names someone else (or nobody): another replica
    // took it over (or it was released). Stop writing at once, not at the deadline.
    if (this.leading && spec.holderIdentity !== this.opts.identity) {
      this.lose('a renewal read shows another holder', { holder: spec.holderIdentity ?? '' });
      return false;
    }
    const held = spec.holderIdentity && spec.holderIdentity !== this.opts.identity;
    const durationMs = (spec.leaseDurationSeconds ?? 0) * 1000;
    if (held && this.observed.at + durationMs > this.now()) return false;
    if (spec.holderIdentity === this.opts.identity) {
      mine.acquireTime = spec.acquireTime;
      mine.leaseTransitions = spec.leaseTransitions ?? 0;
    } else {
      mine.leaseTransitions = (spec.leaseTransitions ?? 0) + 1;
    }
    try {
      await this.client.request('PUT', `${this.path}/${encodeURIComponent(this.opts.name)}`, {
        ...this.bounded(signal, deadline, 'UPDATE'),
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { ...current.metadata },
          spec: mine,
        },
      });
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
    this.observed = { record: JSON.stringify(mine), at: this.now() };
    return true;
  }

  /**
   * Stops campaigning/renewing; if leading, releases the lease so a standby
   * takes over at once. The caller stops its writes and drains them first:
   * mayWrite() is false from here on.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    this.clearTimers();
    // The caller drained its writes first; any still in flight stop here,
    // before the Lease is released.
    this.tenure?.abort(new Error('the leader elector is stopping'));
    const inFlight = this.attempt;
    if (inFlight) {
      inFlight.abort.abort(new Error('stopping'));
      await inFlight.done;
    }
    // An aborted attempt may still have written the record: release it too.
    if (!this.leading && !inFlight) return;
    this.leading = false;
    const opts = { timeoutMs: this.opts.renewDeadlineMs };
    try {
      const current = await this.client.request<Lease>(
        'GET',
        `${this.path}/${encodeURIComponent(this.opts.name)}`,
        { ...opts, verb: 'GET' },
      );
      if (current.spec?.holderIdentity !== this.opts.identity) return;
      await this.client.request('PUT', `${this.path}/${encodeURIComponent(this.opts.name)}`, {
        ...opts,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: current.metadata,
          spec: {
            ...current.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: microTime(this.wallClock()),
          },
        },
        verb: 'UPDATE',
      });
      this.log.info('released the leader lease', { identity: this.opts.identity });
    } catch (err) {
      this.log.warn('could not release the leader lease', { error: (err as Error).message });
    }
  }
}
