// The arithmetic of the benchmark, kept apart so it can be unit-tested:
// summaries of repetitions, paired ratios, the marginal-memory slope and the
// seeded order in which contenders run.

export interface Summary {
  /** Repetitions that produced a value. */
  n: number;
  min: number | null;
  median: number | null;
  max: number | null;
}

export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? null) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export function summarize(xs: readonly number[]): Summary {
  if (xs.length === 0) return { n: 0, min: null, median: null, max: null };
  return { n: xs.length, min: Math.min(...xs), median: median(xs), max: Math.max(...xs) };
}

/**
 * a[i] / b[i] for every repetition i where both produced a value. Repetition i
 * of every contender ran in the same round, so a slow spell of the machine
 * hits both sides of each ratio: their spread is the spread of the claim.
 */
export function pairedRatios(
  a: readonly (number | null)[],
  b: readonly (number | null)[],
): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x !== null && x !== undefined && y !== null && y !== undefined && y !== 0) out.push(x / y);
  }
  return out;
}

/**
 * Least-squares slope of y over x (bytes per object when x is objects and y
 * bytes); null with fewer than two distinct x.
 */
export function leastSquaresSlope(points: readonly { x: number; y: number }[]): number | null {
  if (points.length < 2) return null;
  const mx = points.reduce((s, p) => s + p.x, 0) / points.length;
  const my = points.reduce((s, p) => s + p.y, 0) / points.length;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? null : num / den;
}

/** mulberry32: a small, fast PRNG; the same seed gives the same order on any machine. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A shuffled copy (Fisher–Yates) drawn from `random`. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

export const round2 = (x: number): number => Math.round(x * 100) / 100;
