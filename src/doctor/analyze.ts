// What `kubegc doctor` concludes from a Snapshot: pure functions, no API
// calls. The snapshot is indexed once (index.ts); each kind of finding is a
// rule of its own over that index (rules/, one module per FINDING_KINDS
// entry, each unit-tested on hand-made snapshots in doctor.test.ts, whose
// reports are held to golden files); the report keeps the findings in scope,
// old enough, in the documented order (docs/doctor.md).
import {
  FINDING_KINDS,
  SCHEMA_VERSION,
  compareObjects,
  type Finding,
  type FindingKind,
  type Report,
} from './findings.ts';
import { buildIndex, type SnapshotIndex } from './index.ts';
import { blockingCyclesOf } from './rules/blocking-cycle.ts';
import { crossNamespaceReferences } from './rules/cross-namespace-reference.ts';
import { leakedDependents } from './rules/leaked-dependent.ts';
import { stuckDeletions } from './rules/stuck-deletion.ts';
import { terminatingNamespaces } from './rules/terminating-namespace.ts';
import { unresolvableOwnerKinds } from './rules/unresolvable-owner-kind.ts';
import type { Snapshot } from './snapshot.ts';

export * from './findings.ts';

export interface AnalyzeOptions {
  /** ms since the epoch. */
  now: number;
  olderThanSeconds?: number;
}

/** The rule of each kind of finding. */
export const RULES: Record<FindingKind, (ix: SnapshotIndex) => Finding[]> = {
  'stuck-deletion': stuckDeletions,
  'terminating-namespace': terminatingNamespaces,
  'leaked-dependent': leakedDependents,
  'cross-namespace-reference': crossNamespaceReferences,
  'unresolvable-owner-kind': unresolvableOwnerKinds,
  'blocking-cycle': blockingCyclesOf,
};

export function analyze(s: Snapshot, o: AnalyzeOptions): Report {
  const ix = buildIndex(s, o.now);
  const { unavailableRefs } = ix;
  const obj = s.objects;
  const findings = FINDING_KINDS.flatMap((k) => RULES[k](ix));

  // --- scope, age, order ----------------------------------------------------
  const inScope = (f: Finding): boolean =>
    !s.namespace ||
    (f.kind === 'terminating-namespace'
      ? f.object.name === s.namespace
      : f.object.namespace === s.namespace);
  const scoped = findings.filter(inScope);
  const minAge = o.olderThanSeconds ?? 0;
  const kept = scoped.filter((f) => f.ageSeconds >= minAge);
  kept.sort(compareFindings);
  const byKind = Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])) as Record<
    FindingKind,
    number
  >;
  for (const f of kept) byKind[f.kind]++;
  return {
    schemaVersion: SCHEMA_VERSION,
    scannedAt: new Date(s.startedAt).toISOString(),
    durationSeconds: Math.round((s.finishedAt - s.startedAt) / 10) / 100,
    scope: { namespace: s.namespace ?? null, olderThanSeconds: o.olderThanSeconds ?? null },
    findings: kept,
    notScanned: [...s.notScanned].sort((a, b) => a.resource.localeCompare(b.resource)),
    unavailableAPIServices: unavailableRefs,
    summary: {
      findings: kept.length,
      byKind,
      hiddenByOlderThan: scoped.length - kept.length,
      notScanned: s.notScanned.length,
      objects: obj.length,
      resources: s.resources.filter((r) => r.listed).length,
    },
  };
}

function compareFindings(a: Finding, b: Finding): number {
  return (
    FINDING_KINDS.indexOf(a.kind) - FINDING_KINDS.indexOf(b.kind) ||
    a.since.localeCompare(b.since) ||
    compareObjects(a.object, b.object)
  );
}

export function exitCode(r: Report): number {
  return r.findings.length > 0 ? 1 : 0;
}
