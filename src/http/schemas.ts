import { Type } from 'typebox';
import type { Static, TSchemaOptions } from 'typebox';
import { MAX_URL_LENGTH, NAME_PATTERN, TEXT_PATTERN } from '../domain/validation.js';
import {
  BRANDING_COLOR_KEYS,
  BRANDING_TEXT_KEYS,
  LOCALE_RE,
  MAX_BRANDING_LOCALES,
  MAX_BRANDING_TEXT,
  MAX_BRANDING_URL,
} from '../domain/branding.js';
import type { Branding as BrandingValue } from '../domain/branding.js';
import { ENFORCEMENTS, MAX_ESCALATE_AFTER_DAYS, MAX_GRACE_DAYS, POLICY_RULES } from '../domain/policy.js';
import type { Enforcement } from '../domain/policy.js';
import { ADMIN_ACTIONS, HISTORY_EFFECTS, HISTORY_SOURCES } from '../domain/history.js';
import { PREVIEW_STATUSES } from '../domain/lookup.js';
import { EPISODE_STATES } from '../domain/stripe/fold.js';
import {
  ANALYTICS_GRANULARITIES,
  MAX_ANALYTICS_RANGE_DAYS,
  RUN_DECLINE_CLASSES,
  RUN_OUTCOMES,
} from '../domain/runs.js';
import {
  DELIVERY_OUTCOMES,
  DELIVERY_STATES,
  ENDPOINT_DISABLED_REASONS,
  ENDPOINT_ID_RE,
  MAX_DESCRIPTION_LENGTH,
  MESSAGE_ID_RE,
  DOWNSTREAM_EVENT_TYPES,
} from '../domain/downstream-endpoints.js';
import { STRIPE_EVENT_OUTCOME_DESCRIPTIONS, STRIPE_EVENT_OUTCOMES } from '../domain/stripe/outcomes.js';
import type { StripeEventOutcomeName } from '../domain/stripe/outcomes.js';
import {
  CUSTOMER_ID_PATTERN,
  FLAG_NAME_PATTERN,
  NOTICE_EXPIRES_PATTERN,
  NOTICE_KINDS,
  REASON_PATTERN,
  SLUG_PATTERN,
  STATUSES,
  TIER_NAME_PATTERN,
} from '../domain/types.js';
import type { NoticeKind } from '../domain/types.js';
import { SCOPES } from '../domain/keys.js';
import { STRIPE_API_KEY_PATTERN } from '../domain/stripe/api-key.js';
import { ERRORS } from './problems.js';
import type { Scope } from '../domain/keys.js';

export { MAX_URL_LENGTH };

/**
 * A free string the API takes (one with no pattern of its own): every one refuses U+0000
 * (TEXT_PATTERN), which the store cannot hold. Strings with a pattern of their own (slugs,
 * ids, names, secrets) refuse it already.
 */
export function Text(options: { minLength?: number; maxLength?: number; description?: string } = {}) {
  return Type.String({ ...options, pattern: TEXT_PATTERN });
}
export const MAX_ALLOWED_ORIGINS = 50;
export const STRIPE_WEBHOOK_SECRET_PATTERN = '^whsec_[A-Za-z0-9+/=_-]{8,256}$';

/** One of a closed vocabulary of the domain: the union of its literals, typed as the vocabulary. */
function oneOf<T extends string>(values: readonly T[], options?: TSchemaOptions) {
  return Type.Unsafe<T>(
    Type.Union(
      values.map((v) => Type.Literal(v)),
      options,
    ),
  );
}

/** One of a closed vocabulary, or null. */
function oneOfOrNull<T extends string>(values: readonly T[], options?: TSchemaOptions) {
  return Type.Unsafe<T | null>(Type.Union([...values.map((v) => Type.Literal(v)), Type.Null()], options));
}

