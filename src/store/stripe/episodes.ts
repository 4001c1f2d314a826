import { decideAdminChange, decideDueLockout, decideReanswer, payUrlOf, statusOf } from '../../domain/effect.js';
import type {
  ApplyOutcome,
  CustomerState,
  Effect,
  InvoicePage,
  ScheduledRule,
  Settled,
  StoredEpisode,
  StoredSubscriber,
} from '../../domain/effect.js';
import type { ChangeCause } from '../../domain/history.js';
import { RUN_DECLINE_CLASSES } from '../../domain/runs.js';
import type { RunChange } from '../../domain/runs.js';
import { DEFAULT_POLICY } from '../../domain/policy.js';
import type { Policy } from '../../domain/policy.js';
import { MAX_REVISED_FAILURES, decideStripeEvent, eventInvoiceIds } from '../../domain/stripe/decide.js';
import type {
  ApplicableDerivation,
  DeclineAtFailure,
  InvoiceContext,
  StoredDecline,
  StoredFailure,
  StoredInvoice,
  StripeApplyOutcome,
  StripeEvent,
} from '../../domain/stripe/decide.js';
import type { Decline, InvoiceLink } from '../../domain/stripe/derive.js';
import type { Change, CustomerStatus, EpisodeState, Position } from '../../domain/stripe/fold.js';
import type { SubscriberStatus } from '../../domain/types.js';
import type { Queryable } from '../db/db.js';
import { downstreamTarget, writeOutboxMessage } from '../downstream/outbox.js';
import { cardLink, payLink, spaceLinkBase } from '../links/tokens.js';

/**
 * The SQL side of docs/stripe.md, statuses from dunning episodes. Every write about a customer
 * goes the same way, inside the caller's transaction: `lockCustomer`, read the customer's
 * state (`readCustomerState`), let the domain decide (domain/effect.ts, domain/stripe/decide.ts),
 * and write the decision's effect as it is (`writeEffect`). The lock serialises all writes
 * about one customer, so two events racing (a decline and the invoice that links it, two
 * episodes of a new customer) each see what the other committed.
 */

export type { StripeApplyOutcome };

/** A Stripe event as the store records it, without its derivation. */
export type StripeEventFacts = Omit<StripeEvent, 'derivation'>;

/** Serialises every write about one customer of one tenant, until the transaction ends. */
export async function lockCustomer(tx: Queryable, tenantId: number, customerId: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [tenantId, customerId]);
}

const ms = (value: Date | string | null): number | null => (value === null ? null : new Date(value).getTime());
const date = (value: number | null): Date | null => (value === null ? null : new Date(value));

interface SubscriberRow {
  status: SubscriberStatus;
  derived_status: SubscriberStatus;
  reason: string;
  overridden_at: Date | null;
  lockout_at: Date | null;
  lockout_rule: ScheduledRule | null;
  pay_url: string | null;
  card_url: string | null;
}

/** A row of subscriber_episodes, as the store reads it. */
export interface EpisodeRow {
  episode: string;
  state: EpisodeState;
  reason: string;
  decline_code: string | null;
  at: Date;
  rank: number;
  event_id: string;
  dunning_started_at: Date | null;
  resolved_at: Date | null;
  invoice_id: string | null;
}

interface InvoiceRow {
  invoice_id: string;
  processor_customer_id: string;
  episode: string;
  auto_collected: boolean;
  first_invoice: boolean;
}

function toPosition(row: { at: Date; rank: number; event_id: string }): Position {
  return { atMs: new Date(row.at).getTime(), rank: Number(row.rank), eventId: row.event_id };
}

function toSubscriber(row: SubscriberRow): StoredSubscriber {
  return {
    status: row.status,
    derivedStatus: row.derived_status,
    reason: row.reason,
    overriddenAtMs: ms(row.overridden_at),
    lockoutAtMs: ms(row.lockout_at),
    lockoutRule: row.lockout_rule,
    payUrl: row.pay_url,
    cardUrl: row.card_url,
  };
}

function toEpisode(row: EpisodeRow): StoredEpisode {
  return {
    key: row.episode,
    state: row.state,
    reason: row.reason,
    declineCode: row.decline_code,
    position: toPosition(row),
    dunningStartedAtMs: ms(row.dunning_started_at),
    resolvedAtMs: ms(row.resolved_at),
    invoiceId: row.invoice_id,
  };
}

