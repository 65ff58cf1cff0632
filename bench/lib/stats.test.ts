import { leastSquaresSlope, median, pairedRatios, rng, shuffled, summarize } from './stats.ts';

describe('benchmark statistics', () => {
  it('summarizes repetitions as min / median / max and counts them', () => {
    expect(summarize([3, 1, 2, 10, 4])).toEqual({ n: 5, min: 1, median: 3, max: 10 });
    expect(summarize([2, 4])).toEqual({ n: 2, min: 2, median: 3, max: 4 });
    expect(summarize([])).toEqual({ n: 0, min: null, median: null, max: null });
    expect(median([5])).toBe(5);
  });

  it('pairs ratios by repetition and skips repetitions where either side failed', () => {
    expect(pairedRatios([10, null, 9, 8], [5, 4, 3])).toEqual([2, 3]);
    expect(pairedRatios([1], [0])).toEqual([]);
  });

  it('fits a least-squares slope through several sizes', () => {
    // y = 1000 x + 50e6, with noise that cancels.
    const pts = [10_000, 50_000, 200_000].map((x) => ({ x, y: 1000 * x + 50e6 }));
    expect(leastSquaresSlope(pts)).toBeCloseTo(1000, 6);
    expect(leastSquaresSlope([{ x: 1, y: 1 }])).toBeNull();
    expect(
      leastSquaresSlope([
        { x: 2, y: 1 },
        { x: 2, y: 5 },
      ]),
    ).toBeNull();
  });

  it('draws the same order from the same seed, and a different one from another', () => {
    const items = ['kubegc', 'kcm_default', 'kcm_equal', 'ceiling', 'kubegc_kcm_budget'];
    const a = [1, 2, 3].map(() => shuffled(items, rng(42)).join());
    expect(new Set(a).size).toBe(1);
    const r = rng(42);
    const orders = new Set(Array.from({ length: 20 }, () => shuffled(items, r).join()));
    // Successive rounds of one run are shuffled afresh.
    expect(orders.size).toBeGreaterThan(5);
    for (const o of orders) expect(o.split(',').sort()).toEqual([...items].sort());
    expect(shuffled(items, rng(7)).join()).not.toBe(shuffled(items, rng(8)).join());
  });
});
