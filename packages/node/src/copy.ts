import type { AnswerSource, BillingStatus, BootstrapAnswer, BootstrapEntitlements, StatusAnswer } from './types.js';
import { STATUSES as STATUS_LIST } from './wire.js';

/**
 * The copy of a tenant's non-active subscribers, and the answers `status()` hands out.
 *
 * Sizing: only subscribers answered `warning` or `lockout` are held, one `Map` entry each
 * (its key is the customer id string the service sent). A subscriber with neither a scheduled
 * lockout nor a pay link shares one answer object per status with every other such subscriber;
 * the others hold one frozen answer of their own, made when the change is applied, sharing the
 * copy's entitlements object and the status strings. `status()` then is one `Map` lookup and a
 * comparison of the clock: no allocation for an unknown customer, nor for a held one while the
 * copy is fresh.
 */

/** Stripe's hosted pages and any link Dunwall keeps: https, no spaces, quotes or backslashes (it goes into pages). */
const PAY_URL_RE = /^https:\/\/[!#-[\]-~]+$/;
const MAX_PAY_URL_LENGTH = 2048;
/** An ISO 8601 instant is 20 to 30 characters; a longer `lockout_at` is not one (Date.parse skips parenthesised text). */
const MAX_LOCKOUT_AT_LENGTH = 64;

const EMPTY_ENTITLEMENTS: Readonly<Record<string, boolean>> = Object.freeze({});

/**
 * An answer, frozen. Every answer is of this one class, so that `status()` returns one shape.
 * `#dueAtMs`: when a warning's scheduled lockout falls (null: none scheduled); a number only
 * for such a warning, so that the others store no number at all.
 */
export class Answer implements StatusAnswer {
  readonly status: BillingStatus;
  readonly lockout_at: string | null;
  readonly pay_url: string | null;
  readonly entitlements: Readonly<Record<string, boolean>>;
  readonly source: AnswerSource;
  readonly #dueAtMs: number | null;

  constructor(
    status: BillingStatus,
    lockoutAt: string | null,
    payUrl: string | null,
    entitlements: Readonly<Record<string, boolean>>,
    source: AnswerSource,
    dueAtMs: number | null,
  ) {
    this.status = status;
    this.lockout_at = lockoutAt;
    this.pay_url = payUrl;
    this.entitlements = entitlements;
    this.source = source;
    this.#dueAtMs = dueAtMs;
    Object.freeze(this);
  }

  /**
   * This answer at `nowMs` while the copy is fresh: itself, or `lockout` once its scheduled
   * lockout has fallen due, as the service's lookup answers it from that instant (the change
   * that records it follows within moments; until then this allocates).
   */
  at(nowMs: number): Answer {
    const due = this.#dueAtMs;
    if (due === null || nowMs < due) return this;
    return new Answer('lockout', null, this.pay_url, this.entitlements, 'feed', null);
  }

  /** This answer from a stale copy: never a lockout (a warning keeping lockout_at and pay_url). */
  stale(): Answer {
    return new Answer(
      this.status === 'lockout' ? 'warning' : this.status,
      this.lockout_at,
      this.pay_url,
      this.entitlements,
      'stale',
      null,
    );
  }
}

/** Before the first list has completed: everyone is `active`. */
export const STARTING: Answer = new Answer('active', null, null, EMPTY_ENTITLEMENTS, 'starting', null);

/** One subscriber as the list or a change gives it, validated. */
export interface Entry {
  customerId: string;
  status: BillingStatus;
  lockoutAt: string | null;
  /** `lockout_at` in epoch milliseconds; null when none. */
  lockoutAtMs: number | null;
  payUrl: string | null;
}

/** How many subscribers a copy holds, and about how many bytes they take. */
export interface Footprint {
  size: number;
  bytes: number;
}

/**
 * About the bytes one held subscriber takes, on the high side (measured: about 75 without a
 * link or a lockout, 345 with a Stripe pay link and a scheduled lockout): its `Map` entry and
 * customer id (two bytes a character, as a string outside Latin-1 is), and, unless it shares
 * its status's answer, an answer of its own with its strings.
 */
export function weightOf(customerId: string, lockoutAt: string | null, payUrl: string | null): number {
  const shared = 64 + 2 * customerId.length;
  if (lockoutAt === null && payUrl === null) return shared;
  return (
    shared + 80 + (lockoutAt === null ? 0 : 16 + 2 * lockoutAt.length) + (payUrl === null ? 0 : 16 + payUrl.length)
  );
}

/** A list's copy of the tenant: its entitlements, its shared answers, its held subscribers. */
export class Copy {
  readonly entitlements: Readonly<Record<string, boolean>>;
  /** The answer of every customer not held, while fresh; and while stale. */
  readonly active: Answer;
  readonly activeStale: Answer;
  /** Non-active subscribers, by customer id. */
  readonly held = new Map<string, Answer>();
  /** What the held subscribers take, estimated as `weightOf` does. */
  bytes = 0;
  private readonly plainWarning: Answer;
  private readonly plainLockout: Answer;

  constructor(entitlements: Readonly<Record<string, boolean>>) {
    this.entitlements = Object.isFrozen(entitlements) ? entitlements : Object.freeze({ ...entitlements });
    this.active = new Answer('active', null, null, this.entitlements, 'feed', null);
    this.activeStale = new Answer('active', null, null, this.entitlements, 'stale', null);
    this.plainWarning = new Answer('warning', null, null, this.entitlements, 'feed', null);
    this.plainLockout = new Answer('lockout', null, null, this.entitlements, 'feed', null);
  }

  get size(): number {
    return this.held.size;
  }

  /** What the copy would hold once `entries` are applied, in order (nothing is applied). */
  after(entries: readonly Entry[]): Footprint {
    let size = this.held.size;
    let bytes = this.bytes;
    if (entries.length === 0) return { size, bytes };
    const last = new Map<string, Entry>();
    for (const entry of entries) last.set(entry.customerId, entry);
    for (const [customerId, entry] of last) {
      const was = this.held.get(customerId);
      if (was !== undefined) {
        size -= 1;
        bytes -= weightOf(customerId, was.lockout_at, was.pay_url);
      }
      if (entry.status !== 'active') {
        size += 1;
        bytes += weightOf(customerId, entry.status === 'warning' ? entry.lockoutAt : null, entry.payUrl);
      }
    }
    return { size, bytes };
  }

  /** Sets a subscriber as the entry says, or forgets it when `active`. */
  apply(entry: Entry): void {
    const was = this.held.get(entry.customerId);
    if (was !== undefined) this.bytes -= weightOf(entry.customerId, was.lockout_at, was.pay_url);
    if (entry.status === 'active') {
      this.held.delete(entry.customerId);
      return;
    }
    // A scheduled lockout only ever comes with a warning (the service drops it otherwise).
    const lockoutAt = entry.status === 'warning' ? entry.lockoutAt : null;
    this.bytes += weightOf(entry.customerId, lockoutAt, entry.payUrl);
    if (lockoutAt === null && entry.payUrl === null) {
      this.held.set(entry.customerId, entry.status === 'warning' ? this.plainWarning : this.plainLockout);
      return;
    }
    this.held.set(
      entry.customerId,
      new Answer(
        entry.status,
        lockoutAt,
        entry.payUrl,
        this.entitlements,
        'feed',
        lockoutAt === null ? null : entry.lockoutAtMs,
      ),
    );
  }
}

// --- validation of what the service sends ---------------------------------------------------

const STATUSES: ReadonlySet<string> = new Set(STATUS_LIST);
const MAX_CUSTOMER_ID_LENGTH = 255;

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One subscriber of a list page or a change; null when it is not what the contract says. */
export function entryOf(value: unknown): Entry | null {
  if (!isObject(value)) return null;
  const customerId = value.processor_customer_id;
  const status = value.status;
  if (typeof customerId !== 'string' || customerId.length === 0 || customerId.length > MAX_CUSTOMER_ID_LENGTH)
    return null;
  if (typeof status !== 'string' || !STATUSES.has(status)) return null;
  let lockoutAt: string | null = null;
  let lockoutAtMs: number | null = null;
  if (value.lockout_at !== undefined && value.lockout_at !== null) {
    if (typeof value.lockout_at !== 'string' || value.lockout_at.length > MAX_LOCKOUT_AT_LENGTH) return null;
    lockoutAtMs = Date.parse(value.lockout_at);
    if (!Number.isFinite(lockoutAtMs)) return null;
    lockoutAt = value.lockout_at;
  }
  let payUrl: string | null = null;
  if (value.pay_url !== undefined && value.pay_url !== null) {
    if (typeof value.pay_url !== 'string') return null;
    // A link a page would not be given is dropped, the status kept.
    if (value.pay_url.length <= MAX_PAY_URL_LENGTH && PAY_URL_RE.test(value.pay_url)) payUrl = value.pay_url;
  }
  return { customerId, status: status as BillingStatus, lockoutAt, lockoutAtMs, payUrl };
}

/** A link the lookup gives (`card_update_url`): http(s), nothing that could break out of an attribute. */
const LINK_RE = /^https?:\/\/[!#-[\]-~]+$/;

/**
 * The lookup's answer to a secret key (`GET /v1/subscribers/:id/status`) as a page's
 * bootstrap, stamped `at`; null when it is not the contract's answer.
 */
export function bootstrapOf(value: unknown, at: number): BootstrapAnswer | null {
  if (!isObject(value)) return null;
  const status = value.status;
  if (typeof status !== 'string' || !STATUSES.has(status)) return null;
  const entry = entryOf({ ...value, processor_customer_id: 'cus_answer' });
  if (entry === null) return null;
  const card = value.card_update_url;
  const cardUpdateUrl =
    typeof card === 'string' && card.length <= MAX_PAY_URL_LENGTH && LINK_RE.test(card) ? card : null;
  const entitlements =
    value.entitlements === undefined || value.entitlements === null
      ? null
      : bootstrapEntitlementsOf(entitlementsOf(value.entitlements));
  return {
    status: entry.status,
    lockout_at: entry.status === 'warning' ? entry.lockoutAt : null,
    pay_url: entry.status === 'active' ? null : entry.payUrl,
    card_update_url: entry.status === 'active' ? null : cardUpdateUrl,
    entitlements,
    at,
  };
}

/** Flags as a page's bootstrap carries them: only with Dunwall's three flags (null otherwise). */
export function bootstrapEntitlementsOf(flags: Readonly<Record<string, boolean>> | null): BootstrapEntitlements | null {
  if (flags === null) return null;
  const named = ['powered_by_watermark', 'custom_domain', 'downstream_webhooks'];
  return named.every((name) => typeof flags[name] === 'boolean') ? (flags as BootstrapEntitlements) : null;
}

/** The tenant's entitlement flags, frozen; null when they are not flags. */
export function entitlementsOf(value: unknown): Readonly<Record<string, boolean>> | null {
  if (!isObject(value)) return null;
  const out: Record<string, boolean> = {};
  for (const [name, flag] of Object.entries(value)) {
    if (typeof flag !== 'boolean') return null;
    out[name] = flag;
  }
  return Object.freeze(out);
}

export interface ListPage {
  entries: Entry[];
  entitlements: Readonly<Record<string, boolean>>;
  next: string | null;
  feedCursor: string;
}

export interface ChangesPage {
  entries: Entry[];
  next: string;
}

const MAX_CURSOR_LENGTH = 8192;
const isCursor = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= MAX_CURSOR_LENGTH;

function entriesOf(data: unknown): Entry[] | null {
  if (!Array.isArray(data)) return null;
  const entries: Entry[] = [];
  for (const item of data) {
    const entry = entryOf(item);
    if (entry === null) return null;
    entries.push(entry);
  }
  return entries;
}

/** A page of `GET /v1/statuses`; null when it is not what the contract says (nothing of it is applied). */
export function listPageOf(body: unknown): ListPage | null {
  if (!isObject(body)) return null;
  const entries = entriesOf(body.data);
  const entitlements = entitlementsOf(body.entitlements);
  if (entries === null || entitlements === null || !isCursor(body.feed_cursor)) return null;
  if (body.next !== null && !isCursor(body.next)) return null;
  return { entries, entitlements, next: body.next, feedCursor: body.feed_cursor };
}

/** A page of `GET /v1/status-changes`; null when it is not what the contract says (nothing of it is applied). */
export function changesPageOf(body: unknown): ChangesPage | null {
  if (!isObject(body)) return null;
  const entries = entriesOf(body.data);
  if (entries === null || !isCursor(body.next)) return null;
  return { entries, next: body.next };
}
