import { downstreamMessage } from './downstream.js';
import type { DownstreamTarget, OutboxMessage } from './downstream.js';
import type { ChangeCause, HistoryEffect } from './history.js';
import { answerCustomer } from './policy.js';
import type { Answer, Policy, PolicyEpisode, ScheduledRule } from './policy.js';
import { runChanges } from './runs.js';
import type { RunChange } from './runs.js';
import { EPISODE_SEVERITY, RANKS, comparePositions, customerStatus, endsOverride, supersedes } from './stripe/fold.js';
import type { Change, CustomerStatus, EpisodeState, Override, Position, UnresolvedState } from './stripe/fold.js';
import type { StripeEventOutcomeName } from './stripe/outcomes.js';
import type { SubscriberStatus } from './types.js';

/**
 * What one write does to a customer, as a value (docs/stripe.md, statuses from dunning
 * episodes; docs/reference.md#the-dunning-policy for the policy): its episodes, its record (the answered
 * status under the tenant's policy, the derived one, the scheduled lockout, the pay link),
 * its history entry and its downstream message. The store reads a `CustomerState` under the
 * customer's lock, a decision here turns it into an `Effect`, and the store writes that in
 * the same transaction, with no decision of its own. Pure: the clock is the caller's.
 */

export type { ScheduledRule };

/** The customer's record as stored. */
export interface StoredSubscriber {
  /** The answered status (after the tenant's policy). */
  status: SubscriberStatus;
  /** The status of the episodes, or of the override while it stands. */
  derivedStatus: SubscriberStatus;
  reason: string;
  /** Set while an admin's status overrides the episodes. */
  overriddenAtMs: number | null;
  /** While answered `warning`: when the policy's scheduled lockout falls. */
  lockoutAtMs: number | null;
  lockoutRule: ScheduledRule | null;
  payUrl: string | null;
  /** The customer's card link through Dunwall while not active; absent or null: none. */
  cardUrl?: string | null;
}

/**
 * An episode as stored: its state as the event at `position` set it, the first event of its
 * current unresolved run and its last resolution (null: unknown), and the invoice behind it.
 */
export interface StoredEpisode {
  key: string;
  state: EpisodeState;
  reason: string;
  declineCode: string | null;
  position: Position;
  dunningStartedAtMs: number | null;
  resolvedAtMs: number | null;
  invoiceId: string | null;
}

/** What Stripe last told of an invoice's hosted page. */
export interface InvoicePage {
  hostedInvoiceUrl: string | null;
  /** draft, open, paid, uncollectible or void; null: not told. */
  status: string | null;
}

/** Everything a decision about one customer reads, as the store read it under the customer's lock. */
export interface CustomerState {
  customerId: string;
  subscriber: StoredSubscriber | null;
  /** Every episode of the customer. */
  episodes: readonly StoredEpisode[];
  /** The position of the customer's last removal; null: never removed. */
  tombstone: Position | null;
  policy: Policy;
  /** The invoices the episodes name (and those a Stripe event names), by id; missing: unknown. */
  invoices: ReadonlyMap<string, InvoicePage>;
  /** Where the tenant's messages go; null: nowhere. */
  downstream: DownstreamTarget | null;
  /**
   * The customer's card link through Dunwall, made when the space has a Stripe API key and a
   * public address and the customer may be answered non-active; absent or null: none.
   */
  cardUrl?: string | null;
}

/** The record as a write leaves it. */
export interface SubscriberWrite {
  status: SubscriberStatus;
  derivedStatus: SubscriberStatus;
  reason: string;
  /** The time of the cause: the record's status time, kept only when `statusChanged`. */
  statusAt: Date;
  /** The answered status, the derived one or the reason changed. */
  statusChanged: boolean;
  overriddenAtMs: number | null;
  lockoutAtMs: number | null;
  lockoutRule: ScheduledRule | null;
  payUrl: string | null;
  /** The card link a non-active answer carries (a warning's `card_update_url`); null: none. */
  cardUrl: string | null;
}