export const Problem = Type.Object(
  {
    type: Type.Literal('about:blank'),
    title: Type.String(),
    status: Type.Integer(),
    code: Type.String({ enum: Object.keys(ERRORS), description: 'Stable machine code; docs/api.md lists them.' }),
    detail: Type.String(),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' },
);

/** Reference to the shared `Problem` schema registered on the app. */
export const ProblemRef = Type.Unsafe<Static<typeof Problem>>({ $ref: 'Problem#' });

export const Entitlements = Type.Unsafe<Record<string, boolean>>({
  type: 'object',
  patternProperties: { [FLAG_NAME_PATTERN]: { type: 'boolean' } },
  additionalProperties: false,
  description:
    'Capability flags of the tier; powered_by_watermark, custom_domain and downstream_webhooks are always present.',
});

export const Status = oneOf(STATUSES);
export const Slug = Type.String({ pattern: SLUG_PATTERN, description: 'Tenant slug' });
export const CustomerId = Type.String({
  pattern: CUSTOMER_ID_PATTERN,
  description: "The payment processor's customer ID",
});
export const TierName = Type.String({ pattern: TIER_NAME_PATTERN });
const Timestamp = Type.String({ format: 'date-time' });
const NullableUrl = Type.Union([Text({ maxLength: MAX_URL_LENGTH }), Type.Null()], {
  description: 'An https URL, or null',
});
export const MAX_LOOKUPS_PER_MINUTE = 1_000_000_000;
const NullableLookupsPerMinute = Type.Union(
  [Type.Integer({ minimum: 1, maximum: MAX_LOOKUPS_PER_MINUTE }), Type.Null()],
  {
    description: "This tenant's lookup rate limit, all addresses together; null: the service's default",
  },
);
const Livemode = Type.Union([Type.Boolean(), Type.Null()], {
  description:
    'Superseded by the modes (every tenant has a live and a test mode; see ?mode=test): the setting a tenant had before them, which decided where its data went (false: test mode; true or null: live). It no longer changes anything',
});

/** The mode an operator's request addresses (docs/test-mode.md). */
export const ModeParam = Type.Union([Type.Literal('live'), Type.Literal('test')], {
  description: "The tenant's mode this request reads or writes: live (the default) or test",
});
export const ModeQuery = Type.Object({ mode: Type.Optional(ModeParam) });
const NullableOrigins = Type.Union(
  [
    Type.Array(Text({ maxLength: 255 }), { minItems: 1, maxItems: MAX_ALLOWED_ORIGINS, uniqueItems: true }),
    Type.Null(),
  ],
  {
    description: 'Origins (scheme://host[:port]) allowed to call the lookup from a browser; null: any',
  },
);

// --- lookup ------------------------------------------------------------------------------

export const LookupParams = Type.Object({ tenantSlug: Type.String({ description: 'Tenant slug' }) });
export const LookupQuery = Type.Object({
  processor_customer_id: Type.String({
    pattern: CUSTOMER_ID_PATTERN,
    description: "The subscriber's customer ID (cus_...)",
  }),
  hmac: Type.Optional(
    Type.String({ description: "Lowercase hex HMAC-SHA256 of processor_customer_id under the tenant's HMAC secret" }),
  ),
  preview: Type.Optional(
    oneOf(PREVIEW_STATUSES, {
      description:
        "A test tenant's (livemode false) lookup answers that status with sample data (no hmac needed); ignored for any other tenant",
    }),
  ),
});
export const LookupHeaders = Type.Object({
  authorization: Type.String({ description: 'Bearer <publishable key>' }),
});
export const LookupUnknown = Type.Object({ status: Type.Literal('active') }, { additionalProperties: false });
export const LookupNotice = Type.Object(
  {
    kind: oneOf(NOTICE_KINDS),
    expires: Type.String({ pattern: NOTICE_EXPIRES_PATTERN, description: 'The month the card expires (YYYY-MM)' }),
  },
  {
    additionalProperties: false,
    description:
      'An active subscriber told ahead of a failure (a tenant whose policy enables notices; only where pay_url could be given): shown as a dismissable soft banner, never a gate',
  },
);
export const LookupKnown = Type.Object({
  status: Status,
  card_update_url: Type.Union([Type.String(), Type.Null()], {
    description:
      "Where the customer updates the card: with a warning, or an active answer carrying a notice; else null. The tenant's card update URL, else (a signed lookup in a mode with a Stripe API key) Dunwall's card link {DUNWALL_PUBLIC_URL}/card/{token}",
  }),
  entitlements: Entitlements,
  lockout_at: Type.Optional(
    Type.String({
      format: 'date-time',
      description: "While warning and the tenant's policy schedules a lockout: when (RFC 3339, UTC, seconds)",
    }),
  ),
  pay_url: Type.Optional(
    Type.String({
      description: "Stripe's hosted page of the open invoice to pay; only for a lookup with a valid hmac, never logged",
    }),
  ),
  notice: Type.Optional(LookupNotice),
});

// --- admin -------------------------------------------------------------------------------

const BrandingTexts = Type.Object(
  Object.fromEntries(
    BRANDING_TEXT_KEYS.map((k) => [k, Type.Optional(Text({ minLength: 1, maxLength: MAX_BRANDING_TEXT }))]),
  ),
  {
    additionalProperties: false,
  },
);
export const Branding = Type.Unsafe<BrandingValue>(
  Type.Object(
    {
      payment_url: Type.Optional(Text({ maxLength: MAX_BRANDING_URL, description: "The gate's link to pay (https)" })),
      support_url: Type.Optional(Text({ maxLength: MAX_BRANDING_URL, description: 'A link to the support (https)' })),
      logo_url: Type.Optional(Text({ maxLength: MAX_BRANDING_URL, description: 'A logo image (https)' })),
      colors: Type.Optional(
        Type.Object(
          Object.fromEntries(
            BRANDING_COLOR_KEYS.map((k) => [k, Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' }))]),
          ),
          {
            additionalProperties: false,
          },
        ),
      ),
      texts: Type.Optional(
        Type.Record(Type.String({ pattern: LOCALE_RE.source }), BrandingTexts, {
          maxProperties: MAX_BRANDING_LOCALES,
          description:
            "By locale tag (fr, fr-CA) or default; the snippet picks by the browser's languages, then the shorter tag, then default, then its English",
        }),
      ),
    },
    { additionalProperties: false, description: 'What the snippet shows with a banner or a gate' },
  ),
);

const policyFields = {
  enforcement: Type.Unsafe<Enforcement>({
    type: 'string',
    enum: [...ENFORCEMENTS],
    description: 'gate: as derived; banner_only: a lockout is answered warning; monitor: every lookup answers active',
  }),
  grace_days: Type.Integer({
    minimum: 0,
    maximum: MAX_GRACE_DAYS,
    description: "A lockout is answered warning until the episode's dunning start plus this many days",
  }),
  escalate_after_days: Type.Union([Type.Integer({ minimum: 1, maximum: MAX_ESCALATE_AFTER_DAYS }), Type.Null()], {
    description: 'A warning still unresolved this many days after its dunning start is answered lockout; null: never',
  }),
};
/** The tenant's policy: the enforcement's fields, and the notices (which never change a status). */
const tenantPolicyFields = {
  ...policyFields,
  notices: Type.Array(
    Type.Unsafe<NoticeKind>({
      type: 'string',
      enum: [...NOTICE_KINDS],
      description: 'card_expiring: an active subscriber whose default card expires before its next renewal is told so',
    }),
    {
      uniqueItems: true,
      maxItems: NOTICE_KINDS.length,
      description: "The notices an active subscriber's answer may carry (docs/notices.md); default none",
    },
  ),
};
export const Policy = Type.Object(tenantPolicyFields, {
  additionalProperties: false,
  description: 'How derived statuses are enforced, and the notices answered (docs/policy.md)',
});
/** Any subset of the policy's fields: the others keep their values. */
export const PolicyPatch = Type.Partial(Type.Object(tenantPolicyFields, { additionalProperties: false }), {
  additionalProperties: false,
});

/** A data space's Stripe API key as it is shown: never the key. */
export const StripeApiKeyView = Type.Union(
  [
    Type.Object({
      prefix: Type.String({ description: 'The first 12 characters of the key (rk_live_51Ab...)' }),
      set_at: Timestamp,
    }),
    Type.Null(),
  ],
  { description: 'The Stripe API key of this mode: its prefix and when it was set, never the key; null: none' },
);
export const Tenant = Type.Object({
  slug: Type.String(),
  tier: Type.String(),
  entitlements: Entitlements,
  card_update_url: Type.Union([Type.String(), Type.Null()]),
  hmac_required: Type.Boolean(),
  suspended: Type.Boolean(),
  allowed_origins: Type.Union([Type.Array(Type.String()), Type.Null()]),
  lookups_per_minute: Type.Union([Type.Integer(), Type.Null()]),
  branding: Branding,
  policy: Policy,
  livemode: Livemode,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type TenantBody = Static<typeof Tenant>;

export const TenantWithKeys = Type.Intersect([
  Tenant,
  Type.Object({
    publishable_key: Type.String({ description: "The live mode's publishable key (pk_live_)" }),
    test_publishable_key: Type.String({ description: "The test mode's publishable key (pk_test_)" }),
    hmac_secret: Type.String(),
  }),
]);

export const RotatedTenant = Type.Intersect([
  Tenant,
  Type.Object({
    publishable_key: Type.Optional(Type.String()),
    hmac_secret: Type.Optional(Type.String()),
    previous_expires_at: Type.String({
      format: 'date-time',
      description: 'When the keys this one replaces stop working',
    }),
  }),
]);

export const TenantList = Type.Object({ data: Type.Array(Tenant) });

const CredentialSummary = Type.Object({
  kind: Type.Union([
    Type.Literal('publishable_key'),
    Type.Literal('hmac_secret'),
    Type.Literal('stripe_webhook_secret'),
  ]),
  created_at: Timestamp,
  expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'null: current; else a replaced one, working until then (the overlap)',
  }),
});
const statusCounts = () =>
  Object.fromEntries(STATUSES.map((s) => [s, Type.Integer()])) as Record<
    (typeof STATUSES)[number],
    ReturnType<typeof Type.Integer>
  >;
export const TenantDetail = Type.Intersect([
  Tenant,
  Type.Object({
    mode: ModeParam,
    stripe_webhook_secret_set: Type.Boolean({
      description: 'A Stripe signing secret is set, so the webhook can verify deliveries',
    }),
    stripe_api_key: StripeApiKeyView,
    credentials: Type.Array(CredentialSummary, { description: 'Keys and secrets in force now: never their values' }),
    subscriber_counts: Type.Object(statusCounts(), { description: "By answered status (after the tenant's policy)" }),
    derived_subscriber_counts: Type.Object(statusCounts(), {
      description:
        "By derived status (Stripe's events and overrides, before the policy): what the policy would enforce",
    }),
  }),
]);

export const MAX_SUBSCRIBERS_PAGE = 1000;
const STATUS_ALTERNATIVES = STATUSES.join('|');
/** One status, or several separated by commas (`warning,lockout`). */
const StatusList = Type.String({
  pattern: `^(${STATUS_ALTERNATIVES})(,(${STATUS_ALTERNATIVES}))*$`,
  maxLength: 64,
  description: 'A status, or several separated by commas',
});
export const SubscriberListQuery = Type.Object(
  {
    status: Type.Optional(StatusList),
    derived_status: Type.Optional(StatusList),
    reason: Type.Optional(Type.String({ pattern: REASON_PATTERN })),
    updated_since: Type.Optional(
      Type.String({ format: 'date-time', description: 'Only records changed at or after this instant' }),
    ),
    limit: Type.Optional(
      Type.String({
        pattern: '^[1-9][0-9]{0,3}$',
        description: `Rows per page, 1 to ${MAX_SUBSCRIBERS_PAGE} (default 100)`,
      }),
    ),
    cursor: Type.Optional(
      Type.String({ pattern: CUSTOMER_ID_PATTERN, description: 'next_cursor of the previous page' }),
    ),
  },
  { additionalProperties: false },
);
export const SubscriberPage = Type.Object({
  data: Type.Array(
    Type.Object({
      processor_customer_id: Type.String(),
      status: Status,
      derived_status: Status,
      reason: Type.String(),
      updated_at: Timestamp,
    }),
  ),
  next_cursor: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as cursor for the next page; null: this was the last',
  }),
});

export const CreateTenantBody = Type.Object(
  {
    slug: Slug,
    tier: Type.Optional(
      Type.String({
        pattern: TIER_NAME_PATTERN,
        description: "The tenant's tier; absent: the service's DUNWALL_DEFAULT_TIER (starter unless set)",
      }),
    ),
    card_update_url: Type.Optional(NullableUrl),
    hmac_required: Type.Optional(Type.Boolean()),
    allowed_origins: Type.Optional(NullableOrigins),
    lookups_per_minute: Type.Optional(NullableLookupsPerMinute),
    branding: Type.Optional(Branding),
    policy: Type.Optional(PolicyPatch),
    livemode: Type.Optional(Livemode),
  },
  { additionalProperties: false },
);
export type CreateTenantBody = Static<typeof CreateTenantBody>;

export const UpdateTenantBody = Type.Object(
  {
    tier: Type.Optional(TierName),
    card_update_url: Type.Optional(NullableUrl),
    hmac_required: Type.Optional(Type.Boolean()),
    suspended: Type.Optional(Type.Boolean()),
    allowed_origins: Type.Optional(NullableOrigins),
    lookups_per_minute: Type.Optional(NullableLookupsPerMinute),
    branding: Type.Optional(Branding),
    policy: Type.Optional(PolicyPatch),
    livemode: Type.Optional(Livemode),
    stripe_webhook_secret: Type.Optional(
      Type.String({
        pattern: STRIPE_WEBHOOK_SECRET_PATTERN,
        description: "The Stripe endpoint's signing secret (whsec_...)",
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateTenantBody = Static<typeof UpdateTenantBody>;

export const RotateBody = Type.Object(
  { key: Type.Union([Type.Literal('publishable'), Type.Literal('hmac')]) },
  { additionalProperties: false },
);

export const TenantParams = Type.Object({ slug: Slug });

// --- tenant secret keys and settings (docs/reference.md#keys-and-scopes) ------------------

export const ScopeName = Type.Unsafe<Scope>({
  type: 'string',
  enum: [...SCOPES],
  description: 'A scope of a secret key',
});
export const KEY_ID_PATTERN = '^key_[A-Za-z0-9]{20}$';
export const KeyId = Type.String({ pattern: KEY_ID_PATTERN, description: 'A secret key id' });
export const MAX_KEY_NAME = 100;
export const CreateKeyBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_KEY_NAME,
      pattern: NAME_PATTERN,
      description: 'What the key is for (printable text: no control or bidirectional-control character)',
    }),
    scopes: Type.Array(ScopeName, { minItems: 1, maxItems: SCOPES.length, uniqueItems: true }),
    expires_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'When the key stops working; null or absent: never',
      }),
    ),
  },
  { additionalProperties: false },
);
export const RotateKeyBody = Type.Object(
  {
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 30 * 86_400,
        description: 'How long the replaced secret keeps working (default DUNWALL_ROTATION_OVERLAP_S)',
      }),
    ),
  },
  { additionalProperties: false },
);
export const SecretKey = Type.Object({
  id: Type.String(),
  name: Type.String(),
  scopes: Type.Array(ScopeName),
  prefix: Type.String({ description: 'The first 12 characters of the key in force' }),
  created_at: Timestamp,
  expires_at: Type.Union([Timestamp, Type.Null()]),
  last_used_at: Type.Union([Timestamp, Type.Null()], { description: 'Coarse: recorded about once a minute' }),
  seen_in_browser_at: Type.Union([Timestamp, Type.Null()], {
    description:
      'When the key was last sent from a browser (a lookup carrying Origin), which is refused: treat the key as leaked and rotate it. Null: never, or not since its last rotation',
  }),
  previous_expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'After a rotation: when the replaced secret stops working',
  }),
});
export const SecretKeyWithSecret = Type.Intersect([
  SecretKey,
  Type.Object({
    secret_key: Type.String({ description: 'Shown once, never again' }),
    expires_at_clamped_by: Type.Optional(
      Type.String({
        description:
          "Present when the key was created by a key that expires: the creating key's id. The new key's expires_at was asked for later than the creator's, or absent, and is the creator's",
      }),
    ),
  }),
]);
export const SecretKeyList = Type.Object({ data: Type.Array(SecretKey) });