function toInvoice(row: InvoiceRow): StoredInvoice {
  return {
    invoiceId: row.invoice_id,
    customerId: row.processor_customer_id,
    episode: row.episode,
    autoCollected: row.auto_collected,
    firstInvoice: row.first_invoice,
  };
}

async function readSubscriber(tx: Queryable, tenantId: number, customerId: string): Promise<StoredSubscriber | null> {
  const [row] = await tx.query<SubscriberRow>(
    `SELECT status, derived_status, reason, overridden_at, lockout_at, lockout_rule, pay_url, card_url FROM subscribers
     WHERE tenant_id = $1 AND processor_customer_id = $2`,
    [tenantId, customerId],
  );
  return row ? toSubscriber(row) : null;
}

/** The customer's answered status as stored now; null: unknown. */
export async function storedStatus(
  tx: Queryable,
  tenantId: number,
  customerId: string,
): Promise<CustomerStatus | null> {
  return statusOf(await readSubscriber(tx, tenantId, customerId));
}

async function readEpisodes(tx: Queryable, tenantId: number, customerId: string): Promise<StoredEpisode[]> {
  const rows = await tx.query<EpisodeRow>(
    `SELECT episode, state, reason, decline_code, at, rank, event_id, dunning_started_at, resolved_at, invoice_id FROM subscriber_episodes
     WHERE tenant_id = $1 AND processor_customer_id = $2 ORDER BY episode`,
    [tenantId, customerId],
  );
  return rows.map(toEpisode);
}

async function readTombstone(tx: Queryable, tenantId: number, customerId: string): Promise<Position | null> {
  const [row] = await tx.query<{ at: Date; rank: number; event_id: string }>(
    'SELECT removed_at AS at, rank, event_id FROM subscriber_tombstones WHERE tenant_id = $1 AND processor_customer_id = $2',
    [tenantId, customerId],
  );
  return row ? toPosition(row) : null;
}

/**
 * What Stripe last told of the pages of the given invoices. In a space whose links go through
 * Dunwall (`linkBase`, asked only when an invoice is payable), the page an answer links to is
 * Dunwall's own pay link, which asks Stripe for the invoice's current page when opened
 * (docs/links.md).
 */
async function readInvoicePages(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoiceIds: readonly string[],
  now: Date | undefined,
  linkBase: () => Promise<string | null>,
): Promise<Map<string, InvoicePage>> {
  if (invoiceIds.length === 0) return new Map();
  const rows = await tx.query<{ invoice_id: string; hosted_invoice_url: string | null; status: string | null }>(
    'SELECT invoice_id, hosted_invoice_url, status FROM stripe_invoices WHERE tenant_id = $1 AND invoice_id = ANY($2::text[])',
    [tenantId, invoiceIds],
  );
  const pages = new Map(rows.map((r) => [r.invoice_id, { hostedInvoiceUrl: r.hosted_invoice_url, status: r.status }]));
  const payable = [...pages].filter(([, page]) => payUrlOf(page) !== null);
  if (payable.length === 0 || now === undefined) return pages;
  const base = await linkBase();
  if (base === null) return pages;
  for (const [invoiceId, page] of payable)
    pages.set(invoiceId, { ...page, hostedInvoiceUrl: await payLink(tx, tenantId, customerId, invoiceId, base, now) });
  return pages;
}

/** The tenant's policy, read in the transaction of the change it applies to. */
export async function tenantPolicy(tx: Queryable, tenantId: number): Promise<Policy> {
  const [row] = await tx.query<{
    enforcement: Policy['enforcement'];
    grace_days: number;
    escalate_after_days: number | null;
  }>(
    `SELECT policy_enforcement AS enforcement, policy_grace_days AS grace_days, policy_escalate_after_days AS escalate_after_days
     FROM tenants WHERE id = $1`,
    [tenantId],
  );
  return row
    ? {
        enforcement: row.enforcement,
        grace_days: Number(row.grace_days),
        escalate_after_days: row.escalate_after_days === null ? null : Number(row.escalate_after_days),
      }
    : DEFAULT_POLICY;
}

/**
 * Everything a decision about the customer reads, after `lockCustomer`: its record, episodes
 * and tombstone, the tenant's policy (`policy` when the caller already read it), the pages of
 * the invoices its episodes name and of `invoiceIds`, and where the tenant's messages go.
 */
