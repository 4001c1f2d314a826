import { createHmac, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

const HMAC_HEX_RE = /^[0-9a-fA-F]{64}$/;

/** The value a tenant's backend computes: lowercase hex HMAC-SHA256(secret, customer id). */
export function computeHmac(secret: string, customerId: string): string {
  return hmacDigest(secret, customerId).toString('hex');
}

/** The digest `customerId` signs to under a key: what a valid hmac decodes to. */
export function hmacDigest(key: string | KeyObject, customerId: string): Buffer {
  return createHmac('sha256', key).update(customerId, 'utf8').digest();
}

/**
 * True when `presented` decodes to one of `expected` (the digests under the current keys).
 * Every digest is compared, through `timingSafeEqual`, with no early exit.
 */
export function matchesDigest(presented: string, expected: readonly Buffer[]): boolean {
  if (!HMAC_HEX_RE.test(presented)) return false;
  const presentedDigest = Buffer.from(presented, 'hex');
  let matched = false;
  for (const digest of expected) if (timingSafeEqual(digest, presentedDigest)) matched = true;
  return matched;
}
