// The leader elector's time bounds, with an in-memory Lease whose requests the
// test can hold up, and jest's fake clock (setTimeout and performance.now).
// The real API server and two real replicas: test/e2e/leader-tenure.test.ts.
import { jest } from '@jest/globals';
import { ApiError } from '../api/errors.ts';
import { type RequestOptions } from '../api/request.ts';
import { silentLogger } from '../log.ts';
import { LeaderElector, type LeaderElectionOptions } from './lease.ts';

interface Call {
  method: string;
  path: string;
  verb: string | undefined;
  signal: AbortSignal | undefined;
  timeoutMs: number | undefined;
  at: number;
}

interface LeaseObject {
  metadata: { name: string; namespace: string; resourceVersion: string };
  spec: Record<string, unknown>;
}

/** One Lease in memory; while `hang` is set, requests never answer (until their signal aborts). */
class FakeLeaseApi {
  lease: LeaseObject | undefined;
  hang = false;
  readonly calls: Call[] = [];
  private rv = 0;

  request<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    this.calls.push({
      method,
      path,
      verb: o.verb,
      signal: o.signal,
      timeoutMs: o.timeoutMs,
      at: performance.now(),
    });
    if (this.hang) {
      return new Promise<T>((_resolve, reject) => {
        o.signal?.addEventListener('abort', () => reject(new ApiError(method, path, 0, 'aborted')));
      });
    }
    return Promise.resolve(this.answer(method, path, o) as T);
  }

  private answer(method: string, path: string, o: RequestOptions): unknown {
    const body = o.body as LeaseObject | undefined;
    switch (method) {
      case 'GET':
        if (!this.lease) throw new ApiError(method, path, 404, '{"reason":"NotFound"}');
        return structuredClone(this.lease);
      case 'POST':
        if (this.lease) throw new ApiError(method, path, 409, '{"reason":"AlreadyExists"}');
        this.lease = { ...structuredClone(body as LeaseObject) };
        this.lease.metadata.resourceVersion = String(++this.rv);
        return structuredClone(this.lease);
      case 'PUT':
        if (body?.metadata.resourceVersion !== this.lease?.metadata.resourceVersion)
          throw new ApiError(method, path, 409, '{"reason":"Conflict"}');
        this.lease = structuredClone(body as LeaseObject);
        this.lease.metadata.resourceVersion = String(++this.rv);
        return structuredClone(this.lease);
      default:
        throw new Error(`unexpected ${method}`);
    }
  }
}