async function readCustomerState(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  options: { policy?: Policy; invoiceIds?: readonly string[]; now?: Date; mayOweMoney?: boolean } = {},
): Promise<CustomerState> {
  const subscriber = await readSubscriber(tx, tenantId, customerId);
  const episodes = await readEpisodes(tx, tenantId, customerId);
  const tombstone = await readTombstone(tx, tenantId, customerId);
  const policy = options.policy ?? (await tenantPolicy(tx, tenantId));
  const invoiceIds = new Set([
    ...episodes.flatMap((e) => (e.invoiceId === null ? [] : [e.invoiceId])),
    ...(options.invoiceIds ?? []),
  ]);
  // Links through Dunwall are made on this write, never on a lookup: only for a customer that
  // may be answered non-active (in dunning, or an invoice of the event to pay), and only in a
  // space with a Stripe API key and a public address.
  let base: Promise<string | null> | undefined;
  const linkBase = (): Promise<string | null> => (base ??= spaceLinkBase(tx, tenantId));
  const now = options.now;
  const invoices = await readInvoicePages(tx, tenantId, customerId, [...invoiceIds], now, linkBase);
  const mayOweMoney =
    options.mayOweMoney === true ||
    [...invoices.values()].some((page) => payUrlOf(page) !== null) ||
    episodes.some((e) => e.state !== 'resolved') ||
    (subscriber?.status ?? 'active') !== 'active';
  const cardBase = now !== undefined && mayOweMoney ? await linkBase() : null;
  const cardUrl =
    cardBase === null || now === undefined ? null : await cardLink(tx, tenantId, customerId, cardBase, now);
  const downstream = await downstreamTarget(tx, tenantId, customerId);
  return { customerId, subscriber, episodes, tombstone, policy, invoices, downstream, cardUrl };
}

/**
 * One run change (domain/runs.ts, migration 015). The run takes its invoice's amount and
 * currency as stripe_invoices holds them now (the invoice's facts are kept before the
 * decision). An open run keeps the worst class of its events, in the domain's order.
 */
async function writeRun(tx: Queryable, tenantId: number, customerId: string, run: RunChange): Promise<void> {
  if (run.kind === 'open') {
    await tx.query(
      `INSERT INTO dunning_runs (tenant_id, processor_customer_id, episode, started_at, invoice_id, amount, currency, decline_class)
       SELECT $1, $2, $3, $4, $5::text, i.amount_due, i.currency, $6
       FROM (SELECT 1) AS one LEFT JOIN stripe_invoices i ON i.tenant_id = $1 AND i.invoice_id = $5::text
       ON CONFLICT (tenant_id, processor_customer_id, episode) WHERE ended_at IS NULL
       DO UPDATE SET started_at = EXCLUDED.started_at, invoice_id = COALESCE(EXCLUDED.invoice_id, dunning_runs.invoice_id),
         amount = COALESCE(EXCLUDED.amount, dunning_runs.amount), currency = COALESCE(EXCLUDED.currency, dunning_runs.currency),
         decline_class = CASE WHEN array_position($7::text[], EXCLUDED.decline_class) > array_position($7::text[], dunning_runs.decline_class)
           THEN EXCLUDED.decline_class ELSE dunning_runs.decline_class END`,
      [
        tenantId,
        customerId,
        run.episode,
        new Date(run.startedAtMs),
        run.invoiceId,
        run.declineClass,
        RUN_DECLINE_CLASSES,
      ],
    );
    return;
  }
  // The open run ends; with none open (a run the store never saw begin), a closed one is kept.
  await tx.query(
    `WITH closed AS (
       UPDATE dunning_runs r SET ended_at = $4, outcome = $5,
         amount = COALESCE(r.amount, i.amount_due), currency = COALESCE(r.currency, i.currency), invoice_id = COALESCE(r.invoice_id, $6::text)
       FROM (SELECT 1) AS one LEFT JOIN stripe_invoices i ON i.tenant_id = $1 AND i.invoice_id = $6::text
       WHERE r.tenant_id = $1 AND r.processor_customer_id = $2 AND r.episode = $3 AND r.ended_at IS NULL
       RETURNING r.id
     )
     INSERT INTO dunning_runs (tenant_id, processor_customer_id, episode, started_at, ended_at, outcome, invoice_id, amount, currency, decline_class)
     SELECT $1, $2, $3, $7, $4, $5, $6::text, i.amount_due, i.currency, 'soft'
     FROM (SELECT 1) AS one LEFT JOIN stripe_invoices i ON i.tenant_id = $1 AND i.invoice_id = $6::text
     WHERE NOT EXISTS (SELECT 1 FROM closed)`,
    [tenantId, customerId, run.episode, new Date(run.endedAtMs), run.outcome, run.invoiceId, new Date(run.startedAtMs)],
  );
}

