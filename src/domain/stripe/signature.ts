import { createHmac, timingSafeEqual } from 'node:crypto';

/** Stripe's own default: a signature older than this is a replay. */
export const WEBHOOK_TOLERANCE_S = 300;

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
 * The event of a Stripe delivery whose signature verifies under one of `secrets` (two during
 * a rotation) and is at most `toleranceS` old at `nowMs`; undefined otherwise, or when the
 * body is not JSON. The signed content is `<t>.<raw body>`; every secret and every `v1` is
 * compared, in constant time, with no early exit.
 */
export function verifyStripeDelivery(raw: Buffer, header: string, secrets: readonly string[], nowMs: number, toleranceS = WEBHOOK_TOLERANCE_S): unknown {
  const parsed = parseSignatureHeader(header);
  if (parsed === null || nowMs / 1000 - parsed.timestamp > toleranceS) return undefined;
  let verified = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${parsed.timestamp}.`, 'utf8').update(raw).digest();
    for (const signature of parsed.v1) if (timingSafeEqual(expected, signature)) verified = true;
  }
  if (!verified) return undefined;
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
