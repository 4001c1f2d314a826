import type { SecretKeyStore } from './keys/secret-keys.js';
import type { ConsoleSessionStore } from './sessions/console-sessions.js';
import type { Analytics } from './analytics/analytics.js';
import type { Branding } from '../domain/branding.js';
import type { FeedCursor, ListCursor } from '../domain/feed-cursor.js';
import type { AdminAction, ChangeCause, HistoryEffect, HistorySource } from '../domain/history.js';
import type { Policy, PolicyRule } from '../domain/policy.js';
import type { ListenHandlers } from './db/db.js';
import type { ApplicableDerivation } from '../domain/stripe/decide.js';
import type { Facts } from '../domain/stripe/derive.js';
import type { Change, CustomerStatus, EpisodeState } from '../domain/stripe/fold.js';
import type { Credential, Entitlements, SubscriberStatus, TenantAuth } from '../domain/types.js';
import type { DeliveryOutcome, DeliveryState, EndpointDisabledReason } from '../domain/downstream-endpoints.js';
import type { StripeEventOutcomeName } from '../domain/stripe/outcomes.js';
import type { StripeIntakeCount, StripeIntakeKind } from '../domain/stripe/intake.js';

export type CredentialKind = 'publishable_key' | 'hmac_secret' | 'stripe_webhook_secret';

/** A new credential; the current ones of its kind expire `overlapS` seconds later. */
export interface CredentialRotation {
  kind: CredentialKind;
  /** A SHA-256 hex digest for publishable keys, the secret itself otherwise. */
  material: string;
  overlapS: number;
  /** Who made it: recorded beside it (tenant_credential_changes, migration 021) when given. */
  by?: CredentialActor;
}

/** The operator, or the tenant's secret key (by its id) that made a change. */
export type CredentialActor = { kind: 'operator' } | { kind: 'key'; keyId: string };

/** One recorded change of a credential: when, and the operator or the key (as it was then) that made it. */
export interface CredentialChange {
  kind: CredentialKind;
  at: Date;
  by: { kind: 'operator' } | { kind: 'key'; id: string; prefix: string; name: string };
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
  /** How derived statuses are enforced (CONTRACT.md section 6). */
  policy: Policy;
  /** Stripe events taken: live only (true), test only (false), or both (null). */
  livemode: boolean | null;
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
  /** Any of the policy's fields: the others keep their values. */
  policy: Partial<Policy>;
  livemode: boolean | null;
}

export interface NewTenant extends Omit<
  TenantSettings,
  'suspended' | 'lookupsPerMinute' | 'branding' | 'policy' | 'livemode'
