import type { Invalidation } from '../cache/invalidation.js';
import type { Derivation, Facts } from '../domain/stripe/derive.js';
import type { Change, CustomerStatus, EpisodeState } from '../domain/stripe/fold.js';
import type { Credential, Entitlements, SubscriberStatus, TenantAuth } from '../domain/types.js';

export type CredentialKind = 'publishable_key' | 'hmac_secret' | 'stripe_webhook_secret';

/** A new credential; the current ones of its kind expire `overlapS` seconds later. */
export interface CredentialRotation {
  kind: CredentialKind;
  /** A SHA-256 hex digest for publishable keys, the secret itself otherwise. */
  material: string;
  overlapS: number;
}

export interface TenantRecord {
  id: number;
  slug: string;
  tier: string;
  entitlements: Entitlements;
  cardUpdateUrl: string | null;
  hmacRequired: boolean;
  suspended: boolean;
  allowedOrigins: string[] | null;
  /** This tenant's lookup rate limit; null: the service's default. */
  lookupsPerMinute: number | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface TenantSettings {
  tier: string;
  cardUpdateUrl: string | null;
  hmacRequired: boolean;
  suspended: boolean;
  allowedOrigins: string[] | null;
  lookupsPerMinute: number | null;
}

export interface NewTenant extends Omit<TenantSettings, 'suspended' | 'lookupsPerMinute'> {
  lookupsPerMinute?: number | null;
  slug: string;
  publishableKeyHash: string;
  hmacSecret: string;
}

export interface TierRecord {
  name: string;
  entitlements: Entitlements;
  createdAt: Date;
  updatedAt: Date;
}

/** The cause of a status change: an admin action, or a payment processor event. */
export interface ChangeCause {
  source: 'admin' | 'stripe';
  eventId: string | null;
  eventType: string | null;
  declineCode: string | null;
  /** When the cause happened (the event's time); orders changes. */
  occurredAt: Date;
}

export interface HistoryEntry {
  /** The status after this entry; null: no record (removed, or never known). */
  status: SubscriberStatus | null;
  reason: string | null;
  /** changed: the status or its reason changed; removed: the record went; none: kept for the record only. */
  effect: 'changed' | 'removed' | 'none';
  /** The episode the change came through (a subscription or invoice id), when one did. */
  episode: string | null;
  source: 'admin' | 'stripe';
  eventId: string | null;
  eventType: string | null;
  declineCode: string | null;
  occurredAt: Date;
  recordedAt: Date;
}

export interface EpisodeRecord {
  episode: string;
  state: EpisodeState;
  reason: string;
  declineCode: string | null;
  /** The time of the event that set the episode. */
  at: Date;
  eventId: string;
}

/**
 * A subscriber as the admin API shows it. A cleared or deleted customer whose history is
 * kept has `status` null.
 */
export interface SubscriberRecord {
  processorCustomerId: string;
  status: SubscriberStatus | null;
  reason: string | null;
  /** Set while an admin's status overrides the episodes. */
  overriddenAt: Date | null;
  updatedAt: Date | null;
  episodes: EpisodeRecord[];
  history: HistoryEntry[];
}

export interface InvalidationHandlers {
  onInvalidate(invalidation: Invalidation): void;
  onReady(): void;
  onLost(): void;
}

export type ApplyOutcome = 'applied' | 'stale';
/** pending: a decline not linked to an invoice (yet); it gates only once an invoice event links it. */
export type StripeEventOutcome = ApplyOutcome | 'ignored' | 'pending' | 'duplicate';

/** What one event did: its outcome, and the customer's status before and after it (null: unknown). */
export interface StripeEventResult {
  outcome: StripeEventOutcome;
  customerId: string | null;
  before: CustomerStatus | null;
  after: CustomerStatus | null;
}

/** A relevant event's derivation: what the store applies. */
export type StripeDerivation = Exclude<Derivation, { kind: 'irrelevant' }>;

export interface StripeEventInput {
  event: StripeEventRecord;
  derivation: StripeDerivation;
}

export interface StripeEventRecord {
  eventId: string;
  eventType: string;
  customerId: string | null;
  created: Date;
  declineCode: string | null;
  /** The fields the derivation used. */
  facts: Facts;
}

export type CreateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'exists' | 'unknown_tier' };
export type UpdateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'not_found' | 'unknown_tier' };

/**
 * Everything Dunwall keeps. The lookup reads through `getTenantAuth` and
 * `getSubscriberStatus` only, so that a cache can stand in front of exactly those two.
 */
export interface Store {
  readonly engine: 'postgres' | 'embedded';

  getTenantAuth(slug: string): Promise<TenantAuth | null>;
  getSubscriberStatus(tenantId: number, customerId: string): Promise<SubscriberStatus | null>;

  /** The tenant's Stripe signing secrets, expired ones included (the caller filters by time); null: no such tenant. */
  getStripeSigningSecrets(slug: string): Promise<{ tenantId: number; secrets: Credential<string>[] } | null>;

  countTenants(): Promise<number>;
  createTenant(tenant: NewTenant, now: Date): Promise<CreateTenantResult>;
  listTenants(): Promise<TenantRecord[]>;
  getTenant(slug: string): Promise<TenantRecord | null>;
  /** Applies the patch and, in the same transaction, the rotation when one is given. */
  updateTenant(slug: string, patch: Partial<TenantSettings>, now: Date, rotation?: CredentialRotation): Promise<UpdateTenantResult>;
  /**
   * Adds a credential and makes every current one of the same kind expire `overlapS` seconds
   * from `now` (a rotation). The material is a hash for publishable keys, a secret otherwise.
   */
  rotateCredential(tenantId: number, kind: CredentialKind, material: string, overlapS: number, now: Date): Promise<void>;

  /**
   * An admin's action (CONTRACT.md section 5): a status that overrides the episodes as of
   * `cause.occurredAt`, or a removal. `stale` when a Stripe event dated later has spoken.
   */
  applyChange(tenantId: number, customerId: string, change: Change, cause: ChangeCause, now: Date): Promise<ApplyOutcome>;
  /** Null only when the store holds neither a record nor a history for the customer. */
  getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null>;
  /**
   * Keeps a Stripe event and applies its derivation in one transaction. A redelivered
   * event id is a `duplicate` and changes nothing.
   */
  recordStripeEvent(tenantId: number, input: StripeEventInput, now: Date): Promise<StripeEventResult>;
  /**
   * Several events, each in its own transaction, in the order given; with `dryRun`, all of
   * them in one transaction that is rolled back, so that the results say what they would do.
   */
  recordStripeEvents(tenantId: number, inputs: readonly StripeEventInput[], now: Date, options?: { dryRun?: boolean }): Promise<StripeEventResult[]>;

  listTiers(): Promise<TierRecord[]>;
  putTier(name: string, entitlements: Entitlements, now: Date): Promise<TierRecord>;

  /** This instance's own writes, each reported once committed. */
  onInvalidate(listener: (invalidation: Invalidation) => void): () => void;
  /** Every instance's committed writes, through the database's notifications (migration 003). */
  listenForInvalidations(handlers: InvalidationHandlers): Promise<() => Promise<void>>;

  /** Throws when the store cannot answer a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
