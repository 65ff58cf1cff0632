// A small seeded PRNG for the soak: sfc32 seeded through a string hash, so a
// seed and a label (one per actor, one for the fault schedule) always give the
// same stream of choices. Not cryptographic; fast and well distributed.

/** 32-bit hash of a string (cyrb53's mixing, truncated), used to derive seeds. */
export function hash32(text: string, seed = 0): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h1 ^ h2) >>> 0;
}

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  readonly seed: number;
  readonly label: string;

  constructor(seed: number, label = '') {
    if (!Number.isInteger(seed)) throw new Error(`seed must be an integer, not ${seed}`);
    this.seed = seed;
    this.label = label;
    this.a = hash32(label, seed);
    this.b = hash32(label, seed ^ 0x9e3779b9);
    this.c = hash32(label, seed ^ 0x7f4a7c15);
    this.d = 1;
    // Discard the first outputs: sfc32 needs a few rounds to mix a fresh state.
    for (let i = 0; i < 15; i++) this.next32();
  }

  /** An independent stream for `label`, the same for the same seed whatever was drawn here. */
  fork(label: string): Prng {
    return new Prng(this.seed, this.label ? `${this.label}/${label}` : label);
  }

  /** Uniform 32-bit unsigned integer. */
  next32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.next32() / 4294967296;
  }

  /** Uniform integer in [min, max] (both included). */
  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min)
      throw new Error(`bad range [${min}, ${max}]`);
    return min + Math.floor(this.float() * (max - min + 1));
  }

  /** true with probability p. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.float() * items.length)] as T;
  }

  /** One of the keys, with probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    if (!(total > 0)) throw new Error('weights must sum to a positive number');
    let x = this.float() * total;
    for (const [k, w] of entries) {
      x -= w;
      if (x < 0) return k;
    }
    return (entries[entries.length - 1] as [K, number])[0];
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  }

  /** A lowercase alphanumeric suffix for object names. */
  suffix(length = 5): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
    let s = '';
    for (let i = 0; i < length; i++) s += alphabet[this.next32() % alphabet.length];
    return s;
  }
}
