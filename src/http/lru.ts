/**
 * How many recently used entries an insertion may pass over (each moved to the back, its
 * mark cleared) before it evicts one regardless: bounds the cost of one insertion when
 * every entry is in use.
 */
const SECOND_CHANCES_PER_EVICTION = 8;

/**
 * A bounded map that forgets an entry not used lately first (CLOCK, or "second chance":
 * a read only marks its entry; the eviction hand passes over marked entries, clearing
 * their mark, and evicts the first unmarked one), with a time to live per entry as a
 * safety net. A read never deletes and
 * re-inserts its key: V8's Map keeps deleted entries in the bucket chain until it
 * rehashes, so one hot key read that way cost 94 µs per read in a 100k-entry map.
 * An expired entry is no longer a hit, but it stays (until replaced or evicted) as the
 * last known value, which `peek` still returns.
 */
interface Entry<V> {
  value: V;
  expiresAtMs: number;
  used: boolean;
}

export class Lru<K, V> {
  private readonly entries = new Map<K, Entry<V>>();
  /**
   * The clock's hand: one iterator kept from eviction to eviction. A new iterator starts at
   * the front of the Map, where V8 leaves the holes of deleted entries until it rehashes,
   * and walking them on every eviction cost time in proportion to the map's size.
   */
  private hand: Iterator<[K, Entry<V>]> | null = null;

  constructor(private readonly maxEntries: number) {}

  /** The value, or undefined when absent or expired. */
  get(key: K, nowMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.expiresAtMs <= nowMs) return undefined;
    entry.used = true;
    return entry.value;
  }

  /** The entry, expired or not, without marking it used. */
  peek(key: K): { readonly value: V; readonly expiresAtMs: number } | undefined {
    return this.entries.get(key);
  }

  set(key: K, value: V, expiresAtMs: number): void {
    if (this.maxEntries <= 0) return;
    const existing = this.entries.get(key);
    if (existing !== undefined) {
      existing.value = value;
      existing.expiresAtMs = expiresAtMs;
      existing.used = true;
      return;
    }
    if (this.entries.size >= this.maxEntries) this.evictOne();
    this.entries.set(key, { value, expiresAtMs, used: false });
  }

  private evictOne(): void {
    let chances = SECOND_CHANCES_PER_EVICTION;
    // At most one full turn of the map plus the chances: the hand wraps around once when it
    // reaches the end.
    for (let wraps = 0; wraps < 2;) {
      this.hand ??= this.entries.entries();
      const next = this.hand.next();
      if (next.done === true) {
        this.hand = null;
        wraps += 1;
        continue;
      }
      const [key, entry] = next.value;
      if (entry.used && chances > 0) {
        chances -= 1;
        entry.used = false;
        continue;
      }
      this.entries.delete(key);
      return;
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}
