// Owners verified absent, keyed by full coordinates (group, kind, namespace,
// name, uid), never by UID alone: a reference that names the UID of a deleted
// object under other coordinates must still be checked live (upstream #65200).
// Bounded LRU so a long-running GC does not grow without limit. Each entry
// remembers when the owner was first known gone (for the decision-latency metric).
export class AbsentOwnerCache {
  private readonly entries = new Map<string, number>();
  private readonly capacity: number;

  constructor(capacity = 500) {
    this.capacity = capacity;
  }

  add(key: string, at = Date.now()): void {
    const since = this.entries.get(key);
    this.entries.delete(key);
    this.entries.set(key, since === undefined ? at : Math.min(since, at));
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  /** Forgets an owner: it was observed alive after all. */
  delete(key: string): void {
    this.entries.delete(key);
  }

  has(key: string): boolean {
    return this.goneSince(key) !== undefined;
  }

  /** When the owner was first known gone (ms since epoch), refreshing the entry; undefined if not cached. */
  goneSince(key: string): number | undefined {
    const since = this.entries.get(key);
    if (since === undefined) return undefined;
    // Refresh: a hit means more dependents of this owner are being decided.
    this.entries.delete(key);
    this.entries.set(key, since);
    return since;
  }

  get size(): number {
    return this.entries.size;
  }
}
