import type { SubscriberStatus } from '../types.js';

/**
 * A subscriber's status follows its dunning episodes (docs/stripe.md, statuses from dunning episodes): one per
 * subscription, or per automatically collected invoice that belongs to none. Each episode
 * is set by the last of its events; the customer shows the worst unresolved one.
 */
export const EPISODE_STATES = ['warning', 'lockout', 'resolved'] as const;
export type EpisodeState = (typeof EPISODE_STATES)[number];
/** An episode still in dunning: what the tenant's policy answers. */
export type UnresolvedState = Exclude<EpisodeState, 'resolved'>;

/** What one event does to its episode. */
export interface EpisodeOutcome {
  state: EpisodeState;
  reason: string;
}

/** An admin action on a subscriber: set a status as of now (an override), or forget it. */
/** An admin's (or a tenant key's) action: set an override, clear it (back to what the episodes say), or forget the customer. */
export type Change = { kind: 'set'; status: SubscriberStatus; reason: string } | { kind: 'clear' } | { kind: 'delete' };

/**
 * Where an event stands among the events of its episode or customer. Ordered by time,
 * then rank, then event id: the last one wins, whatever the arrival order.
 */
export interface Position {
  atMs: number;
  rank: number;
  eventId: string;
}

/**
 * At an equal time, warning < lockout < resolved: a hard decline outranks a soft one and a
 * same-second payment wins, in the fail-open spirit. A removal outranks everything: the
 * record is gone, and unknown answers active.
 */
export const RANKS: Readonly<Record<EpisodeState | 'removed', number>> = {
  warning: 1,
  lockout: 2,
  resolved: 3,
  removed: 4,
};

/** Negative when `a` comes before `b`. Event ids compare by code unit, the same on every machine. */
export function comparePositions(a: Position, b: Position): number {
  if (a.atMs !== b.atMs) return a.atMs < b.atMs ? -1 : 1;
  if (a.rank !== b.rank) return a.rank - b.rank;
  if (a.eventId === b.eventId) return 0;
  return a.eventId < b.eventId ? -1 : 1;
}

/** An event applies only when it comes after the one that set the current state. */
export function supersedes(candidate: Position, current: Position | null): boolean {
  return current === null || comparePositions(candidate, current) > 0;
}

export interface Episode {
  key: string;
  outcome: EpisodeOutcome;
  position: Position;
}

/** An admin's status, standing until a Stripe event dated in a later second changes an episode. */
export interface Override {
  status: SubscriberStatus;
  reason: string;
  atMs: number;
}

export interface CustomerStatus {
  status: SubscriberStatus;
  reason: string;
}

/** How severe an episode's state is: the customer shows its most severe unresolved episode. */
export const EPISODE_SEVERITY: Readonly<Record<EpisodeState, number>> = { resolved: 0, warning: 1, lockout: 2 };

/**
 * The customer's status: an override while it stands; else the most severe unresolved
 * episode (the latest among equals) with its reason; else `active` with the reason of the
 * most recently resolved episode; null with no episode at all (unknown, so the lookup
 * answers active and the customer is not "known").
 */
export function customerStatus(episodes: readonly Episode[], override: Override | null): CustomerStatus | null {
  if (override !== null) return { status: override.status, reason: override.reason };
  let worst: Episode | null = null;
  for (const e of episodes) {
    if (worst === null) {
      worst = e;
      continue;
    }
    const bySeverity = EPISODE_SEVERITY[e.outcome.state] - EPISODE_SEVERITY[worst.outcome.state];
    if (bySeverity > 0 || (bySeverity === 0 && comparePositions(e.position, worst.position) > 0)) worst = e;
  }
  if (worst === null) return null;
  const { state, reason } = worst.outcome;
  return { status: state === 'resolved' ? 'active' : state, reason };
}

/**
 * Whether a Stripe event at `eventAtMs` ends an override set at `override.atMs`: only an
 * event dated in a later second does, since Stripe's times are whole seconds and an
 * event of the same second may well be the one the admin was correcting.
 */
export function endsOverride(override: Override, eventAtMs: number): boolean {
  return Math.floor(eventAtMs / 1000) > Math.floor(override.atMs / 1000);
}
