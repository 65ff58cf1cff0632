// A short soak in CI: about 3 minutes of the seeded workload (fixed seed) with
// kubegc alone, 2 replicas with leader election (each through its own TCP
// proxy to the API server), and one of each of six faults (apiserver restart,
// etcd compaction, leader SIGSTOP, mid-list connection cuts, a 429 squeeze, a
// TCP reset of the connections; one per 20 s slot), on a control plane of its own in .cluster-soak-ci (started and torn down
// here; the shared e2e cluster is not touched). The workload includes the odd but
// legal shapes (soak/lib/shapes.ts: shared UIDs, self-references, cluster scope,
// names that need escaping, a CRD deleted and created again, owners served by an aggregated
// API that refuses field selectors, its APIService flapping) and the webhook that
// refuses some of the GC's writes (soak/lib/webhook.ts). Fails on any I1–I4 violation;
// the full soak is `npm run soak` (soak/README.md).
import { readFile } from 'node:fs/promises';
import { logFile } from '../../cluster/controlplane.ts';
import type { Violation } from '../../soak/lib/oracle.ts';
import { render, summary } from '../../soak/lib/report.ts';
import type { FaultKind } from '../../soak/lib/schedule.ts';
import { runSoak } from '../../soak/lib/soak.ts';

const DIR = '.cluster-soak-ci';

const CI_FAULTS: FaultKind[] = [
  'apiserver-restart',
  'etcd-compaction',
  'leader-stop',
  'net-cut-list',
  'squeeze-429',
  'net-reset',
];

test(
  'soak: kubegc keeps I1–I4 through a seeded workload and six faults',
  async () => {
    const lines: string[] = [];
    const result = await runSoak({
      durationMs: 180_000,
      seed: 1,
      contenders: ['kubegc'],
      dir: DIR,
      replicas: 2,
      faults: CI_FAULTS,
      faultSlotMs: 20_000,
      log: (l) => lines.push(`${new Date().toISOString()} ${l}`),
    });
    const r = result.results[0];
    if (!r) throw new Error('the soak returned no result');
    const report = render(result, { evidenceLines: 20, maxViolations: 10 }, 'CI soak');
    process.stderr.write(`\nCI soak (seed 1, 3 min, kubegc):\n${summary(result.results)}\n`);
    const shapeTally = (m: Record<string, number>): string =>
      Object.entries(m)
        .filter(([k]) => k.startsWith('shape: '))
        .map(([k, n]) => `${k.slice(7)} ${n}`)
        .join(', ');
    process.stderr.write(
      `shape scenarios: ${shapeTally(r.scenarios)}\nshape operations: ${shapeTally(r.ops)}\n`,
    );
    for (const f of r.faults)
      process.stderr.write(
        `fault ${f.kind} at ${((f.start - r.startedAt) / 1000).toFixed(0)} s, ${((f.end - f.start) / 1000).toFixed(1)} s: ${f.detail}${f.error ? ` (error: ${f.error})` : ''}\n`,
      );
    const broken = r.violations.filter((v) => v.invariant !== 'I5');
    // First on stderr (CI shows the start of a failure): each violation, its
    // evidence and what kubegc logged about the object.
    for (const v of broken) process.stderr.write(await explainViolation(v));
    if (broken.length) throw new Error(`${report}\n\nsoak log:\n${lines.join('\n')}`);
    expect(broken).toEqual([]);
    // The run really exercised the GC and the faults.
    expect(r.faults.map((f) => f.kind).sort()).toEqual([
      'apiserver-restart',
      'etcd-compaction',
      'leader-stop',
      'net-cut-list',
      'net-reset',
      'squeeze-429',
    ]);
    expect(r.faults.filter((f) => f.error)).toEqual([]);
    // The restarted replicas' start-up lists were cut mid-stream.
    expect(r.faults.find((f) => f.kind === 'net-cut-list')?.cuts).toBeGreaterThan(0);
    expect(r.gcDeletes.total).toBeGreaterThan(50);
    // The shapes ran (several kinds of them), and the webhook refused some of the GC's writes.
    const shapes = Object.keys(r.scenarios).filter((k) => k.startsWith('shape: '));
    expect(shapes.length).toBeGreaterThanOrEqual(5);
    const refused = Object.entries(r.ops).filter(
      ([k]) => k.startsWith('webhook: ') && !k.endsWith(' allowed'),
    );
    expect(refused.reduce((n, [, v]) => n + v, 0)).toBeGreaterThan(0);
    // The aggregated owners ran (AggWidgets of an aggregated API that refuses field selectors,
    // owning workload objects; some deleted, their dependents then collected or I2 would say),
    // and their APIService flapped and came back: deleted and created again, or its server
    // unavailable (503) and available again.
    expect(r.scenarios['shape: aggregatedOwner']).toBeGreaterThan(0);
    expect(r.ops['shape: AggWidget created']).toBeGreaterThan(0);
    expect(r.ops['shape: AggWidget deleted']).toBeGreaterThan(0);
    expect(r.scenarios['shape: apiServiceFlap']).toBeGreaterThan(0);
    expect(
      (r.ops['shape: APIService created again'] ?? 0) +
        (r.ops['shape: aggregated API available again'] ?? 0),
    ).toBeGreaterThan(0);
  },
  15 * 60_000,
);

/** A violation with its evidence and the kubegc log lines that name the object's UID. */
async function explainViolation(v: Violation): Promise<string> {
  const out = [`\n${v.invariant} ${v.object}: ${v.summary}`, ...v.evidence.slice(0, 30)];
  const uid = /uid ([0-9a-f]{6,})/.exec(v.object)?.[1];
  if (uid) {
    for (const label of ['kubegc-r0', 'kubegc-r1']) {
      const text = await readFile(logFile(DIR, label), 'utf8').catch(() => '');
      const hits = text.split('\n').filter((l) => l.includes(uid));
      out.push(`${label} log lines naming ${uid}: ${hits.length}`);
      for (const l of hits.slice(-30)) out.push(`  ${l.slice(0, 600)}`);
    }
  }
  return `${out.join('\n')}\n`;
}
