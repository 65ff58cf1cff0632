// The soak's tables: one per contender (and a side-by-side summary when both
// ran), as markdown for stdout and for soak/RESULTS.md.
import os from 'node:os';
import type { ContenderResult, SoakResult } from './soak.ts';
import { ONE_READ_MS, type Invariant } from './oracle.ts';

const INVARIANTS: { id: Invariant; what: string }[] = [
  {
    id: 'I1',
    what: 'no GC delete of an object with a live, not-deleting (or Orphan-deleting) owner',
  },
  {
    id: 'I2',
    what: 'after the workload stops, objects whose owners are all gone are gone within 60 s',
  },
  {
    id: 'I3',
    what: 'no orphan/foregroundDeletion finalizer left; Orphan-deleted owners’ dependents kept, reference removed',
  },
  { id: 'I4', what: 'no write by a replica outside its lease tenure' },
  {
    id: 'I5',
    what: 'RSS at the end of each quiet period ≤ 10% above the previous; no restarts but injected ones',
  },
];

function table(header: string[], rows: (string | number)[][]): string {
  const esc = (c: string | number): string => String(c).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

const mib = (b: number | undefined): string =>
  b === undefined ? '–' : `${(b / 1048576).toFixed(1)} MiB`;
const secs = (ms: number | undefined): string =>
  ms === undefined ? '–' : `${(ms / 1000).toFixed(1)} s`;
const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);

function countBy<T>(items: T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return out;
}

function rssStartEnd(r: ContenderResult): string {
  // Per process lifetime: the first and last quiet-period readings.
  const byPid = new Map<number, { process: string; first: number; last: number }>();
  for (const s of r.rss) {
    const cur = byPid.get(s.pid);
    if (!cur) byPid.set(s.pid, { process: s.process, first: s.rssBytes, last: s.rssBytes });
    else cur.last = s.rssBytes;
  }
  return (
    [...byPid.entries()]
      .map(([pid, v]) => `${v.process}/${pid}: ${mib(v.first)} → ${mib(v.last)}`)
      .join('; ') || '–'
  );
}

function violationCount(r: ContenderResult, id: Invariant): number {
  return r.violations.filter((v) => v.invariant === id).length;
}

export function summary(results: ContenderResult[]): string {
  const rows: (string | number)[][] = [
    ['workload operations', ...results.map((r) => sum(r.ops))],
    ['faults injected', ...results.map((r) => r.faults.length)],
    ['deletions by the GC (2xx)', ...results.map((r) => r.gcDeletes.total)],
    ...INVARIANTS.map((i) => [
      `${i.id} violations`,
      ...results.map((r) => violationCount(r, i.id)),
    ]),
    ['deletes one read old (not violations)', ...results.map((r) => (r.excused ?? []).length)],
    [
      'slowest collection',
      ...results.map((r) => (r.collections.slowest ? secs(r.collections.slowest.latencyMs) : '–')),
    ],
    ['median collection', ...results.map((r) => secs(r.collections.medianMs))],
    ['quiescence after the workload stopped', ...results.map((r) => secs(r.quiescenceMs))],
    ['RSS start → end', ...results.map(rssStartEnd)],
  ];
  return table(['', ...results.map((r) => r.contender)], rows);
}

export interface RenderOptions {
  /** Evidence lines per violation (all when undefined). */
  evidenceLines?: number;
  /** Violations listed per invariant (all when undefined). */
  maxViolations?: number;
}

