import { createHash, randomBytes } from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const PUBLISHABLE_KEY_RANDOM_CHARS = 32;
const HMAC_SECRET_BYTES = 32;
const ADMIN_TOKEN_RANDOM_CHARS = 48;

/** `pk_`, `pk_live_` or `pk_test_`, then the random part: keys made before test mode have no mode. */
export const PUBLISHABLE_KEY_RE = /^pk_(?:live_|test_)?[A-Za-z0-9]{24,128}$/;

/** Uniform base62 characters: bytes >= 248 are rejected so that no character is favoured. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/**
 * The prefix of a tenant's new publishable keys: `pk_live_` for a live tenant, `pk_test_`
 * for a test one, plain `pk_` for one that takes both modes (docs/api.md, test mode). The
 * prefix only tells a person which key is which; the lookup checks the key's digest.
 */
export function publishableKeyPrefix(livemode: boolean | null): string {
  if (livemode === null) return 'pk_';
  return livemode ? 'pk_live_' : 'pk_test_';
}

export function generatePublishableKey(livemode: boolean | null = null): string {
  return `${publishableKeyPrefix(livemode)}${randomBase62(PUBLISHABLE_KEY_RANDOM_CHARS)}`;
}

export function generateHmacSecret(): string {
  return randomBytes(HMAC_SECRET_BYTES).toString('base64url');
}

/** `sk_live_` or `sk_test_`, then at least 32 base62 characters (docs/reference.md#keys-and-scopes). */
export const SECRET_KEY_RE = /^sk_(?:live|test)_[A-Za-z0-9]{32,128}$/;
const SECRET_KEY_RANDOM_CHARS = 40;
/** How many characters of a secret key are kept in clear, to tell keys apart. */
export const SECRET_KEY_PREFIX_CHARS = 12;

/** A test tenant's keys are `sk_test_`; every other tenant's `sk_live_`. */
export function generateSecretKey(livemode: boolean | null): string {
  return `${livemode === false ? 'sk_test_' : 'sk_live_'}${randomBase62(SECRET_KEY_RANDOM_CHARS)}`;
}

/** Whether a bearer token is meant as a secret key (checked by its digest afterwards). */
export function looksLikeSecretKey(token: string): boolean {
  return token.startsWith('sk_');
}

export function generateKeyId(): string {
  return `key_${randomBase62(20)}`;
}

export function generateAdminToken(): string {
  return `dwa_${randomBase62(ADMIN_TOKEN_RANDOM_CHARS)}`;
}

export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * What a tenant's secret key may do (docs/reference.md#keys-and-scopes): the one list the schemas, the
 * checks and the CLI derive from. `stripe:write` guards what can decide a status as an
 * override does (the Stripe webhook signing secret): `settings:write` never reaches it, and
 * a key holds it only when it was given it by name.
 */
export const SCOPES = [
  'status:read',
  'subscribers:read',
  'subscribers:write',
  'settings:write',
  'webhooks:write',
  'keys:write',
  'stripe:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
