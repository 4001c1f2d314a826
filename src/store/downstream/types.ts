import type { DeliveryOutcome, DeliveryState, EndpointDisabledReason } from '../../domain/downstream-endpoints.js';

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
export interface Outbox {
  /** The customer's messages, newest first (by their sequence number), at most `limit`. */
  listCustomerMessages(tenantId: number, customerId: string, limit: number): Promise<CustomerMessageRecord[]>;
}

/** The outbox of downstream webhooks: its endpoints, its queue, and each customer's messages. */
export interface DownstreamStore {
  endpoints: EndpointStore;
  outbox: Outbox;
  queue: DeliveryQueue;
}
