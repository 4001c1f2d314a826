import type { ChangeCause } from '../../domain/history.js';
import type { Commits } from '../changes/commits.js';
import { tryDeploymentLock } from '../db/db.js';
import type { Db, Queryable } from '../db/db.js';
import { PRUNE_STATUS_CHANGES_SQL } from '../feed/status-feed.js';
import { recordDueLockout, reanswerCustomer, tenantPolicy } from '../stripe/episodes.js';
import { relinkNotices } from '../stripe/notices.js';
import { PRUNE_STRIPE_INTAKE_SQL } from '../stripe/intake.js';
import type { Maintenance, RetainedTable } from './types.js';

/** Advisory lock keys (arbitrary, fixed) that let one instance of a deployment prune a table at a time. */
export const RETENTION_LOCK_KEYS: Record<RetainedTable, number> = {
  stripe_events: 0x64770001,
  subscriber_history: 0x64770002,
  webhook_events: 0x64770003,
  webhook_attempts: 0x64770004,
  status_changes: 0x64770005,
  stripe_intake: 0x64770006,
};

/** Each table's oldest rows, at most $2 of them recorded before $1, deleted. */
const PRUNE_SQL: Record<RetainedTable, string> = {
  stripe_events: `WITH doomed AS (SELECT tenant_id, event_id FROM stripe_events WHERE received_at < $1 ORDER BY received_at LIMIT $2)
    DELETE FROM stripe_events e USING doomed d WHERE e.tenant_id = d.tenant_id AND e.event_id = d.event_id RETURNING 1 AS n`,
  // A subscriber's newest entry stays whatever its age: it says why the status is what it is.
  subscriber_history: `WITH doomed AS (
      SELECT h.id FROM subscriber_history h WHERE h.recorded_at < $1
        AND EXISTS (SELECT 1 FROM subscriber_history n WHERE n.tenant_id = h.tenant_id AND n.processor_customer_id = h.processor_customer_id AND n.id > h.id)
      ORDER BY h.recorded_at LIMIT $2)
    DELETE FROM subscriber_history h USING doomed d WHERE h.id = d.id RETURNING 1 AS n`,
  // A message still waiting for a delivery stays (one whose retry window ended before the
  // cut-off does not: its endpoint stayed disabled); its deliveries and attempts go with it.
  webhook_events: `WITH doomed AS (
      SELECT ev.id FROM webhook_events ev WHERE ev.created_at < $1
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.state = 'pending' AND d.give_up_at >= $1)
      ORDER BY ev.created_at LIMIT $2)
    DELETE FROM webhook_events ev USING doomed d WHERE ev.id = d.id RETURNING 1 AS n`,
  webhook_attempts: `WITH doomed AS (SELECT id FROM webhook_attempts WHERE attempted_at < $1 ORDER BY attempted_at LIMIT $2)
    DELETE FROM webhook_attempts a USING doomed d WHERE a.id = d.id RETURNING 1 AS n`,
  status_changes: PRUNE_STATUS_CHANGES_SQL,
  stripe_intake: PRUNE_STRIPE_INTAKE_SQL,
};

/**
 * The time a time-driven write is made at: the database's `now()`, or `notAfter` when that
 * is earlier (a test's clock). Never later than the database's: an instance whose clock runs
 * ahead cannot bring a scheduled lockout forward.
 */
async function databaseNow(tx: Queryable, notAfter: Date | null): Promise<Date> {
  const [row] = await tx.query<{ now: Date }>('SELECT LEAST($1::timestamptz, now()) AS now', [notAfter]);
  if (!row) throw new Error('the database did not tell its time');
  return new Date(row.now);
}

/** Pruning, scheduled lockouts, policy sweeps and health in SQL. */
export class SqlMaintenance implements Maintenance {
  readonly engine: 'postgres' | 'embedded';

  constructor(
    private readonly db: Db,
    private readonly commits: Commits,
  ) {
    this.engine = db.engine;
  }

