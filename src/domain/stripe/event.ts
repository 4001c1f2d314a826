import type { StripeEventLike } from './derive.js';

const EVENT_ID_RE = /^evt_[A-Za-z0-9_]{1,255}$/;
const EVENT_TYPE_RE = /^[a-z0-9_.]{1,128}$/;

/** Null when `value` has the shape of a Stripe event that the derivation can read; else why not. */
export function eventShapeProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the event must be a JSON object';
  const e = value as Record<string, unknown>;
  if (typeof e.id !== 'string' || !EVENT_ID_RE.test(e.id)) return 'id: must be a Stripe event id (evt_...)';
  if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type)) return 'type: must be a Stripe event type';
  if (typeof e.created !== 'number' || !Number.isSafeInteger(e.created) || e.created < 0) return 'created: must be a Unix time in seconds';
  const data = e.data as Record<string, unknown> | null | undefined;
  if (typeof data !== 'object' || data === null || typeof data.object !== 'object' || data.object === null || Array.isArray(data.object)) {
    return 'data.object: must be an object';
  }
  return null;
}

export function isStripeEvent(value: unknown): value is StripeEventLike {
  return eventShapeProblem(value) === null;
}
