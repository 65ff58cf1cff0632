import { Prng, hash32 } from './prng.ts';
import { parseDuration, planSchedule, faultKindsFor, FAULT_KINDS } from './schedule.ts';

describe('Prng', () => {
  test('the same seed and label give the same stream; another seed or label another', () => {
    const draw = (p: Prng): number[] => Array.from({ length: 8 }, () => p.next32());
    expect(draw(new Prng(1, 'a'))).toEqual(draw(new Prng(1, 'a')));
    expect(draw(new Prng(1, 'a'))).not.toEqual(draw(new Prng(2, 'a')));
    expect(draw(new Prng(1, 'a'))).not.toEqual(draw(new Prng(1, 'b')));
  });

  test('fork depends on the seed and label, not on what was drawn before', () => {
    const a = new Prng(7);
    const b = new Prng(7);
    for (let i = 0; i < 100; i++) b.next32();
    expect(a.fork('actor-1').int(0, 1e9)).toBe(b.fork('actor-1').int(0, 1e9));
    expect(a.fork('actor-1').int(0, 1e9)).not.toBe(a.fork('actor-2').int(0, 1e9));
  });

  test('int stays in range and covers it; float in [0, 1)', () => {
    const p = new Prng(3);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const v = p.int(-2, 3);
      expect(v).toBeGreaterThanOrEqual(-2);
      expect(v).toBeLessThanOrEqual(3);
      seen.add(v);
      const f = p.float();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
    }
    expect(seen.size).toBe(6);
  });

  test('roughly uniform', () => {
    const p = new Prng(11);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 40_000; i++) {
      const k = p.int(0, 3);
      counts[k] = (counts[k] ?? 0) + 1;
    }
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });

  test('weighted, pick and shuffle', () => {
    const p = new Prng(5);
    let a = 0;
    for (let i = 0; i < 10_000; i++) if (p.weighted({ a: 3, b: 1 }) === 'a') a++;
    expect(a).toBeGreaterThan(7_000);
    expect(a).toBeLessThan(8_000);
    expect(['x', 'y']).toContain(p.pick(['x', 'y']));
    expect(() => p.pick([])).toThrow();
    const items = [1, 2, 3, 4, 5, 6, 7, 8];
    const shuffled = p.shuffle(items);
    expect([...shuffled].sort()).toEqual(items);
    expect(items).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(p.suffix(6)).toMatch(/^[a-z0-9]{6}$/);
  });

  test('rejects non-integer seeds and bad ranges', () => {
    expect(() => new Prng(1.5)).toThrow(/integer/);
    expect(() => new Prng(1).int(3, 2)).toThrow(/range/);
    expect(hash32('x')).toBe(hash32('x'));
  });
});

describe('schedule', () => {
  test('parseDuration', () => {
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('1500')).toBe(1500);
    expect(() => parseDuration('3 minutes')).toThrow(/not a duration/);
    expect(() => parseDuration('')).toThrow(/not a duration/);
    expect(() => parseDuration('5x')).toThrow(/not a duration/);
  });

  test('a 30 minute plan alternates work and quiet and uses every fault kind', () => {
    const s = planSchedule({ durationMs: 1_800_000, seed: 1, contender: 'kubegc' });
    expect(s.phases.map((p) => p.kind)).toEqual(
      s.phases.map((_, i) => (i % 2 === 0 ? 'work' : 'quiet')),
    );
    const total = s.phases.reduce((t, p) => t + p.durationMs, 0);
    expect(Math.abs(total - 1_800_000)).toBeLessThan(60_000);
    expect(new Set(s.faults.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS));
    const work = s.phases.find((p) => p.kind === 'work')?.durationMs ?? 0;
    for (const f of s.faults) expect(f.offsetMs).toBeLessThan(work);
    expect(planSchedule({ durationMs: 1_800_000, seed: 1, contender: 'kubegc' })).toEqual(s);
    expect(planSchedule({ durationMs: 1_800_000, seed: 2, contender: 'kubegc' })).not.toEqual(s);
  });

  test('kcm gets no leader SIGSTOP; an explicit list is used as given', () => {
    expect(faultKindsFor('kcm')).not.toContain('leader-stop');
    const kcm = planSchedule({ durationMs: 1_800_000, seed: 1, contender: 'kcm' });
    expect(kcm.faults.some((f) => f.kind === 'leader-stop')).toBe(false);
    const ci = planSchedule({
      durationMs: 180_000,
      seed: 1,
      contender: 'kubegc',
      faults: ['apiserver-restart', 'etcd-compaction', 'leader-stop', 'squeeze-429'],
    });
    expect(ci.faults.map((f) => f.kind)).toEqual([
      'apiserver-restart',
      'etcd-compaction',
      'leader-stop',
      'squeeze-429',
    ]);
    // The CI soak's six faults fit in 20 s slots; net faults are planned for kcm too.
    const ci6 = planSchedule({
      durationMs: 180_000,
      seed: 1,
      contender: 'kubegc',
      faultSlotMs: 20_000,
      faults: [
        'apiserver-restart',
        'etcd-compaction',
        'leader-stop',
        'net-cut-list',
        'squeeze-429',
        'net-reset',
      ],
    });
    expect(ci6.faults).toHaveLength(6);
    const cutList = ci6.faults.find((f) => f.kind === 'net-cut-list');
    expect(cutList?.holdMs).toBeGreaterThanOrEqual(8_000);
    expect(cutList?.holdMs).toBeLessThanOrEqual(15_000);
    for (const f of kcm.faults.filter((x) => x.kind === 'net-blackhole'))
      expect(f.holdMs).toBeGreaterThanOrEqual(20_000);
    expect(kcm.faults.some((f) => f.kind === 'net-cut-list')).toBe(true);
    expect(() =>
      planSchedule({ durationMs: 180_000, seed: 1, contender: 'kcm', faults: ['leader-stop'] }),
    ).toThrow(/not available/);
    expect(() => planSchedule({ durationMs: 30_000, seed: 1, contender: 'kcm' })).toThrow(/1m/);
  });
});
