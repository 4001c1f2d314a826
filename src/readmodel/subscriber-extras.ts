import { answerBody } from '../domain/lookup.js';
import type { SubscriberStatus, TenantAuth } from '../domain/types.js';
import { findSlot, fingerprint, fingerprintBytes } from './subscriber-index.js';
import type { SubscriberExtra } from '../store/index.js';

/**
 * What a non-active subscriber's answer carries beside its status: when its scheduled
 * lockout falls, the page where it pays, and its card link through Dunwall. Only the few subscribers in dunning have one,
 * so they sit beside the index (which stays 17 bytes a slot for everyone) in a table of
 * their own, keyed by the same 128-bit fingerprint: open addressing with linear probing,
 * the keys, the times and the links in flat arrays (no object per subscriber), at most 3/4
 * full. A slot is 16 + 4 + 1 bytes and a reference to the link: 29 bytes, so 39 to 77 a
 * subscriber with the link's own string (16 bytes and one a character) on top; measured
 * in the benchmark (bench/README.md).
 *
 * A subscriber's answer bytes are built at its first lookup and kept beside its slot
 * (`answer`) until they could change: its status or extra is set again (the slot's answer is
 * dropped), its tenant is prepared again (a change of policy, branding, entitlements: another
 * `TenantAuth`), or the clock crosses its scheduled lockout (the bytes say for which instants
 * they hold). A lookup compares two numbers and a reference, and builds nothing.
 */

const EMPTY = 0;
const DELETED = 1;
const USED = 2;
const MIN_SLOTS = 16;
const MAX_LOAD = 0.75;

/** What a lookup reads of one subscriber: `lockoutAtS` 0 when none is scheduled. */
export interface ExtraView {
  lockoutAtS: number;
  payUrl: string | null;
  /** The card link through Dunwall a signed warning carries as `card_update_url`. */
  cardUrl: string | null;
}

/**
 * One subscriber's answer as built: for the tenant and stored status it was built from, the
 * bytes of an unsigned and of a signed lookup, each built when first asked for (a
 * subscriber's lookups are usually all signed, or all not; without a pay link both are the
 * same buffer), true at every instant from `fromMs` (inclusive) to `untilMs` (exclusive):
 * either side of a scheduled lockout, or always.
 */
interface BuiltAnswer {
  readonly tenant: TenantAuth;
  readonly status: SubscriberStatus;
  readonly fromMs: number;
  readonly untilMs: number;
  unsigned: Buffer | null;
  signed: Buffer | null;
}

export class SubscriberExtras {
  private slots = MIN_SLOTS;
  private keys = new Uint32Array(MIN_SLOTS * 4);
  private states = new Uint8Array(MIN_SLOTS);
  private lockouts = new Uint32Array(MIN_SLOTS);
  private links: (string | null)[] = new Array<string | null>(MIN_SLOTS).fill(null);
  private cards: (string | null)[] = new Array<string | null>(MIN_SLOTS).fill(null);
  /** Each slot's answer once a lookup built it; undefined: none built, or dropped since. */
  private answers: (BuiltAnswer | undefined)[] = new Array<BuiltAnswer | undefined>(MIN_SLOTS);
  private live = 0;
  private deleted = 0;
  private readonly fp = new Uint32Array(4);
  /** The one view a read returns, filled in place: a read allocates nothing. */
  private readonly view: ExtraView = { lockoutAtS: 0, payUrl: null, cardUrl: null };

  get size(): number {
    return this.live;
  }

  /** The extra of a subscriber, or null. The view is reused by the next read: read it, keep nothing. */
  get(tenantId: number, customerId: string): Readonly<ExtraView> | null {
    if (this.live === 0 || !fingerprint(tenantId, customerId, this.fp)) return null;
    const slot = this.find(this.fp);
    if (slot < 0) return null;
    this.view.lockoutAtS = this.lockouts[slot] ?? 0;
    this.view.payUrl = this.links[slot] ?? null;
    this.view.cardUrl = this.cards[slot] ?? null;
    return this.view;
  }

  /**
   * The answer of a subscriber of fingerprint `fp` (as `fingerprint` makes it) whose stored
   * status is `status` (not `active`), at `nowMs`; null when it has no extra, so that its
   * tenant's prebuilt bytes answer. Built once, then reused while its tenant, its status and
   * the side of its scheduled lockout stay the same.
   */
  answer(fp: Uint32Array, tenant: TenantAuth, status: SubscriberStatus, signed: boolean, nowMs: number): Buffer | null {
    if (this.live === 0) return null;
    const slot = this.find(fp);
    if (slot < 0) return null;
    let built = this.answers[slot];
    if (
      built === undefined ||
      built.tenant !== tenant ||
      built.status !== status ||
      nowMs < built.fromMs ||
      nowMs >= built.untilMs
    ) {
      built = this.span(slot, tenant, status, nowMs);
      this.answers[slot] = built;
    }
    if (signed) return built.signed ?? this.build(slot, built, true, nowMs);
    return built.unsigned ?? this.build(slot, built, false, nowMs);
  }

