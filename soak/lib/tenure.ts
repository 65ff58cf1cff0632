// Leader tenures from the audit log, and the writes that fall outside them.
//
// A replica's tenure starts when the API server receives its acquiring write
// to the Lease (a create, or an update that names it holder while someone
// else, nobody, or nobody any more, held it) and ends at the earliest of: its
// release (an update with holderIdentity ''), another holder's acquire, or
// its last renewTime + leaseDurationSeconds. Every write a replica makes,
// other than to the Lease itself, must TAKE EFFECT inside one of its own
// tenures: a write that completes after that is one a standby may be making
// too. A write takes effect when it completes: the stageTimestamp of its
// ResponseComplete stage, and only one answered 2xx takes effect at all (a
// write received in tenure and held by, say, an admission webhook until after
// it counts at the time it completed; one that was cancelled did nothing).
import { auditTimeMs, WRITE_VERBS, type AuditEvent } from './audit.ts';

/** One uninterrupted holding of the Lease; ms since the epoch, server clock, [from, to). */
export interface Tenure {
  identity: string;
  from: number;
  to: number;
}

export interface TenureViolation {
  identity: string;
  event: AuditEvent;
  reason: string;
}

interface LeaseRef {
  namespace: string;
  name: string;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  renewTime?: string;
}

function isLease(e: AuditEvent, lease: LeaseRef): boolean {
  const o = e.objectRef;
  return (
    o?.resource === 'leases' &&
    o.apiGroup === 'coordination.k8s.io' &&
    o.namespace === lease.namespace &&
    o.name === lease.name &&
    !o.subresource
  );
}

function succeeded(e: AuditEvent): boolean {
  const code = e.responseStatus?.code ?? 0;
  return code >= 200 && code < 300;
}

function specOf(e: AuditEvent): LeaseSpec | undefined {
  const body = e.requestObject as { spec?: LeaseSpec } | undefined;
  return body && typeof body === 'object' ? body.spec : undefined;
}

/**
 * The tenures recorded by the successful create/update requests of the Lease
 * `lease`, in order. (A patch is read the same way: the fields it sets.)
 */
export function leaseTenures(events: AuditEvent[], lease: LeaseRef): Tenure[] {
  const writes = events
    .filter(
      (e) =>
        isLease(e, lease) &&
        ['create', 'update', 'patch'].includes(e.verb) &&
        succeeded(e) &&
        e.stage === 'ResponseComplete',
    )
    .map((e) => ({ e, received: auditTimeMs(e.requestReceivedTimestamp) }))
    // Successful writes of one object are serialized by resourceVersion: a
    // later one was received after the earlier one committed.
    .sort((a, b) => a.received - b.received);
  const tenures: Tenure[] = [];
  let current: { identity: string; from: number; expires: number } | undefined;
  let spec: LeaseSpec = {};
  const close = (at: number): void => {
    if (!current) return;
    tenures.push({
      identity: current.identity,
      from: current.from,
      to: Math.min(at, current.expires),
    });
    current = undefined;
  };
  for (const { e, received } of writes) {
    const written = specOf(e) ?? {};
    spec = e.verb === 'patch' ? { ...spec, ...written } : { ...written };
    const holder = spec.holderIdentity ?? '';
    const renewed = spec.renewTime ? auditTimeMs(spec.renewTime) : received;
    const expires = renewed + (spec.leaseDurationSeconds ?? 0) * 1000;
    if (current && current.identity === holder && received < current.expires) {
      current.expires = Math.max(current.expires, expires);
      continue;
    }
    // A release, another holder, or the same one again after its lease ran out.
    close(received);
    if (holder) current = { identity: holder, from: received, expires };
  }
  close(Infinity);
  return tenures;
}

function describe(e: AuditEvent): string {
  const o = e.objectRef ?? {};
  const what = `${o.resource ?? '?'}${o.apiGroup ? `.${o.apiGroup}` : ''} ${o.namespace ? `${o.namespace}/` : ''}${o.name ?? ''}`;
  return `${e.verb} ${what} (audit ${e.auditID}, code ${e.responseStatus?.code ?? '?'})`;
}

const iso = (ms: number): string => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));

/**
 * When a write took effect: the stageTimestamp of its ResponseComplete
 * stage, if it was answered 2xx; undefined if it did not take effect.
 */
export function tookEffectAt(e: AuditEvent): number | undefined {
  if (e.stage !== 'ResponseComplete' || !succeeded(e)) return undefined;
  return auditTimeMs(e.stageTimestamp);
}

/**
 * Every write by a replica (as `identityOf` attributes it; undefined: not a
 * replica), except its writes to the Lease itself, that took effect (see
 * tookEffectAt) outside one of that replica's tenures.
 */
export function writesOutsideTenure(
  events: AuditEvent[],
  tenures: Tenure[],
  identityOf: (e: AuditEvent) => string | undefined,
  lease: LeaseRef,
): TenureViolation[] {
  const byIdentity = new Map<string, Tenure[]>();
  for (const t of tenures) byIdentity.set(t.identity, [...(byIdentity.get(t.identity) ?? []), t]);
  const violations: TenureViolation[] = [];
  for (const e of events) {
    if (!WRITE_VERBS.has(e.verb) || isLease(e, lease)) continue;
    const identity = identityOf(e);
    if (identity === undefined) continue;
    const at = tookEffectAt(e);
    if (at === undefined) continue;
    const own = byIdentity.get(identity) ?? [];
    if (own.some((t) => t.from <= at && at < t.to)) continue;
    const before = own.filter((t) => t.to <= at).at(-1);
    const after = own.find((t) => t.from > at);
    const context = own.length
      ? [
          before &&
            `${(at - before.to).toFixed(3)} ms after its tenure ${iso(before.from)}–${iso(before.to)} ended`,
          after &&
            `${(after.from - at).toFixed(3)} ms before its tenure from ${iso(after.from)} began`,
        ]
          .filter(Boolean)
          .join('; ')
      : 'it never held the lease';
    violations.push({
      identity,
      event: e,
      reason: `${describe(e)} by ${identity} (received ${e.requestReceivedTimestamp}) took effect ${e.stageTimestamp}, outside its tenures: ${context}`,
    });
  }
  return violations;
}

/**
 * The replica identity in a kubegc User-Agent: `kubegc/<version> (<identity>)`,
 * optionally followed by ` leader-election`; undefined for anything else.
 */
export function kubegcIdentityFromUserAgent(ua: string | undefined): string | undefined {
  const m = /^kubegc\/\S+ \(([^()\s]+)\)(?: |$)/.exec(ua ?? '');
  return m?.[1];
}