/** What a tenant may change of itself: never its tier, suspension, slug, mode or quota. */
export const UpdateSettingsBody = Type.Object(
  {
    card_update_url: Type.Optional(NullableUrl),
    hmac_required: Type.Optional(Type.Boolean()),
    allowed_origins: Type.Optional(NullableOrigins),
    branding: Type.Optional(Branding),
    policy: Type.Optional(PolicyPatch),
    stripe_webhook_secret: Type.Optional(
      Type.String({
        pattern: STRIPE_WEBHOOK_SECRET_PATTERN,
        description: "The Stripe endpoint's signing secret (whsec_...); write-only",
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export const Settings = Type.Object({
  slug: Type.String(),
  tier: Type.String(),
  entitlements: Entitlements,
  card_update_url: Type.Union([Type.String(), Type.Null()]),
  hmac_required: Type.Boolean(),
  allowed_origins: Type.Union([Type.Array(Type.String()), Type.Null()]),
  branding: Branding,
  policy: Policy,
  livemode: Livemode,
  stripe_webhook_secret_set: Type.Boolean(),
  stripe_api_key: StripeApiKeyView,
});
/** `PUT /v1/settings/stripe-webhook-secret` (`stripe:write`). */
export const StripeWebhookSecretBody = Type.Object(
  {
    secret: Type.String({
      pattern: STRIPE_WEBHOOK_SECRET_PATTERN,
      description: "The Stripe endpoint's signing secret (whsec_...); write-only",
    }),
  },
  { additionalProperties: false },
);
/** Who changed a credential that decides statuses: the operator, or a secret key as it was then. */
export const CredentialChangeView = Type.Object({
  at: Timestamp,
  by: Type.Union([Type.Literal('operator'), Type.Literal('key')]),
  key: Type.Union([Type.Object({ id: Type.String(), prefix: Type.String(), name: Type.String() }), Type.Null()], {
    description: 'The secret key that made the change (kept once the key is revoked); null: the operator',
  }),
});
export const STRIPE_SECRET_CHANGES_SHOWN = 10;

/** `PUT .../stripe-api-key` (`stripe:write`). */
export const StripeApiKeyBody = Type.Object(
  {
    key: Type.String({
      pattern: STRIPE_API_KEY_PATTERN,
      description:
        'A restricted key (rk_live_... / rk_test_...) with read on Invoices, Customers and Subscriptions and write on Customer portal, or a secret key (sk_...); write-only',
    }),
  },
  { additionalProperties: false },
);
export const StripeApiKeyState = Type.Object({
  mode: Type.Union([Type.Literal('live'), Type.Literal('test')], { description: 'The mode the key serves' }),
  stripe_api_key: StripeApiKeyView,
  changes: Type.Array(CredentialChangeView, {
    description: `The latest changes of this mode's Stripe API key, the latest first (${STRIPE_SECRET_CHANGES_SHOWN} at most)`,
  }),
});
export const StripeWebhookSecretState = Type.Object({
  stripe_webhook_secret_set: Type.Boolean(),
  previous_expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'When the secret this one replaced stops verifying (the overlap); null: none was set',
  }),
  changes: Type.Array(CredentialChangeView, {
    description: `The latest changes of the signing secret, the latest first (${STRIPE_SECRET_CHANGES_SHOWN} at most)`,
  }),
});
export const SecretKeyHeaders = Type.Object({
  authorization: Type.Optional(Type.String({ description: 'Bearer <secret key> (sk_live_... or sk_test_...)' })),
});
export const SubscriberParams = Type.Object({ slug: Slug, customerId: CustomerId });

export const PutSubscriberBody = Type.Object(
  { status: Status, reason: Type.Optional(Type.String({ pattern: REASON_PATTERN })) },
  { additionalProperties: false },
);

export const HistoryEntry = Type.Object({
  status: Type.Union([Status, Type.Null()], {
    description: 'The answered status after this entry; null: no record (removed, or never known)',
  }),
  derived_status: Type.Union([Status, Type.Null()], {
    description: "The status Stripe's events (or an override) derive, before the tenant's policy",
  }),
  lockout_at: Type.Union([Timestamp, Type.Null()], {
    description: 'The lockout the policy scheduled after this entry, if any',
  }),
  reason: Type.Union([Type.String(), Type.Null()]),
  effect: oneOf(HISTORY_EFFECTS, {
    description:
      'changed: the status or its reason changed; removed: the record was removed; none: kept for the record (a decline of a one-off payment, or one not linked to an invoice yet)',
  }),
  episode: Type.Union([Type.String(), Type.Null()], {
    description: 'The subscription (sub_...) or invoice (in_...) the change came through',
  }),
  source: oneOf(HISTORY_SOURCES),
  policy_rule: oneOfOrNull(POLICY_RULES, {
    description: 'For source policy: a grace that ended, an escalation that fell due, or a change of the policy',
  }),
  secret_key_id: Type.Union([Type.String(), Type.Null()], {
    description: "For source admin: the tenant's secret key that made the change; null: the operator",
  }),
  admin_action: oneOfOrNull(ADMIN_ACTIONS, {
    description:
      'For source admin: an override set (set_status), an override cleared (clear_override) or the record removed (delete); null for other sources, and for admin changes recorded before it was kept',
  }),
  event_id: Type.Union([Type.String(), Type.Null()]),
  event_type: Type.Union([Type.String(), Type.Null()]),
  decline_code: Type.Union([Type.String(), Type.Null()]),
  occurred_at: Timestamp,
  recorded_at: Timestamp,
});

const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const Episode = Type.Object({
  episode: Type.String({
    description: 'A subscription id, or the id of an automatically collected invoice of no subscription',
  }),
  state: oneOf(EPISODE_STATES),
  reason: Type.String(),
  decline_code: Type.Union([Type.String(), Type.Null()]),
  at: Timestamp,
  event_id: Type.String({ description: 'The event that set the state (the latest of the episode)' }),
  dunning_started_at: Type.Union([Timestamp, Type.Null()], {
    description: 'The first event of its current unresolved run (null: unknown, or never in dunning)',
  }),
  resolved_at: Type.Union([Timestamp, Type.Null()], { description: 'When it was last resolved' }),
  invoice: Type.Union(
    [
      Type.Object({
        id: Type.String(),
        status: Type.Union([Type.String(), Type.Null()]),
        amount_due: Type.Union([Type.Integer(), Type.Null()]),
        amount_remaining: Type.Union([Type.Integer(), Type.Null()]),
        currency: Type.Union([Type.String(), Type.Null()]),
        hosted_invoice_url: Type.Union([Type.String(), Type.Null()]),
      }),
      Type.Null(),
    ],
    { description: 'The invoice behind it, as Stripe last told (amounts in the smallest unit of the currency)' },
  ),
});

export const Subscriber = Type.Object({
  processor_customer_id: Type.String(),
  status: Type.Union([Status, Type.Null()], {
    description:
      "The answered status (after the tenant's policy); null: no record (cleared or deleted); the history is kept",
  }),
  derived_status: Type.Union([Status, Type.Null()], {
    description: "The status Stripe's events (or an override) derive, before the tenant's policy",
  }),
  lockout_at: Type.Union([Timestamp, Type.Null()], {
    description: 'While warning: when the policy schedules the lockout',
  }),
  pay_url: Type.Union([Type.String(), Type.Null()], {
    description: 'The hosted page of the open invoice behind the worst unresolved episode',
  }),
  reason: Type.Union([Type.String(), Type.Null()]),
  overridden_at: Type.Union([Timestamp, Type.Null()], {
    description:
      "Set while an admin's status overrides the episodes, until a Stripe event dated in a later second changes one",
  }),
  updated_at: NullableTimestamp,
  episodes: Type.Array(Episode, { description: 'Its dunning episodes, newest first' }),
  history: Type.Array(HistoryEntry, { description: 'The newest 100 changes, oldest first' }),
});

export const Tier = Type.Object({
  name: Type.String(),
  entitlements: Entitlements,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export const TierList = Type.Object({ data: Type.Array(Tier) });
export const TierParams = Type.Object({ name: TierName });
export const PutTierBody = Type.Object({ entitlements: Entitlements }, { additionalProperties: false });

export const AdminHeaders = Type.Object({
  authorization: Type.Optional(Type.String({ description: 'Bearer <admin token>' })),
});

export const MAX_REPLAY_EVENTS = 500;
export const ReplayBody = Type.Object(
  {
    // Any JSON value: a line that is not an event is refused by itself, in `invalid`.
    events: Type.Array(Type.Unknown({ description: 'A Stripe event object' }), {
      minItems: 1,
      maxItems: MAX_REPLAY_EVENTS,
    }),
    dry_run: Type.Optional(
      Type.Boolean({
        description: 'Apply the batch in a transaction that is rolled back: the answer says what would change',
      }),
    ),
  },
  { additionalProperties: false },
);
const Count = Type.Integer({ minimum: 0 });
export const ReplayAnswer = Type.Object({
  received: Count,
  dry_run: Type.Boolean(),
  outcomes: Type.Object(
    Object.fromEntries(STRIPE_EVENT_OUTCOMES.map((o) => [o, Count])) as Record<StripeEventOutcomeName, typeof Count>,
    {
      description: 'How many events had each outcome',
    },
  ),
  invalid: Type.Array(Type.Object({ index: Count, detail: Type.String() }), {
    description: 'Events refused, by position in the batch',
  }),
  results: Type.Array(
    Type.Unsafe<StripeEventOutcomeName | 'invalid'>(
      Type.Union([...STRIPE_EVENT_OUTCOMES.map((o) => Type.Literal(o)), Type.Literal('invalid')]),
    ),
    {
      description: 'The outcome of each event, in the order sent (invalid: refused, see invalid)',
    },
  ),
  customers: Type.Array(
    Type.Object({
      processor_customer_id: Type.String(),
      status_before: Type.Union([Status, Type.Null()], { description: 'Before the batch; null: unknown' }),
      status: Type.Union([Status, Type.Null()], { description: 'After the batch; null: unknown' }),
      reason: Type.Union([Type.String(), Type.Null()]),
    }),
    { description: 'Every customer the batch named, with its status before and after' },
  ),
});

/** What one Stripe event did: the webhook's answer. */
export const StripeEventOutcome = Type.Unsafe<StripeEventOutcomeName>(
  Type.Union(
    STRIPE_EVENT_OUTCOMES.map((o) => Type.Literal(o)),
    { description: STRIPE_EVENT_OUTCOMES.map((o) => `${o}: ${STRIPE_EVENT_OUTCOME_DESCRIPTIONS[o]}`).join('; ') },
  ),
);

/* Downstream webhooks (docs/webhooks.md). */

export const MAX_WEBHOOK_PAGE = 500;
const EventType = oneOf(DOWNSTREAM_EVENT_TYPES);
const EventTypes = Type.Array(EventType, { minItems: 1, maxItems: DOWNSTREAM_EVENT_TYPES.length, uniqueItems: true });
const EndpointUrl = Text({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description: 'https URL the events are POSTed to',
});
/** Shown in the console beside the endpoint: printable text, as a key's name. */
const Description = Type.String({ maxLength: MAX_DESCRIPTION_LENGTH, pattern: NAME_PATTERN });

export const WebhookEndpoint = Type.Object({
  id: Type.String({ description: 'ep_...' }),
  url: Type.String(),
  description: Type.String(),
  event_types: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'null: every event type' }),
  enabled: Type.Boolean(),
  disabled_reason: oneOfOrNull(ENDPOINT_DISABLED_REASONS, {
    description:
      'admin: disabled through the API; gone: the endpoint answered 410; failing: every attempt failed for days',
  }),
  disabled_detail: Type.Union([Type.String(), Type.Null()]),
  disabled_at: NullableTimestamp,
  failing_since: Type.Union([Timestamp, Type.Null()], {
    description: 'Since when every attempt failed; null after a success',
  }),
  signing_secrets: Type.Array(Type.Object({ created_at: Timestamp, expires_at: NullableTimestamp }), {
    description:
      'The secrets in force (never their values): the current one, and the one it replaced until its overlap ends',
  }),
  pending: Type.Integer({ description: 'Messages waiting for delivery' }),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export const WebhookEndpointWithSecret = Type.Intersect([
  WebhookEndpoint,
  Type.Object({
    secret: Type.String({ description: 'The Standard Webhooks signing secret (whsec_...): shown once' }),
    previous_expires_at: Type.Optional(NullableTimestamp),
  }),
]);
export const WebhookEndpointList = Type.Object({ data: Type.Array(WebhookEndpoint) });
export const CreateWebhookEndpointBody = Type.Object(
  { url: EndpointUrl, description: Type.Optional(Description), event_types: Type.Optional(EventTypes) },
  { additionalProperties: false },
);
export const UpdateWebhookEndpointBody = Type.Object(
  {
    url: Type.Optional(EndpointUrl),
    description: Type.Optional(Description),
    event_types: Type.Optional(Type.Union([EventTypes, Type.Null()], { description: 'null: every event type' })),
    enabled: Type.Optional(Type.Boolean({ description: 'true re-enables an endpoint disabled for any reason' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export const RotateWebhookSecretBody = Type.Object(
  {
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 31_536_000,
        description: 'How long the current secret keeps signing too (default DUNWALL_ROTATION_OVERLAP_S)',
      }),
    ),
  },
  { additionalProperties: false },
);
export const WebhookEndpointParams = Type.Object({
  slug: Slug,
  endpointId: Type.String({ pattern: ENDPOINT_ID_RE.source }),
});
export const WebhookMessageParams = Type.Object({
  slug: Slug,
  endpointId: Type.String({ pattern: ENDPOINT_ID_RE.source }),
  messageId: Type.String({ pattern: MESSAGE_ID_RE.source }),
});
const PageLimit = Type.Optional(
  Type.String({
    pattern: '^[1-9][0-9]{0,2}$',
    description: `At most this many, 1 to ${MAX_WEBHOOK_PAGE} (default 50)`,
  }),
);
export const WebhookAttemptsQuery = Type.Object({ limit: PageLimit }, { additionalProperties: false });
export const WebhookMessagesQuery = Type.Object(
  { limit: PageLimit, state: Type.Optional(oneOf(DELIVERY_STATES)) },
  { additionalProperties: false },
);
export const WebhookAttemptList = Type.Object({
  data: Type.Array(
    Type.Object({
      message_id: Type.String(),
      attempted_at: Timestamp,
      status_code: Type.Union([Type.Integer(), Type.Null()]),
      latency_ms: Type.Integer(),
      outcome: oneOf(DELIVERY_OUTCOMES),
      error: Type.Union([Type.String(), Type.Null()]),
    }),
  ),
});
export const WebhookMessageList = Type.Object({
  data: Type.Array(
    Type.Object({
      message_id: Type.String(),
      type: Type.String(),
      processor_customer_id: Type.String(),
      sequence: Type.Integer(),
      created_at: Timestamp,
      state: oneOf(DELIVERY_STATES),
      attempts: Type.Integer(),
      next_attempt_at: NullableTimestamp,
      last_attempt_at: NullableTimestamp,
      last_status: Type.Union([Type.Integer(), Type.Null()]),
      last_error: Type.Union([Type.String(), Type.Null()]),
    }),
  ),
});
export const MAX_CUSTOMER_WEBHOOKS = 100;
export const CustomerWebhooksQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.String({
        pattern: '^[1-9][0-9]{0,2}$',
        description: `At most this many, 1 to ${MAX_CUSTOMER_WEBHOOKS} (default 50)`,
      }),
    ),
  },
  { additionalProperties: false },
);
export const CustomerWebhookList = Type.Object({
  data: Type.Array(
    Type.Object({
      message_id: Type.String({ description: 'msg_...: the webhook-id of every delivery of it' }),
      type: Type.String(),
      sequence: Type.Integer({ description: "The customer's sequence number: receivers order by it" }),
      created_at: Timestamp,
      deliveries: Type.Array(
        Type.Object({
          endpoint_id: Type.String({ description: 'ep_...' }),
          state: oneOf(DELIVERY_STATES),
          attempts: Type.Integer(),
          last_status: Type.Union([Type.Integer(), Type.Null()], {
            description: "The receiver's last HTTP status; null: none yet, or no answer",
          }),
          last_attempt_at: NullableTimestamp,
        }),
        { description: 'One per endpoint the message was queued for (none when the tenant had no endpoint then)' },
      ),
    }),
    { description: 'Newest first' },
  ),
});
export const MAX_REPLAY_MESSAGES = 10_000;
export const WebhookReplayBody = Type.Object(
  {
    since: Timestamp,
    until: Type.Optional(Timestamp),
    after: Type.Optional(
      Type.String({
        pattern: MESSAGE_ID_RE.source,
        description: "The previous answer's next.after: go on after this message",
      }),
    ),
  },
  { additionalProperties: false },
);
export const WebhookReplayAnswer = Type.Object({
  queued: Type.Integer({ description: `Messages queued again (at most ${MAX_REPLAY_MESSAGES} a call)` }),
  next: Type.Union([Type.Object({ since: Timestamp, after: Type.String() }), Type.Null()], {
    description:
      'Where the next call goes on (send since and after as given, with the same until); null: the range is done',
  }),
});
export const WebhookRetryAnswer = Type.Object({ queued: Type.Literal(true) });

// Recovery analytics (docs/api.md): figures over the tenant's dunning runs.

/** A day (`2026-01-31`, midnight UTC) or an instant with its offset (`2026-01-31T12:00:00Z`). */
export const ANALYTICS_DATE_PATTERN =
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2}))?$';
export const RecoveryQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        pattern: ANALYTICS_DATE_PATTERN,
        description: 'Start of the range, included (ISO 8601 date or date-time); default: 365 days before `to`',
      }),
    ),
    to: Type.Optional(
      Type.String({ pattern: ANALYTICS_DATE_PATTERN, description: 'End of the range, excluded; default: now' }),
    ),
    granularity: Type.Optional(
      oneOf(ANALYTICS_GRANULARITIES, {
        description: 'Periods of `recovered.periods` (UTC; weeks start on Monday); default month',
      }),
    ),
  },
  { additionalProperties: false, description: `The range is at most ${MAX_ANALYTICS_RANGE_DAYS} days` },
);
const Rate = Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], {
  description: 'A fraction from 0 to 1; null when there is nothing to divide by',
});
const Amounts = Type.Array(
  Type.Object({ currency: Type.String(), amount: Type.Integer({ description: "In the currency's smallest unit" }) }),
  {
    description: 'Invoice amounts (amount_due) by currency, in currency order',
  },
);
const Seconds = Type.Union([Type.Number({ minimum: 0 }), Type.Null()]);
export const RecoveryAnalytics = Type.Object({
  from: Timestamp,
  to: Timestamp,
  granularity: oneOf(ANALYTICS_GRANULARITIES),
  at_risk: Type.Object({ count: Count, amounts: Amounts }, { description: 'Runs open now, whatever the range' }),
  recovered: Type.Object(
    {
      ended: Count,
      recovered: Count,
      rate: Rate,
      amounts: Amounts,
      periods: Type.Array(
        Type.Object({ period_start: Timestamp, ended: Count, recovered: Count, rate: Rate, amounts: Amounts }),
        {
          description: 'Every period of the range, empty ones included',
        },
      ),
    },
    { description: 'Runs ended in the range: by payment (recovered) against all that ended' },
  ),
  time_to_recover: Type.Object(
    { median_seconds: Seconds, p90_seconds: Seconds },
    { description: 'From dunning start to payment, over the runs recovered in the range' },
  ),
  outcomes: Type.Object(Object.fromEntries([...RUN_OUTCOMES, 'open'].map((o) => [o, Count])), {
    description: 'Runs started in the range, by how they ended (`removed`: the customer was deleted in dunning)',
  }),
  decline_mix: Type.Object(Object.fromEntries(RUN_DECLINE_CLASSES.map((c) => [c, Count])), {
    description: 'Runs started in the range, by the worst decline class of their events',
  }),
  cohorts: Type.Array(Type.Object({ month: Timestamp, started: Count, recovered: Count, rate: Rate }), {
    description: 'Runs started in the range, by month of dunning start: how many were since recovered',
  }),
  links: Type.Object(
    {
      opened: Count,
      recovered_after_open: Count,
      median_seconds_to_payment: Seconds,
      periods: Type.Array(
        Type.Object({
          period_start: Timestamp,
          opened: Count,
          recovered_after_open: Count,
          median_seconds_to_payment: Seconds,
        }),
        { description: "Every period of the range, empty ones included, by the period of each run's first open" },
      ),
    },
    {
      description:
        'Runs whose customer opened a pay or card link through Dunwall while in dunning (first open in the range), those of them recovered, and the median time from the first open to the payment',
    },
  ),
});