  async pruneOld(table: RetainedTable, before: Date, batch: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      // One instance prunes a table at a time; the others find the lock taken and stop.
      if (!(await tryDeploymentLock(tx, RETENTION_LOCK_KEYS[table]))) return 0;
      const deleted = await tx.query<{ n: number }>(PRUNE_SQL[table], [before, batch]);
      return deleted.length;
    });
  }

  async recordDueLockouts(notAfter: Date | null, limit: number): Promise<number> {
    // Due by the database's clock, never by this instance's alone: a given time only holds
    // the record back (LEAST ignores a null), it can never bring it forward.
    const due = await this.db.query<{ tenant_id: number; processor_customer_id: string }>(
      'SELECT tenant_id, processor_customer_id FROM subscribers WHERE lockout_at <= LEAST($1::timestamptz, now()) ORDER BY lockout_at LIMIT $2',
      [notAfter, limit],
    );
    let recorded = 0;
    // One short transaction per customer, under its lock: a racing instance that took the
    // same customer finds the lockout written and records nothing more.
    for (const row of due) {
      const done = await this.db.transaction(async (tx) =>
        recordDueLockout(tx, row.tenant_id, row.processor_customer_id, await databaseNow(tx, notAfter)),
      );
      if (done) recorded += 1;
    }
    if (recorded > 0) this.commits.emit();
    return recorded;
  }

  async sweepPolicy(notAfter: Date | null, batch: number): Promise<{ seen: number; pending: boolean }> {
    const result = await this.db.transaction(async (tx) => {
      // Answered again as of the database's time: a fast instance cannot record a lockout early.
      const now = await databaseNow(tx, notAfter);
      // The sweep's row is held for this batch only: another instance takes the next one.
      const [sweep] = await tx.query<{ tenant_id: number; after: string; started_at: Date }>(
        'SELECT tenant_id, after, started_at FROM policy_sweeps ORDER BY started_at, tenant_id LIMIT 1 FOR UPDATE SKIP LOCKED',
      );
      // None, or each held by another instance for its batch: nothing for this one to do now.
      if (!sweep) return { seen: 0, pending: false };
      const policy = await tenantPolicy(tx, sweep.tenant_id);
      // Only a subscriber derived or answered other than active can be answered differently.
      const customers = await tx.query<{ processor_customer_id: string }>(
        `SELECT processor_customer_id FROM subscribers
         WHERE tenant_id = $1 AND processor_customer_id > $2 AND (derived_status <> 'active' OR status <> 'active')
         ORDER BY processor_customer_id LIMIT $3`,
        [sweep.tenant_id, sweep.after, batch],
      );
      const cause: ChangeCause = {
        source: 'policy',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: new Date(sweep.started_at),
        policyRule: 'policy_changed',
      };
      // Locked in code-unit order, the order every other taker of several customers' locks uses
      // (a dry run): the database's collation may order them otherwise.
      const ids = customers.map((c) => c.processor_customer_id).sort();
      for (const id of ids) await reanswerCustomer(tx, sweep.tenant_id, id, cause, now, policy);
      const last = customers.at(-1);
      const done = customers.length < batch || last === undefined;
      if (done) {
        // A notice's card link follows the space's links too (a key set or removed, a new address).
        await relinkNotices(tx, sweep.tenant_id, now);
        await tx.query('DELETE FROM policy_sweeps WHERE tenant_id = $1', [sweep.tenant_id]);
      } else
        await tx.query('UPDATE policy_sweeps SET after = $2 WHERE tenant_id = $1', [
          sweep.tenant_id,
          last.processor_customer_id,
        ]);
      // Another tenant's sweep may wait: the caller asks again, and finds none when all are done.
      return { seen: customers.length, pending: true };
    });
    if (result.seen > 0) this.commits.emit();
    return result;
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1');
  }

  async databaseTime(): Promise<Date> {
    const [row] = await this.db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    if (!row) throw new Error('the database did not tell its time');
    return new Date(row.now);
  }
}