/** One entry of the customer's history. */
export interface HistoryRow {
  /** The answered status after the change; null: no record. */
  status: SubscriberStatus | null;
  derivedStatus: SubscriberStatus | null;
  reason: string | null;
  lockoutAtMs: number | null;
  effect: HistoryEffect;
  /** The episode the change came through, when one did. */
  episode: string | null;
  cause: ChangeCause;
}

/** What one write does, for the store to write as it is. */
export interface Effect {
  /** The episodes set or changed, each as it now is. */
  episodes: StoredEpisode[];
  /** The episodes a removal takes away. */
  removedEpisodes: string[];
  /** The customer's new removal position; null: unchanged. */
  tombstone: Position | null;
  /** The record: written as given, deleted, or (null) left as it is. */
  subscriber: { kind: 'write'; row: SubscriberWrite } | { kind: 'delete' } | null;
  history: HistoryRow | null;
  message: OutboxMessage | null;
  /** The dunning runs the episode changes open, extend or end (domain/runs.ts). */
  runs: RunChange[];
}

/** What a change did to the customer's answered status; null: unknown (no record). */
export interface Settled {
  before: CustomerStatus | null;
  after: CustomerStatus | null;
}

/** A decision: its outcome, the status before and after, and the effect to write. */
export interface Decision<O> extends Settled {
  outcome: O;
  effect: Effect;
}

/** The outcome of an admin's action. */
export type ApplyOutcome = Extract<StripeEventOutcomeName, 'applied' | 'stale'>;

export function noEffect(): Effect {
  return {
    episodes: [],
    removedEpisodes: [],
    tombstone: null,
    subscriber: null,
    history: null,
    message: null,
    runs: [],
  };
}

export function statusOf(row: StoredSubscriber | null): CustomerStatus | null {
  return row ? { status: row.status, reason: row.reason } : null;
}

/** An outcome that changes nothing. */
export function unchanged<O>(state: CustomerState, outcome: O): Decision<O> {
  return { outcome, before: statusOf(state.subscriber), after: statusOf(state.subscriber), effect: noEffect() };
}

/** An override stands with the derived status of the record (docs/reference.md#statuses-and-their-derivation). */
export function overrideOf(row: StoredSubscriber | null): Override | null {
  return row !== null && row.overriddenAtMs !== null
    ? { status: row.derivedStatus, reason: row.reason, atMs: row.overriddenAtMs }
    : null;
}

/** The history entry of an action that changed nothing: the record as it is. */
export function unchangedEntry(row: StoredSubscriber | null, episode: string | null, cause: ChangeCause): HistoryRow {
  return {
    status: row?.status ?? null,
    derivedStatus: row?.derivedStatus ?? null,
    reason: row?.reason ?? null,
    lockoutAtMs: row?.lockoutAtMs ?? null,
    effect: 'none',
    episode,
    cause,
  };
}

/** The hosted page of an invoice Stripe still waits on; null when it is paid, void or unknown. */
export function payUrlOf(page: InvoicePage | undefined): string | null {
  if (page === undefined || page.hostedInvoiceUrl === null) return null;
  return page.status === null || page.status === 'open' || page.status === 'uncollectible'
    ? page.hostedInvoiceUrl
    : null;
}

/**
 * The customer's answer under the tenant's policy at `now`, and the pay link of the invoice
 * behind its worst answered episode. The unresolved episodes go to the policy derived worst
 * first (most severe, then latest): among equally severe answers the derived worst is shown.
 */
function answerNow(
  state: CustomerState,
  episodes: readonly StoredEpisode[],
  override: Override | null,
  now: Date,
): { answer: Answer; payUrl: string | null } {
  const unresolved = episodes
    .filter((e) => e.state !== 'resolved')
    .sort((a, b) => EPISODE_SEVERITY[b.state] - EPISODE_SEVERITY[a.state] || comparePositions(b.position, a.position));
  const asked: PolicyEpisode[] = unresolved.map((e) => ({
    state: e.state as UnresolvedState,
    dunningStartMs: e.dunningStartedAtMs,
  }));
  const answer = answerCustomer(asked, override === null ? null : override.status, state.policy, now.getTime());
  const behind = unresolved[answer.worst ?? 0];
  const payUrl =
    answer.status === 'active' || behind === undefined || behind.invoiceId === null
      ? null
      : payUrlOf(state.invoices.get(behind.invoiceId));
  return { answer, payUrl };
}

