// A map whose entries expire after their TTL, holding at most `max` of them
// (the least recently used go first). The metrics port's token and access
// review answers, and the node's workload reads (expected back), are kept in one.
export class TtlLru<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly max: number;
  private readonly now: () => number;
  constructor(max: number, now: () => number) {
    this.max = max;
    this.now = now;
  }
  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    this.entries.delete(key);
    if (e.expires <= this.now()) return undefined;
    this.entries.set(key, e);
    return e.value;
  }
  set(key: string, value: V, ttlMs: number): void {
    this.entries.delete(key);
    if (ttlMs <= 0) return;
    this.entries.set(key, { value, expires: this.now() + ttlMs });
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
  }
  get size(): number {
    return this.entries.size;
  }
}
