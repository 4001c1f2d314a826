import type { StripeEventLike } from './derive.js';

const EVENT_ID_RE = /^evt_[A-Za-z0-9_]{1,255}$/;
/** Before Stripe existed: a `created` earlier than this is not a Stripe time (or is in ms). */
export const MIN_CREATED_S = 1_262_304_000; // 2010-01-01
/** A clock may drift; an event dated further ahead would pin a status beyond correction. */
export const MAX_CREATED_AHEAD_S = 86_400;
const EVENT_TYPE_RE = /^[a-z0-9_.]{1,128}$/;

/**
 * Null when `value` has the shape of a Stripe event that the derivation can read, dated
 * no later than `maxAheadS` (default a day) after `nowMs`; else why not.
 */
export function eventShapeProblem(value: unknown, nowMs: number, maxAheadS = MAX_CREATED_AHEAD_S): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the event must be a JSON object';
  const e = value as Record<string, unknown>;
  if (typeof e.id !== 'string' || !EVENT_ID_RE.test(e.id)) return 'id: must be a Stripe event id (evt_...)';
  if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type)) return 'type: must be a Stripe event type';
  if (typeof e.created !== 'number' || !Number.isSafeInteger(e.created) || e.created < MIN_CREATED_S) {
    return 'created: must be a Unix time in seconds';
  }
  // Stripe always sends a boolean: anything else would slip past a live or test tenant's check.
  if (e.livemode !== undefined && typeof e.livemode !== 'boolean') return 'livemode: must be true or false';
  if (e.created > nowMs / 1000 + maxAheadS) return maxAheadS === MAX_CREATED_AHEAD_S ? 'created: more than a day in the future' : `created: more than ${maxAheadS} s in the future`;
  const data = e.data as Record<string, unknown> | null | undefined;
  if (typeof data !== 'object' || data === null || typeof data.object !== 'object' || data.object === null || Array.isArray(data.object)) {
    return 'data.object: must be an object';
  }
  return null;
}

export function isStripeEvent(value: unknown, nowMs: number): value is StripeEventLike {
  return eventShapeProblem(value, nowMs) === null;
}
