/**
 * A bounded map that forgets the least recently used entry first, with a time to live per
 * entry as a safety net. A Map keeps insertion order: a hit is re-inserted at the end.
 * An expired entry is no longer a hit, but it stays (until replaced or evicted) as the
 * last known value, which `peek` still returns.
 */
export class Lru<K, V> {
  private readonly entries = new Map<K, { value: V; expiresAtMs: number }>();

  constructor(private readonly maxEntries: number) {}

  /** The value, or undefined when absent or expired. */
  get(key: K, nowMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.expiresAtMs <= nowMs) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** The entry, expired or not, without making it recently used. */
  peek(key: K): { readonly value: V; readonly expiresAtMs: number } | undefined {
    return this.entries.get(key);
  }

  set(key: K, value: V, expiresAtMs: number): void {
    if (this.maxEntries <= 0) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAtMs });
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
