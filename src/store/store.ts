import type { Invalidation } from '../cache/invalidation.js';
import type { Facts } from '../domain/stripe/derive.js';
import type { Change } from '../domain/stripe/fold.js';
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
  status: SubscriberStatus | null;
  reason: string | null;
  source: 'admin' | 'stripe';
  eventId: string | null;
  eventType: string | null;
  declineCode: string | null;
  occurredAt: Date;
  recordedAt: Date;
}

export interface SubscriberRecord {
  processorCustomerId: string;
  status: SubscriberStatus;
  reason: string;
  updatedAt: Date;
  history: HistoryEntry[];
}

export interface InvalidationHandlers {
  onInvalidate(invalidation: Invalidation): void;
  onReady(): void;
  onLost(): void;
}

export type ApplyOutcome = 'applied' | 'stale';
export type StripeEventOutcome = ApplyOutcome | 'ignored' | 'duplicate';

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
   * Applies a change to a subscriber when it comes after the change that set its current
   * state (CONTRACT.md section 5); else nothing changes and the answer is `stale`.
   */
  applyChange(tenantId: number, customerId: string, change: Change, cause: ChangeCause, now: Date): Promise<ApplyOutcome>;
  getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null>;
  /**
   * Keeps a Stripe event and applies its change in one transaction. A redelivered event id
   * is a `duplicate` and changes nothing; `change` null: the event changes nothing (`ignored`).
   */
  recordStripeEvent(tenantId: number, event: StripeEventRecord, change: Change | null, now: Date): Promise<StripeEventOutcome>;

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
