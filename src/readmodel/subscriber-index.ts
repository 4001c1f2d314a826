import { STATUSES } from '../domain/types.js';
import type { SubscriberStatus } from '../domain/types.js';

/**
 * Every known subscriber's status, in a few typed arrays: what the lookup needs of a
 * subscriber is its status (2 bits) and whether it is known at all, so a full copy of a
 * million subscribers fits in each process. Keys are 128-bit fingerprints of (tenant id,
 * customer id), never the ids themselves.
 *
 * Exactness: a lookup answers "known" for a customer that is not only when its 128-bit
 * fingerprint equals that of a known one. Treating the fingerprint as a uniform random
 * function of the key, the chance that any two of n keys share one is at most
 * n^2 / 2^129: for n = 10^6, 1.5e-27; for n = 10^9, 1.5e-21. The fingerprint is not a
 * secret-keyed hash: a customer id crafted to collide with a known one would only read
 * that customer's status, which the lookup answers for the known id itself under the same
 * key and HMAC checks.
 *
 * Layout: open addressing with linear probing over a power-of-two number of slots, 16
 * bytes of fingerprint and 1 byte of state a slot, at most 3/4 full. A growing table is
 * rebuilt at 3/8 to 3/4 full, so 17 / 0.75 = 23 to 17 / 0.375 = 45 bytes a subscriber (and
 * both arrays at once, briefly, during a rebuild); one sized for its subscribers up front
 * (a snapshot load that counts its rows) is 0.35 to 0.7 full: 24 to 49 bytes, 35.7 for a
 * million. A read allocates nothing and never writes.
 */

const EMPTY = 0;
const DELETED = 1;
/**
 * A slot's state byte: EMPTY, DELETED, then each status in the order of `STATUSES`, then
 * the two states of a customer with a notice (docs/notices.md): an active subscriber's, and
 * one Dunwall knows no status of (answered as unknown, but for its notice). A lookup reads
 * the state byte it reads anyway: an active subscriber without a notice costs nothing more.
 */
const STATUS_OF: readonly (SubscriberStatus | null)[] = [null, null, ...STATUSES, 'active', null];
const STATE_OF = Object.fromEntries(STATUSES.map((s) => [s, STATUS_OF.indexOf(s)])) as Readonly<
  Record<SubscriberStatus, number>
>;
/** The state of an active subscriber with a notice. */
export const NOTICED_ACTIVE = STATUSES.length + 2;
/** The state of a customer with a notice and no status kept (answered unknown, but for its notice). */
export const NOTICED_UNKNOWN = STATUSES.length + 3;
/** The status a state byte stands for (null: not known). */
export function statusOfState(state: number): SubscriberStatus | null {
  return STATUS_OF[state] ?? null;
}
/** The state byte of each status (what `stateOf` answers for a subscriber without a notice). */
export const STATE_OF_STATUS = STATE_OF;
const MIN_SLOTS = 16;
const MAX_LOAD = 0.75;
/** How full a table sized up front may start: room for growth before the first rebuild. */
const UPFRONT_LOAD = 0.7;

/** MurmurHash3 x86 128-bit constants. */
const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** A byte of a key; a module function, not a closure, so that hashing allocates nothing. */
function byte(bytes: Uint8Array, i: number): number {
  return bytes[i] ?? 0;
}

/** Longer than any customer id (at most 255 characters): such an id is never stored. */
const MAX_ID_BYTES = 256;
/** The id being hashed, one byte a char: reads allocate nothing. */
const scratch = new Uint8Array(MAX_ID_BYTES);

/**
 * MurmurHash3 x86_128 of the customer id (one byte a char), seeded with the tenant id,
 * into `out[0..3]`. False, with `out` meaningless, when the id is not ASCII or too long:
 * customer ids are (`^cus_[A-Za-z0-9_]{1,251}$`), so no such id is ever stored, and hashing
 * only the low byte of a wider char could make it collide with one that is.
 */
export function fingerprint(tenantId: number, id: string, out: Uint32Array): boolean {
  const len = id.length;
  if (len > MAX_ID_BYTES) return false;
  let wide = 0;
  for (let i = 0; i < len; i += 1) {
    const c = id.charCodeAt(i);
    wide |= c;
    scratch[i] = c;
  }
  if (wide > 0x7f) return false;
  hash(tenantId, scratch, 0, len, out);
  return true;
}