/** Writes what a decision decided, as it is, in the caller's transaction. */
async function writeEffect(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  effect: Effect,
  now: Date,
): Promise<void> {
  if (effect.removedEpisodes.length > 0) {
    await tx.query(
      'DELETE FROM subscriber_episodes WHERE tenant_id = $1 AND processor_customer_id = $2 AND episode = ANY($3::text[])',
      [tenantId, customerId, effect.removedEpisodes],
    );
  }
  for (const e of effect.episodes) {
    await tx.query(
      `INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, decline_code, at, rank, event_id, updated_at,
         dunning_started_at, resolved_at, invoice_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       ON CONFLICT (tenant_id, processor_customer_id, episode)
       DO UPDATE SET state = EXCLUDED.state, reason = EXCLUDED.reason, decline_code = EXCLUDED.decline_code,
         at = EXCLUDED.at, rank = EXCLUDED.rank, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at,
         dunning_started_at = EXCLUDED.dunning_started_at, resolved_at = EXCLUDED.resolved_at, invoice_id = EXCLUDED.invoice_id`,
      [
        tenantId,
        customerId,
        e.key,
        e.state,
        e.reason,
        e.declineCode,
        new Date(e.position.atMs),
        e.position.rank,
        e.position.eventId,
        now,
        date(e.dunningStartedAtMs),
        date(e.resolvedAtMs),
        e.invoiceId,
      ],
    );
  }
  for (const run of effect.runs) await writeRun(tx, tenantId, customerId, run);
  if (effect.tombstone !== null) {
    const t = effect.tombstone;
    await tx.query(
      `INSERT INTO subscriber_tombstones (tenant_id, processor_customer_id, removed_at, rank, event_id) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (tenant_id, processor_customer_id)
       DO UPDATE SET removed_at = EXCLUDED.removed_at, rank = EXCLUDED.rank, event_id = EXCLUDED.event_id`,
      [tenantId, customerId, new Date(t.atMs), t.rank, t.eventId],
    );
  }
  if (effect.subscriber?.kind === 'delete') {
    await tx.query('DELETE FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2', [
      tenantId,
      customerId,
    ]);
  } else if (effect.subscriber?.kind === 'write') {
    const r = effect.subscriber.row;
    await tx.query(
      `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, lockout_at, lockout_rule, pay_url, card_url, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $13, $11)
       ON CONFLICT (tenant_id, processor_customer_id)
       DO UPDATE SET status = EXCLUDED.status, derived_status = EXCLUDED.derived_status, reason = EXCLUDED.reason,
         overridden_at = EXCLUDED.overridden_at, lockout_at = EXCLUDED.lockout_at, lockout_rule = EXCLUDED.lockout_rule, pay_url = EXCLUDED.pay_url,
         card_url = EXCLUDED.card_url,
         status_at = CASE WHEN $12 THEN EXCLUDED.status_at ELSE subscribers.status_at END, updated_at = EXCLUDED.updated_at`,
      [
        tenantId,
        customerId,
        r.status,
        r.derivedStatus,
        r.reason,
        r.statusAt,
        date(r.overriddenAtMs),
        date(r.lockoutAtMs),
        r.lockoutRule,
        r.payUrl,
        now,
        r.statusChanged,
        r.cardUrl,
      ],
    );
  }
  if (effect.history !== null) {
    const h = effect.history;
    const cause = h.cause;
    await tx.query(
      `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, event_id,
         event_type, decline_code, occurred_at, recorded_at, episode, effect, derived_status, lockout_at, policy_rule, secret_key_id, admin_action)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
      [
        tenantId,
        customerId,
        h.status,
        h.reason,
        cause.source,
        cause.eventId,
        cause.eventType,
        cause.declineCode,
        cause.occurredAt,
        now,
        h.episode,
        h.effect,
        h.derivedStatus,
        date(h.lockoutAtMs),
        cause.policyRule ?? null,
        cause.secretKeyId ?? null,
        cause.adminAction ?? null,
      ],
    );
  }
  if (effect.message !== null) await writeOutboxMessage(tx, tenantId, customerId, effect.message, now);
}

/**
 * Answers the customer again under `policy` at `now` (a policy change), recording what
 * changed with `cause`. Runs in the caller's transaction.
 */
export async function reanswerCustomer(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  cause: ChangeCause,
  now: Date,
  policy?: Policy,
): Promise<Settled> {
  await lockCustomer(tx, tenantId, customerId);
  const decision = decideReanswer(
    await readCustomerState(tx, tenantId, customerId, policy === undefined ? { now } : { policy, now }),
    cause,
    now,
  );
  await writeEffect(tx, tenantId, customerId, decision.effect, now);
  return { before: decision.before, after: decision.after };
}

/**
 * Records a scheduled lockout that fell due (by `now`), as of its time, with its rule. Only
 * when one is still due once the customer is locked: another instance may have written it,
 * or an event may have resolved the episode meanwhile. False: nothing was due any more.
 */
export async function recordDueLockout(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  now: Date,
): Promise<boolean> {
  await lockCustomer(tx, tenantId, customerId);
  const decision = decideDueLockout(await readCustomerState(tx, tenantId, customerId, { now }), now);
  await writeEffect(tx, tenantId, customerId, decision.effect, now);
  return decision.outcome === 'recorded';
}

/**
 * An admin's action at `cause.occurredAt` (domain/effect.ts, decideAdminChange): an override,
 * its clearing, or a removal; stale when a Stripe event dated later has spoken.
 */
export async function applyAdminChange(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  change: Change,
  cause: ChangeCause,
  now: Date,
): Promise<ApplyOutcome> {
  await lockCustomer(tx, tenantId, customerId);
  const setsDunning = change.kind === 'set' && change.status !== 'active';
  const state = await readCustomerState(tx, tenantId, customerId, { now, mayOweMoney: setsDunning });
  const decision = decideAdminChange(state, change, cause, now);
  await writeEffect(tx, tenantId, customerId, decision.effect, now);
  return decision.outcome;
}

/**
 * Keeps what an invoice event tells. An invoice's subscription, collection method and billing
 * reason are fixed once it is finalized: the first event that names it is as good as any. Its
 * money and status change as it is paid: the latest event (by `created`) tells them.
 */
async function recordInvoice(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoice: InvoiceLink,
  observedAt: Date,
): Promise<void> {
  const m = invoice.money;
  await tx.query(
    `INSERT INTO stripe_invoices (tenant_id, invoice_id, processor_customer_id, episode, auto_collected, first_invoice,
       amount_due, amount_remaining, currency, hosted_invoice_url, status, observed_at, hosted_page_expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (tenant_id, invoice_id) DO UPDATE SET
       amount_due = COALESCE(EXCLUDED.amount_due, stripe_invoices.amount_due),
       amount_remaining = COALESCE(EXCLUDED.amount_remaining, stripe_invoices.amount_remaining),
       currency = COALESCE(EXCLUDED.currency, stripe_invoices.currency),
       hosted_invoice_url = COALESCE(EXCLUDED.hosted_invoice_url, stripe_invoices.hosted_invoice_url),
       status = COALESCE(EXCLUDED.status, stripe_invoices.status),
       hosted_page_expires_at = COALESCE(EXCLUDED.hosted_page_expires_at, stripe_invoices.hosted_page_expires_at),
       observed_at = EXCLUDED.observed_at
     WHERE stripe_invoices.observed_at IS NULL OR stripe_invoices.observed_at <= EXCLUDED.observed_at`,
    [
      tenantId,
      invoice.invoiceId,
      customerId,
      invoice.episode,
      invoice.autoCollected,
      invoice.firstInvoice,
      m.amountDue,
      m.amountRemaining,
      m.currency,
      m.hostedInvoiceUrl,
      m.status,
      observedAt,
      m.hostedPageExpiresAtMs == null ? null : new Date(m.hostedPageExpiresAtMs),
    ],
  );
  await linkPayments(tx, tenantId, invoice.paymentIds, invoice.invoiceId);
}

async function linkPayments(
  tx: Queryable,
  tenantId: number,
  paymentIds: readonly string[],
  invoiceId: string,
): Promise<void> {
  if (paymentIds.length === 0) return;
  await tx.query(
    `INSERT INTO stripe_payment_links (tenant_id, payment_id, invoice_id)
     SELECT $1, p, $3 FROM unnest($2::text[]) AS p ON CONFLICT (tenant_id, payment_id) DO NOTHING`,
    [tenantId, paymentIds, invoiceId],
  );
}

/** Keeps a decline, one row per payment it names, and links its payments to the invoice it names. */
async function recordDecline(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  event: StripeEventFacts,
  decline: Decline,
): Promise<void> {
  const ids = decline.paymentIds;
  await tx.query(
    `INSERT INTO stripe_declines (tenant_id, payment_id, event_id, processor_customer_id, created, hard, decline_code)
     SELECT $1, p, $3, $4, $5, $6, $7 FROM unnest($2::text[]) AS p ON CONFLICT DO NOTHING`,
    [tenantId, ids, event.eventId, customerId, event.created, decline.hard, decline.code],
  );
  if (decline.invoiceId !== null) await linkPayments(tx, tenantId, ids, decline.invoiceId);
}

const INVOICE_COLUMNS = 'invoice_id, processor_customer_id, episode, auto_collected, first_invoice';

async function invoiceRow(tx: Queryable, tenantId: number, invoiceId: string): Promise<StoredInvoice | null> {
  const [row] = await tx.query<InvoiceRow>(
    `SELECT ${INVOICE_COLUMNS} FROM stripe_invoices WHERE tenant_id = $1 AND invoice_id = $2`,
    [tenantId, invoiceId],
  );
  return row ? toInvoice(row) : null;
}

/** The invoice a decline's payments are linked to, when some event has told it. */
async function invoiceOfPayments(
  tx: Queryable,
  tenantId: number,
  paymentIds: readonly string[],
): Promise<StoredInvoice | null> {
  const [row] = await tx.query<InvoiceRow>(
    `SELECT i.invoice_id, i.processor_customer_id, i.episode, i.auto_collected, i.first_invoice
     FROM stripe_payment_links l JOIN stripe_invoices i ON i.tenant_id = l.tenant_id AND i.invoice_id = l.invoice_id
     WHERE l.tenant_id = $1 AND l.payment_id = ANY($2::text[]) ORDER BY i.invoice_id LIMIT 1`,
    [tenantId, paymentIds],
  );
  return row ? toInvoice(row) : null;
}

/**
 * The customer's declines whose payment is linked to the invoice, whichever arrived first, of
 * the latest second only: only the latest can set the episode or end an override, however
 * many a payment collected.
 */
async function latestLinkedDeclines(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoiceId: string,
): Promise<StoredDecline[]> {
  const rows = await tx.query<{ event_id: string; created: Date; hard: boolean; decline_code: string | null }>(
    `WITH linked AS (
       SELECT d.event_id, d.created, d.hard, d.decline_code
       FROM stripe_declines d JOIN stripe_payment_links l ON l.tenant_id = d.tenant_id AND l.payment_id = d.payment_id
       WHERE d.tenant_id = $1 AND l.invoice_id = $2 AND d.processor_customer_id = $3
     )
     SELECT DISTINCT event_id, created, hard, decline_code FROM linked WHERE created = (SELECT max(created) FROM linked)`,
    [tenantId, invoiceId, customerId],
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    createdMs: new Date(r.created).getTime(),
    hard: r.hard,
    declineCode: r.decline_code,
  }));
}

/**
 * The decline that counts for an invoice failure at `at` (docs/stripe.md, which decline
 * counts): the latest decline of this customer linked to the invoice and dated at or before
 * the failure's second, by (created, hard before soft, event id): the attempt that failed.
 * A decline dated later is a later attempt: it counts as a failure of its own, at its own
 * time. Every attempt at one invoice goes through the invoice's payment intent, so once
 * that is linked each attempt's decline is too, and an older attempt's hard decline does
 * not stand in for a newer soft one.
 */
async function declineAtFailure(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoiceId: string,
  at: Date,
): Promise<DeclineAtFailure | null> {
  const [row] = await tx.query<{ hard: boolean; decline_code: string | null }>(
    `SELECT d.hard, d.decline_code
     FROM stripe_declines d JOIN stripe_payment_links l ON l.tenant_id = d.tenant_id AND l.payment_id = d.payment_id
     WHERE d.tenant_id = $1 AND l.invoice_id = $2 AND d.processor_customer_id = $3 AND d.created <= $4
     ORDER BY d.created DESC, d.hard DESC, d.event_id DESC LIMIT 1`,
    [tenantId, invoiceId, customerId, at],
  );
  return row ? { hard: row.hard, code: row.decline_code } : null;
}

/**
 * The invoice's `invoice.payment_failed` events of this customer already kept (but the one
 * being applied), newest first, each with the decline that counts for it now (as
 * `declineAtFailure` reads it): read from stripe_events, so one pruned by retention is no
 * longer there.
 */
async function storedFailures(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  invoiceId: string,
  exceptEventId: string,
): Promise<StoredFailure[]> {
  const rows = await tx.query<{
    event_id: string;
    created: Date;
    facts: Record<string, unknown> | string;
    hard: boolean | null;
    decline_code: string | null;
  }>(
    `SELECT f.event_id, f.created, f.facts, d.hard, d.decline_code
     FROM (SELECT event_id, created, facts FROM stripe_events
           WHERE tenant_id = $1 AND processor_customer_id = $3 AND event_type = 'invoice.payment_failed'
             AND facts ->> 'invoice' = $2 AND event_id <> $4
           ORDER BY created DESC, event_id DESC LIMIT ${MAX_REVISED_FAILURES}) f
     LEFT JOIN LATERAL (
       SELECT d.hard, d.decline_code
       FROM stripe_declines d JOIN stripe_payment_links l ON l.tenant_id = d.tenant_id AND l.payment_id = d.payment_id
       WHERE d.tenant_id = $1 AND l.invoice_id = $2 AND d.processor_customer_id = $3 AND d.created <= f.created
       ORDER BY d.created DESC, d.hard DESC, d.event_id DESC LIMIT 1) d ON true
     ORDER BY f.created DESC, f.event_id DESC`,
    [tenantId, invoiceId, customerId, exceptEventId],
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    createdMs: new Date(r.created).getTime(),
    facts: typeof r.facts === 'string' ? (JSON.parse(r.facts) as Record<string, unknown>) : r.facts,
    declineAtFailure: r.hard === null ? null : { hard: r.hard, code: r.decline_code },
  }));
}

/**
 * Keeps what the event tells of invoices, payments and declines, so that whichever of a
 * decline and its invoice comes second completes the link; then reads what the decision
 * needs of the invoice it concerns: an invoice event's own, or the one a decline's payments
 * are linked to. Null: none known.
 */
async function recordInvoiceFacts(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  event: StripeEvent,
): Promise<InvoiceContext | null> {
  const d = event.derivation;
  const change = d.kind === 'change' ? d.change : null;
  let invoice: StoredInvoice | null = null;
  if (d.invoice !== null) {
    await recordInvoice(tx, tenantId, customerId, d.invoice, event.created);
    invoice = await invoiceRow(tx, tenantId, d.invoice.invoiceId);
  } else if (change?.kind === 'decline') {
    await recordDecline(tx, tenantId, customerId, event, change.decline);
    invoice = await invoiceOfPayments(tx, tenantId, change.decline.paymentIds);
  }
  if (invoice === null) return null;
  const own = invoice.customerId === customerId;
  return {
    invoice,
    latestDeclines: d.invoice !== null ? await latestLinkedDeclines(tx, tenantId, customerId, invoice.invoiceId) : [],
    failures: own ? await storedFailures(tx, tenantId, customerId, invoice.invoiceId, event.eventId) : [],
    ownDeclineAtFailure:
      change?.kind === 'episode' && change.failure !== undefined
        ? await declineAtFailure(tx, tenantId, customerId, invoice.invoiceId, event.created)
        : null,
  };
}

/**
 * Applies one Stripe event of a customer (its row in stripe_events is already written, in
 * the same transaction): keeps what it tells of invoices and payments, reads the customer's
 * state, and writes what domain/stripe/decide.ts decides.
 */
export async function applyStripeEvent(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  facts: StripeEventFacts,
  derivation: ApplicableDerivation,
  now: Date,
): Promise<{ outcome: StripeApplyOutcome } & Settled> {
  await lockCustomer(tx, tenantId, customerId);
  const event: StripeEvent = { ...facts, derivation };
  const invoice = await recordInvoiceFacts(tx, tenantId, customerId, event);
  const state = await readCustomerState(tx, tenantId, customerId, {
    invoiceIds: eventInvoiceIds(event, invoice?.invoice ?? null),
    now,
  });
  const decision = decideStripeEvent({ ...state, invoice }, event, now);
  await writeEffect(tx, tenantId, customerId, decision.effect, now);
  return { outcome: decision.outcome, before: decision.before, after: decision.after };
}
