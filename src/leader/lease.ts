// Leader election on a coordination.k8s.io/v1 Lease, with client-go's
// semantics: a candidate takes the lease when the holder has not renewed it
// within the lease duration (measured on OUR clock from when we last saw the
// record change, so clock skew between replicas does not matter); the leader
// renews every retry period and gives up if it cannot renew within the renew
// deadline; a clean stop releases the lease so a standby takes over at once.
import { ApiError, isConflict, isNotFound, type KubeClient } from '../api/client.ts';
import type { Logger } from '../log.ts';

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
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

export class LeaderElector {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly opts: LeaderElectionOptions;
  private observed: { record: string; at: number } | undefined;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private lastRenew = 0;
  private wake: (() => void) | undefined;

  constructor(client: KubeClient, log: Logger, opts: LeaderElectionOptions) {
    this.client = client;
    this.log = log;
    this.opts = opts;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
  }

  /**
   * Campaigns until this process leads (resolves), then keeps renewing in the
   * background; `onLost` is called once if the lease is lost.
   */
  async run(onLost: () => void): Promise<void> {
    this.log.info('waiting to acquire the leader lease', {
      lease: `${this.opts.namespace}/${this.opts.name}`,
      identity: this.opts.identity,
    });
    while (!this.stopped) {
      if (await this.tryAcquireOrRenew().catch((err: unknown) => this.failed('acquire', err)))
        break;
      await this.sleep(this.opts.retryPeriodMs);
    }
    if (this.stopped) return;
    this.leading = true;
    this.lastRenew = Date.now();
    this.log.info('became leader', {
      lease: `${this.opts.namespace}/${this.opts.name}`,
      identity: this.opts.identity,
    });
    const renew = async (): Promise<void> => {
      if (this.stopped || !this.leading) return;
      const ok = await this.tryAcquireOrRenew().catch((err: unknown) => this.failed('renew', err));
      if (ok) this.lastRenew = Date.now();
      else if (Date.now() - this.lastRenew > this.opts.renewDeadlineMs) {
        this.leading = false;
        this.log.error('lost the leader lease: could not renew it within the renew deadline', {
          identity: this.opts.identity,
        });
        onLost();
        return;
      }
      this.timer = setTimeout(() => void renew(), this.opts.retryPeriodMs);
    };
    this.timer = setTimeout(() => void renew(), this.opts.retryPeriodMs);
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

  /** One step of client-go's tryAcquireOrRenew. True when we hold the lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    const mine: LeaseSpec = {
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.ceil(this.opts.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    let current: Lease;
    try {
      current = await this.client.request<Lease>(
        'GET',
        `${this.path}/${encodeURIComponent(this.opts.name)}`,
        { verb: 'GET' },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.client.request('POST', this.path, {
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec: mine,
          },
          verb: 'CREATE',
        });
        return true;
      } catch (createErr) {
        if (createErr instanceof ApiError && createErr.status === 409) return false;
        throw createErr;
      }
    }
    const spec = current.spec ?? {};
    const record = JSON.stringify(spec);
    if (!this.observed || this.observed.record !== record)
      this.observed = { record, at: Date.now() };
    const held = spec.holderIdentity && spec.holderIdentity !== this.opts.identity;
    const durationMs = (spec.leaseDurationSeconds ?? 0) * 1000;
    if (held && this.observed.at + durationMs > Date.now()) return false;
    if (spec.holderIdentity === this.opts.identity) {
      mine.acquireTime = spec.acquireTime;
      mine.leaseTransitions = spec.leaseTransitions ?? 0;
    } else {
      mine.leaseTransitions = (spec.leaseTransitions ?? 0) + 1;
    }
    try {
      await this.client.request('PUT', `${this.path}/${encodeURIComponent(this.opts.name)}`, {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { ...current.metadata },
          spec: mine,
        },
        verb: 'UPDATE',
      });
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
    this.observed = { record: JSON.stringify(mine), at: Date.now() };
    return true;
  }

  /** Stops campaigning/renewing; if leading, releases the lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    if (this.timer) clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
    try {
      const current = await this.client.request<Lease>(
        'GET',
        `${this.path}/${encodeURIComponent(this.opts.name)}`,
        { verb: 'GET' },
      );
      if (current.spec?.holderIdentity !== this.opts.identity) return;
      await this.client.request('PUT', `${this.path}/${encodeURIComponent(this.opts.name)}`, {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: current.metadata,
          spec: {
            ...current.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: microTime(),
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
