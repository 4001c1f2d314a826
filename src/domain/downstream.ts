import type { ChangeCause } from './history.js';
import { formatLockoutAt } from './policy.js';
import type { CustomerStatus } from './stripe/fold.js';
import type { DownstreamCause, DownstreamEventType, DownstreamPayload } from './downstream-endpoints.js';

/**
 * The downstream message of a change (docs/webhooks.md): what a tenant's backend hears of one
 * subscriber's change, built here as a value, in one place, and written by the store in the
 * transaction of the change (the outbox). Pure: the message's id and the clock are the caller's.
 */

/** Where the tenant's messages go, as the store read it in the transaction of the change. */
export interface DownstreamTarget {
  /** The tenant's slug, named in every message. */
  slug: string;
  /** The mode of the change's data space: true live, false test (docs/test-mode.md). */
  livemode: boolean;
  /** The tenant's endpoints (none when its tier does not include downstream webhooks). */
  endpoints: readonly DownstreamEndpoint[];
  /** The customer's last sequence number; 0 before its first message. */
  lastSequence: number;
  /** The id the message of this change takes (msg_...). */
  messageId: string;
}

export interface DownstreamEndpoint {
  /** The endpoint's key in the store. */
  key: number;
  enabled: boolean;
  /** The event types it takes; null: every one. */
  eventTypes: readonly string[] | null;
}

/** One change of a customer's answered status or reason, as a write saw it. */
export type DownstreamChange =
  | {
      type: 'subscriber.status_changed';
      before: CustomerStatus | null;
      after: CustomerStatus;
      /** While `after` is `warning`: when the policy's scheduled lockout falls. */
      lockoutAtMs: number | null;
    }
  | { type: 'subscriber.deleted'; before: CustomerStatus };

/** A message for the outbox, and the deliveries it starts. */
export interface OutboxMessage {
  id: string;
  type: DownstreamEventType;
  /** The customer's next sequence number: receivers order a customer's messages by it. */
  sequence: number;
  payload: DownstreamPayload;
  /**
   * The endpoints it is delivered to: the enabled ones that take its type. A message is kept
   * even when there is none, so that a replay can send it once one is enabled again.
   */
  endpointKeys: number[];
}

/** A change's cause as a message tells it. */
export function webhookCause(cause: ChangeCause): DownstreamCause {
  if (cause.source === 'stripe')
    return { source: 'stripe', stripe_event_id: cause.eventId, stripe_event_type: cause.eventType };
  if (cause.source === 'policy') return { source: 'policy', rule: cause.policyRule ?? 'policy_changed' };
  const action = { source: 'admin' as const, action: cause.adminAction ?? 'set_status' };
  return cause.secretKeyId === undefined ? action : { ...action, secret_key_id: cause.secretKeyId };
}

function payloadOf(
  id: string,
  slug: string,
  livemode: boolean,
  customerId: string,
  sequence: number,
  change: DownstreamChange,
  cause: ChangeCause,
  now: Date,
): DownstreamPayload {
  const common = {
    processor_customer_id: customerId,
    sequence,
    cause: webhookCause(cause),
    occurred_at: cause.occurredAt.toISOString(),
  };
  const envelope = { id, tenant: slug, livemode, timestamp: now.toISOString() };
  if (change.type === 'subscriber.deleted') {
    return {
      ...envelope,
      type: change.type,
      data: { ...common, from: change.before.status, previous_reason: change.before.reason },
    };
  }
  return {
    ...envelope,
    type: change.type,
    data: {
      ...common,
      from: change.before?.status ?? null,
      to: change.after.status,
      reason: change.after.reason,
      previous_reason: change.before?.reason ?? null,
      ...(change.lockoutAtMs !== null ? { lockout_at: formatLockoutAt(change.lockoutAtMs) } : {}),
    },
  };
}

/**
 * The message of `change` for the tenant's endpoints; null when the tenant has none (or its
 * tier does not include downstream webhooks): then nothing is written, not even a sequence
 * number.
 */
export function downstreamMessage(
  target: DownstreamTarget | null,
  customerId: string,
  change: DownstreamChange,
  cause: ChangeCause,
  now: Date,
): OutboxMessage | null {
  if (target === null || target.endpoints.length === 0) return null;
  const sequence = target.lastSequence + 1;
  return {
    id: target.messageId,
    type: change.type,
    sequence,
    payload: payloadOf(target.messageId, target.slug, target.livemode, customerId, sequence, change, cause, now),
    endpointKeys: target.endpoints
      .filter((e) => e.enabled && (e.eventTypes === null || e.eventTypes.includes(change.type)))
      .map((e) => e.key),
  };
}