/** The same fingerprint of an id given as bytes (`bytes[start..end)`), as a load streams them. */
export function fingerprintBytes(
  tenantId: number,
  bytes: Uint8Array,
  start: number,
  end: number,
  out: Uint32Array,
): boolean {
  const len = end - start;
  if (len > MAX_ID_BYTES || len < 0) return false;
  let wide = 0;
  for (let i = start; i < end; i += 1) wide |= bytes[i] ?? 0;
  if (wide > 0x7f) return false;
  hash(tenantId, bytes, start, len, out);
  return true;
}

/** MurmurHash3 x86_128 of `len` ASCII bytes from `bytes[o]`, seeded with the tenant id, into `out`. */
function hash(tenantId: number, bytes: Uint8Array, o: number, len: number, out: Uint32Array): void {
  const seed = fmix((tenantId ^ 0x9747b28c) >>> 0);
  let h1 = seed;
  let h2 = seed;
  let h3 = seed;
  let h4 = seed;
  const blocks = len - (len & 15);
  for (let i = 0; i < blocks; i += 16) {
    let k1 =
      byte(bytes, o + i) |
      (byte(bytes, o + i + 1) << 8) |
      (byte(bytes, o + i + 2) << 16) |
      (byte(bytes, o + i + 3) << 24);
    let k2 =
      byte(bytes, o + i + 4) |
      (byte(bytes, o + i + 5) << 8) |
      (byte(bytes, o + i + 6) << 16) |
      (byte(bytes, o + i + 7) << 24);
    let k3 =
      byte(bytes, o + i + 8) |
      (byte(bytes, o + i + 9) << 8) |
      (byte(bytes, o + i + 10) << 16) |
      (byte(bytes, o + i + 11) << 24);
    let k4 =
      byte(bytes, o + i + 12) |
      (byte(bytes, o + i + 13) << 8) |
      (byte(bytes, o + i + 14) << 16) |
      (byte(bytes, o + i + 15) << 24);
    k1 = Math.imul(rotl(Math.imul(k1, C1), 15), C2);
    h1 ^= k1;
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    k2 = Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h2 ^= k2;
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    k3 = Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    h3 ^= k3;
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    k4 = Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    h4 ^= k4;
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
  }
  const rest = len & 15;
  if (rest > 0) {
    const t = blocks;
    let k1 = 0;
    let k2 = 0;
    let k3 = 0;
    let k4 = 0;
    for (let j = rest - 1; j >= 0; j -= 1) {
      const b = byte(bytes, o + t + j);
      if (j >= 12) k4 |= b << ((j - 12) * 8);
      else if (j >= 8) k3 |= b << ((j - 8) * 8);
      else if (j >= 4) k2 |= b << ((j - 4) * 8);
      else k1 |= b << (j * 8);
    }
    if (rest > 12) h4 ^= Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    if (rest > 8) h3 ^= Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    if (rest > 4) h2 ^= Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h1 ^= Math.imul(rotl(Math.imul(k1, C1), 15), C2);
  }
  h1 ^= len;
  h2 ^= len;
  h3 ^= len;
  h4 ^= len;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h3 = fmix(h3);
  h4 = fmix(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  out[0] = h1;
  out[1] = h2;
  out[2] = h3;
  out[3] = h4;
}

/**
 * The slot of fingerprint `fp` in a table of `slots` (a power of two) laid out as this
 * index's is: four key words a slot, a state a slot (0 empty, 1 deleted, more: live);
 * linear probing from its first word. -1: not there. Shared by the index and the extras
 * beside it (subscriber-extras.ts).
 */
export function findSlot(keys: Uint32Array, states: Uint8Array, slots: number, fp: Uint32Array): number {
  const mask = slots - 1;
  const a = fp[0] ?? 0;
  const b = fp[1] ?? 0;
  const c = fp[2] ?? 0;
  const d = fp[3] ?? 0;
  for (let slot = a & mask; ; slot = (slot + 1) & mask) {
    const state = states[slot] ?? EMPTY;
    if (state === EMPTY) return -1;
    const k = slot * 4;
    if (state !== DELETED && keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d) return slot;
  }
}

export class SubscriberIndex {
  private slots: number;
  private keys: Uint32Array;
  private states: Uint8Array;
  private live = 0;
  private deleted = 0;
  /** Scratch for one fingerprint: reads allocate nothing. */
  private readonly fp = new Uint32Array(4);

  constructor(expected = 0) {
    this.slots = MIN_SLOTS;
    while (expected > this.slots * UPFRONT_LOAD) this.slots *= 2;
    this.keys = new Uint32Array(this.slots * 4);
    this.states = new Uint8Array(this.slots);
  }

  get size(): number {
    return this.live;
  }

  /** Bytes held by the arrays (what grows with the subscribers). */
  get byteLength(): number {
    return this.keys.byteLength + this.states.byteLength;
  }

  /** The status of a known subscriber; null: not known. */
  get(tenantId: number, customerId: string): SubscriberStatus | null {
    if (!fingerprint(tenantId, customerId, this.fp)) return null;
    return this.statusOf(this.fp);
  }

  /** The status of the subscriber of fingerprint `fp` (`fingerprint`): a caller that reads more than the status hashes once. */
  statusOf(fp: Uint32Array): SubscriberStatus | null {
    const slot = this.find(fp);
    return slot < 0 ? null : (STATUS_OF[this.states[slot] ?? 0] ?? null);
  }

  /**
   * The state byte of the subscriber of fingerprint `fp`: 0 when not known, a status's
   * (`STATE_OF_STATUS`), or NOTICED_ACTIVE / NOTICED_UNKNOWN.
   */
  stateOf(fp: Uint32Array): number {
    const slot = this.find(fp);
    return slot < 0 ? EMPTY : (this.states[slot] ?? EMPTY);
  }

  /**
   * Records a subscriber's status (null: none kept) and whether a notice holds for it; false,
   * storing nothing, for an id that is not ASCII.
   */
  setWithNotice(tenantId: number, customerId: string, status: SubscriberStatus | null, noticed: boolean): boolean {
    if (!fingerprint(tenantId, customerId, this.fp)) return false;
    if (noticed && (status === null || status === 'active'))
      return this.put(status === null ? NOTICED_UNKNOWN : NOTICED_ACTIVE);
    if (status !== null) return this.put(STATE_OF[status]);
    const slot = this.find(this.fp);
    if (slot >= 0) {
      this.states[slot] = DELETED;
      this.live -= 1;
      this.deleted += 1;
    }
    return true;
  }

  /**
   * Records a subscriber's status. False, storing nothing, for an id that is not ASCII: no
   * lookup can ask for one (customer ids are `^cus_[A-Za-z0-9_]+$`).
   */
  set(tenantId: number, customerId: string, status: SubscriberStatus): boolean {
    return fingerprint(tenantId, customerId, this.fp) && this.put(STATE_OF[status]);
  }

  /** Stores `state` under the fingerprint in `this.fp`. */
  private put(state: number): boolean {
    const found = this.find(this.fp);
    if (found >= 0) {
      this.states[found] = state;
      return true;
    }
    if (this.live + this.deleted + 1 > this.slots * MAX_LOAD) this.rebuild(this.live + 1);
    this.insert(this.fp, state);
    return true;
  }

  /** `set` for an id given as bytes (a streamed load): no string made per subscriber. */
  setBytes(tenantId: number, bytes: Uint8Array, start: number, end: number, status: SubscriberStatus): boolean {
    return fingerprintBytes(tenantId, bytes, start, end, this.fp) && this.put(STATE_OF[status]);
  }

  /** Forgets a subscriber (it becomes unknown). */
  delete(tenantId: number, customerId: string): boolean {
    if (!fingerprint(tenantId, customerId, this.fp)) return false;
    const slot = this.find(this.fp);
    if (slot < 0) return false;
    this.states[slot] = DELETED;
    this.live -= 1;
    this.deleted += 1;
    return true;
  }

  private find(fp: Uint32Array): number {
    return findSlot(this.keys, this.states, this.slots, fp);
  }

  private insert(fp: Uint32Array, state: number): void {
    const mask = this.slots - 1;
    let slot = (fp[0] ?? 0) & mask;
    while ((this.states[slot] ?? EMPTY) > DELETED) slot = (slot + 1) & mask;
    if (this.states[slot] === DELETED) this.deleted -= 1;
    this.keys.set(fp, slot * 4);
    this.states[slot] = state;
    this.live += 1;
  }

  /** A fresh table at most half full for `needed` subscribers, without the deleted slots. */
  private rebuild(needed: number): void {
    const oldKeys = this.keys;
    const oldStates = this.states;
    let slots = MIN_SLOTS;
    while (needed > slots / 2) slots *= 2;
    this.slots = slots;
    this.keys = new Uint32Array(slots * 4);
    this.states = new Uint8Array(slots);
    this.live = 0;
    this.deleted = 0;
    const fp = new Uint32Array(4);
    for (let i = 0; i < oldStates.length; i += 1) {
      const state = oldStates[i] ?? EMPTY;
      if (state <= DELETED) continue;
      fp.set(oldKeys.subarray(i * 4, i * 4 + 4));
      this.insert(fp, state);
    }
  }
}
