import { decideRemoval, noEffect, overrideOf, settle, statusOf, unchanged, unchangedEntry } from '../effect.js';
import type { CustomerState, Decision, StoredEpisode } from '../effect.js';
import type { ChangeCause } from '../history.js';
import { runChanges } from '../runs.js';
import { invoiceFailureOfEventFacts, invoiceFailureOutcome, linkedDeclineOutcome } from './derive.js';
import type { Derivation, InvoiceFailure } from './derive.js';
import { RANKS, comparePositions, endsOverride, supersedes } from './fold.js';
import type { EpisodeOutcome, EpisodeState, Override, Position } from './fold.js';
import type { StripeEventOutcomeName } from './outcomes.js';

/**
 * One Stripe event's whole effect on its customer (docs/stripe.md, statuses from dunning
 * episodes), decided from what the store read under the customer's lock: the episodes it
 * sets, the record under the tenant's policy, the history entry and the downstream message.
 * The store first keeps what the event tells of invoices, payments and declines (so that
 * whichever of a decline and its invoice comes second completes the link), then reads the
 * state, and writes the decision's effect as it is.
 */

/** A derivation that reaches a customer: a change, or an event that changes nothing by itself. */
export type ApplicableDerivation = Extract<Derivation, { kind: 'change' } | { kind: 'ignored' }>;

/** The outcomes an event applied to its customer can have. */
export type StripeApplyOutcome = Extract<StripeEventOutcomeName, 'applied' | 'stale' | 'ignored' | 'pending'>;

/** A Stripe event with its derivation, as the store keeps it. */
export interface StripeEvent {
  eventId: string;
  eventType: string;
  created: Date;
  declineCode: string | null;
  derivation: ApplicableDerivation;
}

/** An invoice as the store keeps it: its customer and episode, how it is collected, whether it is a subscription's first. */
export interface StoredInvoice {
  invoiceId: string;
  customerId: string;
  episode: string;
  autoCollected: boolean;
  firstInvoice: boolean;
}

/** A decline of a payment linked to an invoice. */
export interface StoredDecline {
  eventId: string;
  createdMs: number;
  hard: boolean;
  declineCode: string | null;
}

/**
 * The decline that makes an invoice failure a hard one (docs/stripe.md, which decline
 * counts): the latest decline of the customer linked to the invoice and dated at or before
 * the failure's second, by (created, hard before soft, event id).
 */
export interface DeclineAtFailure {
  hard: boolean;
  code: string | null;
}

/** An `invoice.payment_failed` already applied, as stripe_events keeps it, with the decline that counts for it now. */
export interface StoredFailure {
  eventId: string;
  createdMs: number;
  facts: Readonly<Record<string, unknown>>;
  declineAtFailure: DeclineAtFailure | null;
}

/** The most invoice failures of one invoice weighed again: Stripe makes a handful at most. */
export const MAX_REVISED_FAILURES = 50;

/**
 * What the store read of the invoice an event concerns, after keeping what the event tells:
 * an invoice event's own invoice, or the invoice a decline's payments are linked to.
 */
export interface InvoiceContext {
  invoice: StoredInvoice;
  /**
   * For an invoice event: the customer's declines linked to the invoice, of the latest second
   * only (only the latest can set the episode or end an override). Empty for a decline.
   */
  latestDeclines: readonly StoredDecline[];
  /** The invoice's other `invoice.payment_failed` events of the customer, newest first, at most MAX_REVISED_FAILURES. */
  failures: readonly StoredFailure[];
  /** For an `invoice.payment_failed`: the decline that counts for the event itself. */
  ownDeclineAtFailure: DeclineAtFailure | null;
}

export interface StripeEventState extends CustomerState {
  /** Null: the event names no invoice the store knows (a decline not linked yet, a subscription event). */
  invoice: InvoiceContext | null;
}

/**
 * The invoices, besides those of the customer's episodes, whose hosted page the decision
 * may show: the ones the event names or was linked to.
 */
export function eventInvoiceIds(event: StripeEvent, invoice: StoredInvoice | null): string[] {
  const d = event.derivation;
  const named = [
    d.invoice?.invoiceId,
    d.kind === 'change' && d.change.kind === 'episode' ? d.change.invoiceId : null,
    invoice?.invoiceId,
  ];
  return [...new Set(named.filter((id): id is string => typeof id === 'string'))];
}

