import { invoiceFailureOfFacts, invoiceFailureOutcome, linkedDeclineOutcome } from '../domain/stripe/derive.js';
import type { Decline, Derivation, InvoiceFailure, InvoiceLink } from '../domain/stripe/derive.js';
import { EPISODE_SEVERITY, RANKS, comparePositions, customerStatus, endsOverride, supersedes } from '../domain/stripe/fold.js';
import type { Change, CustomerStatus, Episode, EpisodeOutcome, EpisodeState, Override, Position } from '../domain/stripe/fold.js';
import { answerCustomer, DEFAULT_POLICY } from '../domain/policy.js';
import type { Answer, Policy, PolicyEpisode, PolicyRule } from '../domain/policy.js';
import type { HistoryEffect } from '../domain/history.js';
import type { SubscriberStatus } from '../domain/types.js';
import type { Queryable } from './db.js';
import { downstreamMessage } from '../domain/downstream.js';
import type { DownstreamChange } from '../domain/downstream.js';
import { downstreamTarget, writeOutboxMessage } from './webhooks.js';
import type { ApplyOutcome, ChangeCause, StripeEventOutcome } from './store.js';

/**
 * The SQL side of docs/stripe.md, statuses from dunning episodes. Every function here runs inside the caller's
 * transaction, after `lockCustomer`: all writes about one customer are serialised, so two
 * events racing (a decline and the invoice that links it, two episodes of a new customer)
 * each see what the other committed.
 */

interface SubscriberRow {
  /** The answered status (after the tenant's policy); for an override, the status the admin set. */
  status: SubscriberStatus;
  derived_status: SubscriberStatus;
  reason: string;
  overridden_at: Date | null;
  lockout_at: Date | null;
  lockout_rule: PolicyRule | null;
  pay_url: string | null;
}

interface EpisodeRow {
  episode: string;
  state: EpisodeState;
  reason: string;
  at: Date;
  rank: number;
  event_id: string;
  dunning_started_at: Date | null;
  invoice_id: string | null;
}

interface InvoiceRow {
  invoice_id: string;
  processor_customer_id: string;
  episode: string;
  auto_collected: boolean;
  first_invoice: boolean;
}

/** What one change did to the customer's status; null: unknown (no record). */
export interface Settled {
  before: CustomerStatus | null;
  after: CustomerStatus | null;
}

/** A Stripe event with its derivation, as the store records it. */
export interface StripeEventFacts {
  eventId: string;
  eventType: string;
  created: Date;
  declineCode: string | null;
}

export type StripeApplyOutcome = Exclude<StripeEventOutcome, 'duplicate'>;

/** Serialises every write about one customer of one tenant, until the transaction ends. */
export async function lockCustomer(tx: Queryable, tenantId: number, customerId: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [tenantId, customerId]);
}

function toPosition(row: { at: Date; rank: number; event_id: string }): Position {
  return { atMs: new Date(row.at).getTime(), rank: Number(row.rank), eventId: row.event_id };
}

function toEpisode(row: EpisodeRow): Episode {
  return { key: row.episode, outcome: { state: row.state, reason: row.reason }, position: toPosition(row) };
}

const SUBSCRIBER_COLUMNS = 'status, derived_status, reason, overridden_at, lockout_at, lockout_rule, pay_url';

async function subscriberRow(tx: Queryable, tenantId: number, customerId: string): Promise<SubscriberRow | null> {
  const [row] = await tx.query<SubscriberRow>(
    `SELECT ${SUBSCRIBER_COLUMNS} FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2`,
    [tenantId, customerId],
  );
  return row ?? null;
}

async function episodeRows(tx: Queryable, tenantId: number, customerId: string): Promise<EpisodeRow[]> {
  return tx.query<EpisodeRow>(
    `SELECT episode, state, reason, at, rank, event_id, dunning_started_at, invoice_id FROM subscriber_episodes
     WHERE tenant_id = $1 AND processor_customer_id = $2 ORDER BY episode`,
    [tenantId, customerId],
  );
}

export async function loadEpisodes(tx: Queryable, tenantId: number, customerId: string): Promise<Episode[]> {
  return (await episodeRows(tx, tenantId, customerId)).map(toEpisode);
}

async function tombstone(tx: Queryable, tenantId: number, customerId: string): Promise<Position | null> {
  const [row] = await tx.query<{ at: Date; rank: number; event_id: string }>(
    'SELECT removed_at AS at, rank, event_id FROM subscriber_tombstones WHERE tenant_id = $1 AND processor_customer_id = $2',
    [tenantId, customerId],
  );
  return row ? toPosition(row) : null;
}

/** An override's status is the derived one while it stands (section 5). */
function overrideOf(row: SubscriberRow | null): Override | null {
  return row?.overridden_at ? { status: row.derived_status, reason: row.reason, atMs: new Date(row.overridden_at).getTime() } : null;
}

function statusOfRow(row: SubscriberRow | null): CustomerStatus | null {
  return row ? { status: row.status, reason: row.reason } : null;
}

