import type { StripeEventLike } from './derive.js';

const EVENT_ID_RE = /^evt_[A-Za-z0-9_]{1,255}$/;
/** Before Stripe existed: a `created` earlier than this is not a Stripe time (or is in ms). */
export const MIN_CREATED_S = 1_262_304_000; // 2010-01-01
/**
 * How far ahead of Dunwall's clock a Stripe time may be: the two clocks' drift, no more.
 * Stripe creates an event before it signs a delivery of it, and an event replayed from an
 * export was created before it was exported, so a time further ahead is not Stripe's; an
 * event dated ahead would hold a status against every correction until its time. The one
 * rule for the webhook (the event's `created` and its signature's timestamp) and the replay.
 */
export const MAX_AHEAD_S = 300;

/** Null when the Unix time `unixS` is at most MAX_AHEAD_S after `nowMs`; else why not, naming `field`. */
export function aheadProblem(field: string, unixS: number, nowMs: number): string | null {
  return unixS > nowMs / 1000 + MAX_AHEAD_S ? `${field}: more than ${MAX_AHEAD_S} s in the future` : null;
}
const EVENT_TYPE_RE = /^[a-z0-9_.]{1,128}$/;

/**
 * Null when `value` has the shape of a Stripe event that the derivation can read, dated
 * no later than MAX_AHEAD_S after `nowMs`; else why not.
 */
export function eventShapeProblem(value: unknown, nowMs: number): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the event must be a JSON object';
  const e = value as Record<string, unknown>;
  if (typeof e.id !== 'string' || !EVENT_ID_RE.test(e.id)) return 'id: must be a Stripe event id (evt_...)';
  if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type)) return 'type: must be a Stripe event type';
  if (typeof e.created !== 'number' || !Number.isSafeInteger(e.created) || e.created < MIN_CREATED_S) {
    return 'created: must be a Unix time in seconds';
  }
  // Stripe always sends a boolean: anything else would slip past a live or test tenant's check.
  if (e.livemode !== undefined && typeof e.livemode !== 'boolean') return 'livemode: must be true or false';
  const ahead = aheadProblem('created', e.created, nowMs);
  if (ahead !== null) return ahead;
  const data = e.data as Record<string, unknown> | null | undefined;
  if (
    typeof data !== 'object' ||
    data === null ||
    typeof data.object !== 'object' ||
    data.object === null ||
    Array.isArray(data.object)
  ) {
    return 'data.object: must be an object';
  }
  return null;
}

export function isStripeEvent(value: unknown, nowMs: number): value is StripeEventLike {
  return eventShapeProblem(value, nowMs) === null;
}
