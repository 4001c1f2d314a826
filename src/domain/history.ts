import type { PolicyRule } from './policy.js';

/**
 * What a subscriber's history keeps of each change (docs/api.md, the subscriber's history):
 * who or what caused it, and what it did to the record.
 */

/** Who caused a change: an admin action, a payment processor event, or the tenant's policy. */
export const HISTORY_SOURCES = ['admin', 'stripe', 'policy'] as const;
export type HistorySource = (typeof HISTORY_SOURCES)[number];

/** changed: the status or its reason changed; removed: the record went; none: kept for the record only. */
export const HISTORY_EFFECTS = ['changed', 'removed', 'none'] as const;
export type HistoryEffect = (typeof HISTORY_EFFECTS)[number];

/** What an admin (or a tenant's secret key) did: set a status (an override), clear it, or remove the record. */
export const ADMIN_ACTIONS = ['set_status', 'clear_override', 'delete'] as const;
export type AdminAction = (typeof ADMIN_ACTIONS)[number];

/** The cause of a status change, as the history and the downstream message tell it. */
export interface ChangeCause {
  source: HistorySource;
  eventId: string | null;
  eventType: string | null;
  declineCode: string | null;
  /** When the cause happened (the event's time); orders changes. */
  occurredAt: Date;
  /** The admin API's action, for an admin cause. */
  adminAction?: AdminAction;
  /** The tenant's secret key that made an admin change (absent: the operator). */
  secretKeyId?: string;
  /** The policy's rule, for a policy cause: a grace that ended, an escalation, a change of policy. */
  policyRule?: PolicyRule;
}
