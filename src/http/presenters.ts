import { unescapeStored } from '../domain/stripe/json.js';
import type { EpisodeRecord, HistoryEntry, SubscriberRecord, TenantRecord, TierRecord } from '../store/index.js';

/** The tenant object of docs/api.md, the admin API: never a key or a secret. */
export function presentTenant(t: TenantRecord) {
  return {
    slug: t.slug,
    tier: t.tier,
    entitlements: t.entitlements,
    card_update_url: t.cardUpdateUrl,
    hmac_required: t.hmacRequired,
    suspended: t.suspended,
    allowed_origins: t.allowedOrigins,
    lookups_per_minute: t.lookupsPerMinute,
    branding: t.branding,
    policy: t.policy,
    livemode: t.livemode,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
  };
}

function presentHistory(h: HistoryEntry) {
  return {
    status: h.status,
    derived_status: h.derivedStatus,
    lockout_at: h.lockoutAt?.toISOString() ?? null,
    reason: h.reason,
    effect: h.effect,
    episode: h.episode,
    source: h.source,
    policy_rule: h.policyRule,
    secret_key_id: h.secretKeyId,
    admin_action: h.adminAction,
    event_id: h.eventId,
    event_type: h.eventType,
    // Stripe's own text, kept escaped (domain/stripe/json.ts), shown as Stripe sent it.
    decline_code: h.declineCode === null ? null : unescapeStored(h.declineCode),
    occurred_at: h.occurredAt.toISOString(),
    recorded_at: h.recordedAt.toISOString(),
  };
}

function presentEpisode(e: EpisodeRecord) {
  const i = e.invoice;
  return {
    episode: e.episode,
    state: e.state,
    reason: e.reason,
    decline_code: e.declineCode === null ? null : unescapeStored(e.declineCode),
    at: e.at.toISOString(),
    event_id: e.eventId,
    dunning_started_at: e.dunningStartedAt?.toISOString() ?? null,
    resolved_at: e.resolvedAt?.toISOString() ?? null,
    invoice:
      i === null
        ? null
        : {
            id: i.id,
            status: i.status,
            amount_due: i.amountDue,
            amount_remaining: i.amountRemaining,
            currency: i.currency,
            hosted_invoice_url: i.hostedInvoiceUrl,
          },
  };
}

export function presentSubscriber(s: SubscriberRecord) {
  return {
    processor_customer_id: s.processorCustomerId,
    status: s.status,
    derived_status: s.derivedStatus,
    lockout_at: s.lockoutAt?.toISOString() ?? null,
    pay_url: s.payUrl,
    reason: s.reason,
    overridden_at: s.overriddenAt?.toISOString() ?? null,
    updated_at: s.updatedAt?.toISOString() ?? null,
    episodes: s.episodes.map(presentEpisode),
    history: s.history.map(presentHistory),
  };
}

export function presentTier(t: TierRecord) {
  return {
    name: t.name,
    entitlements: t.entitlements,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
  };
}
