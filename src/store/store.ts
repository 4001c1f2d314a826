import type { Branding } from '../domain/branding.js';
import type { ListenHandlers } from './db.js';
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
  /** What the snippet shows with a banner or a gate ({}: its defaults). */
  branding: Branding;
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
  branding: Branding;
}

export interface NewTenant extends Omit<TenantSettings, 'suspended' | 'lookupsPerMinute' | 'branding'> {
  lookupsPerMinute?: number | null;
  branding?: Branding;
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

/**
 * Where a reader of the change log (migration 006) stands: the snapshot it last read at,
 * opaque to all but the store.
 */
export type ChangePosition = string;

/** Receives a snapshot load: the tenants and the subscriber count first, then each subscriber. */
export interface LookupStateSink {
  begin(subscribers: number, tenants: readonly TenantAuth[]): void;
  /** A subscriber, its customer id as the ASCII bytes `bytes[start..end)` of the load's stream: no string per row. */
  subscriber(tenantId: number, bytes: Uint8Array, start: number, end: number, status: SubscriberStatus): void;
}

/** The changes a reader at some position had not seen, each key with its value now. */
export interface LookupChanges {
  position: ChangePosition;
  /** The log was pruned past the position: changes may be missing, so the reader reloads. */
  gap: boolean;
  /** Changed tenants: as they are now, or null when deleted. */
  tenants: { id: number; tenant: TenantAuth | null }[];
  /** Changed subscribers: their status now, or null when they have no record any more. */
  subscribers: { tenantId: number; customerId: string; status: SubscriberStatus | null }[];
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

/** A page of a tenant's subscribers, by customer id. */
export interface SubscriberListQuery {
  status?: SubscriberStatus;
  reason?: string;
  /** Only those whose record changed at or after this instant. */
  updatedSince?: Date;
  /** The last customer id of the previous page (keyset pagination). */
  after?: string;
  limit: number;
}

export interface SubscriberListRow {
  processorCustomerId: string;
  status: SubscriberStatus;
  reason: string;
  updatedAt: Date;
}

/** What a tenant's credentials look like to an operator: never their material. */
export interface CredentialSummary {
  kind: CredentialKind;
  createdAt: Date;
  /** Null: current with no end; else it stops working then (a replaced key in its overlap). */
  expiresAt: Date | null;
}

/** The tables that grow with traffic and are pruned by age. */
export type RetainedTable = 'stripe_events' | 'subscriber_history';

export type DeleteTierResult = 'deleted' | 'not_found' | 'in_use';

export type CreateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'exists' | 'unknown_tier' };
export type UpdateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'not_found' | 'unknown_tier' };

/**
 * Everything Dunwall keeps. The lookup reads none of it directly: each process holds a copy
 * of what it needs (src/readmodel/), loaded with `loadLookupState` and kept true with
 * `lookupChangesSince`.
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
   * An admin's action (docs/stripe.md, statuses from dunning episodes): a status that overrides the episodes as of
   * `cause.occurredAt`, or a removal. `stale` when a Stripe event dated later has spoken.
   */
  applyChange(tenantId: number, customerId: string, change: Change, cause: ChangeCause, now: Date): Promise<ApplyOutcome>;
  /** A page of the tenant's subscribers in customer id order, and whether more follow. */
  listSubscribers(tenantId: number, query: SubscriberListQuery): Promise<{ rows: SubscriberListRow[]; more: boolean }>;
  /** How many subscribers the tenant has in each status. */
  countSubscribers(tenantId: number): Promise<Record<SubscriberStatus, number>>;
  /** The tenant's credentials still in force at `now` (expired ones are left out). */
  listCredentials(tenantId: number, now: Date): Promise<CredentialSummary[]>;
  /** Deletes the tenant and everything it owns (credentials, subscribers, history, Stripe events); false: no such tenant. */
  deleteTenant(tenantId: number): Promise<boolean>;
  /** Deletes a tier no tenant is on. */
  deleteTier(name: string): Promise<DeleteTierResult>;
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

  /** Everything the lookup reads, as of one snapshot; returns that snapshot's position. */
  loadLookupState(sink: LookupStateSink): Promise<ChangePosition>;
  /** Every change committed since `since` (whatever the order its writers committed in). */
  lookupChangesSince(since: ChangePosition): Promise<LookupChanges>;
  /** Forgets change log rows recorded more than `olderThanMs` ago, by the database's clock; returns how many. */
  pruneLookupChanges(olderThanMs: number): Promise<number>;
  /** This instance's own writes that may change a lookup's answer, each reported once committed. */
  onCommit(listener: () => void): () => void;
  /** A notification for every instance's committed change (migration 006), and for each loss and recovery of the listener. */
  listenForChanges(handlers: ListenHandlers): Promise<() => Promise<void>>;

  /**
   * Deletes at most `batch` rows of `table` older than `before` (Stripe events by when they
   * were received; history entries by when they were recorded, never a subscriber's newest),
   * in one short transaction. Returns how many; 0 when none is left, or when another
   * instance is pruning the same table at that moment.
   */
  pruneOld(table: RetainedTable, before: Date, batch: number): Promise<number>;

  /** Throws when the store cannot answer a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
