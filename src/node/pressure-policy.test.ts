import {
  DEFAULT_EVICTION_HARD,
  deriveContainerFsThresholds,
  layoutOf,
  parseEvictionHard,
  parseReclaimMargin,
  parseQuantity,
  pressureNeeds,
  reclaimSteps,
  type FsObservation,
} from './pressure-policy.ts';

const GB = 1e9;

describe('--eviction-hard (the kubelet syntax and rules)', () => {
  test('the kubelet defaults: the disk signals kept, memory.available accepted and ignored', () => {
    const r = parseEvictionHard(DEFAULT_EVICTION_HARD);
    expect(r.thresholds).toEqual([
      { signal: 'nodefs.available', value: { percent: 10 } },
      { signal: 'nodefs.inodesFree', value: { percent: 5 } },
      { signal: 'imagefs.available', value: { percent: 15 } },
      { signal: 'imagefs.inodesFree', value: { percent: 5 } },
    ]);
    expect(r.ignored).toEqual(['memory.available']);
  });

  test('quantities, 0% and 100% turn a signal off, containerfs given is ignored (the kubelet derives it)', () => {
    const r = parseEvictionHard(
      'imagefs.available<2Gi, nodefs.available<0%,nodefs.inodesFree<100%,containerfs.available<5%',
    );
    expect(r.thresholds).toEqual([
      { signal: 'imagefs.available', value: { quantity: 2 * 2 ** 30 } },
    ]);
    expect(r.ignored).toEqual(['containerfs.available']);
    expect(parseEvictionHard('').thresholds).toEqual([]);
  });

  test.each([
    ['imagefs.available>15%', /not of the form signal<value/],
    ['imagefs.available<150%', /must be <= 100%/],
    ['imagefs.available<-1%', /must be >= 0%/],
    ['imagefs.available<0', /must be positive/],
    ['imagefs.available<lots', /is not a quantity/],
    ['disk.available<10%', /unsupported eviction signal disk.available/],
    ['imagefs.available<10%,imagefs.available<20%', /given twice/],
    ['memory.available<x', /is not a quantity/],
  ])('%s: %p', (text, message) => {
    expect(() => parseEvictionHard(text)).toThrow(message);
  });

  test.each([
    ['100Mi', 100 * 2 ** 20],
    ['2G', 2e9],
    ['1.5Gi', 1.5 * 2 ** 30],
    ['5000', 5000],
    ['10MB', undefined],
    ['', undefined],
  ])('quantity %s = %p', (text, n) => {
    expect(parseQuantity(text)).toBe(n);
  });
});

test('--eviction-reclaim-margin: up to 10% and any quantity (as the kubelet takes --eviction-minimum-reclaim); 10.1% and 50% refused', () => {
  expect(parseReclaimMargin('5%')).toEqual({ percent: 5 });
  expect(parseReclaimMargin('10%')).toEqual({ percent: 10 });
  expect(parseReclaimMargin('2Gi')).toEqual({ quantity: 2 ** 31 });
  expect(() => parseReclaimMargin('10.1%')).toThrow(
    '--eviction-reclaim-margin: 10.1% is more than 10%',
  );
  expect(() => parseReclaimMargin('50%')).toThrow(/would start below 65% free/);
});

describe('layouts (by device) and the containerfs thresholds', () => {
  test.each([
    [{ nodefs: 1n, imagefs: 1n, containerfs: 1n }, 'single'],
    [{ nodefs: 1n, imagefs: 2n, containerfs: 2n }, 'imagefs'],
    [{ nodefs: 1n, imagefs: 2n, containerfs: 1n }, 'split'],
  ] as const)('%p → %s', (devices, layout) => {
    expect(layoutOf(devices)).toBe(layout);
  });

  const base = parseEvictionHard(DEFAULT_EVICTION_HARD).thresholds;
  test('one filesystem or split: containerfs takes nodefs thresholds; a dedicated imagefs: imagefs ones', () => {
    const cf = (layout: 'single' | 'imagefs' | 'split') =>
      deriveContainerFsThresholds(base, layout).filter((t) => t.signal.startsWith('containerfs.'));
    expect(cf('single')).toEqual([
      { signal: 'containerfs.available', value: { percent: 10 } },
      { signal: 'containerfs.inodesFree', value: { percent: 5 } },
    ]);
    expect(cf('split')).toEqual(cf('single'));
    expect(cf('imagefs')).toEqual([
      { signal: 'containerfs.available', value: { percent: 15 } },
      { signal: 'containerfs.inodesFree', value: { percent: 5 } },
    ]);
  });

  test("reclaim steps: the kubelet's buildSignalToNodeReclaimFuncs", () => {
    expect(reclaimSteps('single', 'nodefs.available')).toEqual(['containers', 'images']);
    expect(reclaimSteps('single', 'imagefs.inodesFree')).toEqual(['containers', 'images']);
    expect(reclaimSteps('imagefs', 'nodefs.available')).toEqual([]);
    expect(reclaimSteps('imagefs', 'imagefs.available')).toEqual(['containers', 'images']);
    expect(reclaimSteps('imagefs', 'containerfs.available')).toEqual(['containers', 'images']);
    expect(reclaimSteps('split', 'imagefs.available')).toEqual(['images']);
    expect(reclaimSteps('split', 'nodefs.available')).toEqual(['containers']);
    expect(reclaimSteps('split', 'containerfs.inodesFree')).toEqual(['containers']);
  });
});

describe('pressureNeeds: reclaim starts a margin above the kubelet threshold', () => {
  const fs = (availableGb: number, inodesFree = 900_000): FsObservation => ({
    capacityBytes: 100 * GB,
    availableBytes: availableGb * GB,
    inodes: 1_000_000,
    inodesFree,
  });
  const thresholds = parseEvictionHard(DEFAULT_EVICTION_HARD).thresholds;

  test('imagefs at 19% available: above the kubelet 15%, below 15% + 5%: reclaim to 25%', () => {
    const r = pressureNeeds({
      thresholds,
      observations: { nodefs: fs(50), imagefs: fs(19) },
      margin: { percent: 5 },
    });
    expect(r.needs).toEqual([
      {
        signal: 'imagefs.available',
        available: 19 * GB,
        threshold: 15 * GB,
        start: 20 * GB,
        target: 25 * GB,
      },
    ]);
    expect(r.levels).toHaveLength(4);
  });

  test('at exactly threshold + margin nothing is due; a signal without its filesystem observed is skipped', () => {
    const r = pressureNeeds({
      thresholds,
      observations: { imagefs: fs(20) },
      margin: { percent: 5 },
    });
    expect(r.needs).toEqual([]);
    expect(r.levels.map((l) => l.signal)).toEqual(['imagefs.available', 'imagefs.inodesFree']);
  });

  test('inodes: a percentage margin applies; a byte margin falls back to the threshold itself', () => {
    const low = { nodefs: fs(50, 80_000) }; // 8% of inodes free, threshold 5%
    expect(
      pressureNeeds({ thresholds, observations: low, margin: { percent: 5 } }).needs.map(
        (n) => n.signal,
      ),
    ).toEqual(['nodefs.inodesFree']);
    const q = pressureNeeds({ thresholds, observations: low, margin: { quantity: 5 * GB } });
    expect(q.needs).toEqual([
      {
        signal: 'nodefs.inodesFree',
        available: 80_000,
        threshold: 50_000,
        start: 100_000,
        target: 150_000,
      },
    ]);
  });
});