/** One event's effect on an episode, as it would have been in arrival order of its time. */
interface EpisodeEvent {
  episode: string;
  outcome: EpisodeOutcome;
  position: Position;
  declineCode: string | null;
  /** The invoice it concerns, when it names one: the one a customer pays to end the episode. */
  invoiceId: string | null;
}

const earliest = (a: number | null, b: number): number => (a === null || b < a ? b : a);

/**
 * The episode's run after an event that does not set its state (an older one): a failure
 * after its last resolution is part of the current run, which then began no later than it;
 * a resolution after the current run's start ends that run, so the current one began after
 * it (at the latest known failure, the one that set the state). Null: nothing to change.
 */
export function olderEventRun(
  row: StoredEpisode,
  state: EpisodeState,
  atMs: number,
): { startMs: number | null; resolvedMs: number | null } | null {
  const resolvedMs = row.resolvedAtMs;
  const startMs = row.dunningStartedAtMs;
  if (state !== 'resolved') {
    if (row.state === 'resolved' || (resolvedMs !== null && atMs <= resolvedMs)) return null;
    return startMs !== null && startMs <= atMs ? null : { startMs: atMs, resolvedMs };
  }
  const resolved = resolvedMs === null || atMs > resolvedMs ? atMs : resolvedMs;
  // A resolution ends a run that began at or before it (in the same second it sorts after the
  // failures); one that began after it is not touched.
  if (row.state === 'resolved' || startMs === null || startMs > atMs)
    return resolved === resolvedMs ? null : { startMs, resolvedMs: resolved };
  return { startMs: row.position.atMs, resolvedMs: resolved };
}

/**
 * The customer's episodes while one event is folded in: each event that comes after the one
 * that set its episode sets it; an older one only corrects the episode's run. Keeps which
 * episodes were written.
 */
class EpisodeFold {
  private readonly byKey: Map<string, StoredEpisode>;
  private readonly written = new Set<string>();
  /** Per episode, the reason of an older resolution that ended the run it was in. */
  readonly endedBy = new Map<string, string>();

  constructor(
    episodes: readonly StoredEpisode[],
    private readonly tombstone: Position | null,
  ) {
    this.byKey = new Map(episodes.map((e) => [e.key, e]));
  }

  private set(e: StoredEpisode): void {
    this.byKey.set(e.key, e);
    this.written.add(e.key);
  }

  /**
   * Sets the episode from this event when it is the episode's latest; false: an older event.
   * Either way, keeps the episode's dunning start (the first event of its current unresolved
   * run) and last resolution as the set of its events makes them, whatever their order.
   */
  private applyOne(e: EpisodeEvent): boolean {
    const row = this.byKey.get(e.episode);
    const atMs = e.position.atMs;
    if (row !== undefined && !supersedes(e.position, row.position)) {
      const run = olderEventRun(row, e.outcome.state, atMs);
      if (run !== null) {
        if (e.outcome.state === 'resolved' && row.state !== 'resolved' && run.resolvedMs !== row.resolvedAtMs)
          this.endedBy.set(row.key, e.outcome.reason);
        this.set({ ...row, dunningStartedAtMs: run.startMs, resolvedAtMs: run.resolvedMs });
      }
      return false;
    }
    const resolved = e.outcome.state === 'resolved';
    // A failure after a resolution (or the first) starts a run; one within a run keeps its start.
    const start = resolved
      ? (row?.dunningStartedAtMs ?? null)
      : row === undefined || row.state === 'resolved'
        ? atMs
        : earliest(row.dunningStartedAtMs, atMs);
    this.set({
      key: e.episode,
      state: e.outcome.state,
      reason: e.outcome.reason,
      declineCode: e.declineCode,
      position: e.position,
      dunningStartedAtMs: start,
      resolvedAtMs: resolved ? atMs : (row?.resolvedAtMs ?? null),
      invoiceId: e.invoiceId ?? row?.invoiceId ?? null,
    });
    return true;
  }

  /**
   * Applies episode events of the customer. An event older than the customer's removal
   * changes nothing; one dated in a later second than an admin's override ends it, whether
   * or not it is its episode's latest, so that the result depends on the set of events only.
   */
  apply(events: readonly EpisodeEvent[], override: Override | null): { applied: boolean[]; override: Override | null } {
    const applied: boolean[] = [];
    let standing = override;
    for (const e of events) {
      if (this.tombstone !== null && !supersedes(e.position, this.tombstone)) {
        applied.push(false);
        continue;
      }
      if (standing !== null && endsOverride(standing, e.position.atMs)) standing = null;
      applied.push(this.applyOne(e));
    }
    return { applied, override: standing };
  }

