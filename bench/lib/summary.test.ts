import { notFullBecause, parsePlan } from '../run.ts';
import {
  renderTables,
  summarizeRecords,
  targets,
  wireComparisons,
  type RepRecord,
} from './summary.ts';

function cascadeRec(contender: string, rep: number, seconds: number | null): RepRecord {
  return {
    scenario: 'cascade',
    contender,
    label: `${contender} label`,
    rep,
    position: 1,
    ok: seconds !== null,
    ...(seconds === null ? { error: 'boom' } : {}),
    params: { n: 2000 },
    values:
      seconds === null
        ? {}
        : { seconds, cpu: { gc: 1, apiserver: 2, etcd: 3 }, requests: { DELETE: 2001 } },
  };
}

function memRec(
  contender: string,
  rep: number,
  objects: number,
  rssMb: number,
  sync: number,
  readMb = 0,
): RepRecord {
  return {
    scenario: 'memory',
    contender,
    label: contender,
    rep,
    position: 1,
    ok: true,
    params: { payload: 'empty', objects },
    values: {
      rssBytes: rssMb * 2 ** 20,
      syncSeconds: sync,
      listedSeconds: sync / 2,
      readBytes: readMb * 2 ** 20,
    },
  };
}

describe('benchmark summary', () => {
  it('pairs rounds for the ratios, shows spread, and keeps failed repetitions visible', () => {
    const records = [
      cascadeRec('kubegc', 1, 2),
      cascadeRec('kcm_equal', 1, 4),
      cascadeRec('kubegc', 2, 4),
      cascadeRec('kcm_equal', 2, 4),
      cascadeRec('kubegc', 3, null),
      cascadeRec('kcm_equal', 3, 100),
      cascadeRec('ceiling', 1, 1.8),
      cascadeRec('ceiling', 2, 3.6),
    ];
    const s = summarizeRecords(records);
    const k = s.cascades.cascade?.contenders.kubegc;
    expect(k).toMatchObject({ ok: 2, failed: 1, seconds: { n: 2, min: 2, median: 3, max: 4 } });
    expect(k?.errors).toEqual(['rep 3: boom']);
    const t = targets(records, s);
    // Rounds 1 and 2 only (kubegc failed in round 3): ratios 2 and 1.
    const equal = t.find((x) => x.what.startsWith('cascade (graph-copy path): kcm'));
    expect(equal).toMatchObject({ value: '1.50× (1.00×–2.00×)', met: false }); // goal ≥ 1.6×
    const ceiling = t.find((x) => x.what.includes('ceiling'));
    expect(ceiling).toMatchObject({ value: '90% (90%–90%)', met: true });
    const md = renderTables(records, s, {});
    expect(md).toContain('2 (**1 failed**)');
    expect(md).toContain('cascade {"n":2000} kubegc rep 3: boom');
  });

  it('fits marginal bytes per object over the sizes, not the baseline, and checks RSS per size', () => {
    const records = [0, 10_000, 50_000].flatMap((o) => [
      memRec('kubegc', 1, o, 80 + o / 1000, 1),
      memRec('kcm_default', 1, o, 60 + o / 380, 2),
    ]);
    const s = summarizeRecords(records);
    const mem = s.memory.empty;
    expect(mem?.objects).toEqual([0, 10_000, 50_000]);
    expect(mem?.contenders.kubegc?.bytes_per_object).toBe(Math.round(2 ** 20 / 1000));
    const t = targets(records, s);
    expect(t.find((x) => x.what.startsWith('RSS at 10,000'))).toMatchObject({ met: false });
    expect(t.find((x) => x.what.startsWith('RSS at 50,000'))).toMatchObject({ met: true });
    expect(t.find((x) => x.what.startsWith('marginal'))).toMatchObject({ value: '38%', met: true });
    expect(t.find((x) => x.what.includes('"informers listed"'))).toMatchObject({
      value: '0.25×',
      met: true,
    });
  });

  it('compares the bytes read to sync above the near-empty baseline', () => {
    // kubegc reads 5 MB more at 50,000 objects than near-empty, kcm 20 MB more.
    const records = [0, 50_000].flatMap((o) => [
      memRec('kubegc', 1, o, 80, 1, 3 + o / 10_000),
      memRec('kcm_default', 1, o, 60, 2, 1 + o / 2_500),
    ]);
    const s = summarizeRecords(records);
    const [row] = wireComparisons(s);
    expect(row?.value).toBe('25%');
    expect(row?.what).toContain('105 B/object ÷ 419 B/object');
    expect(renderTables(records, s, {})).toContain('bytes read to sync at 50,000 empty');
  });

  it('calls a run full only with every default that makes it one', () => {
    expect(notFullBecause(parsePlan([]))).toEqual([]);
    expect(notFullBecause(parsePlan(['--seed', '7', '--keep-cluster']))).toEqual([]);
    for (const argv of [
      ['--quick'],
      ['--reps', '3'],
      ['--n', '100'],
      ['--memory', '0,10000'],
      ['--payloads', 'empty'],
      ['--graph-objects', '1000'],
      ['--only', 'cascade'],
      ['--contenders', 'kubegc,kcm_equal'],
      ['--node-flags', '--optimize-for-size'],
      ['--kubegc-args', '--workers=5'],
      ['--kcm-args', '--concurrent-gc-syncs=5'],
    ])
      expect(notFullBecause(parsePlan(argv)).length).toBeGreaterThan(0);
    expect(() => parsePlan(['--contenders', 'kubegc,nope'])).toThrow(/unknown nope/);
  });
});
