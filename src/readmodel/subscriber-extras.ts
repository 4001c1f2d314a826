import { fingerprint, fingerprintBytes } from './subscriber-index.js';
import type { SubscriberExtra } from '../store/store.js';

/**
 * What a non-active subscriber's answer carries beside its status: when its scheduled
 * lockout falls, and the page where it pays. Only the few subscribers in dunning have one,
 * so they sit beside the index (which stays 17 bytes a slot for everyone) in a map keyed by
 * the same 128-bit fingerprint: its first word, cut to a small integer so that V8 keeps the
 * key unboxed, and the other three in the entry. Entries whose keys meet on that word are
 * chained. What one adds is measured in the benchmark (bench/README.md).
 */
interface Entry {
  a: number;
  b: number;
  c: number;
  d: number;
  lockoutAtS: number;
  payUrl: string | null;
  next: Entry | null;
}

/** A Smi on every platform V8 runs on (31 bits signed). */
const KEY_MASK = 0x3fffffff;

export class SubscriberExtras {
  private readonly map = new Map<number, Entry>();
  private count = 0;
  private readonly fp = new Uint32Array(4);

  get size(): number {
    return this.count;
  }

  /** The extra of a subscriber, or null. The returned object is the map's: read it, keep nothing. */
  get(tenantId: number, customerId: string): Readonly<Entry> | null {
    if (this.count === 0 || !fingerprint(tenantId, customerId, this.fp)) return null;
    return this.find(this.fp);
  }

  /** Sets (or, with null, clears) a subscriber's extra. */
  set(tenantId: number, customerId: string, extra: SubscriberExtra | null): void {
    if (!fingerprint(tenantId, customerId, this.fp)) return;
    this.put(extra);
  }

  setBytes(tenantId: number, bytes: Uint8Array, start: number, end: number, extra: SubscriberExtra | null): void {
    if (!fingerprintBytes(tenantId, bytes, start, end, this.fp)) return;
    this.put(extra);
  }

  /** Words are kept as signed 32-bit integers: small integers in V8, never boxed numbers. */
  private find(fp: Uint32Array): Entry | null {
    const a = (fp[0] ?? 0) | 0;
    const b = (fp[1] ?? 0) | 0;
    const c = (fp[2] ?? 0) | 0;
    const d = (fp[3] ?? 0) | 0;
    for (let e = this.map.get(a & KEY_MASK) ?? null; e !== null; e = e.next) {
      if (e.a === a && e.b === b && e.c === c && e.d === d) return e;
    }
    return null;
  }

  private put(extra: SubscriberExtra | null): void {
    const fp = this.fp;
    const a = (fp[0] ?? 0) | 0;
    const key = a & KEY_MASK;
    const found = this.find(fp);
    if (extra === null || (extra.lockoutAtS === null && extra.payUrl === null)) {
      if (found === null) return;
      const head = this.map.get(key) ?? null;
      if (head === found) {
        if (found.next === null) this.map.delete(key);
        else this.map.set(key, found.next);
      } else {
        for (let e = head; e !== null; e = e.next) {
          if (e.next === found) {
            e.next = found.next;
            break;
          }
        }
      }
      this.count -= 1;
      return;
    }
    if (found !== null) {
      found.lockoutAtS = extra.lockoutAtS ?? 0;
      found.payUrl = extra.payUrl;
      return;
    }
    const entry: Entry = { a, b: (fp[1] ?? 0) | 0, c: (fp[2] ?? 0) | 0, d: (fp[3] ?? 0) | 0, lockoutAtS: extra.lockoutAtS ?? 0, payUrl: extra.payUrl, next: this.map.get(key) ?? null };
    this.map.set(key, entry);
    this.count += 1;
  }
}
