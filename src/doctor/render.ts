// `kubegc doctor`'s text output: one section per finding kind, oldest first,
// each finding one headline and its blockers indented under it. The JSON
// output is the Report itself (docs/doctor.md).
import {
  FINDING_KINDS,
  describeBlocker,
  formatAge,
  type Finding,
  type FindingKind,
  type ObjectRef,
  type OwnerInfo,
  type Report,
} from './analyze.ts';
import type { GcView } from './gc-metrics.ts';

const TITLES: Record<FindingKind, string> = {
  'stuck-deletion': 'Stuck in deletion',
  'terminating-namespace': 'Namespaces stuck in Terminating',
  'leaked-dependent': 'Leaked dependents, every owner gone',
  'cross-namespace-reference': 'Invalid cross-namespace owner references',
  'unresolvable-owner-kind': 'Owner references to kinds no API serves',
  'blocking-cycle': 'Cycles of blocking owner references',
};

const CONCLUSIONS = {
  'leaked-dependent': 'a garbage collector deletes it (is one running?)',
  'cross-namespace-reference':
    "an invalid owner reference (a namespaced owner must be in the dependent's namespace; a cluster-scoped object can only have cluster-scoped owners)",
  'unresolvable-owner-kind': 'a garbage collector never deletes it on that basis',
};

function name(o: ObjectRef): string {
  return `${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name}`;
}

function owner(x: OwnerInfo): string {
  return `${x.kind} ${x.name} (${x.apiVersion}, uid ${x.uid}): ${x.state}${x.state === 'present' ? '' : ` — ${x.detail}`}`;
}

function lines(f: Finding): string[] {
  const age = formatAge(f.ageSeconds);
  switch (f.kind) {
    case 'stuck-deletion': {
      const out = [
        `${name(f.object)}: deleting for ${age} (since ${f.since})${f.finalizers.length ? `; finalizers: ${f.finalizers.join(', ')}` : ''}`,
      ];
      if (f.blockers.length === 0) out.push(`  ${f.detail}`);
      else {
        out.push(
          `  waiting for ${f.blockingDependents} blocking dependent${f.blockingDependents === 1 ? '' : 's'}; held by:`,
        );
        for (const b of f.blockers) out.push(`    ${describeBlocker(b)}`);
        if (f.blockersTotal > f.blockers.length)
          out.push(`    ... and ${f.blockersTotal - f.blockers.length} more`);
        if (f.foreignFinalizers.length)
          out.push(`  then its own finalizers: ${f.foreignFinalizers.join(', ')}`);
      }
      return out;
    }
    case 'terminating-namespace': {
      const out = [`Namespace ${f.object.name}: terminating for ${age} (since ${f.since})`];
      for (const c of f.conditions) out.push(`  ${c.type}: ${c.message ?? c.reason ?? ''}`);
      for (const r of f.remaining) {
        const fins = Object.entries(r.finalizers).map(([k, v]) => `${k} ×${v}`);
        out.push(
          `  remaining: ${r.resource} ${r.count}${r.deleting ? ` (${r.deleting} being deleted)` : ''}${fins.length ? `, finalizers: ${fins.join(', ')}` : ''} — e.g. ${r.examples.join(', ')}`,
        );
      }
      if (f.unavailableAPIServices?.length)
        for (const a of f.unavailableAPIServices)
          out.push(
            `  unavailable APIService ${a.name}${a.service ? ` (service ${a.service})` : ''}: ${a.reason ?? ''}${a.message ? `: ${a.message}` : ''}`,
          );
      if (f.conditions.length === 0 && f.remaining.length === 0) out.push(`  ${f.detail}`);
      return out;
    }
    case 'leaked-dependent':
    case 'cross-namespace-reference':
    case 'unresolvable-owner-kind':
      return [
        `${name(f.object)}: exists for ${age} (created ${f.since}); ${CONCLUSIONS[f.kind]}`,
        ...f.owners.map((x) => `  owner ${owner(x)}`),
      ];
    case 'blocking-cycle':
      return [
        `${f.chain.map(name).join(' → ')} → ${name(f.chain[0] as ObjectRef)}`,
        `  ${f.members} object${f.members === 1 ? '' : 's'}, all existing for at least ${age}; every reference has blockOwnerDeletion: a foreground deletion of any of them waits until a garbage collector unblocks one`,
      ];
  }
}

/** The running controller's work queues by lane (--gc-metrics). */
function gcLines(gc: GcView): string[] {
  const role =
    gc.leader === null
      ? ''
      : gc.leader
        ? ', the leader'
        : ', a standby (its queues are not drained)';
  if (gc.error !== undefined) return [`Running kubegc (${gc.url}): could not be read: ${gc.error}`];
  const out = [`Running kubegc (${gc.url}${role}):`];
  if (gc.lanes.length === 0)
    out.push('  no work-queue lanes in its metrics (a kubegc without lanes?)');
  const queues = [...new Set(gc.lanes.map((l) => l.queue))];
  for (const q of queues) {
    const parts = gc.lanes
      .filter((l) => l.queue === q)
      .map(
        (l) =>
          `${l.lane} ${l.waiting.toLocaleString('en-US')} waiting${l.waiting > 0 ? `, the oldest for ${formatAge(Math.round(l.oldestWaitingSeconds))}` : ''}`,
      );
    out.push(`  ${q}: ${parts.join('; ')}`);
  }
  if (gc.rateLimited)
    out.push(
      `  requests waiting for its client-side rate limit: user ${gc.rateLimited.user}, housekeeping ${gc.rateLimited.housekeeping}`,
    );
  return out;
}

export function renderText(r: Report): string {
  const out: string[] = [];
  if (r.gc) out.push(...gcLines(r.gc), '');
  for (const kind of FINDING_KINDS) {
    const fs = r.findings.filter((f) => f.kind === kind);
    if (fs.length === 0) continue;
    out.push(`${TITLES[kind]} (${fs.length}):`);
    for (const f of fs) out.push(...lines(f).map((l) => `  ${l}`));
    out.push('');
  }
  if (r.notScanned.length) {
    out.push(`Not scanned (${r.notScanned.length}): nothing is concluded from these`);
    for (const n of r.notScanned) out.push(`  ${n.resource}: ${n.error}`);
    out.push('');
  }
  const counts = FINDING_KINDS.filter((k) => r.summary.byKind[k] > 0)
    .map((k) => `${r.summary.byKind[k]} ${k}`)
    .join(', ');
  const scope = [
    r.scope.namespace ? `namespace ${r.scope.namespace}` : 'cluster-wide',
    r.scope.olderThanSeconds ? `older than ${formatAge(r.scope.olderThanSeconds)}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  out.push(
    `${r.summary.findings === 0 ? 'No findings' : `${r.summary.findings} finding${r.summary.findings === 1 ? '' : 's'}: ${counts}`} (${scope}; ${r.summary.objects} objects in ${r.summary.resources} resources scanned at ${r.scannedAt} in ${r.durationSeconds}s${r.summary.hiddenByOlderThan ? `; ${r.summary.hiddenByOlderThan} younger finding${r.summary.hiddenByOlderThan === 1 ? '' : 's'} hidden` : ''}${r.notScanned.length ? `; ${r.notScanned.length} not scanned` : ''})`,
  );
  return `${out.join('\n')}\n`;
}
