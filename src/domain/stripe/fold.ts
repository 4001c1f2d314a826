import type { SubscriberStatus } from '../types.js';

/** What an event does to a subscriber: set a status, or remove the record (unknown, so active). */
export type Change = { kind: 'set'; status: SubscriberStatus; reason: string } | { kind: 'delete' };

/**
 * Where a change stands in a customer's history. Changes are ordered by time, then rank,
 * then event id: the last one wins (CONTRACT.md section 5).
 */
export interface Position {
  atMs: number;
  rank: number;
  eventId: string;
}

/**
 * At an equal time, warning < lockout < active: a hard decline outranks a soft one and a
 * same-second payment wins, in the fail-open spirit. A deletion outranks everything: the
 * record is gone, and unknown answers active.
 */
const RANKS: Record<SubscriberStatus | 'deleted', number> = { warning: 1, lockout: 2, active: 3, deleted: 4 };

export function rankOf(change: Change): number {
  return change.kind === 'delete' ? RANKS.deleted : RANKS[change.status];
}

export function positionOf(change: Change, atMs: number, eventId: string): Position {
  return { atMs, rank: rankOf(change), eventId };
}

/** Negative when `a` comes before `b`. Event ids compare by code unit, the same on every machine. */
export function comparePositions(a: Position, b: Position): number {
  if (a.atMs !== b.atMs) return a.atMs < b.atMs ? -1 : 1;
  if (a.rank !== b.rank) return a.rank - b.rank;
  if (a.eventId === b.eventId) return 0;
  return a.eventId < b.eventId ? -1 : 1;
}

/** A change applies only when it comes after the one that set the current state. */
export function supersedes(candidate: Position, current: Position | null): boolean {
  return current === null || comparePositions(candidate, current) > 0;
}

export interface PositionedChange {
  change: Change;
  position: Position;
}

/** The state a set of changes leads to, whatever their order: the last by position wins. */
export function fold(changes: Iterable<PositionedChange>): PositionedChange | null {
  let last: PositionedChange | null = null;
  for (const c of changes) if (supersedes(c.position, last?.position ?? null)) last = c;
  return last;
}

/** The status a lookup answers for the folded state; null: unknown. */
export function statusOf(state: PositionedChange | null): SubscriberStatus | null {
  return state === null || state.change.kind === 'delete' ? null : state.change.status;
}
