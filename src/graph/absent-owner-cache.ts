// Owners verified absent, keyed by full coordinates (group, kind, namespace,
// name, uid), never by UID alone: a reference that names the UID of a deleted
// object under other coordinates must still be checked live (upstream #65200).
// Bounded LRU so a long-running GC does not grow without limit.
export class AbsentOwnerCache {
  private readonly entries = new Map<string, true>();
  private readonly capacity: number;

  constructor(capacity = 500) {
    this.capacity = capacity;
  }

  add(key: string): void {
    this.entries.delete(key);
    this.entries.set(key, true);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  has(key: string): boolean {
    if (!this.entries.has(key)) return false;
    // Refresh: a hit means more dependents of this owner are being decided.
    this.entries.delete(key);
    this.entries.set(key, true);
    return true;
  }

  get size(): number {
    return this.entries.size;
  }
}
