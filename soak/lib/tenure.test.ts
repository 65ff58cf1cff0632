// The audit-log reader and the tenure oracle on hand-made audit events.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { auditTimeMs, readAuditLog, type AuditEvent } from './audit.ts';
import {
  kubegcIdentityFromUserAgent,
  leaseTenures,
  writesOutsideTenure,
  type Tenure,
} from './tenure.ts';

const LEASE = { namespace: 'kubegc-system', name: 'kubegc' };
const T0 = Date.parse('2026-01-01T00:00:00Z');
/** An audit timestamp `s` seconds after T0, with microseconds. */
const ts = (s: number): string =>
  new Date(T0 + Math.round(s * 1000)).toISOString().replace('Z', '000Z');
const ua = (id: string, lease = false): string =>
  `kubegc/0.1.0 (${id})${lease ? ' leader-election' : ''}`;

let seq = 0;
function event(
  verb: string,
  atS: number,
  o: Partial<AuditEvent> & { objectRef?: AuditEvent['objectRef'] } = {},
): AuditEvent {
  return {
    auditID: `a${++seq}`,
    stage: 'ResponseComplete',
    verb,
    user: { username: 'admin' },
    responseStatus: { code: 200 },
    requestReceivedTimestamp: ts(atS),
    stageTimestamp: ts(atS + 0.001),
    ...o,
  };
}

/** A Lease write by `id` setting holderIdentity `holder` with renewTime `renewS`. */
function leaseWrite(
  id: string,
  atS: number,
  holder: string,
  opts: { verb?: string; renewS?: number; durationS?: number; code?: number } = {},
): AuditEvent {
  return event(opts.verb ?? 'update', atS, {
    userAgent: ua(id, true),
    objectRef: { resource: 'leases', apiGroup: 'coordination.k8s.io', ...LEASE },
    responseStatus: { code: opts.code ?? 200 },
    requestObject: {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: LEASE.name, namespace: LEASE.namespace },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: opts.durationS ?? (holder ? 4 : 1),
        renewTime: ts(opts.renewS ?? atS - 0.005),
      },
    },
  });
}

function deleteBy(id: string, atS: number, name: string, code = 200): AuditEvent {
  return event('delete', atS, {
    userAgent: ua(id),
    objectRef: { resource: 'configmaps', apiVersion: 'v1', namespace: 'ns', name },
    responseStatus: { code },
  });
}

const identityOf = (e: AuditEvent): string | undefined => kubegcIdentityFromUserAgent(e.userAgent);

/** A leads from 0 (renewing at 1, 2), stops renewing; B takes over at 7 and releases at 10. */
function history(): AuditEvent[] {
  return [
    leaseWrite('a', 0, 'a', { verb: 'create' }),
    leaseWrite('b', 0.5, 'b', { code: 409 }),
    leaseWrite('a', 1, 'a'),
    leaseWrite('a', 2, 'a'),
    leaseWrite('b', 7, 'b'),
    leaseWrite('b', 8, 'b'),
    leaseWrite('b', 10, '', { durationS: 1 }),
  ];
}

const at = (s: number): number => T0 + Math.round(s * 1000);

test('leaseTenures: acquire, renewals, expiry, takeover and release', () => {
  const tenures = leaseTenures(history(), LEASE);
  // A: from its create until its last renewTime (1.995) + 4 s; B: from its takeover to its release.
  expect(tenures).toEqual<Tenure[]>([
    { identity: 'a', from: at(0), to: at(1.995) + 4000 },
    { identity: 'b', from: at(7), to: at(10) },
  ]);
});

test('leaseTenures: another holder acquiring before the lease ran out ends the tenure there', () => {
  const events = [leaseWrite('a', 0, 'a', { verb: 'create' }), leaseWrite('b', 2, 'b')];
  expect(leaseTenures(events, LEASE)).toEqual([
    { identity: 'a', from: at(0), to: at(2) },
    { identity: 'b', from: at(2), to: at(1.995) + 4000 },
  ]);
});

test('leaseTenures: the same holder renewing after its lease ran out starts a new tenure', () => {
  const events = [leaseWrite('a', 0, 'a', { verb: 'create' }), leaseWrite('a', 9, 'a')];
  expect(leaseTenures(events, LEASE)).toEqual([
    { identity: 'a', from: at(0), to: at(-0.005) + 4000 },
    { identity: 'a', from: at(9), to: at(8.995) + 4000 },
  ]);
});

test('leaseTenures: other Leases and failed writes do not count', () => {
  const other = leaseWrite('c', 3, 'c');
  other.objectRef = { ...other.objectRef, name: 'other' };
  const panic = { ...leaseWrite('c', 3.5, 'c'), stage: 'Panic' };
  const tenures = leaseTenures([...history(), other, panic], LEASE);
  expect(tenures.map((t) => t.identity)).toEqual(['a', 'b']);
});

test('writesOutsideTenure: writes inside their own tenure pass; Lease writes are exempt', () => {
  const events = [
    ...history(),
    deleteBy('a', 0.5, 'x'),
    deleteBy('a', 5.9, 'y', 404),
    deleteBy('b', 7.5, 'z'),
    // Completes (9.999) just before B's release is received (10).
    deleteBy('b', 9.998, 'w'),
    // Not a replica.
    { ...deleteBy('a', 20, 'v'), userAgent: 'kubectl/v1.35.4' },
  ];
  expect(writesOutsideTenure(events, leaseTenures(events, LEASE), identityOf, LEASE)).toEqual([]);
});

