import type { Branding } from './branding.js';
import type { Credential } from './credential.js';
import type { HmacKey } from './hmac.js';

import type { Scope } from './keys.js';
export { isCurrent } from './credential.js';
export type { Credential } from './credential.js';

export const STATUSES = ['active', 'warning', 'lockout'] as const;
export type SubscriberStatus = (typeof STATUSES)[number];

/** How a tenant's policy enforces derived statuses (policy.ts). */
export const ENFORCEMENTS = ['gate', 'banner_only', 'monitor'] as const;
export type Enforcement = (typeof ENFORCEMENTS)[number];

export const NAMED_FLAGS = ['powered_by_watermark', 'custom_domain', 'downstream_webhooks'] as const;
export type Entitlements = Record<string, boolean>;

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{1,62}$';
export const CUSTOMER_ID_PATTERN = '^cus_[A-Za-z0-9_]{1,251}$';
export const TIER_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
export const FLAG_NAME_PATTERN = '^[a-z][a-z0-9_]{0,62}$';
export const REASON_PATTERN = '^[a-z][a-z0-9_]{0,63}$';

export const SLUG_RE = new RegExp(SLUG_PATTERN);
export const CUSTOMER_ID_RE = new RegExp(CUSTOMER_ID_PATTERN);

/** What the store holds of a tenant for the lookup. */
export interface TenantAuthFields {
  id: number;
  slug: string;
  suspended: boolean;
  hmacRequired: boolean;
  cardUpdateUrl: string | null;
  allowedOrigins: readonly string[] | null;
  /** The tenant's own lookup rate limit; null: the service's default. */
  lookupsPerMinute: number | null;
  /** What the snippet shows with a banner or a gate; served publicly. */
  branding: Branding;
  /** The policy's enforcement: applied again at each lookup, so that a change reaches every answer at once. */
  enforcement: Enforcement;
  /** Live (true), test (false) or either (null): only a test tenant's lookups preview. */
  livemode: boolean | null;
  entitlements: Entitlements;
  /** SHA-256 digests (32 bytes) of the tenant's publishable keys. */
  publishableKeyHashes: readonly Credential<Buffer>[];
  hmacSecrets: readonly Credential<string>[];
  /** The tenant's secret keys by digest: a rotated key has two digests until the overlap ends. */
  secretKeys: readonly SecretKeyAuth[];
}

/** One digest a secret key is known by, what it may do, and until when (null: no expiry). */
export interface SecretKeyAuth {
  readonly id: string;
  /** SHA-256 of the key (32 bytes). */
  readonly digest: Buffer;
  readonly scopes: ReadonlySet<Scope>;
  readonly expiresAtMs: number | null;
}

/**
 * Everything the lookup needs of a tenant, prepared once (what the read model holds per
 * slug): the 200 bodies for each status already serialised, the HMAC secrets as signing keys.
 */
export interface TenantAuth extends Omit<TenantAuthFields, 'hmacSecrets'> {
  hmacKeys: readonly Credential<HmacKey>[];
  knownBodies: Readonly<Record<SubscriberStatus, Buffer>>;
  /** The warning and lockout bodies without their closing brace, for answers that carry more. */
  knownPrefixes: Readonly<Record<'warning' | 'lockout', Buffer>>;
  /** The branding as served (JSON bytes) and its entity tag. */
  brandingBody: Buffer;
  brandingEtag: string;
  /**
   * Publishable keys already verified, with their expiry: only keys that verified, so at
   * most the tenant's own (a rotation prepares a new tenant, and a new map).
   */
  acceptedKeys: Map<string, number | null>;
}