  /** The span of instants an answer of the slot holds for, its bytes not built yet. */
  private span(slot: number, tenant: TenantAuth, status: SubscriberStatus, nowMs: number): BuiltAnswer {
    // The answer turns when the clock reaches a warning's scheduled lockout (answerBody's
    // comparison); a lockout, or an answer without one, holds at every instant.
    const lockoutAtS = this.lockouts[slot] ?? 0;
    const lockoutMs = status === 'warning' && lockoutAtS > 0 ? lockoutAtS * 1000 : 0;
    const before = lockoutMs > 0 && nowMs < lockoutMs;
    return {
      tenant,
      status,
      fromMs: lockoutMs === 0 || before ? -Infinity : lockoutMs,
      untilMs: before ? lockoutMs : Infinity,
      unsigned: null,
      signed: null,
    };
  }

  /** Builds the bytes of one kind of lookup of the slot, at an instant of `built`'s span. */
  private build(slot: number, built: BuiltAnswer, signed: boolean, nowMs: number): Buffer {
    const payUrl = this.links[slot] ?? null;
    const cardUrl = this.cards[slot] ?? null;
    const extra: ExtraView = { lockoutAtS: this.lockouts[slot] ?? 0, payUrl, cardUrl };
    const made = answerBody(built.tenant, built.status, extra, signed, nowMs);
    const known = built.tenant.knownBodies;
    // The tenant's own bytes are shared. Others are kept for as long as the subscriber is in
    // dunning: in a buffer of their size, not in a slab of Buffer's pool beside the garbage
    // of their making, which the slab would keep too.
    let body = made;
    if (made !== known.warning && made !== known.lockout && made !== known.active) {
      body = Buffer.allocUnsafeSlow(made.length);
      made.copy(body);
    }
    // Without a pay or card link, a signed lookup's answer is the unsigned one's.
    const unlinked = payUrl === null && cardUrl === null;
    if (signed || unlinked) built.signed = body;
    if (!signed || unlinked) built.unsigned = body;
    return body;
  }

  /** Sets (or, with null, clears) a subscriber's extra. */
  set(tenantId: number, customerId: string, extra: SubscriberExtra | null): void {
    if (fingerprint(tenantId, customerId, this.fp)) this.put(extra);
  }

  setBytes(tenantId: number, bytes: Uint8Array, start: number, end: number, extra: SubscriberExtra | null): void {
    if (fingerprintBytes(tenantId, bytes, start, end, this.fp)) this.put(extra);
  }

  private put(extra: SubscriberExtra | null): void {
    const found = this.find(this.fp);
    // Whatever is set, the answer built from what was there is no longer true.
    if (found >= 0) this.answers[found] = undefined;
    if (extra === null || (extra.lockoutAtS === null && extra.payUrl === null && (extra.cardUrl ?? null) === null)) {
      if (found < 0) return;
      this.states[found] = DELETED;
      this.links[found] = null;
      this.cards[found] = null;
      this.live -= 1;
      this.deleted += 1;
      return;
    }
    let slot = found;
    if (slot < 0) {
      if (this.live + this.deleted + 1 > this.slots * MAX_LOAD) this.rebuild(this.live + 1);
      slot = this.insertKey(this.fp);
    }
    this.lockouts[slot] = extra.lockoutAtS ?? 0;
    this.links[slot] = extra.payUrl;
    this.cards[slot] = extra.cardUrl ?? null;
  }

  private find(fp: Uint32Array): number {
    return findSlot(this.keys, this.states, this.slots, fp);
  }

  private insertKey(fp: Uint32Array): number {
    const mask = this.slots - 1;
    let slot = (fp[0] ?? 0) & mask;
    while ((this.states[slot] ?? EMPTY) === USED) slot = (slot + 1) & mask;
    if (this.states[slot] === DELETED) this.deleted -= 1;
    this.keys.set(fp, slot * 4);
    this.states[slot] = USED;
    this.live += 1;
    return slot;
  }

  /** A fresh table at most half full for `needed` subscribers, without the deleted slots. */
  private rebuild(needed: number): void {
    const [keys, states, lockouts, links, cards] = [this.keys, this.states, this.lockouts, this.links, this.cards];
    let slots = MIN_SLOTS;
    while (needed > slots / 2) slots *= 2;
    this.slots = slots;
    this.keys = new Uint32Array(slots * 4);
    this.states = new Uint8Array(slots);
    this.lockouts = new Uint32Array(slots);
    this.links = new Array<string | null>(slots).fill(null);
    this.cards = new Array<string | null>(slots).fill(null);
    // Built answers are not carried over: each is built again at its next lookup.
    this.answers = new Array<BuiltAnswer | undefined>(slots);
    this.live = 0;
    this.deleted = 0;
    const fp = new Uint32Array(4);
    for (let i = 0; i < states.length; i += 1) {
      if (states[i] !== USED) continue;
      fp.set(keys.subarray(i * 4, i * 4 + 4));
      const slot = this.insertKey(fp);
      this.lockouts[slot] = lockouts[i] ?? 0;
      this.links[slot] = links[i] ?? null;
      this.cards[slot] = cards[i] ?? null;
    }
  }
}