> {
  lookupsPerMinute?: number | null;
  branding?: Branding;
  policy?: Policy;
  /** Default null: both modes. */
  livemode?: boolean | null;
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

export type { ChangeCause };

export interface HistoryEntry {
  /** The answered status after this entry; null: no record (removed, or never known). */
  status: SubscriberStatus | null;
  /** The status before the tenant's policy. */
  derivedStatus: SubscriberStatus | null;
  lockoutAt: Date | null;
  policyRule: PolicyRule | null;
  /** The tenant's secret key that made an admin change; null: the operator, or not an admin change. */
  secretKeyId: string | null;
  /** What an admin change was; null: not an admin change, or one recorded before this was kept. */
  adminAction: AdminAction | null;
  reason: string | null;
  effect: HistoryEffect;
  /** The episode the change came through (a subscription or invoice id), when one did. */
  episode: string | null;
  source: HistorySource;
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
  dunningStartedAt: Date | null;
  resolvedAt: Date | null;
  invoice: InvoiceRecord | null;
}

/** What Stripe last told of an invoice. */
export interface InvoiceRecord {
  id: string;
  status: string | null;
  amountDue: number | null;
  amountRemaining: number | null;
  currency: string | null;
  hostedInvoiceUrl: string | null;
}

/**
 * A subscriber as the admin API shows it. A cleared or deleted customer whose history is
 * kept has `status` null.
 */
export interface SubscriberRecord {
  processorCustomerId: string;
  /** The answered status. */
  status: SubscriberStatus | null;
  derivedStatus: SubscriberStatus | null;
  lockoutAt: Date | null;
  payUrl: string | null;
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

/** What a non-active answer carries beside its status (null: nothing). */
export interface SubscriberExtra {
  /** While `warning`: when the policy's scheduled lockout falls, in epoch seconds. */
  lockoutAtS: number | null;
  /** The hosted page of the invoice to pay. */
  payUrl: string | null;
}

/**
 * A tenant whose row or credentials cannot be read for the lookup (a sealed secret that does
 * not open: altered, or copied from another row). It is left out of the read so that it costs
 * that tenant only; `reason` names the row and the kind of secret, never its value.
 */
export interface UnreadableTenant {
  id: number;
  slug: string;
  reason: string;
}

/** Receives a snapshot load: the tenants and the subscriber count first, then each subscriber. */
export interface LookupStateSink {
  begin(subscribers: number, tenants: readonly TenantAuth[], unreadable: readonly UnreadableTenant[]): void;
  /** A subscriber, its customer id as the ASCII bytes `bytes[start..end)` of the load's stream: no string per row. */
  subscriber(
    tenantId: number,
    bytes: Uint8Array,
    start: number,
    end: number,
    status: SubscriberStatus,
    extra: SubscriberExtra | null,
  ): void;
}

/** The changes a reader at some position had not seen, each key with its value now. */
export interface LookupChanges {
  position: ChangePosition;
  /** The log was pruned past the position: changes may be missing, so the reader reloads. */
  gap: boolean;
  /**
   * Changed tenants: as they are now, or null when deleted or unreadable (then `unreadable`
   * says which and why).
   */
  tenants: { id: number; tenant: TenantAuth | null; unreadable?: UnreadableTenant }[];
  /** Changed subscribers: their status now, or null when they have no record any more. */
  subscribers: {
    tenantId: number;
    customerId: string;
    status: SubscriberStatus | null;
    extra: SubscriberExtra | null;
  }[];
}

export type ApplyOutcome = Extract<StripeEventOutcomeName, 'applied' | 'stale'>;
/**
 * What the store answers of one event (the outcomes of STRIPE_EVENT_OUTCOMES an event that
 * reaches it can have); pending: a decline not linked to an invoice (yet), it gates only once
 * an invoice event links it.
 */
export type StripeEventOutcome = Exclude<StripeEventOutcomeName, 'irrelevant' | 'livemode_mismatch'>;

/** What one event did: its outcome, and the customer's status before and after it (null: unknown). */
export interface StripeEventResult {
  outcome: StripeEventOutcome;
  customerId: string | null;
  before: CustomerStatus | null;
  after: CustomerStatus | null;
}

/** A relevant event's derivation: what the store applies. */
export type StripeDerivation = ApplicableDerivation;

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
  /** Answered statuses (any of them). */
  status?: readonly SubscriberStatus[];
  /** Derived statuses, before the tenant's policy (any of them). */
  derivedStatus?: readonly SubscriberStatus[];
  reason?: string;
  /** Only those whose record changed at or after this instant. */
  updatedSince?: Date;
  /** The last customer id of the previous page (keyset pagination). */
  after?: string;
  limit: number;
}

export interface SubscriberListRow {
  derivedStatus: SubscriberStatus;
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
export type RetainedTable =
  'stripe_events' | 'subscriber_history' | 'webhook_events' | 'webhook_attempts' | 'status_changes' | 'stripe_intake';

/**
 * A subscriber's answer as the status feed gives it to its tenant (docs/feed.md): what a
 * signed lookup answers, as stored.
 */
export interface StatusEntry {
  customerId: string;
  status: SubscriberStatus;
  /** While `warning`: when the scheduled lockout falls, in epoch seconds (rounded up, as the lookup); null: none. */
  lockoutAtS: number | null;
  /** While not `active`: the hosted page of the invoice to pay; null: none known. */
  payUrl: string | null;
}

/** A page of a tenant's subscribers answered other than `active`, in customer id order. */
export interface StatusListPage {
  entries: StatusEntry[];
  /** The next page's cursor; null: this was the last. */
  next: ListCursor | null;
  /** Where the feed continues once the whole list is read: the first page's snapshot, on every page. */
  feedCursor: FeedCursor;
}

/** One change of a subscriber's answer; `active` for one that has no record any more. */
export interface StatusChange extends StatusEntry {
  /** Resumes right after this change. */
  cursor: FeedCursor;
  occurredAt: Date;
}

/**
 * What came after a feed cursor: the changes (per subscriber in the order they committed)
 * and where to go on; `expired` when the changes after it were pruned (list again).
 */
export type StatusChanges = { expired: true } | { expired: false; changes: StatusChange[]; next: FeedCursor };

/** The status feed's reads (migration 014): a tenant's non-active subscribers, then their changes. */
export interface StatusFeed {
  /** A page of `limit` at most; the first (cursor null) takes the position the feed continues from. */
  listStatuses(tenantId: number, cursor: ListCursor | null, limit: number): Promise<StatusListPage>;
  /** At most `limit` changes the cursor had not seen, in `seq` order, and the cursor after them. */
  statusChangesAfter(tenantId: number, cursor: FeedCursor, limit: number): Promise<StatusChanges>;
}

export type DeleteTierResult = 'deleted' | 'not_found' | 'in_use';

export type CreateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'exists' | 'unknown_tier' };
export type UpdateTenantResult =
  { ok: true; tenant: TenantRecord } | { ok: false; error: 'not_found' | 'unknown_tier' };

/**
 * Tenants, their credentials and the tiers they are on: what the operator's API and the
 * tenant's settings change.
 */
export interface TenantStore {
  getTenantAuth(slug: string): Promise<TenantAuth | null>;
  countTenants(): Promise<number>;
  createTenant(tenant: NewTenant, now: Date): Promise<CreateTenantResult>;
  listTenants(): Promise<TenantRecord[]>;
  getTenant(slug: string): Promise<TenantRecord | null>;
  /** Applies the patch and, in the same transaction, the rotation when one is given. */
  updateTenant(
    slug: string,
    patch: Partial<TenantSettings>,
    now: Date,
    rotation?: CredentialRotation,
  ): Promise<UpdateTenantResult>;
  /**
   * Adds a credential and makes every current one of the same kind expire `overlapS` seconds
   * from `now` (a rotation). The material is a hash for publishable keys, a secret otherwise.
   */
  rotateCredential(
    tenantId: number,
    kind: CredentialKind,
    material: string,
    overlapS: number,
    now: Date,
  ): Promise<void>;
  /** The tenant's credentials still in force at `now` (expired ones are left out). */
  listCredentials(tenantId: number, now: Date): Promise<CredentialSummary[]>;
  /** The tenant's recorded changes of credentials of `kind`, the latest first, `limit` at most. */
  credentialChanges(tenantId: number, kind: CredentialKind, limit: number): Promise<CredentialChange[]>;
  /** Deletes the tenant and everything it owns (credentials, subscribers, history, Stripe events); false: no such tenant. */
  deleteTenant(tenantId: number): Promise<boolean>;
  listTiers(): Promise<TierRecord[]>;
  putTier(name: string, entitlements: Entitlements, now: Date): Promise<TierRecord>;
  /** Deletes a tier no tenant is on. */
  deleteTier(name: string): Promise<DeleteTierResult>;
}

/** A tenant's subscribers: read, listed, counted, and changed by an admin's (or a tenant key's) action. */
export interface SubscriberStore {
  getSubscriberStatus(tenantId: number, customerId: string): Promise<SubscriberStatus | null>;
  /**
   * An admin's action (docs/stripe.md, statuses from dunning episodes): a status that overrides the episodes as of
   * `cause.occurredAt`, its clearing, or a removal. `stale` when a Stripe event dated later has spoken.
   */
  applyChange(
    tenantId: number,
    customerId: string,
    change: Change,
    cause: ChangeCause,
    now: Date,
  ): Promise<ApplyOutcome>;
  /** A page of the tenant's subscribers in customer id order, and whether more follow. */
  listSubscribers(tenantId: number, query: SubscriberListQuery): Promise<{ rows: SubscriberListRow[]; more: boolean }>;
  /** How many subscribers the tenant has in each status. */
  countSubscribers(
    tenantId: number,
  ): Promise<{ answered: Record<SubscriberStatus, number>; derived: Record<SubscriberStatus, number> }>;
  /** Null only when the store holds neither a record nor a history for the customer. */
  getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null>;
}

/** The tenant's Stripe events: their signing secrets, and each event kept with its effect. */
export interface StripeIngestion {
  /**
   * The tenant's Stripe signing secrets, expired ones included (the caller filters by time),
   * and the mode of the events it takes; null: no such tenant.
   */
  getStripeSigningSecrets(
    slug: string,
  ): Promise<{ tenantId: number; livemode: boolean | null; secrets: Credential<string>[] } | null>;
  /**
   * Keeps a Stripe event and applies its derivation in one transaction. A redelivered
   * event id is a `duplicate` and changes nothing.
   */
  recordStripeEvent(tenantId: number, input: StripeEventInput, now: Date): Promise<StripeEventResult>;
  /**
   * Several events, each in its own transaction, in the order given; with `dryRun`, all of
   * them in one transaction that is rolled back, so that the results say what they would do.
   */
  recordStripeEvents(
    tenantId: number,
    inputs: readonly StripeEventInput[],
    now: Date,
    options?: { dryRun?: boolean },
  ): Promise<StripeEventResult[]>;
}

export type { StripeIntakeCount, StripeIntakeKind };

/** One UTC day of a tenant's Stripe intake: a count per kind. */
export interface StripeIntakeDay {
  /** YYYY-MM-DD. */
  day: string;
  counts: Record<StripeIntakeKind, number>;
}

/** A tenant's Stripe intake as kept: the days from some day on, and the last of each kind. */
export interface StripeIntakeSummary {
  /** Oldest first; only days with a row. */
  days: StripeIntakeDay[];
  /** The latest of each kind among every day still kept (whatever the range of `days`); null: none. */
  lastAt: Record<StripeIntakeKind, Date | null>;
}

/**
 * The Stripe intake counters (migration 016): counted in memory by each process, added here
 * in batches, read by the tenant's health.
 */
export interface StripeIntakeStore {
  /**
   * Adds the counts, one row per (tenant, day, kind), in one statement; `last_at` only ever
   * moves later. Counts of a tenant deleted meanwhile are dropped.
   */
  addStripeIntake(counts: readonly StripeIntakeCount[]): Promise<void>;
  /** The tenant's days from `since` (a UTC midnight) on, and the last of each kind ever kept. */
  stripeIntake(tenantId: number, since: Date): Promise<StripeIntakeSummary>;
}

/**
 * The change log every process's read model follows (migration 006): a snapshot, then
 * every change committed since a position, woken by notifications.
 */
export interface ChangeFeed {
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
}

/** What runs on a clock: pruning by age, scheduled lockouts, policy sweeps, health. */
export interface Maintenance {
  /**
   * Deletes at most `batch` rows of `table` older than `before` (Stripe events by when they
   * were received; history entries by when they were recorded, never a subscriber's newest;
   * status changes by when they happened, recording the feed's horizon; Stripe intake
   * counters by their day), in one short transaction. Returns how many; 0 when none is left,
   * or when another instance is pruning the same table at that moment.
   */
  pruneOld(table: RetainedTable, before: Date, batch: number): Promise<number>;
  /**
   * Records, as of their time, at most `limit` scheduled lockouts that fell due by the
   * database's `now()` (a grace that ended, an escalation), each once whichever instances
   * race; returns how many were recorded. `notAfter` (null in service) can only hold a record
   * back: an instance's clock never brings one forward.
   */
  recordDueLockouts(notAfter: Date | null, limit: number): Promise<number>;
  /**
   * Applies one batch (at most `batch` subscribers, one short transaction) of a tenant's
   * policy change that is still going through its subscribers; returns how many were seen,
   * and whether it took a batch (false: none is left, or each is another instance's now).
   */
  sweepPolicy(notAfter: Date | null, batch: number): Promise<{ seen: number; pending: boolean }>;
  /** Throws when the store cannot answer a trivial query. */
  ping(): Promise<void>;
  /** The database's clock (`clock_timestamp()`): what an instance's own clock is compared with. */
  databaseTime(): Promise<Date>;
}

/**
 * Everything Dunwall keeps, as one object with one role per interface: each consumer takes
 * the role it uses (the read model the change feed, the deliverer the queue, the policy
 * clock the maintenance), so that a test passes a small fake. The lookup reads none of it
 * directly: each process holds a copy of what it needs (src/readmodel/).
 */
export interface Store
  extends
    TenantStore,
    SubscriberStore,
    StripeIngestion,
    StripeIntakeStore,
    ChangeFeed,
    StatusFeed,
    Maintenance,
    SecretKeyStore,
    Analytics,
    ConsoleSessionStore {
  readonly engine: 'postgres' | 'embedded';
  /** Downstream webhooks: endpoints, the outbox and its deliveries. */
  readonly downstream: DownstreamStore;
  close(): Promise<void>;
}

/** A downstream webhook endpoint of a tenant (docs/webhooks.md). */
export interface DownstreamEndpointRecord {
  /** The public id (ep_...). */
  id: string;
  url: string;
  description: string;
  /** Null: every event type. */
  eventTypes: string[] | null;
  enabled: boolean;
  disabledReason: EndpointDisabledReason | null;
  disabledDetail: string | null;
  disabledAt: Date | null;
  /** Since when every attempt failed; null after a success. */
  failingSince: Date | null;
  /** The signing secrets in force: the current one, and the one it replaced during the overlap. */
  secrets: { createdAt: Date; expiresAt: Date | null }[];
  /** Deliveries waiting for an attempt. */
  pending: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewDownstreamEndpoint {
  url: string;
  description: string;
  eventTypes: string[] | null;
  secret: string;
}

/** The endpoint created, or why not: the tenant has as many as allowed, or is gone. */
export type CreateEndpointResult = DownstreamEndpointRecord | 'limit_reached' | 'tenant_not_found';

export interface DownstreamEndpointPatch {
  url?: string;
  description?: string;
  eventTypes?: string[] | null;
  enabled?: boolean;
}

export type { DeliveryOutcome };

export interface DownstreamAttemptRecord {
  messageId: string;
  attemptedAt: Date;
  statusCode: number | null;
  latencyMs: number;
  outcome: DeliveryOutcome;
  error: string | null;
}

export interface DownstreamMessageRecord {
  messageId: string;
  type: string;
  processorCustomerId: string;
  sequence: number;
  createdAt: Date;
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: Date | null;
  lastAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
}

/** A delivery taken by one instance for one attempt: nobody else takes it until `leasedUntil`. */
export interface ClaimedDelivery {
  endpointKey: number;
  endpointId: string;
  eventKey: number;
  messageId: string;
  url: string;
  payload: string;
  /** The signing secrets in force, newest first: each signs the message. */
  secrets: string[];
  /** This attempt's number, from 1. */
  attempt: number;
  giveUpAt: Date;
  leaseToken: string;
  /** The endpoint's tenant: the deliverer counts each tenant's attempts under way. */
  tenantId: number;
}

/** What an attempt came to. */
export interface AttemptResult {
  outcome: Exclude<DeliveryOutcome, 'gave_up'>;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** When to try again after a failure. */
  retryAt: Date;
}

export interface ClaimResult {
  deliveries: ClaimedDelivery[];
  /** Deliveries were due: worth claiming again once room frees (some may have been held back by a cap or a lock). */
  due: boolean;
  /**
   * Endpoints with deliveries due whose signing secret does not open: left pending and
   * skipped for a while, so that the others are sent. `reason` names the row, never a secret.
   */
  unreadable?: { endpointId: string; tenantId: number; reason: string }[];
  /**
   * A tenant with no attempt under way in the claiming process had a delivery due that found
   * no room: the process is full of other tenants' attempts (the deliverer may cut one).
   */
  waiting?: boolean;
}

export interface ClaimLimits {
  /** Attempts under way at once per endpoint, across instances. */
  perEndpoint: number;
  /**
   * Attempts under way at once for one tenant's endpoints, so that one tenant's slow
   * receivers cannot take every slot of a process (approximate across instances).
   */
  perTenant: number;
  /** Deliveries taken by one claim at most: the claiming process's free slots (0: only `waiting` is answered). */
  batch: number;
  /**
   * Of `batch`, what tenants in `busyTenants` may take together; the rest is kept for
   * tenants with no attempt under way in the process, one slot each per claim. Default: all.
   */
  shared?: number;
  /**
   * Tenants with attempts under way in the claiming process: the others' endpoints come
   * first, so that a slot that frees goes to a tenant that holds none.
   */
  busyTenants?: readonly number[];
  /** How long a taken delivery is this instance's. */
  leaseMs: number;
}

export interface ReplayRange {
  since: Date;
  until: Date;
  /** Go on after this message (created at `since`): the `next` of the previous page. */
  after?: string;
}

export interface ReplayPage {
  queued: number;
  next: { since: Date; after: string } | null;
}

/** A tenant's deliveries at a glance (its health). */
export interface DeliveryHealth {
  /** Deliveries waiting for an attempt, on any of its endpoints. */
  pending: number;
  /** When the oldest of them was queued; null: none waits. */
  oldestPendingAt: Date | null;
  /** Deliveries that gave up (their retry window ended, or the endpoint answered 410) since the given time. */
  failed: number;
  endpoints: number;
  disabledEndpoints: number;
}

/** A tenant's downstream webhook endpoints and their messages, as the admin and tenant APIs show them. */
export interface EndpointStore {
  /**
   * A new endpoint, unless the tenant has `maxPerTenant` already (counted and inserted under
   * the tenant's row lock, so that the limit holds whatever runs in parallel).
   */
  createEndpoint(
    tenantId: number,
    endpoint: NewDownstreamEndpoint,
    now: Date,
    maxPerTenant: number,
  ): Promise<CreateEndpointResult>;
  listEndpoints(tenantId: number, now: Date): Promise<DownstreamEndpointRecord[]>;
  getEndpoint(tenantId: number, id: string, now: Date): Promise<DownstreamEndpointRecord | null>;
  /** Enabling clears the reason it was disabled and its failing streak. */
  updateEndpoint(
    tenantId: number,
    id: string,
    patch: DownstreamEndpointPatch,
    now: Date,
  ): Promise<DownstreamEndpointRecord | null>;
  deleteEndpoint(tenantId: number, id: string): Promise<boolean>;
  /** A new signing secret; the current one keeps signing for `overlapS` seconds. False: no such endpoint. */
  rotateEndpointSecret(tenantId: number, id: string, secret: string, overlapS: number, now: Date): Promise<boolean>;
  /** The endpoint's latest attempts, newest first. */
  listAttempts(tenantId: number, id: string, limit: number): Promise<DownstreamAttemptRecord[] | null>;
  /** The endpoint's messages, newest first, optionally of one state. */
  listMessages(
    tenantId: number,
    id: string,
    query: { state?: DownstreamMessageRecord['state']; limit: number },
  ): Promise<DownstreamMessageRecord[] | null>;
  /** Queues the message for the endpoint again, now, for a new retry window. */
  retryMessage(
    tenantId: number,
    id: string,
    messageId: string,
    now: Date,
  ): Promise<'queued' | 'endpoint_not_found' | 'message_not_found'>;
  /**
   * The state of the tenant's deliveries: what waits (on every endpoint, disabled ones
   * included), what gave up since `failedSince`, and how many endpoints it has.
   */
  deliveryHealth(tenantId: number, failedSince: Date): Promise<DeliveryHealth>;
  /**
   * Queues again, now, the tenant's messages created in [since, until) of the endpoint's
   * event types, oldest first, at most `limit`; `next` says where to go on, null when done.
   */
  replay(tenantId: number, id: string, range: ReplayRange, limit: number, now: Date): Promise<ReplayPage | null>;
}

/** The outbox's delivery queue: what the deliverer takes. */
export interface DeliveryQueue {
  /** Takes deliveries due at `now` (FOR UPDATE SKIP LOCKED): each goes to one instance at a time. */
  claim(now: Date, limits: ClaimLimits): Promise<ClaimResult>;
  /**
   * Records an attempt and what follows from it: `gave_up` when its retry window is over,
   * `lost` when the lease was (another instance took the delivery, or it was deleted).
   */
  complete(claim: ClaimedDelivery, result: AttemptResult, now: Date): Promise<'recorded' | 'gave_up' | 'lost'>;
  /** When the oldest delivery still waiting was queued (enabled endpoints only); null: none waits. */
  oldestPendingAt(): Promise<Date | null>;
}

/** A message one customer's change raised, with its delivery to each endpoint it was queued for. */
export interface CustomerMessageRecord {
  messageId: string;
  type: string;
  sequence: number;
  createdAt: Date;
  deliveries: {
    /** The endpoint's public id (ep_...). */
    endpointId: string;
    state: DownstreamMessageRecord['state'];
    attempts: number;
    lastStatus: number | null;
    lastAttemptAt: Date | null;
  }[];
}

/** The webhook messages of one customer, as its page shows them beside its history. */
export interface CustomerMessages {
  /** The customer's messages, newest first (by their sequence number), at most `limit`. */
  listCustomerMessages(tenantId: number, customerId: string, limit: number): Promise<CustomerMessageRecord[]>;
}

/** The outbox of downstream webhooks: its endpoints, its queue, and each customer's messages. */
export interface DownstreamStore extends EndpointStore, DeliveryQueue, CustomerMessages {}