  /**
   * When `e`'s event is the one that set its episode, writes its outcome there (nothing when
   * unchanged) and answers true. Its rank follows its state: within the same second a
   * restated failure meets only the events still stored, the latest of the episode.
   */
  restate(e: EpisodeEvent): boolean {
    const row = this.byKey.get(e.episode);
    if (row?.position.eventId !== e.position.eventId) return false;
    if (row.state === e.outcome.state && row.reason === e.outcome.reason) return true;
    this.set({
      ...row,
      state: e.outcome.state,
      reason: e.outcome.reason,
      declineCode: e.declineCode,
      position: { ...row.position, rank: e.position.rank },
    });
    return true;
  }

  /** Every episode as it now is: those read first, in their order, then any new one. */
  episodes(): StoredEpisode[] {
    return [...this.byKey.values()];
  }

  /** The episodes written, as they now are. */
  changed(): StoredEpisode[] {
    return this.episodes().filter((e) => this.written.has(e.key));
  }
}

/** The episode event of a decline linked to `invoice`; null when the invoice is paid by hand. */
function declineEvent(decline: StoredDecline, invoice: StoredInvoice): EpisodeEvent | null {
  const outcome = linkedDeclineOutcome({ hard: decline.hard }, invoice);
  if (outcome === null) return null;
  return {
    episode: invoice.episode,
    outcome,
    position: { atMs: decline.createdMs, rank: RANKS[outcome.state], eventId: decline.eventId },
    declineCode: decline.declineCode,
    invoiceId: invoice.invoiceId,
  };
}

/** The latest of the linked declines, as an episode event (none when the invoice is another customer's or paid by hand). */
function latestLinkedDecline(customerId: string, context: InvoiceContext): EpisodeEvent[] {
  if (context.invoice.customerId !== customerId) return [];
  const events = context.latestDeclines.flatMap((d) => declineEvent(d, context.invoice) ?? []);
  const latest = events.reduce<EpisodeEvent | null>(
    (a, e) => (a === null || comparePositions(e.position, a.position) > 0 ? e : a),
    null,
  );
  return latest === null ? [] : [latest];
}

/** An invoice failure's episode event, its outcome weighed with the decline that counts. */
function invoiceFailureEvent(
  invoice: StoredInvoice,
  failure: InvoiceFailure,
  event: { eventId: string; createdMs: number; declineCode: string | null },
  atFailure: DeclineAtFailure | null,
): EpisodeEvent | null {
  const linked = failure.payloadHard === null ? atFailure : null;
  const outcome = invoiceFailureOutcome(invoice, failure, linked?.hard ?? null);
  if (outcome === null) return null;
  return {
    episode: invoice.episode,
    outcome,
    position: { atMs: event.createdMs, rank: RANKS[outcome.state], eventId: event.eventId },
    declineCode: event.declineCode ?? (outcome.reason === 'hard_decline' ? (linked?.code ?? null) : null),
    invoiceId: invoice.invoiceId,
  };
}

/**
 * Weighs again the `invoice.payment_failed` events of an invoice already applied, now that
 * a decline is linked to it (the decline arrived after them, or the event that links it
 * did): set semantics, so the invoice failure's outcome does not depend on which came
 * first. A failure that now outranks its episode's state sets it; the failure that set the
 * episode is restated in place when its outcome changed, keeping its time and id. Only the
 * failures stripe_events still keeps are weighed: one pruned by retention no longer is.
 */
function reviseInvoiceFailures(
  fold: EpisodeFold,
  customerId: string,
  context: InvoiceContext,
  override: Override | null,
): Override | null {
  if (context.invoice.customerId !== customerId) return override;
  let standing = override;
  for (const f of context.failures) {
    const declineCode = typeof f.facts.decline_code === 'string' ? f.facts.decline_code : null;
    const e = invoiceFailureEvent(
      context.invoice,
      invoiceFailureOfEventFacts(f.facts),
      { eventId: f.eventId, createdMs: f.createdMs, declineCode },
      f.declineAtFailure,
    );
    if (e === null) continue;
    if (fold.restate(e)) continue;
    standing = fold.apply([e], standing).override;
  }
  return standing;
}