/**
 * The customer as `episodes`, `override` and the tenant's policy make it at `now`: the record
 * when there is one to keep, none otherwise; a history entry when the answered status, the
 * derived one or the reason changed (an admin's action is kept even when it changes nothing);
 * a downstream message when the answered status or its reason did. Nothing is written when
 * nothing changed, so that no instance drops a cached answer for nothing.
 */
export function settle(
  state: CustomerState,
  episodes: readonly StoredEpisode[],
  override: Override | null,
  cause: ChangeCause,
  episode: string | null,
  now: Date,
): Settled & Pick<Effect, 'subscriber' | 'history' | 'message'> {
  const before = state.subscriber;
  const previous = statusOf(before);
  const derived = customerStatus(
    episodes.map((e) => ({ key: e.key, outcome: { state: e.state, reason: e.reason }, position: e.position })),
    override,
  );
  if (derived === null) {
    if (before === null)
      return {
        before: null,
        after: null,
        subscriber: null,
        history: cause.source === 'admin' ? unchangedEntry(null, episode, cause) : null,
        message: null,
      };
    return {
      before: previous,
      after: null,
      subscriber: { kind: 'delete' },
      history: {
        status: null,
        derivedStatus: null,
        reason: null,
        lockoutAtMs: null,
        effect: 'removed',
        episode,
        cause,
      },
      message: downstreamMessage(
        state.downstream,
        state.customerId,
        { type: 'subscriber.deleted', before: { status: before.status, reason: before.reason } },
        cause,
        now,
      ),
    };
  }
  const { answer, payUrl } = answerNow(state, episodes, override, now);
  const cardUrl = answer.status === 'active' ? null : (state.cardUrl ?? null);
  const after: CustomerStatus = { status: answer.status, reason: derived.reason };
  const overriddenAtMs = override === null ? null : override.atMs;
  const answeredChanged = before?.status !== after.status || before.reason !== after.reason;
  const changed = answeredChanged || before.derivedStatus !== derived.status;
  const entry: HistoryRow = {
    status: after.status,
    derivedStatus: derived.status,
    reason: after.reason,
    lockoutAtMs: answer.lockoutAtMs,
    effect: 'changed',
    episode,
    cause,
  };
  const history = changed ? entry : cause.source === 'admin' ? { ...entry, effect: 'none' as const } : null;
  const same =
    !changed &&
    before.overriddenAtMs === overriddenAtMs &&
    before.lockoutAtMs === answer.lockoutAtMs &&
    before.payUrl === payUrl &&
    (before.cardUrl ?? null) === cardUrl;
  if (same) return { before: previous, after, subscriber: null, history, message: null };
  const row: SubscriberWrite = {
    status: after.status,
    derivedStatus: derived.status,
    reason: after.reason,
    statusAt: cause.occurredAt,
    statusChanged: changed,
    overriddenAtMs,
    lockoutAtMs: answer.lockoutAtMs,
    lockoutRule: answer.rule,
    payUrl,
    cardUrl,
  };
  const message = answeredChanged
    ? downstreamMessage(
        state.downstream,
        state.customerId,
        { type: 'subscriber.status_changed', before: previous, after, lockoutAtMs: answer.lockoutAtMs },
        cause,
        now,
      )
    : null;
  return { before: previous, after, subscriber: { kind: 'write', row }, history, message };
}

/**
 * Removes the customer as of `position` (customer.deleted, or an admin's DELETE): every
 * episode set before it goes, an override made before it ends, and the tombstone keeps
 * older events from bringing anything back. Episodes set by later events stay, so the
 * result does not depend on whether they arrived before the removal.
 */