test('writesOutsideTenure: a write after the lease ran out, after the release, or in another replica’s tenure', () => {
  const late = deleteBy('a', 6, 'late');
  const inB = event('patch', 7.2, {
    userAgent: ua('a'),
    objectRef: { resource: 'configmaps', namespace: 'ns', name: 'patched' },
  });
  const afterRelease = deleteBy('b', 10, 'after-release');
  const never = deleteBy('c', 1, 'never');
  const events = [...history(), deleteBy('a', 1.5, 'fine'), late, inB, afterRelease, never];
  const violations = writesOutsideTenure(events, leaseTenures(events, LEASE), identityOf, LEASE);
  expect(violations.map((v) => [v.identity, v.event.objectRef?.name])).toEqual([
    ['a', 'late'],
    ['a', 'patched'],
    ['b', 'after-release'],
    ['c', 'never'],
  ]);
  expect(violations[0]?.reason).toMatch(
    /delete configmaps ns\/late .* by a \(received .*\) took effect .*ms after its tenure/,
  );
  expect(violations[3]?.reason).toMatch(/it never held the lease/);
});

// Issue 19, item 5: a write is judged by when it took effect, not when it was received.
test('writesOutsideTenure: a write received in tenure that completed after it is a violation', () => {
  // Received while A leads, held (an admission webhook, APF) until after A's lease ran out.
  const held = { ...deleteBy('a', 5.5, 'held'), stageTimestamp: ts(6.5) };
  // Held until B had taken over.
  const heldIntoB = { ...deleteBy('a', 1.5, 'held-into-b'), stageTimestamp: ts(7.1) };
  const events = [...history(), held, heldIntoB];
  const violations = writesOutsideTenure(events, leaseTenures(events, LEASE), identityOf, LEASE);
  expect(violations.map((v) => v.event.objectRef?.name)).toEqual(['held', 'held-into-b']);
  expect(violations[0]?.reason).toMatch(
    /by a \(received 2026-01-01T00:00:05\.500000Z\) took effect 2026-01-01T00:00:06\.500000Z, outside its tenures: 505\.000 ms after its tenure/,
  );
});

test('writesOutsideTenure: only writes that completed with a 2xx took effect', () => {
  const late = (name: string, o: Partial<AuditEvent>): AuditEvent => ({
    ...deleteBy('a', 5.5, name),
    stageTimestamp: ts(8),
    ...o,
  });
  const events = [
    ...history(),
    // Cancelled by the client (its tenure ended), refused, or failed: no effect.
    late('cancelled', { responseStatus: { code: 500 } }),
    late('conflict', { responseStatus: { code: 409 } }),
    late('no-status', { responseStatus: undefined }),
    late('panic', { stage: 'Panic', responseStatus: { code: 200 } }),
    // The one that did take effect, after A's tenure.
    late('done', {}),
  ];
  const violations = writesOutsideTenure(events, leaseTenures(events, LEASE), identityOf, LEASE);
  expect(violations.map((v) => v.event.objectRef?.name)).toEqual(['done']);
});

test('kubegcIdentityFromUserAgent', () => {
  expect(kubegcIdentityFromUserAgent('kubegc/0.1.0 (host-1_3f2a)')).toBe('host-1_3f2a');
  expect(kubegcIdentityFromUserAgent('kubegc/0.1.0 (host-1_3f2a) leader-election')).toBe(
    'host-1_3f2a',
  );
  expect(kubegcIdentityFromUserAgent('kubegc/0.1.0')).toBeUndefined();
  expect(kubegcIdentityFromUserAgent('kubegc/0.1.0 leader-election')).toBeUndefined();
  expect(kubegcIdentityFromUserAgent('kubectl/v1.35.4 (linux/amd64) kubernetes/abc')).toBe(
    undefined,
  );
  expect(kubegcIdentityFromUserAgent(undefined)).toBeUndefined();
});

test('auditTimeMs keeps the microseconds', () => {
  expect(auditTimeMs('2026-01-01T00:00:00.123456Z') - T0).toBeCloseTo(123.456, 3);
  expect(auditTimeMs('2026-01-01T00:00:01Z') - T0).toBe(1000);
});

describe('readAuditLog', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-audit-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  const line = (id: string, stage = 'ResponseComplete'): string =>
    JSON.stringify({ ...event('delete', 0), auditID: id, stage });

  test('rotated files oldest first, then the current one; completed stages only; a partial last line skipped', async () => {
    const file = path.join(dir, 'audit.log');
    await fs.writeFile(
      path.join(dir, 'audit-2026-01-01T10-00-00.000.log'),
      `${line('r2a')}\n${line('r2b', 'Panic')}\n`,
    );
    await fs.writeFile(path.join(dir, 'audit-2025-12-31T23-59-59.999.log'), `${line('r1')}\n`);
    await fs.writeFile(path.join(dir, 'other-2025-01-01T00-00-00.000.log'), `${line('x')}\n`);
    await fs.writeFile(
      file,
      `${line('c1')}\n${line('c0', 'RequestReceived')}\n\n${line('c2')}\n${line('c3').slice(0, 40)}`,
    );
    expect((await readAuditLog(file)).map((e) => e.auditID)).toEqual([
      'r1',
      'r2a',
      'r2b',
      'c1',
      'c2',
    ]);
  });

  test('a malformed line that is not the last one is an error', async () => {
    const file = path.join(dir, 'audit.log');
    await fs.writeFile(file, `${line('c1')}\n{"broken\n${line('c2')}\n`);
    await expect(readAuditLog(file)).rejects.toThrow(/audit\.log:2: not a JSON audit event/);
  });

  test('no log yet: no events', async () => {
    expect(await readAuditLog(path.join(dir, 'audit.log'))).toEqual([]);
  });
});