// Policy impact (docs/tenant-api.md): what a proposed policy would change now.

export const PolicyImpactQuery = Type.Object(
  {
    enforcement: Type.Optional(
      Type.Unsafe<Enforcement>({
        type: 'string',
        enum: [...ENFORCEMENTS],
        description: `The proposed enforcement (${ENFORCEMENTS.join(', ')}); absent: the current one`,
      }),
    ),
    grace_days: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,3}$',
        description: `The proposed grace, a whole number of days from 0 to ${MAX_GRACE_DAYS}; absent: the current one`,
      }),
    ),
    escalate_after_days: Type.Optional(
      Type.String({
        pattern: '^([0-9]{1,3}|none)$',
        description: `The proposed escalation, a whole number of days from 1 to ${MAX_ESCALATE_AFTER_DAYS}, or none (never); absent: the current one`,
      }),
    ),
  },
  { additionalProperties: false },
);
/** Customers answered warning and lockout (the others are answered active). */
const gateCounts = (description: string) => Type.Object({ warning: Count, lockout: Count }, { description });
export const PolicyImpact = Type.Object({
  policy: Type.Object(policyFields, {
    additionalProperties: false,
    description: "The proposed policy: the fields given over the tenant's current ones",
  }),
  current: gateCounts('Customers answered warning and lockout under the current policy, now'),
  proposed: gateCounts('Customers answered warning and lockout under the proposed policy, now'),
  newly_gated: Type.Integer({
    minimum: 0,
    description: 'Answered lockout under the proposed policy and not under the current one',
  }),
  released: Type.Integer({
    minimum: 0,
    description: 'Answered lockout under the current policy and not under the proposed one',
  }),
  at: Timestamp,
});

