import type { ChangeCause } from '../../domain/history.js';
import type { Change } from '../../domain/stripe/fold.js';
import { zeroStatusCounts } from '../../domain/types.js';
import type { SubscriberStatus } from '../../domain/types.js';
import type { Commits } from '../changes/commits.js';
import type { Db } from '../db/db.js';
import { applyAdminChange } from '../stripe/episodes.js';
import type { EpisodeRow } from '../stripe/episodes.js';
import type {
  ApplyOutcome,
  EpisodeRecord,
  HistoryEntry,
  SubscriberListQuery,
  SubscriberListRow,
  SubscriberRecord,
  SubscriberStore,
} from './types.js';

const HISTORY_LIMIT = 100;

interface HistoryRow {
  status: SubscriberStatus | null;
  derived_status: SubscriberStatus | null;
  lockout_at: Date | null;
  policy_rule: HistoryEntry['policyRule'];
  secret_key_id: string | null;
  admin_action: HistoryEntry['adminAction'];
  reason: string | null;
  effect: HistoryEntry['effect'];
  episode: string | null;
  source: HistoryEntry['source'];
  event_id: string | null;
  event_type: string | null;
  decline_code: string | null;
  occurred_at: Date;
  recorded_at: Date;
}

function toHistory(row: HistoryRow): HistoryEntry {
  return {
    status: row.status,
    derivedStatus: row.derived_status,
    lockoutAt: row.lockout_at === null ? null : new Date(row.lockout_at),
    policyRule: row.policy_rule,
    secretKeyId: row.secret_key_id,
    adminAction: row.admin_action,
    reason: row.reason,
    effect: row.effect,
    episode: row.episode,
    source: row.source,
    eventId: row.event_id,
    eventType: row.event_type,
    declineCode: row.decline_code,
    occurredAt: new Date(row.occurred_at),
    recordedAt: new Date(row.recorded_at),
  };
}

/** An episode as a subscriber's page shows it: the episode's row, with what Stripe last told of its invoice. */
type ShownEpisodeRow = Omit<EpisodeRow, 'rank'> & {
  invoice_status: string | null;
  amount_due: string | null;
  amount_remaining: string | null;
  currency: string | null;
  hosted_invoice_url: string | null;
};

const dateOrNull = (v: Date | null): Date | null => (v === null ? null : new Date(v));
const numberOrNull = (v: string | number | null): number | null => (v === null ? null : Number(v));

function toEpisodeRecord(row: ShownEpisodeRow): EpisodeRecord {
  return {
    episode: row.episode,
    state: row.state,
    reason: row.reason,
    declineCode: row.decline_code,
    at: new Date(row.at),
    eventId: row.event_id,
    dunningStartedAt: dateOrNull(row.dunning_started_at),
    resolvedAt: dateOrNull(row.resolved_at),
    invoice:
      row.invoice_id === null
        ? null
        : {
            id: row.invoice_id,
            status: row.invoice_status,
            amountDue: numberOrNull(row.amount_due),
            amountRemaining: numberOrNull(row.amount_remaining),
            currency: row.currency,
            hostedInvoiceUrl: row.hosted_invoice_url,
          },
  };
}

/** A tenant's subscribers in SQL. */
export class SqlSubscribers implements SubscriberStore {
  constructor(
    private readonly db: Db,
    private readonly commits: Commits,
  ) {}

  async applyChange(
    tenantId: number,
    customerId: string,
    change: Change,
    cause: ChangeCause,
    now: Date,
  ): Promise<ApplyOutcome> {
    const outcome = await this.db.transaction((tx) => applyAdminChange(tx, tenantId, customerId, change, cause, now));
    if (outcome === 'applied') this.commits.emit();
    return outcome;
  }