/** The customer's answered status as stored now; null: unknown. */
export async function storedStatus(tx: Queryable, tenantId: number, customerId: string): Promise<CustomerStatus | null> {
  return statusOfRow(await subscriberRow(tx, tenantId, customerId));
}

interface HistoryFields {
  status: SubscriberStatus | null;
  derivedStatus: SubscriberStatus | null;
  reason: string | null;
  lockoutAt: Date | null;
  effect: HistoryEffect;
  episode: string | null;
}

async function insertHistory(tx: Queryable, tenantId: number, customerId: string, entry: HistoryFields, cause: ChangeCause, now: Date): Promise<void> {
  await tx.query(
    `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, event_id,
       event_type, decline_code, occurred_at, recorded_at, episode, effect, derived_status, lockout_at, policy_rule, secret_key_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
    [
      tenantId,
      customerId,
      entry.status,
      entry.reason,
      cause.source,
      cause.eventId,
      cause.eventType,
      cause.declineCode,
      cause.occurredAt,
      now,
      entry.episode,
      entry.effect,
      entry.derivedStatus,
      entry.lockoutAt,
      cause.policyRule ?? null,
      cause.secretKeyId ?? null,
    ],
  );
}

/** No change of record: what a history row of an action that changed nothing shows. */
function unchangedEntry(row: SubscriberRow | null, episode: string | null): HistoryFields {
  return { status: row?.status ?? null, derivedStatus: row?.derived_status ?? null, reason: row?.reason ?? null, lockoutAt: row?.lockout_at ?? null, effect: 'none', episode };
}

/** The tenant's policy, read in the transaction of the change it applies to. */
export async function tenantPolicy(tx: Queryable, tenantId: number): Promise<Policy> {
  const [row] = await tx.query<{ enforcement: Policy['enforcement']; grace_days: number; escalate_after_days: number | null }>(
    `SELECT policy_enforcement AS enforcement, policy_grace_days AS grace_days, policy_escalate_after_days AS escalate_after_days
     FROM tenants WHERE id = $1`,
    [tenantId],
  );
  return row ? { enforcement: row.enforcement, grace_days: Number(row.grace_days), escalate_after_days: row.escalate_after_days === null ? null : Number(row.escalate_after_days) } : DEFAULT_POLICY;
}

/**
 * The unresolved episodes, the derived worst first (most severe, then latest): the policy
 * answers each, and among equally severe answers the derived worst is the one shown.
 */
function unresolvedWorstFirst(rows: readonly EpisodeRow[]): EpisodeRow[] {
  return rows
    .filter((r) => r.state !== 'resolved')
    .sort((a, b) => EPISODE_SEVERITY[b.state] - EPISODE_SEVERITY[a.state] || comparePositions(toPosition(b), toPosition(a)));
}

/** The hosted page of an invoice Stripe still waits on; null when it is paid, void or unknown. */
async function payUrlOf(tx: Queryable, tenantId: number, invoiceId: string | null): Promise<string | null> {
  if (invoiceId === null) return null;
  const [row] = await tx.query<{ hosted_invoice_url: string | null; status: string | null }>(
    'SELECT hosted_invoice_url, status FROM stripe_invoices WHERE tenant_id = $1 AND invoice_id = $2',
    [tenantId, invoiceId],
  );
  if (!row || row.hosted_invoice_url === null) return null;
  return row.status === null || row.status === 'open' || row.status === 'uncollectible' ? row.hosted_invoice_url : null;
}

/** The customer as its episodes, override and tenant's policy make it at `now`. */
interface Settling {
  derived: CustomerStatus;
  answer: Answer;
  payUrl: string | null;
}

async function answerNow(tx: Queryable, tenantId: number, rows: readonly EpisodeRow[], derived: CustomerStatus, override: Override | null, policy: Policy, now: Date): Promise<Settling> {
  const unresolved = unresolvedWorstFirst(rows);
  const episodes: PolicyEpisode[] = unresolved.map((r) => ({
    state: r.state as PolicyEpisode['state'],
    dunningStartMs: r.dunning_started_at === null ? null : new Date(r.dunning_started_at).getTime(),
  }));
  const answer = answerCustomer(episodes, override === null ? null : override.status, policy, now.getTime());
  const behind = unresolved[answer.worst ?? 0];
  const payUrl = answer.status === 'active' || behind === undefined ? null : await payUrlOf(tx, tenantId, behind.invoice_id);
  return { derived, answer, payUrl };
}

async function raise(tx: Queryable, tenantId: number, customerId: string, change: DownstreamChange, cause: ChangeCause, now: Date): Promise<void> {
  const message = downstreamMessage(await downstreamTarget(tx, tenantId, customerId), customerId, change, cause, now);
  if (message !== null) await writeOutboxMessage(tx, tenantId, customerId, message, now);
}

function sameTime(a: Date | null, b: Date | null): boolean {
  return (a === null ? null : new Date(a).getTime()) === (b === null ? null : new Date(b).getTime());
}

/**
 * Writes the customer's status as its episodes, override and tenant's policy now make it:
 * the record when there is one to keep, none otherwise; a history entry when the answered
 * status, the derived one or the reason changed; a downstream webhook when the answered
 * status or its reason did. Writes nothing when nothing changed, so that no instance drops
 * a cached answer for nothing.
 */
async function settle(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  before: SubscriberRow | null,
  override: Override | null,
  cause: ChangeCause,
  episode: string | null,
  now: Date,
  policy?: Policy,
): Promise<Settled> {
  const rows = await episodeRows(tx, tenantId, customerId);
  const derived = customerStatus(rows.map(toEpisode), override);
  const overriddenAt = override === null ? null : new Date(override.atMs);
  const previous = statusOfRow(before);
  if (derived === null) {
    if (before !== null) {
      await tx.query('DELETE FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2', [tenantId, customerId]);
      await insertHistory(tx, tenantId, customerId, { status: null, derivedStatus: null, reason: null, lockoutAt: null, effect: 'removed', episode }, cause, now);
      await raise(tx, tenantId, customerId, { type: 'subscriber.deleted', before: { status: before.status, reason: before.reason } }, cause, now);
    } else if (cause.source === 'admin') {
      await insertHistory(tx, tenantId, customerId, unchangedEntry(null, episode), cause, now);
    }
    return { before: previous, after: null };
  }
  const { answer, payUrl } = await answerNow(tx, tenantId, rows, derived, override, policy ?? (await tenantPolicy(tx, tenantId)), now);
  const after: CustomerStatus = { status: answer.status, reason: derived.reason };
  const lockoutAt = answer.lockoutAtMs === null ? null : new Date(answer.lockoutAtMs);
  const answeredChanged = before?.status !== after.status || before.reason !== after.reason;
  const changed = answeredChanged || before.derived_status !== derived.status;
  const same =
    !changed && sameTime(before?.overridden_at ?? null, overriddenAt) && sameTime(before?.lockout_at ?? null, lockoutAt) && (before?.pay_url ?? null) === payUrl;
  const entry: HistoryFields = { status: after.status, derivedStatus: derived.status, reason: after.reason, lockoutAt, effect: 'changed', episode };
  // An admin's action is kept in the history with its author even when it changes nothing.
  if (!changed && cause.source === 'admin') await insertHistory(tx, tenantId, customerId, { ...entry, effect: 'none' }, cause, now);
  if (same) return { before: previous, after };
  await tx.query(
    `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, lockout_at, lockout_rule, pay_url, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (tenant_id, processor_customer_id)
     DO UPDATE SET status = EXCLUDED.status, derived_status = EXCLUDED.derived_status, reason = EXCLUDED.reason,
       overridden_at = EXCLUDED.overridden_at, lockout_at = EXCLUDED.lockout_at, lockout_rule = EXCLUDED.lockout_rule, pay_url = EXCLUDED.pay_url,
       status_at = CASE WHEN $12 THEN EXCLUDED.status_at ELSE subscribers.status_at END, updated_at = EXCLUDED.updated_at`,
    [tenantId, customerId, after.status, derived.status, after.reason, cause.occurredAt, overriddenAt, lockoutAt, answer.rule, payUrl, now, changed],
  );
  if (changed) await insertHistory(tx, tenantId, customerId, entry, cause, now);
  if (answeredChanged) {
    await raise(tx, tenantId, customerId, { type: 'subscriber.status_changed', before: previous, after, lockoutAtMs: answer.lockoutAtMs }, cause, now);
  }
  return { before: previous, after };
}

/**
 * Answers the customer again under `policy` at `now` (a scheduled lockout that fell due, or a
 * policy change), recording what changed with `cause`. Runs in the caller's transaction.
 */
export async function reanswerCustomer(tx: Queryable, tenantId: number, customerId: string, cause: ChangeCause, now: Date, policy?: Policy): Promise<Settled> {
  await lockCustomer(tx, tenantId, customerId);
  const before = await subscriberRow(tx, tenantId, customerId);
  if (before === null) return { before: null, after: null };
  return settle(tx, tenantId, customerId, before, overrideOf(before), cause, null, now, policy);
}

/**
 * Records a scheduled lockout that fell due (by `now`), as of its time, with its rule. Only
 * when one is still due once the customer is locked: another instance may have written it,
 * or an event may have resolved the episode meanwhile. False: nothing was due any more.
 */
export async function recordDueLockout(tx: Queryable, tenantId: number, customerId: string, now: Date): Promise<boolean> {
  await lockCustomer(tx, tenantId, customerId);
  const before = await subscriberRow(tx, tenantId, customerId);
  if (before?.lockout_at == null || new Date(before.lockout_at).getTime() > now.getTime()) return false;
  const cause: ChangeCause = {
    source: 'policy',
    eventId: null,
    eventType: null,
    declineCode: null,
    occurredAt: new Date(before.lockout_at),
    policyRule: before.lockout_rule ?? 'grace_ended',
  };
  await settle(tx, tenantId, customerId, before, overrideOf(before), cause, null, now);
  return true;
}

interface EpisodeStateRow {
  state: EpisodeState;
  at: Date;
  rank: number;
  event_id: string;
  dunning_started_at: Date | null;
  resolved_at: Date | null;
}

const earliest = (a: Date | null, b: Date): Date => (a === null || b.getTime() < new Date(a).getTime() ? b : new Date(a));

/**
 * The episode's run after an event that does not set its state (an older one): a failure
 * after its last resolution is part of the current run, which then began no later than it;
 * a resolution after the current run's start ends that run, so the current one began after
 * it (at the latest known failure, the one that set the state). Null: nothing to change.
 */
function olderEventRun(row: EpisodeStateRow, state: EpisodeState, at: Date): { start: Date | null; resolved: Date | null } | null {
  const resolvedMs = row.resolved_at === null ? null : new Date(row.resolved_at).getTime();
  const startMs = row.dunning_started_at === null ? null : new Date(row.dunning_started_at).getTime();
  if (state !== 'resolved') {
    if (row.state === 'resolved' || (resolvedMs !== null && at.getTime() <= resolvedMs)) return null;
    return startMs !== null && startMs <= at.getTime() ? null : { start: at, resolved: row.resolved_at };
  }
  const resolved = resolvedMs === null || at.getTime() > resolvedMs ? at : new Date(row.resolved_at ?? at);
  // A resolution ends a run that began at or before it (in the same second it sorts after the
  // failures); one that began after it is not touched.
  if (row.state === 'resolved' || startMs === null || startMs > at.getTime()) return resolved === row.resolved_at ? null : { start: row.dunning_started_at, resolved };
  return { start: new Date(row.at), resolved };
}

/**
 * Sets the episode from this event when it is the episode's latest; false: an older event.
 * Either way, keeps the episode's dunning start (the first event of its current unresolved
 * run) and last resolution as the set of its events makes them, whatever their order.
 */
async function applyToEpisode(tx: Queryable, tenantId: number, customerId: string, e: EpisodeEvent, now: Date): Promise<boolean> {
  const [row] = await tx.query<EpisodeStateRow>(
    `SELECT state, at, rank, event_id, dunning_started_at, resolved_at FROM subscriber_episodes
     WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = $3`,
    [tenantId, customerId, e.episode],
  );
  const at = new Date(e.position.atMs);
  if (row !== undefined && !supersedes(e.position, toPosition(row))) {
    const run = olderEventRun(row, e.outcome.state, at);
    if (run !== null) {
      await tx.query(
        `UPDATE subscriber_episodes SET dunning_started_at = $4, resolved_at = $5, updated_at = $6
         WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = $3`,
        [tenantId, customerId, e.episode, run.start, run.resolved, now],
      );
    }
    return false;
  }
  const resolved = e.outcome.state === 'resolved';
  // A failure after a resolution (or the first) starts a run; one within a run keeps its start.
  const start = resolved ? (row?.dunning_started_at ?? null) : row === undefined || row.state === 'resolved' ? at : earliest(row.dunning_started_at, at);
  await tx.query(
    `INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, decline_code, at, rank, event_id, updated_at,
       dunning_started_at, resolved_at, invoice_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (tenant_id, processor_customer_id, episode)
     DO UPDATE SET state = EXCLUDED.state, reason = EXCLUDED.reason, decline_code = EXCLUDED.decline_code,
       at = EXCLUDED.at, rank = EXCLUDED.rank, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at,
       dunning_started_at = EXCLUDED.dunning_started_at, resolved_at = EXCLUDED.resolved_at,
       invoice_id = COALESCE(EXCLUDED.invoice_id, subscriber_episodes.invoice_id)`,
    [
      tenantId,
      customerId,
      e.episode,
      e.outcome.state,
      e.outcome.reason,
      e.declineCode,
      at,
      e.position.rank,
      e.position.eventId,
      now,
      start,
      resolved ? at : (row?.resolved_at ?? null),
      e.invoiceId,
    ],
  );
  return true;
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

/**
 * Applies episode events of one customer. An event older than the customer's removal
 * changes nothing; one dated in a later second than an admin's override ends it, whether
 * or not it is its episode's latest, so that the result depends on the set of events only.
 */
async function applyEpisodeEvents(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  events: readonly EpisodeEvent[],
  override: Override | null,
  now: Date,
): Promise<{ applied: boolean[]; override: Override | null }> {
  const removed = await tombstone(tx, tenantId, customerId);
  const applied: boolean[] = [];
  let standing = override;
  for (const e of events) {
    if (removed !== null && !supersedes(e.position, removed)) {
      applied.push(false);
      continue;
    }
    if (standing !== null && endsOverride(standing, e.position.atMs)) standing = null;
    applied.push(await applyToEpisode(tx, tenantId, customerId, e, now));
  }
  return { applied, override: standing };
}

/**
 * Keeps what an invoice event tells. An invoice's subscription, collection method and billing
 * reason are fixed once it is finalized: the first event that names it is as good as any. Its
 * money and status change as it is paid: the latest event (by `created`) tells them.
 */
async function recordInvoice(tx: Queryable, tenantId: number, customerId: string, invoice: InvoiceLink, observedAt: Date): Promise<void> {
  const m = invoice.money;
  await tx.query(
    `INSERT INTO stripe_invoices (tenant_id, invoice_id, processor_customer_id, episode, auto_collected, first_invoice,
       amount_due, amount_remaining, currency, hosted_invoice_url, status, observed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (tenant_id, invoice_id) DO UPDATE SET
       amount_due = COALESCE(EXCLUDED.amount_due, stripe_invoices.amount_due),
       amount_remaining = COALESCE(EXCLUDED.amount_remaining, stripe_invoices.amount_remaining),
       currency = COALESCE(EXCLUDED.currency, stripe_invoices.currency),
       hosted_invoice_url = COALESCE(EXCLUDED.hosted_invoice_url, stripe_invoices.hosted_invoice_url),
       status = COALESCE(EXCLUDED.status, stripe_invoices.status),
       observed_at = EXCLUDED.observed_at
     WHERE stripe_invoices.observed_at IS NULL OR stripe_invoices.observed_at <= EXCLUDED.observed_at`,
    [tenantId, invoice.invoiceId, customerId, invoice.episode, invoice.autoCollected, invoice.firstInvoice, m.amountDue, m.amountRemaining, m.currency, m.hostedInvoiceUrl, m.status, observedAt],
  );
  await linkPayments(tx, tenantId, invoice.paymentIds, invoice.invoiceId);
}

async function linkPayments(tx: Queryable, tenantId: number, paymentIds: readonly string[], invoiceId: string): Promise<void> {
  if (paymentIds.length === 0) return;
  await tx.query(
    `INSERT INTO stripe_payment_links (tenant_id, payment_id, invoice_id)
     SELECT $1, p, $3 FROM unnest($2::text[]) AS p ON CONFLICT (tenant_id, payment_id) DO NOTHING`,
    [tenantId, paymentIds, invoiceId],
  );
}

interface DeclineRow {
  event_id: string;
  created: Date;
  hard: boolean;
  decline_code: string | null;
}

/** The episode event of a decline linked to `invoice`; null when the invoice is paid by hand. */
function declineEvent(decline: DeclineRow, invoice: InvoiceRow): EpisodeEvent | null {
  const outcome = linkedDeclineOutcome({ hard: decline.hard }, { autoCollected: invoice.auto_collected, firstInvoice: invoice.first_invoice });
  if (outcome === null) return null;
  return {
    episode: invoice.episode,
    outcome,
    position: { atMs: new Date(decline.created).getTime(), rank: RANKS[outcome.state], eventId: decline.event_id },
    declineCode: decline.decline_code,
    invoiceId: invoice.invoice_id,
  };
}

/**
 * The latest decline of this customer whose payment is linked to the invoice, whichever
 * arrived first (none when the invoice is another customer's). Only the latest can set the
 * episode or end an override, so only the declines of the latest second are read, however
 * many a payment collected.
 */
async function declinesOfInvoice(tx: Queryable, tenantId: number, customerId: string, invoiceId: string): Promise<EpisodeEvent[]> {
  const invoice = await invoiceRow(tx, tenantId, invoiceId);
  if (invoice === null || invoice.processor_customer_id !== customerId) return [];
  const rows = await tx.query<DeclineRow>(
    `WITH linked AS (
       SELECT d.event_id, d.created, d.hard, d.decline_code
       FROM stripe_declines d JOIN stripe_payment_links l ON l.tenant_id = d.tenant_id AND l.payment_id = d.payment_id
       WHERE d.tenant_id = $1 AND l.invoice_id = $2 AND d.processor_customer_id = $3
     )
     SELECT DISTINCT event_id, created, hard, decline_code FROM linked WHERE created = (SELECT max(created) FROM linked)`,
    [tenantId, invoice.invoice_id, customerId],
  );
  const events = rows.flatMap((d) => declineEvent(d, invoice) ?? []);
  const latest = events.reduce<EpisodeEvent | null>((a, e) => (a === null || comparePositions(e.position, a.position) > 0 ? e : a), null);
  return latest === null ? [] : [latest];
}

async function invoiceRow(tx: Queryable, tenantId: number, invoiceId: string): Promise<InvoiceRow | null> {
  const [row] = await tx.query<InvoiceRow>(
    'SELECT invoice_id, processor_customer_id, episode, auto_collected, first_invoice FROM stripe_invoices WHERE tenant_id = $1 AND invoice_id = $2',
    [tenantId, invoiceId],
  );
  return row ?? null;
}

/** The invoice a decline's payments are linked to, when some event has told it. */
async function invoiceOfPayments(tx: Queryable, tenantId: number, paymentIds: readonly string[]): Promise<InvoiceRow | null> {
  const [row] = await tx.query<InvoiceRow>(
    `SELECT i.invoice_id, i.processor_customer_id, i.episode, i.auto_collected, i.first_invoice
     FROM stripe_payment_links l JOIN stripe_invoices i ON i.tenant_id = l.tenant_id AND i.invoice_id = l.invoice_id
     WHERE l.tenant_id = $1 AND l.payment_id = ANY($2::text[]) ORDER BY i.invoice_id LIMIT 1`,
    [tenantId, paymentIds],
  );
  return row ?? null;
}

async function recordDecline(tx: Queryable, tenantId: number, customerId: string, event: StripeEventFacts, decline: Decline): Promise<void> {
  const ids = decline.paymentIds;
  await tx.query(
    `INSERT INTO stripe_declines (tenant_id, payment_id, event_id, processor_customer_id, created, hard, decline_code)
     SELECT $1, p, $3, $4, $5, $6, $7 FROM unnest($2::text[]) AS p ON CONFLICT DO NOTHING`,
    [tenantId, ids, event.eventId, customerId, event.created, decline.hard, decline.code],
  );
  if (decline.invoiceId !== null) await linkPayments(tx, tenantId, ids, decline.invoiceId);
}

/**
 * Which decline makes an invoice failure a hard one (docs/stripe.md, which decline counts):
 * the latest decline of this customer linked to the invoice and dated at or before the
 * failure's second, by (created, hard before soft, event id): the attempt that failed.
 * A decline dated later is a later attempt: it counts as a failure of its own, at its own
 * time. Every attempt at one invoice goes through the invoice's payment intent, so once
 * that is linked each attempt's decline is too, and an older attempt's hard decline does
 * not stand in for a newer soft one.
 */
async function declineAtFailure(tx: Queryable, tenantId: number, customerId: string, invoiceId: string, at: Date): Promise<{ hard: boolean; code: string | null } | null> {
  const [row] = await tx.query<{ hard: boolean; decline_code: string | null }>(
    `SELECT d.hard, d.decline_code
     FROM stripe_declines d JOIN stripe_payment_links l ON l.tenant_id = d.tenant_id AND l.payment_id = d.payment_id
     WHERE d.tenant_id = $1 AND l.invoice_id = $2 AND d.processor_customer_id = $3 AND d.created <= $4
     ORDER BY d.created DESC, d.hard DESC, d.event_id DESC LIMIT 1`,
    [tenantId, invoiceId, customerId, at],
  );
  return row ? { hard: row.hard, code: row.decline_code } : null;
}

/** An invoice failure's episode event, its outcome weighed with the decline that counts. */
async function invoiceFailureEvent(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoice: InvoiceRow,
  failure: InvoiceFailure,
  event: { eventId: string; created: Date; declineCode: string | null },
): Promise<EpisodeEvent | null> {
  const linked = failure.payloadHard === null ? await declineAtFailure(tx, tenantId, customerId, invoice.invoice_id, event.created) : null;
  const outcome = invoiceFailureOutcome({ autoCollected: invoice.auto_collected, firstInvoice: invoice.first_invoice }, failure, linked?.hard ?? null);
  if (outcome === null) return null;
  return {
    episode: invoice.episode,
    outcome,
    position: { atMs: event.created.getTime(), rank: RANKS[outcome.state], eventId: event.eventId },
    declineCode: event.declineCode ?? (outcome.reason === 'hard_decline' ? (linked?.code ?? null) : null),
    invoiceId: invoice.invoice_id,
  };
}

/** The most invoice failures of one invoice weighed again: Stripe makes a handful at most. */
const MAX_REVISED_FAILURES = 50;

/**
 * Weighs again the `invoice.payment_failed` events of an invoice already applied, now that
 * a decline is linked to it (the decline arrived after them, or the event that links it
 * did): set semantics, so the invoice failure's outcome does not depend on which came
 * first. A failure that now outranks its episode's state sets it; the failure that set the
 * episode is restated in place when its outcome changed, keeping its time and id. Reads
 * the failures from stripe_events: one pruned by retention is no longer weighed.
 */
async function reviseInvoiceFailures(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoice: InvoiceRow,
  exceptEventId: string,
  override: Override | null,
  now: Date,
): Promise<Override | null> {
  if (invoice.processor_customer_id !== customerId) return override;
  const rows = await tx.query<{ event_id: string; created: Date; facts: Record<string, unknown> | string }>(
    `SELECT event_id, created, facts FROM stripe_events
     WHERE tenant_id = $1 AND processor_customer_id = $2 AND event_type = 'invoice.payment_failed'
       AND facts ->> 'invoice' = $3 AND event_id <> $4
     ORDER BY created DESC, event_id DESC LIMIT ${MAX_REVISED_FAILURES}`,
    [tenantId, customerId, invoice.invoice_id, exceptEventId],
  );
  let standing = override;
  for (const row of rows) {
    const facts = typeof row.facts === 'string' ? (JSON.parse(row.facts) as Record<string, unknown>) : row.facts;
    const e = await invoiceFailureEvent(tx, tenantId, customerId, invoice, invoiceFailureOfFacts(facts), {
      eventId: row.event_id,
      created: new Date(row.created),
      declineCode: typeof facts.decline_code === 'string' ? facts.decline_code : null,
    });
    if (e === null) continue;
    if (await restateEpisode(tx, tenantId, customerId, e, now)) continue;
    standing = (await applyEpisodeEvents(tx, tenantId, customerId, [e], standing, now)).override;
  }
  return standing;
}

/**
 * When `e`'s event is the one that set its episode, writes its outcome there (a no-op when
 * unchanged) and answers true. Its rank follows its state: within the same second a
 * restated failure meets only the events still stored, the latest of the episode.
 */
async function restateEpisode(tx: Queryable, tenantId: number, customerId: string, e: EpisodeEvent, now: Date): Promise<boolean> {
  const [row] = await tx.query<{ event_id: string; state: EpisodeState; reason: string }>(
    'SELECT event_id, state, reason FROM subscriber_episodes WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = $3',
    [tenantId, customerId, e.episode],
  );
  if (row?.event_id !== e.position.eventId) return false;
  if (row.state === e.outcome.state && row.reason === e.outcome.reason) return true;
  await tx.query(
    `UPDATE subscriber_episodes SET state = $4, reason = $5, decline_code = $6, rank = $7, updated_at = $8
     WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = $3`,
    [tenantId, customerId, e.episode, e.outcome.state, e.outcome.reason, e.declineCode, e.position.rank, now],
  );
  return true;
}

type Applicable = Extract<Derivation, { kind: 'change' } | { kind: 'ignored' }>;

/**
 * Applies one Stripe event of a customer (its row in stripe_events is already written, in
 * the same transaction). Records what it tells of invoices and payments first, so that
 * whichever of a decline and its invoice comes second completes the link.
 */
export async function applyStripeEvent(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  event: StripeEventFacts,
  derivation: Applicable,
  now: Date,
): Promise<{ outcome: StripeApplyOutcome } & Settled> {
  await lockCustomer(tx, tenantId, customerId);
  const before = await subscriberRow(tx, tenantId, customerId);
  const cause: ChangeCause = { source: 'stripe', eventId: event.eventId, eventType: event.eventType, declineCode: event.declineCode, occurredAt: event.created };
  const atMs = event.created.getTime();
  const unchanged = { before: statusOfRow(before), after: statusOfRow(before) };

  if (derivation.invoice !== null) await recordInvoice(tx, tenantId, customerId, derivation.invoice, event.created);
  // The declines this invoice links, earlier or now: they count as the invoice's failures.
  const linked = derivation.invoice === null ? [] : await declinesOfInvoice(tx, tenantId, customerId, derivation.invoice.invoiceId);

  // An invoice event that links a decline weighs the invoice's earlier failures again.
  const revise = async (standing: Override | null): Promise<Override | null> => {
    if (linked.length === 0 || derivation.invoice === null) return standing;
    const invoice = await invoiceRow(tx, tenantId, derivation.invoice.invoiceId);
    return invoice === null ? standing : reviseInvoiceFailures(tx, tenantId, customerId, invoice, event.eventId, standing, now);
  };

  if (derivation.kind === 'ignored') {
    if (linked.length === 0) return { outcome: 'ignored', ...unchanged };
    const result = await applyEpisodeEvents(tx, tenantId, customerId, linked, overrideOf(before), now);
    const standing = await revise(result.override);
    const settled = await settle(tx, tenantId, customerId, before, standing, cause, derivation.invoice?.episode ?? null, now);
    return { outcome: 'ignored', ...settled };
  }

  const change = derivation.change;
  if (change.kind === 'delete') {
    return removeCustomer(tx, tenantId, customerId, { atMs, rank: RANKS.removed, eventId: event.eventId }, before, cause, now);
  }

  if (change.kind === 'decline') {
    const decline = change.decline;
    await recordDecline(tx, tenantId, customerId, event, decline);
    const invoice = await invoiceOfPayments(tx, tenantId, decline.paymentIds);
    if (invoice === null || invoice.processor_customer_id !== customerId) {
      // A one-off payment, or an invoice not heard of yet: kept for the record, and applied
      // when an invoice event names this payment.
      await insertHistory(tx, tenantId, customerId, unchangedEntry(before, null), cause, now);
      return { outcome: 'pending', ...unchanged };
    }
    const own: DeclineRow = { event_id: event.eventId, created: event.created, hard: decline.hard, decline_code: decline.code };
    const e = declineEvent(own, invoice);
    if (e === null) return { outcome: 'ignored', ...unchanged };
    const result = await applyEpisodeEvents(tx, tenantId, customerId, [e], overrideOf(before), now);
    // The invoice's failures dated at or after this decline may have been waiting for it.
    const standing = await reviseInvoiceFailures(tx, tenantId, customerId, invoice, event.eventId, result.override, now);
    const settled = await settle(tx, tenantId, customerId, before, standing, cause, e.episode, now);
    return { outcome: result.applied[0] === true ? 'applied' : 'stale', ...settled };
  }

  let own: EpisodeEvent = {
    episode: change.episode,
    outcome: change.outcome,
    position: { atMs, rank: RANKS[change.outcome.state], eventId: event.eventId },
    declineCode: event.declineCode,
    invoiceId: derivation.invoice?.invoiceId ?? change.invoiceId ?? null,
  };
  if (change.failure !== undefined && derivation.invoice !== null) {
    // An invoice failure: the decline linked to the invoice tells whether it was hard.
    const invoice = await invoiceRow(tx, tenantId, derivation.invoice.invoiceId);
    const weighed = invoice === null ? null : await invoiceFailureEvent(tx, tenantId, customerId, invoice, change.failure, event);
    if (weighed !== null) {
      own = { ...weighed, episode: change.episode };
      cause.declineCode = own.declineCode;
    }
  }
  const result = await applyEpisodeEvents(tx, tenantId, customerId, [own, ...linked], overrideOf(before), now);
  const standing = await revise(result.override);
  const settled = await settle(tx, tenantId, customerId, before, standing, cause, change.episode, now);
  return { outcome: result.applied[0] === true ? 'applied' : 'stale', ...settled };
}

/**
 * Removes the customer as of `position` (customer.deleted, or an admin's DELETE): every
 * episode set before it goes, an override made before it ends, and the tombstone keeps
 * older events from bringing anything back. Episodes set by later events stay, so the
 * result does not depend on whether they arrived before the removal.
 */
async function removeCustomer(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  position: Position,
  before: SubscriberRow | null,
  cause: ChangeCause,
  now: Date,
): Promise<{ outcome: 'applied' | 'stale' } & Settled> {
  const current = await tombstone(tx, tenantId, customerId);
  if (!supersedes(position, current)) return { outcome: 'stale', before: statusOfRow(before), after: statusOfRow(before) };
  const older = (await loadEpisodes(tx, tenantId, customerId)).filter((e) => comparePositions(e.position, position) < 0).map((e) => e.key);
  if (older.length > 0) {
    await tx.query('DELETE FROM subscriber_episodes WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = ANY($3::text[])', [tenantId, customerId, older]);
  }
  await tx.query(
    `INSERT INTO subscriber_tombstones (tenant_id, processor_customer_id, removed_at, rank, event_id) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (tenant_id, processor_customer_id)
     DO UPDATE SET removed_at = EXCLUDED.removed_at, rank = EXCLUDED.rank, event_id = EXCLUDED.event_id`,
    [tenantId, customerId, new Date(position.atMs), position.rank, position.eventId],
  );
  const override = overrideOf(before);
  const standing = override !== null && override.atMs > position.atMs ? override : null;
  return { outcome: 'applied', ...(await settle(tx, tenantId, customerId, before, standing, cause, null, now)) };
}

/**
 * An admin's action at `cause.occurredAt`: a status that overrides the episodes until a
 * Stripe event of a later second changes one, or a removal like customer.deleted. Stale
 * when an event dated later than now has already spoken (a clock ahead of ours).
 */
export async function applyAdminChange(tx: Queryable, tenantId: number, customerId: string, change: Change, given: ChangeCause, now: Date): Promise<ApplyOutcome> {
  await lockCustomer(tx, tenantId, customerId);
  const cause: ChangeCause = { ...given, adminAction: change.kind === 'delete' ? 'delete' : change.kind === 'clear' ? 'clear_override' : 'set_status' };
  const before = await subscriberRow(tx, tenantId, customerId);
  const atMs = cause.occurredAt.getTime();
  const eventId = cause.eventId ?? '';
  if (change.kind === 'delete') {
    const position = { atMs, rank: RANKS.removed, eventId };
    // A Stripe event dated after now keeps its episode through a removal now: the customer
    // would stay gated, so the removal is refused like a PUT would be.
    if ((await loadEpisodes(tx, tenantId, customerId)).some((e) => comparePositions(e.position, position) > 0)) return 'stale';
    return (await removeCustomer(tx, tenantId, customerId, position, before, cause, now)).outcome;
  }
  if (change.kind === 'clear') {
    // Back to what the episodes say: with none, the customer is unknown again (active).
    await settle(tx, tenantId, customerId, before, null, cause, null, now);
    return 'applied';
  }
  const removed = await tombstone(tx, tenantId, customerId);
  if (removed !== null && removed.atMs > atMs) return 'stale';
  const override: Override = { status: change.status, reason: change.reason, atMs };
  const episodes = await loadEpisodes(tx, tenantId, customerId);
  if (episodes.some((e) => endsOverride(override, e.position.atMs))) return 'stale';
  await settle(tx, tenantId, customerId, before, override, cause, null, now);
  return 'applied';
}