export function decideRemoval(
  state: CustomerState,
  position: Position,
  cause: ChangeCause,
  now: Date,
): Decision<ApplyOutcome> {
  if (!supersedes(position, state.tombstone)) return unchanged(state, 'stale');
  const older = state.episodes.filter((e) => comparePositions(e.position, position) < 0).map((e) => e.key);
  const remaining = state.episodes.filter((e) => comparePositions(e.position, position) >= 0);
  const override = overrideOf(state.subscriber);
  const standing = override !== null && override.atMs > position.atMs ? override : null;
  const { before, after, ...written } = settle(state, remaining, standing, cause, null, now);
  const runs = runChanges(state.episodes, [], older, position.atMs);
  return {
    outcome: 'applied',
    before,
    after,
    effect: { ...noEffect(), removedEpisodes: older, tombstone: position, ...written, runs },
  };
}

/**
 * An admin's (or a tenant key's) action at `cause.occurredAt`: a status that overrides the
 * episodes until a Stripe event of a later second changes one, its clearing, or a removal
 * like customer.deleted. Stale when an event dated later than now has already spoken (a
 * clock ahead of ours).
 */
export function decideAdminChange(
  state: CustomerState,
  change: Change,
  given: ChangeCause,
  now: Date,
): Decision<ApplyOutcome> {
  const cause: ChangeCause = {
    ...given,
    adminAction: change.kind === 'delete' ? 'delete' : change.kind === 'clear' ? 'clear_override' : 'set_status',
  };
  const atMs = cause.occurredAt.getTime();
  if (change.kind === 'delete') {
    const position: Position = { atMs, rank: RANKS.removed, eventId: cause.eventId ?? '' };
    // A Stripe event dated after now keeps its episode through a removal now: the customer
    // would stay gated, so the removal is refused like a PUT would be.
    if (state.episodes.some((e) => comparePositions(e.position, position) > 0)) return unchanged(state, 'stale');
    return decideRemoval(state, position, cause, now);
  }
  if (change.kind === 'clear') {
    // Back to what the episodes say: with none, the customer is unknown again (active).
    const { before, after, ...written } = settle(state, state.episodes, null, cause, null, now);
    return { outcome: 'applied', before, after, effect: { ...noEffect(), ...written } };
  }
  if (state.tombstone !== null && state.tombstone.atMs > atMs) return unchanged(state, 'stale');
  const override: Override = { status: change.status, reason: change.reason, atMs };
  if (state.episodes.some((e) => endsOverride(override, e.position.atMs))) return unchanged(state, 'stale');
  const { before, after, ...written } = settle(state, state.episodes, override, cause, null, now);
  return { outcome: 'applied', before, after, effect: { ...noEffect(), ...written } };
}

/**
 * The customer answered again at `now` (a policy change, with its cause): nothing for a
 * customer with no record.
 */
export function decideReanswer(state: CustomerState, cause: ChangeCause, now: Date): Decision<'answered' | 'unknown'> {
  if (state.subscriber === null) return unchanged(state, 'unknown');
  const { before, after, ...written } = settle(state, state.episodes, overrideOf(state.subscriber), cause, null, now);
  return { outcome: 'answered', before, after, effect: { ...noEffect(), ...written } };
}

/**
 * A scheduled lockout that fell due by `now`, recorded as of its time with its rule; `not_due`
 * when none is due any more (another instance recorded it, or an event resolved the episode).
 */
export function decideDueLockout(state: CustomerState, now: Date): Decision<'recorded' | 'not_due'> {
  const row = state.subscriber;
  if (row === null || row.lockoutAtMs === null || row.lockoutAtMs > now.getTime()) return unchanged(state, 'not_due');
  const cause: ChangeCause = {
    source: 'policy',
    eventId: null,
    eventType: null,
    declineCode: null,
    occurredAt: new Date(row.lockoutAtMs),
    policyRule: row.lockoutRule ?? 'grace_ended',
  };
  const { before, after, ...written } = settle(state, state.episodes, overrideOf(row), cause, null, now);
  return { outcome: 'recorded', before, after, effect: { ...noEffect(), ...written } };
}