  async getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null> {
    const [row] = await this.db.query<{
      status: SubscriberStatus;
      derived_status: SubscriberStatus;
      lockout_at: Date | null;
      pay_url: string | null;
      reason: string;
      overridden_at: Date | null;
      updated_at: Date;
    }>(
      `SELECT status, derived_status, lockout_at, pay_url, reason, overridden_at, updated_at FROM subscribers
       WHERE tenant_id = $1 AND processor_customer_id = $2`,
      [tenantId, customerId],
    );
    const history = await this.db.query<HistoryRow>(
      `SELECT * FROM (
         SELECT id, status, derived_status, lockout_at, policy_rule, secret_key_id, admin_action, reason, effect, episode, source, event_id, event_type, decline_code,
           occurred_at, recorded_at
         FROM subscriber_history WHERE tenant_id = $1 AND processor_customer_id = $2
         ORDER BY id DESC LIMIT ${HISTORY_LIMIT}
       ) newest ORDER BY id`,
      [tenantId, customerId],
    );
    // The history outlives the record: a cleared or deleted customer is still shown.
    if (!row && history.length === 0) return null;
    const episodes = await this.db.query<ShownEpisodeRow>(
      `SELECT e.episode, e.state, e.reason, e.decline_code, e.at, e.event_id, e.dunning_started_at, e.resolved_at, e.invoice_id,
         i.status AS invoice_status, i.amount_due, i.amount_remaining, i.currency, i.hosted_invoice_url
       FROM subscriber_episodes e LEFT JOIN stripe_invoices i ON i.tenant_id = e.tenant_id AND i.invoice_id = e.invoice_id
       WHERE e.tenant_id = $1 AND e.processor_customer_id = $2 ORDER BY e.at DESC, e.episode`,
      [tenantId, customerId],
    );
    return {
      processorCustomerId: customerId,
      status: row?.status ?? null,
      derivedStatus: row?.derived_status ?? null,
      lockoutAt: row?.lockout_at ? new Date(row.lockout_at) : null,
      payUrl: row?.pay_url ?? null,
      reason: row?.reason ?? null,
      overriddenAt: row?.overridden_at ? new Date(row.overridden_at) : null,
      updatedAt: row ? new Date(row.updated_at) : null,
      episodes: episodes.map(toEpisodeRecord),
      history: history.map(toHistory),
    };
  }

  async listSubscribers(
    tenantId: number,
    query: SubscriberListQuery,
  ): Promise<{ rows: SubscriberListRow[]; more: boolean }> {
    const where = ['tenant_id = $1'];
    const params: unknown[] = [tenantId];
    const add = (clause: (n: string) => string, value: unknown) => {
      params.push(value);
      where.push(clause(`$${params.length}`));
    };
    if (query.status !== undefined) add((n) => `status = ANY(${n}::text[])`, query.status);
    if (query.derivedStatus !== undefined) add((n) => `derived_status = ANY(${n}::text[])`, query.derivedStatus);
    if (query.reason !== undefined) add((n) => `reason = ${n}`, query.reason);
    if (query.updatedSince !== undefined) add((n) => `updated_at >= ${n}`, query.updatedSince);
    if (query.after !== undefined) add((n) => `processor_customer_id > ${n}`, query.after);
    params.push(query.limit + 1);
    // The primary key (tenant_id, processor_customer_id) serves the order and the cursor.
    const rows = await this.db.query<{
      processor_customer_id: string;
      status: SubscriberStatus;
      derived_status: SubscriberStatus;
      reason: string;
      updated_at: Date;
    }>(
      `SELECT processor_customer_id, status, derived_status, reason, updated_at FROM subscribers WHERE ${where.join(' AND ')}
       ORDER BY processor_customer_id LIMIT $${params.length}`,
      params,
    );
    const page = rows.slice(0, query.limit).map((r) => ({
      processorCustomerId: r.processor_customer_id,
      status: r.status,
      derivedStatus: r.derived_status,
      reason: r.reason,
      updatedAt: new Date(r.updated_at),
    }));
    return { rows: page, more: rows.length > query.limit };
  }

  async countSubscribers(
    tenantId: number,
  ): Promise<{ answered: Record<SubscriberStatus, number>; derived: Record<SubscriberStatus, number> }> {
    const rows = await this.db.query<{ status: SubscriberStatus; derived_status: SubscriberStatus; n: number }>(
      'SELECT status, derived_status, count(*)::integer AS n FROM subscribers WHERE tenant_id = $1 GROUP BY status, derived_status',
      [tenantId],
    );
    const answered = zeroStatusCounts();
    const derived = zeroStatusCounts();
    for (const r of rows) {
      answered[r.status] += Number(r.n);
      derived[r.derived_status] += Number(r.n);
    }
    return { answered, derived };
  }
}