// A tenant's health (docs/tenant-api.md): its Stripe intake, this process's read model, its deliveries.

export const TENANT_HEALTH_DAYS = 7;
export const TenantHealth = Type.Object({
  stripe: Type.Object(
    {
      since: Type.String({
        format: 'date-time',
        description: `Midnight UTC ${TENANT_HEALTH_DAYS - 1} days before today: the counts are of the ${TENANT_HEALTH_DAYS} UTC days from it`,
      }),
      received: Type.Integer({
        minimum: 0,
        description: 'Webhook deliveries whose signature verified, whatever came of them (refused_livemode included)',
      }),
      refused_signature: Type.Integer({ minimum: 0, description: 'Webhook deliveries refused 400 invalid_signature' }),
      refused_livemode: Type.Integer({
        minimum: 0,
        description: "Verified deliveries of the other mode than the tenant's (outcome livemode_mismatch)",
      }),
      replayed: Type.Integer({
        minimum: 0,
        description: "Events taken by the operator's replay (dunwall stripe sync), dry runs aside",
      }),
      last_received_at: Type.Union([Timestamp, Type.Null()], {
        description: 'The last verified delivery, within the counters kept (90 days)',
      }),
      last_refused_at: Type.Union([Timestamp, Type.Null()], {
        description: 'The last refused delivery (signature or livemode), within the counters kept',
      }),
      last_sync_at: Type.Union([Timestamp, Type.Null()], {
        description: 'The last replayed event, within the counters kept',
      }),
      days: Type.Array(
        Type.Object({
          day: Type.String({ format: 'date' }),
          received: Count,
          refused_signature: Count,
          refused_livemode: Count,
        }),
        {
          description: 'Oldest first, only the days with a delivery',
        },
      ),
    },
    { description: 'Counted by each process and written every 10 s: a delivery shows here within that' },
  ),
  read_model: Type.Object(
    {
      serving: Type.Boolean({ description: "This process's in-memory copy may answer lookups" }),
      lag_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description:
          "Milliseconds since this process last read the store's change log successfully: every change committed before at - lag_ms shows in its lookups. Up to about 5,000 when idle and well",
      }),
    },
    { description: 'The process that answered this request' },
  ),
  deliveries: Type.Object(
    {
      pending: Count,
      oldest_pending_at: NullableTimestamp,
      failed_7d: Type.Integer({ minimum: 0, description: 'Deliveries that gave up in the last 7 days' }),
      endpoints: Count,
      disabled_endpoints: Count,
    },
    { description: "The tenant's downstream webhook deliveries" },
  ),
  stripe_webhook_secret: Type.Object(
    {
      set: Type.Boolean(),
      changes: Type.Array(CredentialChangeView, {
        description: `The latest first, ${STRIPE_SECRET_CHANGES_SHOWN} at most`,
      }),
    },
    {
      description:
        'Whether a Stripe signing secret is set, and who changed it: the operator, or which secret key (with stripe:write)',
    },
  ),
  secret_keys: Type.Object(
    {
      seen_in_browser: Type.Array(
        Type.Object({
          id: Type.String(),
          name: Type.String(),
          prefix: Type.String({ description: 'The first 12 characters of the key in force' }),
          seen_in_browser_at: Timestamp,
        }),
        {
          description:
            'Keys sent from a browser (and refused) since their last rotation, the latest first: treat each as leaked and rotate it',
        },
      ),
    },
    { description: "The tenant's secret keys that need attention" },
  ),
  at: Timestamp,
});