const OPTS: LeaderElectionOptions = {
  namespace: 'kubegc-system',
  name: 'kubegc',
  identity: 'host-a_1',
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

async function leading(api: FakeLeaseApi, opts: Partial<LeaderElectionOptions> = {}) {
  const lost = jest.fn();
  const elector = new LeaderElector(api, silentLogger, { ...OPTS, ...opts });
  await elector.run(lost);
  expect(elector.isLeader).toBe(true);
  return { elector, lost };
}

test('a renewal whose request hangs: mayWrite() turns false at the renew deadline, onLost fires and the request is aborted', async () => {
  const api = new FakeLeaseApi();
  const start = performance.now();
  const { elector, lost } = await leading(api);
  expect(elector.mayWrite()).toBe(true);
  expect(api.lease?.spec.holderIdentity).toBe('host-a_1');

  api.hang = true;
  await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  const renew = api.calls.at(-1);
  expect(renew?.method).toBe('GET');
  // The renewal's request is bounded by the time left until the deadline, not the 30 s request timeout.
  expect(renew?.timeoutMs).toBe(OPTS.renewDeadlineMs - OPTS.retryPeriodMs);
  expect(renew?.signal?.aborted).toBe(false);

  await jest.advanceTimersByTimeAsync(start + OPTS.renewDeadlineMs - 1 - performance.now());
  expect(elector.mayWrite()).toBe(true);
  expect(lost).not.toHaveBeenCalled();

  await jest.advanceTimersByTimeAsync(1);
  expect(elector.mayWrite()).toBe(false);
  expect(elector.isLeader).toBe(false);
  expect(lost).toHaveBeenCalledTimes(1);
  expect(renew?.signal?.aborted).toBe(true);

  // No further renewals, and onLost only once.
  const calls = api.calls.length;
  await jest.advanceTimersByTimeAsync(5 * OPTS.retryPeriodMs);
  expect(api.calls.length).toBe(calls);
  expect(lost).toHaveBeenCalledTimes(1);
  await elector.stop();
});

test('successful renewals keep the guard open; each one restarts the deadline from when it started', async () => {
  const api = new FakeLeaseApi();
  const { elector, lost } = await leading(api);
  await jest.advanceTimersByTimeAsync(5 * OPTS.renewDeadlineMs);
  expect(elector.mayWrite()).toBe(true);
  expect(lost).not.toHaveBeenCalled();
  // Renewals stop succeeding. (The fake answers at once: a renewal's PUT is
  // made at the fake time the attempt started.)
  const lastGood = api.calls.filter((c) => c.method === 'PUT').at(-1)?.at ?? NaN;
  api.hang = true;
  await jest.advanceTimersByTimeAsync(lastGood + OPTS.renewDeadlineMs - 1 - performance.now());
  expect(elector.mayWrite()).toBe(true);
  await jest.advanceTimersByTimeAsync(1);
  expect(elector.mayWrite()).toBe(false);
  expect(lost).toHaveBeenCalledTimes(1);
});

test('after an event-loop stall longer than the renew deadline the guard refuses at once, before any timer runs', async () => {
  const api = new FakeLeaseApi();
  let stall = 0;
  const { elector, lost } = await leading(api, { now: () => performance.now() + stall });
  await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  expect(elector.mayWrite()).toBe(true);
  // The process was stopped (SIGSTOP, a long GC pause): the clock jumped, no timer has fired yet.
  stall = OPTS.renewDeadlineMs;
  expect(elector.mayWrite()).toBe(false);
  expect(lost).not.toHaveBeenCalled();
  // The next timer to run (the renewal) finds the deadline gone: no renewal request, the lease is lost.
  const calls = api.calls.length;
  await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  expect(lost).toHaveBeenCalledTimes(1);
  expect(api.calls.length).toBe(calls);
  expect(elector.mayWrite()).toBe(false);
});

test('a standby takes the lease only a lease duration after the last renewal it saw, while the old leader stops writing at its renew deadline', async () => {
  const api = new FakeLeaseApi();
  const a = await leading(api);
  const b = new LeaderElector(api, silentLogger, { ...OPTS, identity: 'host-b_2' });
  let bLeads = false;
  void b.run(jest.fn()).then(() => (bLeads = b.isLeader));
  await jest.advanceTimersByTimeAsync(OPTS.leaseDurationMs * 2);
  expect(bLeads).toBe(false);
  expect(b.mayWrite()).toBe(false);
  // A's renewals stop reaching the server (its PUTs hang, and ignore their
  // abort signal): A stops writing at its renew deadline all the same.
  const lastGood = api.calls.filter((c) => c.method === 'PUT').at(-1)?.at ?? NaN;
  const spy = jest.spyOn(api, 'request');
  spy.mockImplementation(function (method: string, path: string, o?: RequestOptions) {
    const body = o?.body as { spec?: { holderIdentity?: string } } | undefined;
    if (body?.spec?.holderIdentity === 'host-a_1') return new Promise<never>(() => undefined);
    return FakeLeaseApi.prototype.request.call(api, method, path, o);
  } as FakeLeaseApi['request']);
  await jest.advanceTimersByTimeAsync(lastGood + OPTS.renewDeadlineMs - 1 - performance.now());
  expect(a.elector.mayWrite()).toBe(true);
  await jest.advanceTimersByTimeAsync(1);
  expect(a.elector.mayWrite()).toBe(false);
  expect(a.lost).toHaveBeenCalledTimes(1);
  for (let i = 0; i < 100 && !bLeads; i++) await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  expect(bLeads).toBe(true);
  const takeover = api.calls.filter((c) => c.method === 'PUT').at(-1)?.at ?? NaN;
  expect(takeover - lastGood).toBeGreaterThanOrEqual(OPTS.leaseDurationMs);
  expect(api.lease?.spec.holderIdentity).toBe('host-b_2');
  expect(b.mayWrite()).toBe(true);
  spy.mockRestore();
  await b.stop();
  expect(api.lease?.spec.holderIdentity).toBe('');
});

test('stop() aborts a hung renewal, then releases the lease; mayWrite() is false from the start', async () => {
  const api = new FakeLeaseApi();
  const { elector } = await leading(api);
  api.hang = true;
  await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  const renew = api.calls.at(-1);
  api.hang = false;
  const stopped = elector.stop();
  expect(elector.mayWrite()).toBe(false);
  await stopped;
  expect(renew?.signal?.aborted).toBe(true);
  expect(api.lease?.spec.holderIdentity).toBe('');
  expect(api.lease?.spec.leaseDurationSeconds).toBe(1);
});

// Issue 19, item 5: the lease bounds when a write takes effect, not only when it is sent.
test('a renewal read that shows another holder: mayWrite() turns false at once, long before the deadline, and the write signal aborts', async () => {
  const api = new FakeLeaseApi();
  const start = performance.now();
  const { elector, lost } = await leading(api);
  const signal = elector.writeSignal();
  expect(signal?.aborted).toBe(false);
  // Another replica took the Lease over (a standby that saw it expire, a clock gone wrong).
  if (!api.lease) throw new Error('no lease');
  api.lease.spec.holderIdentity = 'host-b_2';
  api.lease.metadata.resourceVersion = '100';
  await jest.advanceTimersByTimeAsync(OPTS.retryPeriodMs);
  expect(performance.now() - start).toBeLessThan(OPTS.renewDeadlineMs);
  expect(elector.mayWrite()).toBe(false);
  expect(elector.isLeader).toBe(false);
  expect(elector.writeDeadline()).toBeUndefined();
  expect(lost).toHaveBeenCalledTimes(1);
  expect(signal?.aborted).toBe(true);
  // The renewal stopped at its read: the other holder's Lease is left alone.
  expect(api.calls.at(-1)?.method).toBe('GET');
  expect(api.lease.spec.holderIdentity).toBe('host-b_2');
  await jest.advanceTimersByTimeAsync(5 * OPTS.retryPeriodMs);
  expect(lost).toHaveBeenCalledTimes(1);
  await elector.stop();
  expect(api.lease.spec.holderIdentity).toBe('host-b_2');
});

test('the write signal aborts at the renew deadline, re-armed by each successful renewal; writes time out within leaseDuration − renewDeadline', async () => {
  const api = new FakeLeaseApi();
  const start = performance.now();
  const { elector, lost } = await leading(api);
  expect(elector.writeTimeoutMs).toBe(OPTS.leaseDurationMs - OPTS.renewDeadlineMs);
  expect(elector.writeDeadline()).toBe(start + OPTS.renewDeadlineMs);
  const signal = elector.writeSignal();
  // Renewals succeed: the same tenure, its deadline moving on with each one.
  await jest.advanceTimersByTimeAsync(3 * OPTS.renewDeadlineMs);
  expect(signal?.aborted).toBe(false);
  expect(elector.writeSignal()).toBe(signal);
  const lastGood = api.calls.filter((c) => c.method === 'PUT').at(-1)?.at ?? NaN;
  expect(elector.writeDeadline()).toBe(lastGood + OPTS.renewDeadlineMs);
  // Renewals stop succeeding: the signal aborts exactly at the last one's deadline.
  api.hang = true;
  await jest.advanceTimersByTimeAsync(lastGood + OPTS.renewDeadlineMs - 1 - performance.now());
  expect(signal?.aborted).toBe(false);
  await jest.advanceTimersByTimeAsync(1);
  expect(signal?.aborted).toBe(true);
  expect((signal?.reason as Error).message).toMatch(/leader lease was lost/);
  expect(lost).toHaveBeenCalledTimes(1);
  await elector.stop();
});

test('stop() aborts the write signal', async () => {
  const api = new FakeLeaseApi();
  const { elector } = await leading(api);
  const signal = elector.writeSignal();
  expect(signal?.aborted).toBe(false);
  await elector.stop();
  expect(signal?.aborted).toBe(true);
});
