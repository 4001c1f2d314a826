import type { Branding } from './branding.js';
import type { Credential } from './credential.js';
import type { HmacKey } from './hmac.js';

import type { Scope } from './keys.js';
export { isCurrent } from './credential.js';
export type { Credential } from './credential.js';

export const STATUSES = ['active', 'warning', 'lockout'] as const;
export type SubscriberStatus = (typeof STATUSES)[number];

/** One count per status, all zero, in the order of `STATUSES`. */
export function zeroStatusCounts(): Record<SubscriberStatus, number> {
  return Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<SubscriberStatus, number>;
}

/** How a tenant's policy enforces derived statuses (policy.ts). */
export const ENFORCEMENTS = ['gate', 'banner_only', 'monitor'] as const;
export type Enforcement = (typeof ENFORCEMENTS)[number];

export const NAMED_FLAGS = ['powered_by_watermark', 'custom_domain', 'downstream_webhooks'] as const;
/**
 * The tier of a tenant created without one, unless the operator sets DUNWALL_DEFAULT_TIER:
 * the seeded tier with the fewest flags (it shows "Powered by Dunwall").
 */
export const DEFAULT_TIER = 'starter';
export type Entitlements = Record<string, boolean>;

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{1,62}$';
export const CUSTOMER_ID_PATTERN = '^cus_[A-Za-z0-9_]{1,251}$';
export const TIER_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
/** The shape of a flag name; `FLAG_NAME_PATTERN` is the whole rule. */
const FLAG_NAME_SHAPE = '[a-z][a-z0-9_]{0,62}';
/**
 * Names every object already answers to (`constructor`): a flag map is a plain object, and
 * a flag by such a name would be dropped or shadowed on its way (it was dropped, silently).
 * Derived from Object.prototype, so that a name a later runtime adds there is refused too.
 */
const OBJECT_NAMES = Object.getOwnPropertyNames(Object.prototype).filter((name) =>
  new RegExp(`^${FLAG_NAME_SHAPE}$`).test(name),
);
/** A tier's flag (entitlement) name: the one rule, for the API's schemas, the CLI and the store. */
export const FLAG_NAME_PATTERN =
  OBJECT_NAMES.length === 0 ? `^${FLAG_NAME_SHAPE}$` : `^(?!(?:${OBJECT_NAMES.join('|')})$)${FLAG_NAME_SHAPE}$`;
export const FLAG_NAME_RULE = `a lowercase letter, then up to 62 lowercase letters, digits or underscores${OBJECT_NAMES.length === 0 ? '' : `, and none of ${OBJECT_NAMES.join(', ')}`}`;
const FLAG_NAME_RE = new RegExp(FLAG_NAME_PATTERN);

export function isFlagName(name: string): boolean {
  return FLAG_NAME_RE.test(name);
}
export const REASON_PATTERN = '^[a-z][a-z0-9_]{0,63}$';

export const SLUG_RE = new RegExp(SLUG_PATTERN);
export const CUSTOMER_ID_RE = new RegExp(CUSTOMER_ID_PATTERN);

/** What the store holds of a tenant for the lookup. */
/**
 * A tenant's two modes, as a Stripe account has them: `pk_live_` / `sk_live_` keys and
 * Stripe's live events address the live mode, `pk_test_` / `sk_test_` keys and test events
 * the test mode. A subscriber, its history and everything derived from it belong to one mode.
 */
export const MODES = ['live', 'test'] as const;
export type Mode = (typeof MODES)[number];

/**
 * What an active subscriber's answer may tell ahead of a failure (`notice.kind`): never a
 * gate, never a change of status. `card_expiring`: the default card expires before the next
 * renewal (`notice.expires`, `YYYY-MM`).
 */
export const NOTICE_KINDS = ['card_expiring'] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];
export const NOTICE_EXPIRES_PATTERN = '^[0-9]{4}-(0[1-9]|1[0-2])$';

export interface TenantAuthFields {
  /** The data space's id: the row whose subscribers, history and events are this mode's. */
  id: number;
  /** The tenant's own row (its settings), the same for both of its spaces (default: `id`). */
  tenantId?: number;
  /** The space's mode (default live). */
  mode?: Mode;
  /**
   * The tenant's other space, on the space the slug names (the tenant's own row's); null on
   * that other space itself. A lookup's key picks the space it addresses.
   */
  twin?: TenantAuth | null;
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
  /** The policy enables the card-expiring notice (docs/notices.md): only then does an active answer carry one. */
  cardExpiringNotice?: boolean;
  /** Superseded by the modes: the setting a tenant had before them (kept for display). */
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
export interface TenantAuth extends Omit<TenantAuthFields, 'hmacSecrets' | 'tenantId' | 'mode' | 'twin'> {
  tenantId: number;
  mode: Mode;
  twin: TenantAuth | null;
  hmacKeys: readonly Credential<HmacKey>[];
  knownBodies: Readonly<Record<SubscriberStatus, Buffer>>;
  /** The warning and lockout bodies without their closing brace, for answers that carry more. */
  knownPrefixes: Readonly<Record<Exclude<SubscriberStatus, 'active'>, Buffer>>;
  /** The branding as served (JSON bytes) and its entity tag. */
  brandingBody: Buffer;
  brandingEtag: string;
  /**
   * Publishable keys already verified, with their expiry: only keys that verified, so at
   * most the tenant's own (a rotation prepares a new tenant, and a new map).
   */
  acceptedKeys: Map<string, number | null>;
}
