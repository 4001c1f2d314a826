import { createHmac, timingSafeEqual } from 'node:crypto';
import { MAX_AHEAD_S } from './event.js';

/** Stripe's own default: a signature older than this is a replay. */
export const STRIPE_SIGNATURE_TOLERANCE_S = 300;

const V1_RE = /^[0-9a-f]{64}$/;
const TIMESTAMP_RE = /^\d{1,12}$/;

/**
 * The `Stripe-Signature` header, as Stripe documents it ("Verify manually"): `t=<unix
 * seconds>`, then one `v1=<hex HMAC-SHA256>` per signing secret Stripe signed with (more
 * than one while a secret rolls over). Other schemes (`v0`) are ignored. Null when there
 * is no usable timestamp or no v1 signature.
 */
export function parseSignatureHeader(header: string): { timestamp: number; v1: Buffer[] } | null {
  let timestamp: number | null = null;
  const v1: Buffer[] = [];
  for (const item of header.split(',')) {
    const eq = item.indexOf('=');
    if (eq < 0) continue;
    const key = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (key === 't' && TIMESTAMP_RE.test(value)) timestamp = Number(value);
    else if (key === 'v1' && V1_RE.test(value)) v1.push(Buffer.from(value, 'hex'));
  }
  return timestamp === null || v1.length === 0 ? null : { timestamp, v1 };
}

/**
 * Why a delivery did not verify, for the operator's log (never the header or a secret):
 * `malformed_header` (no `t=` or no `v1=`), `timestamp_outside_tolerance` (older than the
 * tolerance), `timestamp_ahead` (later than the clocks' drift allows, MAX_AHEAD_S),
 * `no_matching_secret` (no `v1` matches any of the tenant's secrets), `not_json` (signed,
 * but not JSON).
 */
export type SignatureFailure =
  'malformed_header' | 'timestamp_outside_tolerance' | 'timestamp_ahead' | 'no_matching_secret' | 'not_json';

export type DeliveryCheck = { ok: true; event: unknown } | { ok: false; why: SignatureFailure };

/**
 * A Stripe delivery checked against `secrets` (two during a rotation): its signature
 * verifies under one of them, is at most `toleranceS` old at `nowMs` and no more than
 * MAX_AHEAD_S ahead of it. The signed
 * content is `<t>.<raw body>`; every secret and every `v1` is compared, in constant time,
 * with no early exit.
 */
export function checkStripeDelivery(
  raw: Buffer,
  header: string,
  secrets: readonly string[],
  nowMs: number,
  toleranceS = STRIPE_SIGNATURE_TOLERANCE_S,
): DeliveryCheck {
  const parsed = parseSignatureHeader(header);
  if (parsed === null) return { ok: false, why: 'malformed_header' };
  if (nowMs / 1000 - parsed.timestamp > toleranceS) return { ok: false, why: 'timestamp_outside_tolerance' };
  if (parsed.timestamp > nowMs / 1000 + MAX_AHEAD_S) return { ok: false, why: 'timestamp_ahead' };
  let verified = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${parsed.timestamp}.`, 'utf8').update(raw).digest();
    for (const signature of parsed.v1) if (timingSafeEqual(expected, signature)) verified = true;
  }
  if (!verified) return { ok: false, why: 'no_matching_secret' };
  try {
    return { ok: true, event: JSON.parse(raw.toString('utf8')) as unknown };
  } catch {
    return { ok: false, why: 'not_json' };
  }
}

/** The event of a delivery that `checkStripeDelivery` accepts; undefined otherwise. */
export function verifyStripeDelivery(
  raw: Buffer,
  header: string,
  secrets: readonly string[],
  nowMs: number,
  toleranceS = STRIPE_SIGNATURE_TOLERANCE_S,
): unknown {
  const checked = checkStripeDelivery(raw, header, secrets, nowMs, toleranceS);
  return checked.ok ? checked.event : undefined;
}

/**
 * A `Stripe-Signature` header for `payload` signed with `secret` at `timestampS`, as Stripe
 * documents it: `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<payload>">`. For
 * sending sample events to a Dunwall of one's own (`dunwall stripe send-sample`).
 */
export function signStripePayload(payload: string, secret: string, timestampS: number): string {
  const v1 = createHmac('sha256', secret).update(`${timestampS}.`, 'utf8').update(payload, 'utf8').digest('hex');
  return `t=${timestampS},v1=${v1}`;
}