function section(r: ContenderResult, o: RenderOptions): string {
  const t0 = r.startedAt;
  const at = (ms: number): string => `${((ms - t0) / 1000).toFixed(0)} s`;
  const out: string[] = [];
  out.push(
    `## ${r.contender} (GC user \`${r.gcUser}\`${r.contender === 'kubegc' ? `, ${r.replicas} replicas with leader election` : ', kube-controller-manager with only garbage-collector-controller'})`,
  );
  out.push(
    `Seed ${r.seed}; ${Math.round(r.durationMs / 60000)} min planned, ${((r.endedAt - r.startedAt) / 60000).toFixed(1)} min run; ${r.objectsSeen} objects observed; ${r.auditEvents} audit events.`,
  );
  out.push('### Invariants');
  out.push(
    table(
      ['invariant', 'violations', 'what'],
      INVARIANTS.map((i) => [
        i.id,
        r.contender === 'kcm' && i.id === 'I4'
          ? 'n/a (no leader election)'
          : violationCount(r, i.id),
        i.what,
      ]),
    ),
  );
  for (const i of INVARIANTS) {
    const vs = r.violations.filter((v) => v.invariant === i.id);
    if (!vs.length) continue;
    out.push(`#### ${i.id}: ${vs.length} violation${vs.length > 1 ? 's' : ''}`);
    for (const v of vs.slice(0, o.maxViolations ?? vs.length)) {
      const during =
        v.at === undefined
          ? []
          : r.faults.filter((f) => f.start <= (v.at as number) && (v.at as number) <= f.end);
      const when =
        v.at === undefined
          ? ''
          : ` (${at(v.at)} into the run${during.length ? `, during ${during.map((f) => `${f.kind} (${(((v.at as number) - f.start) / 1000) | 0} s in)`).join(', ')}` : ''})`;
      out.push(`- **${v.object}**${when}: ${v.summary}`);
      const ev = v.evidence.slice(0, o.evidenceLines ?? v.evidence.length);
      if (ev.length) out.push(['  ```text', ...ev.map((l) => `  ${l}`), '  ```'].join('\n'));
    }
    if (o.maxViolations !== undefined && vs.length > o.maxViolations)
      out.push(`- … and ${vs.length - o.maxViolations} more`);
  }
  const excused = r.excused ?? [];
  if (excused.length) {
    out.push(
      `#### Deletes one read old: ${excused.length} (not violations: the owner was switched from Foreground to Orphan after the GC read it, and the DELETE followed that read's answer within ${ONE_READ_MS} ms, plus twice any latency the soak injected on the GC's connection meanwhile; soak/README.md, I1)`,
    );
    for (const e of excused) out.push(`- **${e.object}** (audit ${e.auditID}): ${e.reason}`);
  }
  out.push('### Workload operations');
  out.push(table(['operation', 'count'], Object.entries(r.ops)));
  out.push(
    `Scenarios: ${Object.entries(r.scenarios)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}. Failed scenarios: ${
      Object.entries(r.workloadErrors)
        .map(([k, v]) => `${k} × ${v}`)
        .join(', ') || 'none'
    }.`,
  );
  const samples = Object.entries(r.workloadErrorSamples);
  if (samples.length)
    out.push(
      [
        'Examples of the failures (mostly the faults at work):',
        ...samples.map(([k, v]) => `- ${k}: ${v}`),
      ].join('\n'),
    );
  out.push('### Faults');
  out.push(table(['kind', 'count'], Object.entries(countBy(r.faults, (f) => f.kind))));
  out.push(
    table(
      ['at', 'kind', 'took', 'detail'],
      r.faults.map((f) => [
        at(f.start),
        f.kind,
        secs(f.end - f.start),
        `${f.detail}${f.error ? ` (error: ${f.error})` : ''}`,
      ]),
    ),
  );
  out.push(`429 answers to the GC user's writes (audit log): ${r.throttledWrites}.`);
  out.push('### Deletions by the GC');
  out.push(
    table(
      ['resource', 'deletions'],
      [...Object.entries(r.gcDeletes.byResource), ['**total**', r.gcDeletes.total]],
    ),
  );
  out.push(
    `By policy: ${
      Object.entries(r.gcDeletes.byPolicy)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || '–'
    }. Refused: ${
      Object.entries(r.gcDeletes.failed)
        .map(([k, v]) => `${k} × ${v}`)
        .join(', ') || 'none'
    }. Successful PATCHes by the GC: ${r.gcPatches}.`,
  );
  out.push(
    `Tied to the revision they took effect at: ${
      Object.entries(r.resolution)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || '–'
    } (exact: the history shows the object's deletion starting inside the request's revision window; window: it was already being deleted; ambiguous: someone else deleted it at the same time; unresolved: the object was not observed).`,
  );
  out.push(
    `Collections (last owner gone → dependent gone, as the soak's watches saw them): ${r.collections.count}, median ${secs(r.collections.medianMs)}, slowest ${
      r.collections.slowest
        ? `${secs(r.collections.slowest.latencyMs)} (${r.collections.slowest.object})`
        : '–'
    }. Quiescence after the workload stopped: ${r.quiescenceMs === undefined ? 'not within 60 s' : secs(r.quiescenceMs)}.`,
  );
  out.push('### Processes');
  out.push(
    table(
      ['process', 'pid', 'started', 'ended', 'how', 'explained by'],
      r.lifetimes.map((l) => {
        const exit = r.exits.find((e) => e.pid === l.pid);
        return [
          l.process,
          l.pid,
          at(l.startedAt),
          l.exit ? at(l.exit.at) : '–',
          exit
            ? (exit.signal ?? `exit ${exit.code ?? '?'}`)
            : l.exit
              ? 'stopped at the end'
              : 'running',
          exit ? (exit.cause ?? '**nothing (unexpected)**') : '',
        ];
      }),
    ),
  );
  out.push(
    table(
      ['quiet period', ...[...new Set(r.rss.map((s) => `${s.process}/${s.pid}`))]],
      [...new Set(r.rss.map((s) => s.quiet))].map((q) => [
        q + 1,
        ...[...new Set(r.rss.map((s) => `${s.process}/${s.pid}`))].map((k) =>
          mib(r.rss.find((s) => s.quiet === q && `${s.process}/${s.pid}` === k)?.rssBytes),
        ),
      ]),
    ),
  );
  out.push(
    `Soak watch history: ${r.watch.relists} re-lists after 410 Gone, ${r.watch.reconnects} reconnects, ${r.watch.errors} errors.`,
  );
  return out.join('\n\n');
}

export function render(result: SoakResult, o: RenderOptions = {}, title = 'Soak results'): string {
  const r0 = result.results[0];
  const parts = [
    `# ${title}`,
    `\`npm run soak -- --duration ${r0 ? Math.round(r0.durationMs / 60000) : '?'}m --seed ${r0?.seed ?? '?'} --contender ${
      result.results.length > 1 ? 'both' : (r0?.contender ?? '?')
    }\` on ${new Date(r0?.startedAt ?? Date.now()).toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} CPUs, Node ${process.version}. Each contender ran on a fresh local control plane with the same seed (the workload's choices are seeded; their interleaving with the GC and the faults is not reproducible exactly).`,
  ];
  parts.push('## Summary', summary(result.results));
  for (const r of result.results) parts.push(section(r, o));
  return `${parts.join('\n\n')}\n`;
}