/** The decision once the episodes are folded: the customer settled, and what was written. */
function settled<O>(
  state: CustomerState,
  fold: EpisodeFold,
  outcome: O,
  standing: Override | null,
  cause: ChangeCause,
  episode: string | null,
  now: Date,
): Decision<O> {
  const { before, after, ...written } = settle(state, fold.episodes(), standing, cause, episode, now);
  const episodes = fold.changed();
  return {
    outcome,
    before,
    after,
    effect: { ...noEffect(), episodes, ...written, runs: runChanges(state.episodes, episodes, [], null, fold.endedBy) },
  };
}

/**
 * One Stripe event's effect on its customer at `now`: its outcome (applied, stale, ignored,
 * or pending for a decline no invoice links yet), the status before and after, and the
 * effect to write.
 */
export function decideStripeEvent(
  state: StripeEventState,
  event: StripeEvent,
  now: Date,
): Decision<StripeApplyOutcome> {
  const { derivation } = event;
  const cause: ChangeCause = {
    source: 'stripe',
    eventId: event.eventId,
    eventType: event.eventType,
    declineCode: event.declineCode,
    occurredAt: event.created,
  };
  const atMs = event.created.getTime();
  const context = state.invoice;
  const fold = new EpisodeFold(state.episodes, state.tombstone);
  const override = overrideOf(state.subscriber);

  // The declines this invoice links, earlier or now: they count as the invoice's failures.
  const linked = derivation.invoice === null || context === null ? [] : latestLinkedDecline(state.customerId, context);
  // An invoice event that links a decline weighs the invoice's earlier failures again.
  const revise = (standing: Override | null): Override | null =>
    linked.length === 0 || context === null
      ? standing
      : reviseInvoiceFailures(fold, state.customerId, context, standing);

  if (derivation.kind === 'ignored') {
    if (linked.length === 0) return unchanged(state, 'ignored');
    const result = fold.apply(linked, override);
    return settled(state, fold, 'ignored', revise(result.override), cause, derivation.invoice?.episode ?? null, now);
  }

  const change = derivation.change;
  if (change.kind === 'delete')
    return decideRemoval(state, { atMs, rank: RANKS.removed, eventId: event.eventId }, cause, now);

  if (change.kind === 'decline') {
    if (context === null || context.invoice.customerId !== state.customerId) {
      // A one-off payment, or an invoice not heard of yet: kept for the record, and applied
      // when an invoice event names this payment.
      return {
        outcome: 'pending',
        before: statusOf(state.subscriber),
        after: statusOf(state.subscriber),
        effect: { ...noEffect(), history: unchangedEntry(state.subscriber, null, cause) },
      };
    }
    const own = declineEvent(
      { eventId: event.eventId, createdMs: atMs, hard: change.decline.hard, declineCode: change.decline.code },
      context.invoice,
    );
    if (own === null) return unchanged(state, 'ignored');
    const result = fold.apply([own], override);
    // The invoice's failures dated at or after this decline may have been waiting for it.
    const standing = reviseInvoiceFailures(fold, state.customerId, context, result.override);
    return settled(state, fold, result.applied[0] === true ? 'applied' : 'stale', standing, cause, own.episode, now);
  }

  let own: EpisodeEvent = {
    episode: change.episode,
    outcome: change.outcome,
    position: { atMs, rank: RANKS[change.outcome.state], eventId: event.eventId },
    declineCode: event.declineCode,
    invoiceId: derivation.invoice?.invoiceId ?? change.invoiceId ?? null,
  };
  if (change.failure !== undefined && derivation.invoice !== null && context !== null) {
    // An invoice failure: the decline linked to the invoice tells whether it was hard.
    const weighed = invoiceFailureEvent(
      context.invoice,
      change.failure,
      { eventId: event.eventId, createdMs: atMs, declineCode: event.declineCode },
      context.ownDeclineAtFailure,
    );
    if (weighed !== null) {
      own = { ...weighed, episode: change.episode };
      cause.declineCode = own.declineCode;
    }
  }
  const result = fold.apply([own, ...linked], override);
  return settled(
    state,
    fold,
    result.applied[0] === true ? 'applied' : 'stale',
    revise(result.override),
    cause,
    change.episode,
    now,
  );
}
